package keyspace

func init() {
	register(
		&Command{Name: "publish", Arity: 3, Flags: PubSub | Fast, Run: cmdPublish},
		&Command{Name: "spublish", Arity: 3, Flags: PubSub | Fast, FirstKey: 1, LastKey: 1, KeyStep: 1, Run: cmdPublish},
	)
}

// cmdPublish hands the message to the call's Publisher. The state machine gives
// calls a Publisher only when it applies an entry live, so replaying the log
// delivers nothing twice.
func cmdPublish(c *Call) Reply {
	if c.Pub == nil {
		return Zero
	}
	sharded := c.Args[0][0] == 's' || c.Args[0][0] == 'S'
	return Int(c.Pub.Publish(string(c.Args[1]), string(c.Args[2]), sharded))
}

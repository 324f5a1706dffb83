package keyspace

func init() {
	addRows(
		&Command{Name: "publish", Arity: 3, Flags: PubSub | Fast, Run: cmdPublish},
		&Command{Name: "spublish", Arity: 3, Flags: PubSub | Fast, FirstKey: 1, LastKey: 1, KeyStep: 1, Run: cmdPublish},
	)
}

// cmdPublish hands the message to the call's Publisher and replies how many
// subscribers of the node that applies it received it, as Redis Cluster counts
// only the receivers on the node the client is connected to. The state machine
// gives calls a Publisher only when it applies an entry live, so replaying the
// log delivers nothing twice. A script on a Replicated node sees 0: see
// Replicated.
func cmdPublish(c *Call) Reply {
	if c.Pub == nil {
		return Zero
	}
	sharded := c.Args[0][0] == 's' || c.Args[0][0] == 'S'
	n := c.Pub.Publish(c.Args[1], c.Args[2], sharded)
	if _, shared := c.Pub.(replicated); shared && c.Script {
		return Zero
	}
	return Int(n)
}

// Replicated wraps the Publisher of a node whose entries other nodes apply
// too. Each node delivers to its own subscribers and counts them, so the count
// differs from node to node and between a live apply and a replay. A reply
// changes nothing and may carry it; but what a script reads may decide what
// it writes, so redis.call('publish', ...) returns 0 to scripts, on every node
// and on replay alike, and the replicas stay identical.
func Replicated(p Publisher) Publisher { return replicated{p} }

type replicated struct{ Publisher }

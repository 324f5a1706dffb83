package keyspace

func init() {
	register(
		&Command{Name: "del", Arity: -2, Flags: Write, FirstKey: 1, LastKey: -1, KeyStep: 1, Run: cmdDel},
		&Command{Name: "exists", Arity: -2, Flags: ReadOnly | Fast, FirstKey: 1, LastKey: -1, KeyStep: 1, Run: cmdExists},
	)
}

func cmdDel(c *Call) Reply {
	var n int64
	for _, k := range c.Args[1:] {
		if c.del(string(k)) {
			n++
		}
	}
	return Int(n)
}

func cmdExists(c *Call) Reply {
	var n int64
	for _, k := range c.Args[1:] {
		if c.get(string(k)) != nil {
			n++
		}
	}
	return Int(n)
}

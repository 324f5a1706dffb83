package keyspace

// The rows of the command table for commands that the layers above serve. They
// are here so that there is one table: the server, the script engine and COMMAND
// all read arity, flags and key positions from it. The few that scripts may call
// (PING, ECHO, TIME, SELECT) also have a Run for that use.
func init() {
	conn := Connection | NoScript
	register(
		&Command{Name: "ping", Arity: -1, Flags: Connection | Fast, Run: cmdPing},
		&Command{Name: "echo", Arity: 2, Flags: Connection | Fast, Run: cmdEcho},
		&Command{Name: "time", Arity: 1, Flags: Connection | Fast, Run: cmdTime},
		&Command{Name: "select", Arity: 2, Flags: Connection | Fast, Run: cmdSelect},
		&Command{Name: "quit", Arity: -1, Flags: conn | Fast},
		&Command{Name: "reset", Arity: 1, Flags: conn | Fast},
		&Command{Name: "hello", Arity: -1, Flags: conn | Fast},
		&Command{Name: "auth", Arity: -2, Flags: conn | Fast},
		&Command{Name: "client", Arity: -2, Flags: conn},
		&Command{Name: "info", Arity: -1, Flags: conn},
		&Command{Name: "command", Arity: -1, Flags: conn},
		&Command{Name: "config", Arity: -2, Flags: conn | Admin},
		&Command{Name: "wait", Arity: 3, Flags: conn},
		&Command{Name: "waitaof", Arity: 4, Flags: conn},

		&Command{Name: "multi", Arity: 1, Flags: Transaction | NoScript | NoMulti | Fast},
		&Command{Name: "exec", Arity: 1, Flags: Transaction | NoScript | NoMulti},
		&Command{Name: "discard", Arity: 1, Flags: Transaction | NoScript | NoMulti | Fast},
		&Command{Name: "watch", Arity: -2, Flags: Transaction | NoScript | NoMulti | Fast, FirstKey: 1, LastKey: -1, KeyStep: 1},
		&Command{Name: "unwatch", Arity: 1, Flags: Transaction | NoScript | NoMulti | Fast},

		&Command{Name: "subscribe", Arity: -2, Flags: PubSub | NoScript},
		&Command{Name: "psubscribe", Arity: -2, Flags: PubSub | NoScript},
		&Command{Name: "unsubscribe", Arity: -1, Flags: PubSub | NoScript},
		&Command{Name: "punsubscribe", Arity: -1, Flags: PubSub | NoScript},
		&Command{Name: "ssubscribe", Arity: -2, Flags: PubSub | NoScript, FirstKey: 1, LastKey: -1, KeyStep: 1},
		&Command{Name: "sunsubscribe", Arity: -1, Flags: PubSub | NoScript, FirstKey: 1, LastKey: -1, KeyStep: 1},
		&Command{Name: "pubsub", Arity: -2, Flags: PubSub | NoScript},

		&Command{Name: "eval", Arity: -3, Flags: Scripting | NoScript, FirstKey: 0},
		&Command{Name: "evalsha", Arity: -3, Flags: Scripting | NoScript},
		&Command{Name: "eval_ro", Arity: -3, Flags: Scripting | NoScript | ReadOnly},
		&Command{Name: "evalsha_ro", Arity: -3, Flags: Scripting | NoScript | ReadOnly},
		&Command{Name: "script", Arity: -2, Flags: Scripting | NoScript},
	)
}

func cmdPing(c *Call) Reply {
	switch len(c.Args) {
	case 1:
		return Status("PONG")
	case 2:
		return BulkBytes(c.Args[1])
	}
	return ErrWrongArity("ping")
}

func cmdEcho(c *Call) Reply { return BulkBytes(c.Args[1]) }

// cmdTime replies the call's time: inside a script, the entry's frozen time.
func cmdTime(c *Call) Reply {
	return Array(Bulk(FormatInt(c.Now/1000)), Bulk(FormatInt(c.Now%1000*1000)))
}

// cmdSelect changes the database of the call; the connection layer keeps its own.
func cmdSelect(c *Call) Reply {
	n, ok := ParseInt(c.Args[1])
	if !ok {
		return ErrNotInteger
	}
	if n < 0 || n >= NumDBs {
		return ErrInvalidDB
	}
	c.DB = int(n)
	return OK
}

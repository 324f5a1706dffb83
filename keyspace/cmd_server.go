package keyspace

// The rows of the command table for commands that the layers above run. They
// are here so that there is one table: the server, the script engine and COMMAND
// all read arity, flags and key positions from it, and each layer registers
// the executors of its rows (Register). The few that scripts may call (PING,
// ECHO, TIME, SELECT) also have a Run for that use.
//
// A container command's subcommands are rows of their own, named as Redis
// names them ("client|setname"), so that errors and COMMAND INFO use that name.
func init() {
	conn := Connection | NoScript
	admin := conn | Admin
	addRows(runBy(ServerLayer,
		&Command{Name: "ping", Arity: -1, Flags: Connection | Fast, Run: cmdPing},
		&Command{Name: "echo", Arity: 2, Flags: Connection | Fast, Run: cmdEcho},
		&Command{Name: "time", Arity: 1, Flags: Connection | Fast, Run: cmdTime},
		&Command{Name: "select", Arity: 2, Flags: Connection | Fast, Run: cmdSelect},
		&Command{Name: "quit", Arity: -1, Flags: conn | Fast | NoAuth},
		&Command{Name: "reset", Arity: 1, Flags: conn | Fast | NoAuth},
		&Command{Name: "hello", Arity: -1, Flags: conn | Fast | NoAuth},
		&Command{Name: "auth", Arity: -2, Flags: conn | Fast | NoAuth},
		// ACL's subcommands that change the users go through the engine, as
		// the users are replicated state; the others are served by the
		// server from the users it holds.
		&Command{Name: "acl", Arity: -2, Flags: conn, Subcommands: subcommands("acl",
			&Command{Name: "cat", Arity: -2, Flags: conn},
			&Command{Name: "deluser", Arity: -3, Flags: admin | Users, Layer: UsersLayer},
			&Command{Name: "dryrun", Arity: -4, Flags: admin},
			&Command{Name: "genpass", Arity: -2, Flags: conn},
			&Command{Name: "getuser", Arity: 3, Flags: admin},
			&Command{Name: "help", Arity: 2, Flags: Connection},
			&Command{Name: "list", Arity: 2, Flags: admin},
			&Command{Name: "load", Arity: 2, Flags: admin | Users},
			&Command{Name: "log", Arity: -2, Flags: admin},
			&Command{Name: "save", Arity: 2, Flags: admin},
			&Command{Name: "setuser", Arity: -3, Flags: admin | Users},
			&Command{Name: "users", Arity: 2, Flags: admin},
			&Command{Name: "whoami", Arity: 2, Flags: conn},
		)},
		&Command{Name: "client", Arity: -2, Flags: conn, Subcommands: subcommands("client",
			&Command{Name: "caching", Arity: 3, Flags: conn},
			&Command{Name: "getname", Arity: 2, Flags: conn},
			&Command{Name: "getredir", Arity: 2, Flags: conn},
			&Command{Name: "help", Arity: 2, Flags: Connection},
			&Command{Name: "id", Arity: 2, Flags: conn},
			&Command{Name: "info", Arity: 2, Flags: conn},
			&Command{Name: "kill", Arity: -3, Flags: admin},
			&Command{Name: "list", Arity: -2, Flags: admin},
			&Command{Name: "no-evict", Arity: 3, Flags: admin},
			&Command{Name: "no-touch", Arity: 3, Flags: conn | Fast},
			&Command{Name: "pause", Arity: -3, Flags: admin},
			&Command{Name: "reply", Arity: 3, Flags: conn},
			&Command{Name: "setinfo", Arity: 4, Flags: conn},
			&Command{Name: "setname", Arity: 3, Flags: conn},
			&Command{Name: "tracking", Arity: -3, Flags: conn},
			&Command{Name: "trackinginfo", Arity: 2, Flags: conn},
			&Command{Name: "unblock", Arity: -3, Flags: admin},
			&Command{Name: "unpause", Arity: 2, Flags: admin},
		)},
		&Command{Name: "info", Arity: -1, Flags: Connection},
		&Command{Name: "command", Arity: -1, Flags: Connection, Subcommands: subcommands("command",
			&Command{Name: "count", Arity: 2, Flags: Connection},
			&Command{Name: "docs", Arity: -2, Flags: Connection},
			&Command{Name: "getkeys", Arity: -4, Flags: Connection},
			&Command{Name: "getkeysandflags", Arity: -4, Flags: Connection},
			&Command{Name: "help", Arity: 2, Flags: Connection},
			&Command{Name: "info", Arity: -2, Flags: Connection},
			&Command{Name: "list", Arity: -2, Flags: Connection},
		)},
		&Command{Name: "config", Arity: -2, Flags: conn | Admin, Subcommands: subcommands("config",
			&Command{Name: "get", Arity: -3, Flags: admin},
			&Command{Name: "help", Arity: 2, Flags: Connection},
			&Command{Name: "resetstat", Arity: 2, Flags: admin},
			&Command{Name: "rewrite", Arity: 2, Flags: admin},
			&Command{Name: "set", Arity: -4, Flags: admin},
		)},
		&Command{Name: "wait", Arity: 3, Flags: conn},
		&Command{Name: "waitaof", Arity: 4, Flags: conn},
		// Introspection. LATENCY DOCTOR and GRAPH, Redis's prose and ASCII
		// charts, have no rows: they get the unknown-subcommand error.
		// Redis lets scripts call SLOWLOG: no NoScript, though the script
		// engine, which runs only keyspace commands, refuses it all the same.
		&Command{Name: "slowlog", Arity: -2, Flags: admin, Subcommands: subcommands("slowlog",
			&Command{Name: "get", Arity: -2, Flags: Connection | Admin},
			&Command{Name: "help", Arity: 2, Flags: Connection},
			&Command{Name: "len", Arity: 2, Flags: Connection | Admin},
			&Command{Name: "reset", Arity: 2, Flags: Connection | Admin},
		)},
		&Command{Name: "latency", Arity: -2, Flags: admin, Subcommands: subcommands("latency",
			&Command{Name: "doctor", Arity: 2, Flags: admin},
			&Command{Name: "help", Arity: 2, Flags: Connection},
			&Command{Name: "histogram", Arity: -2, Flags: admin},
			&Command{Name: "history", Arity: 3, Flags: admin},
			&Command{Name: "latest", Arity: 2, Flags: admin},
			&Command{Name: "reset", Arity: -2, Flags: admin},
		)},
		&Command{Name: "monitor", Arity: 1, Flags: admin},

		&Command{Name: "multi", Arity: 1, Flags: Transaction | NoScript | noMulti | Fast},
		&Command{Name: "exec", Arity: 1, Flags: Transaction | NoScript | noMulti},
		&Command{Name: "discard", Arity: 1, Flags: Transaction | NoScript | noMulti | Fast},
		&Command{Name: "watch", Arity: -2, Flags: Transaction | NoScript | noMulti | Fast, FirstKey: 1, LastKey: -1, KeyStep: 1},
		// UNWATCH is queued inside MULTI, as in Redis.
		&Command{Name: "unwatch", Arity: 1, Flags: Transaction | NoScript | Fast},

		&Command{Name: "subscribe", Arity: -2, Flags: PubSub | NoScript},
		&Command{Name: "psubscribe", Arity: -2, Flags: PubSub | NoScript},
		&Command{Name: "unsubscribe", Arity: -1, Flags: PubSub | NoScript},
		&Command{Name: "punsubscribe", Arity: -1, Flags: PubSub | NoScript},
		&Command{Name: "ssubscribe", Arity: -2, Flags: PubSub | NoScript, FirstKey: 1, LastKey: -1, KeyStep: 1},
		&Command{Name: "sunsubscribe", Arity: -1, Flags: PubSub | NoScript, FirstKey: 1, LastKey: -1, KeyStep: 1},
		&Command{Name: "pubsub", Arity: -2, Flags: PubSub | NoScript, Subcommands: subcommands("pubsub",
			&Command{Name: "channels", Arity: -2, Flags: PubSub},
			&Command{Name: "help", Arity: 2, Flags: Connection},
			&Command{Name: "numpat", Arity: 2, Flags: PubSub},
			&Command{Name: "numsub", Arity: -2, Flags: PubSub},
			&Command{Name: "shardchannels", Arity: -2, Flags: PubSub},
			&Command{Name: "shardnumsub", Arity: -2, Flags: PubSub},
		)},
	)...)
	addRows(runBy(ScriptingLayer,
		&Command{Name: "eval", Arity: -3, Flags: Scripting | NoScript, FirstKey: 0},
		&Command{Name: "evalsha", Arity: -3, Flags: Scripting | NoScript},
		&Command{Name: "eval_ro", Arity: -3, Flags: Scripting | NoScript | ReadOnly},
		&Command{Name: "evalsha_ro", Arity: -3, Flags: Scripting | NoScript | ReadOnly},
		// SCRIPT's subcommands run in the script engine; the rows give the
		// server their names and arities.
		&Command{Name: "script", Arity: -2, Flags: Scripting | NoScript, Subcommands: subcommands("script",
			&Command{Name: "debug", Arity: 3, Flags: Scripting | NoScript},
			&Command{Name: "exists", Arity: -3, Flags: Scripting | NoScript},
			&Command{Name: "flush", Arity: -2, Flags: Scripting | NoScript},
			&Command{Name: "help", Arity: 2, Flags: Scripting},
			&Command{Name: "kill", Arity: 2, Flags: Scripting | NoScript},
			&Command{Name: "load", Arity: 3, Flags: Scripting | NoScript},
		)},
		&Command{Name: "fcall", Arity: -3, Flags: Scripting | NoScript},
		&Command{Name: "fcall_ro", Arity: -3, Flags: Scripting | NoScript | ReadOnly},
		// FUNCTION's subcommands, likewise. The flags of those that change
		// the libraries are Redis's: the server refuses them past maxmemory.
		&Command{Name: "function", Arity: -2, Flags: Scripting, Subcommands: subcommands("function",
			&Command{Name: "delete", Arity: 3, Flags: Scripting | Write | NoScript},
			&Command{Name: "dump", Arity: 2, Flags: Scripting | NoScript},
			&Command{Name: "flush", Arity: -2, Flags: Scripting | Write | NoScript},
			&Command{Name: "help", Arity: 2, Flags: Scripting},
			&Command{Name: "kill", Arity: 2, Flags: Scripting | NoScript},
			&Command{Name: "list", Arity: -2, Flags: Scripting | NoScript},
			&Command{Name: "load", Arity: -3, Flags: Scripting | Write | DenyOOM | NoScript},
			&Command{Name: "restore", Arity: -3, Flags: Scripting | Write | DenyOOM | NoScript},
			&Command{Name: "stats", Arity: 2, Flags: Scripting | NoScript},
		)},
	)...)
}

// subcommands indexes a container's subcommand rows by their own name and
// gives each its full name, "container|sub".
func subcommands(container string, rows ...*Command) map[string]*Command {
	m := make(map[string]*Command, len(rows))
	for _, r := range rows {
		m[r.Name] = r
		r.Name = container + "|" + r.Name
	}
	return m
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
	return Array(Bulk(formatInt(c.Now/1000)), Bulk(formatInt(c.Now%1000*1000)))
}

// cmdSelect changes the database of the call; the connection layer keeps its own.
func cmdSelect(c *Call) Reply {
	n, ok := ParseInt(c.Args[1])
	if !ok {
		return ErrNotInteger
	}
	if n < 0 || n >= NumDBs {
		return errInvalidDB
	}
	c.DB = int(n)
	return OK
}

package keyspace

// LOCKSERVER administers a Raft cluster (members, leader, snapshots, joins)
// and carries requests that followers forward to the leader. A cluster
// member's engine runs it (ClusterLayer); these rows give it its
// subcommands, arities and flags, and their Run answers on a standalone
// server.
//
// The subcommands flagged Member are the calls members make to each other:
// only a connection that came through the member link may send them.
func init() {
	admin := Admin | NoScript | noMulti
	member := admin | Member
	addRows(runBy(ClusterLayer, &Command{Name: "lockserver", Arity: -2, Flags: admin, Run: runSubcommand, Subcommands: subcommands("lockserver",
		&Command{Name: "status", Arity: 2, Flags: admin, Run: cmdLockserver},
		&Command{Name: "members", Arity: 2, Flags: admin, Run: cmdLockserver},
		&Command{Name: "leader", Arity: 2, Flags: admin, Run: cmdLockserver},
		&Command{Name: "snapshot", Arity: 2, Flags: admin, Run: cmdLockserver},
		&Command{Name: "remove", Arity: 3, Flags: admin, Run: cmdLockserver},
		&Command{Name: "help", Arity: 2, Flags: admin, Run: cmdLockserver},
		&Command{Name: "join", Arity: 5, Flags: member, Run: cmdLockserver},
		&Command{Name: "register", Arity: 4, Flags: member, Run: cmdLockserver},
		&Command{Name: "applied", Arity: 2, Flags: member, Run: cmdLockserver},
		&Command{Name: "acked", Arity: 2, Flags: member, Run: cmdLockserver},
		&Command{Name: "forward", Arity: 3, Flags: member, Run: cmdLockserver},
	)})...)
}

func cmdLockserver(c *Call) Reply {
	return Error("ERR LOCKSERVER needs a cluster member; this server is standalone")
}

package keyspace

// LOCKSERVER administers a Raft cluster (members, leader, snapshots, joins)
// and carries requests that followers forward to the leader. A cluster
// member's engine serves it; this row gives it its arity and flags, and its
// Run answers on a standalone server.
func init() {
	register(&Command{Name: "lockserver", Arity: -2, Flags: Admin | NoScript | NoMulti, Run: cmdLockserver})
}

func cmdLockserver(c *Call) Reply {
	return Error("ERR LOCKSERVER needs a cluster member; this server is standalone")
}

package keyspace

// LOCKSERVER administers a Raft cluster (members, leader, snapshots, joins)
// and carries requests that followers forward to the leader. A cluster
// member's engine runs it (ClusterLayer); these rows give it its
// subcommands, arities and flags. A standalone server answers it with an
// error.
//
// The subcommands flagged Member are the calls members make to each other:
// only a connection that came through the member link may send them.
func init() {
	admin := Admin | NoScript | noMulti
	member := admin | Member
	addRows(runBy(ClusterLayer, &Command{Name: "lockserver", Arity: -2, Flags: admin, Subcommands: subcommands("lockserver",
		&Command{Name: "status", Arity: 2, Flags: admin},
		&Command{Name: "members", Arity: 2, Flags: admin},
		&Command{Name: "leader", Arity: 2, Flags: admin},
		&Command{Name: "snapshot", Arity: 2, Flags: admin},
		&Command{Name: "remove", Arity: 3, Flags: admin},
		&Command{Name: "downgrade", Arity: 3, Flags: admin},
		&Command{Name: "digest", Arity: 2, Flags: admin},
		&Command{Name: "backup", Arity: -2, Flags: admin},
		&Command{Name: "help", Arity: 2, Flags: admin},
		&Command{Name: "join", Arity: 5, Flags: member},
		&Command{Name: "register", Arity: 4, Flags: member},
		&Command{Name: "applied", Arity: 2, Flags: member},
		&Command{Name: "registered", Arity: 3, Flags: member},
		&Command{Name: "acked", Arity: 2, Flags: member},
		&Command{Name: "forward", Arity: 3, Flags: member},
	)})...)
}

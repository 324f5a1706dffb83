package keyspace

// SENTINEL and ROLE let clients configured for Redis Sentinel find the Raft
// leader (server's sentinel.go serves them). Arities and flags are Redis
// 7.0's: SENTINEL's as a Sentinel lists them, ROLE's as every server does.
// Sentinel's subcommands that reconfigure or debug a Sentinel (MONITOR,
// REMOVE, SET, RESET, CONFIG, DEBUG, ...) have no rows: there is nothing of
// the kind to change, and they get Redis's unknown-subcommand error.
func init() {
	admin := Admin | NoScript
	addRows(runBy(ServerLayer,
		&Command{Name: "role", Arity: 1, Flags: NoScript | Fast},
		&Command{Name: "sentinel", Arity: -2, Flags: admin, Subcommands: subcommands("sentinel",
			&Command{Name: "ckquorum", Arity: 3, Flags: admin},
			&Command{Name: "failover", Arity: 3, Flags: admin},
			&Command{Name: "get-master-addr-by-name", Arity: 3, Flags: admin},
			&Command{Name: "help", Arity: 2, Flags: NoScript},
			&Command{Name: "master", Arity: 3, Flags: admin},
			&Command{Name: "masters", Arity: 2, Flags: admin},
			&Command{Name: "myid", Arity: 2, Flags: admin},
			&Command{Name: "replicas", Arity: 3, Flags: admin},
			&Command{Name: "sentinels", Arity: 3, Flags: admin},
			&Command{Name: "slaves", Arity: 3, Flags: admin},
		)},
	)...)
}

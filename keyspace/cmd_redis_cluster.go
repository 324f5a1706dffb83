package keyspace

// CLUSTER, READONLY, READWRITE and ASKING present a deployment to Redis
// Cluster clients as a cluster of one shard that owns every slot (server's
// cluster.go serves them). Arities and flags are Redis 7.0's. The
// subcommands that change a Redis Cluster's layout (ADDSLOTS, MEET,
// REPLICATE, SETSLOT, FAILOVER, ...) have no rows: the layout follows the
// Raft membership, and they get Redis's unknown-subcommand error.
// COUNTKEYSINSLOT and GETKEYSINSLOT are missing too: they would need the
// keyspace indexed by slot, which no lock client asks for.
func init() {
	register(
		&Command{Name: "cluster", Arity: -2, Subcommands: subcommands("cluster",
			&Command{Name: "help", Arity: 2},
			&Command{Name: "info", Arity: 2},
			&Command{Name: "keyslot", Arity: 3},
			&Command{Name: "myid", Arity: 2},
			&Command{Name: "nodes", Arity: 2},
			&Command{Name: "shards", Arity: 2},
			&Command{Name: "slots", Arity: 2},
		)},
		&Command{Name: "readonly", Arity: 1, Flags: Connection | Fast},
		&Command{Name: "readwrite", Arity: 1, Flags: Connection | Fast},
		&Command{Name: "asking", Arity: 1, Flags: Connection | Fast},
	)
}

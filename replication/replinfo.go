package replication

// ReplicationInfo is a node's place in replication, in the terms Redis clients
// read from INFO replication and WAIT.
type ReplicationInfo struct {
	// Role is "master" for a standalone server and for the Raft leader, and
	// "slave" for a follower. A follower still accepts writes (it forwards them
	// to the leader), so it is not read-only.
	Role string
	// MasterAddr is a follower's leader's client address, "" if unknown;
	// MasterLinkUp says whether the follower hears from a leader.
	MasterAddr   string
	MasterLinkUp bool
	// Replicas are, on the leader, the other members.
	Replicas []Replica
	// Offset is the index of the last entry this node applied.
	Offset uint64
	// Synced is how many replicas certainly hold every acknowledged write: with
	// Raft, a write is acknowledged once a majority of the voters holds it, so
	// a majority less the leader. It is WAIT's answer.
	Synced int
}

// Replica is a member as the leader sees it.
type Replica struct {
	ID, Addr string // Addr is the client address
	// Online is false while the leader's heartbeats to it fail.
	Online bool
	Voter  bool
}

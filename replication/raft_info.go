package replication

import "github.com/hashicorp/raft"

// Info describes the node for INFO and WAIT. The leader is the "master" and
// its replicas are the other members, counted while its heartbeats to them
// succeed. A follower is a "slave", though it takes writes (it forwards them).
// Every write acknowledged anywhere is committed on a majority of the voters,
// so on any node WAIT can answer that majority less the leader.
func (r *Raft) Info() Info {
	info := Info{Role: "slave"}
	var servers []raft.Server
	if cf := r.raft.GetConfiguration(); cf.Error() == nil {
		servers = cf.Configuration().Servers
	}
	for _, s := range servers {
		if s.Suffrage == raft.Voter {
			info.SyncedReplicas++
		}
	}
	info.SyncedReplicas /= 2
	if r.raft.State() == raft.Leader {
		info.Role = "master"
		r.peerMu.Lock()
		for _, s := range servers {
			if id := string(s.ID); id != r.opts.NodeID && !r.unreachable[id] {
				info.Replicas++
			}
		}
		r.peerMu.Unlock()
	}
	r.smMu.Lock()
	info.Keys, info.Expires = r.sm.Load().KeyCounts()
	r.smMu.Unlock()
	return info
}

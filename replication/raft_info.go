package replication

import "github.com/hashicorp/raft"

// Info describes the node for INFO and WAIT: it is "master" while it leads and
// "slave" otherwise; the other members are its replicas; and every write
// acknowledged by a leader is committed on a majority, so that many replicas
// besides the leader hold it.
func (r *Raft) Info() Info {
	info := Info{Role: "slave"}
	leading := r.raft.State() == raft.Leader
	if leading {
		info.Role = "master"
	}
	if cf := r.raft.GetConfiguration(); cf.Error() == nil {
		voters := 0
		for _, s := range cf.Configuration().Servers {
			if s.Suffrage == raft.Voter {
				voters++
			}
		}
		info.Replicas = len(cf.Configuration().Servers) - 1
		if leading {
			info.SyncedReplicas = voters / 2 // a majority, the leader not counted
		}
	}
	r.smMu.Lock()
	info.Keys, info.Expires = r.sm.Load().KeyCounts()
	r.smMu.Unlock()
	return info
}

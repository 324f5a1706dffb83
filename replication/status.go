package replication

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/hashicorp/raft"
	"github.com/lockserver/lockserver/keyspace"
	"github.com/lockserver/lockserver/replication/internal/memberlink"
)

// RaftStatus describes a node of the cluster, as LOCKSERVER STATUS shows it.
type RaftStatus struct {
	NodeID     string
	State      string // leader, follower, candidate or shutdown
	Term       uint64
	LeaderID   string
	LeaderAddr string // the leader's client address
	// AppliedIndex is the last entry this node's state machine applied.
	AppliedIndex uint64
	Members      []Member
	// Version is the release this node runs; ClusterVersion the cluster
	// version its log has recorded (see version.go); Epoch the restores and
	// recoveries its state went through (see backup.go).
	Version, ClusterVersion string
	Epoch                   uint64
	// commitIndex is the last entry this node knows to be committed;
	// lastIndex the last in its log.
	commitIndex, lastIndex uint64
	// notReady, filled in for LOCKSERVER STATUS only, says why the member is
	// not ready for clients (see Ready); it is empty when the member is ready.
	notReady string
	// cluster is the identity of the node's cluster.
	cluster memberlink.ClusterID
}

// Member is a node of the configuration.
type Member struct {
	ID, ClientAddr string
	Voter          bool
	// Version is the release it runs, as it last said in a member link
	// handshake with this node; "" if it has not.
	Version  string
	raftAddr string // where the other members reach it
}

// Status returns this node's view of the cluster.
func (r *Raft) Status() RaftStatus {
	leader := r.leaderID()
	r.smMu.Lock()
	cluster, epoch := r.sm.Load().cluster.get(), r.sm.Load().epoch
	r.smMu.Unlock()
	st := RaftStatus{
		Version:        r.opts.build,
		ClusterVersion: cluster.String(),
		Epoch:          epoch,
		NodeID:         r.opts.NodeID,
		State:          strings.ToLower(r.raft.State().String()),
		Term:           r.raft.CurrentTerm(),
		LeaderID:       leader,
		LeaderAddr:     r.memberAddr(leader),
		commitIndex:    r.raft.CommitIndex(),
		AppliedIndex:   r.applied.Load(),
		lastIndex:      r.raft.LastIndex(),
		cluster:        r.cluster,
	}
	if cf := r.raft.GetConfiguration(); cf.Error() == nil {
		builds := r.peerBuilds()
		for _, s := range cf.Configuration().Servers {
			m := Member{
				ID: string(s.ID), raftAddr: string(s.Address), ClientAddr: r.memberAddr(string(s.ID)),
				Voter: s.Suffrage == raft.Voter, Version: builds[string(s.ID)],
			}
			if m.ID == r.opts.NodeID {
				m.Version = r.opts.build
			}
			st.Members = append(st.Members, m)
		}
	}
	return st
}

func (st RaftStatus) reply() keyspace.Reply {
	ready := 0
	if st.notReady == "" {
		ready = 1
	}
	u := func(n uint64) keyspace.Reply { return keyspace.Int(int64(n)) }
	return keyspace.Map(
		keyspace.Bulk("node"), keyspace.Bulk(st.NodeID),
		keyspace.Bulk("state"), keyspace.Bulk(st.State),
		keyspace.Bulk("term"), u(st.Term),
		keyspace.Bulk("leader"), keyspace.Bulk(st.LeaderID),
		keyspace.Bulk("leader_client"), keyspace.Bulk(st.LeaderAddr),
		keyspace.Bulk("commit_index"), u(st.commitIndex),
		keyspace.Bulk("applied_index"), u(st.AppliedIndex),
		keyspace.Bulk("last_index"), u(st.lastIndex),
		keyspace.Bulk("members"), keyspace.Int(int64(len(st.Members))),
		keyspace.Bulk("ready"), keyspace.Int(int64(ready)),
		keyspace.Bulk("not_ready_because"), keyspace.Bulk(st.notReady),
		keyspace.Bulk("cluster"), keyspace.Bulk(st.cluster.String()),
		keyspace.Bulk("version"), keyspace.Bulk(st.Version),
		keyspace.Bulk("cluster_version"), keyspace.Bulk(st.ClusterVersion),
		keyspace.Bulk("epoch"), u(st.Epoch),
	)
}

func (m Member) reply(leader bool) keyspace.Reply {
	role := "nonvoter"
	if m.Voter {
		role = "voter"
	}
	if leader {
		role = "leader"
	}
	return keyspace.Map(
		keyspace.Bulk("id"), keyspace.Bulk(m.ID),
		keyspace.Bulk("raft"), keyspace.Bulk(m.raftAddr),
		keyspace.Bulk("client"), keyspace.Bulk(m.ClientAddr),
		keyspace.Bulk("role"), keyspace.Bulk(role),
		keyspace.Bulk("version"), keyspace.Bulk(m.Version),
	)
}

// Info describes the node for INFO. The leader is the "master" and its
// replicas are the members that WAIT counts (see replicaSet), so that a
// client that waits for connected_slaves replicas gets them. A follower is a
// "slave", though it takes writes (it forwards them).
func (r *Raft) Info() Info {
	info := Info{Role: "slave"}
	if r.raft.State() == raft.Leader {
		info.Role = "master"
		info.Replicas = len(r.replicaSet())
	}
	r.smMu.Lock()
	r.sm.Load().figures(&info)
	r.smMu.Unlock()
	info.Scripts = r.sm.Load().scripts()
	info.Libraries, info.Functions = r.sm.Load().lua.NumFunctions()
	return info
}

// readyWait is how long a readiness check waits for the member to apply
// what it knows to be committed: under load it is always a little behind.
const readyWait = 250 * time.Millisecond

// Ready reports whether the member is ready for clients, or why not: it
// knows a leader, and it has applied every entry committed when asked (the
// leader's index for WAIT, which it asks the leader for), waiting for that
// until ctx ends. A member cut off from the others knows no leader or cannot
// reach it; one catching up has not applied what the leader committed. Its
// own commit index would not do: a member that just rejoined knows of the
// leader before it learns how far the log has gone.
func (r *Raft) Ready(ctx context.Context) error {
	if r.closed.Load() {
		return errors.New("the node is shut down")
	}
	if r.leaderID() == "" {
		return errors.New("no leader is known")
	}
	target, err := r.leaderAcked()
	if err != nil {
		return fmt.Errorf("the leader's commit index is not known: %w", err)
	}
	t := time.NewTicker(time.Millisecond)
	defer t.Stop()
	for {
		applied := r.applied.Load()
		if applied >= target {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("applied index %d is behind the commit index %d", applied, target)
		case <-t.C:
		}
	}
}

// readyNow is Ready with readyWait.
func (r *Raft) readyNow() error {
	ctx, cancel := context.WithTimeout(r.ctx, readyWait)
	defer cancel()
	return r.Ready(ctx)
}

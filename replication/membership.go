package replication

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/hashicorp/raft"
	"github.com/lockserver/lockserver/replication/internal/logcodec"
	"github.com/lockserver/lockserver/replication/internal/memberlink"
)

// Membership changes: a node joins as a non-voter (join, addNode), records
// its client address (registerNode), is promoted once it has caught up
// (promoteLoop) and may be removed (removeNode); leadership may be handed
// to another voter (TransferLeadership). Each runs on the leader, to which
// the other members relay it (onLeader).

// onLeader runs change if this node leads, or sends args to the leader.
//
// A JOIN comes from a node with no state. If this node takes that node for
// the leader (its id, or its Raft address), the leader lost its data and
// was restarted before this node noticed it had gone, and the address is the
// joining process's own, which serves nothing until the join ends: sent
// there, the JOIN would wait on itself. It waits instead for the others to
// elect a leader.
func (r *Raft) onLeader(ctx context.Context, args [][]byte, change func() error) error {
	joining := func(leader, addr string) bool {
		return len(args) == 5 && strings.EqualFold(string(args[1]), "join") && (leader == string(args[2]) || addr == string(args[3]))
	}
	for backoff := 5 * time.Millisecond; ; backoff = min(2*backoff, 200*time.Millisecond) {
		leader, addr := r.leaderLink()
		switch {
		case leader == r.opts.NodeID && r.leading():
			return change()
		case leader != "" && leader != r.opts.NodeID && addr != "" && !joining(leader, addr):
			_, err := r.peers.Call(ctx, addr, args...)
			if err == nil || !retryable(err) {
				return err
			}
		}
		select {
		case <-ctx.Done():
			return replyErr(errClusterDown)
		case <-r.stop:
			return replyErr(errClosed)
		case <-time.After(backoff):
		}
	}
}

// join asks the cluster at opts.Join to add this node, again and again until
// JoinTimeout has passed, and returns the cluster's identity. A refusal of
// this node's credentials ends it at once. It runs before the Raft node
// starts, so that this node, which has no log, answers no vote request until
// the leader has removed any older self of it from the voters.
func (r *Raft) join() (memberlink.ClusterID, error) {
	if r.opts.Join == r.opts.RaftAddr {
		return memberlink.ClusterID{}, fmt.Errorf("join: %s is this node's own Raft address; give another member's", r.opts.Join)
	}
	args := [][]byte{argLockserver, []byte("JOIN"), []byte(r.opts.NodeID), []byte(r.trans.LocalAddr()), []byte(r.opts.ClientAddr)}
	ctx, cancel := context.WithTimeout(r.ctx, r.opts.JoinTimeout)
	defer cancel()
	var last error // the error to report: the last one not cut short by the timeout
	for backoff := 50 * time.Millisecond; ; backoff = min(2*backoff, time.Second) {
		call, cancelCall := context.WithTimeout(ctx, adminTimeout)
		res, err := r.peers.Call(call, r.opts.Join, args...)
		cancelCall()
		if err == nil {
			id, err := memberlink.ParseClusterID(res)
			if err != nil {
				return id, fmt.Errorf("join via %s: %w", r.opts.Join, err)
			}
			r.log.Info("joined the cluster", "via", r.opts.Join, "cluster", id)
			return id, nil
		}
		if errors.Is(err, memberlink.ErrRefused) {
			return memberlink.ClusterID{}, fmt.Errorf("join via %s: %w", r.opts.Join, err)
		}
		if last == nil || ctx.Err() == nil {
			last = err
		}
		r.log.Warn("join failed; retrying", "via", r.opts.Join, "err", err)
		select {
		case <-ctx.Done():
			return memberlink.ClusterID{}, fmt.Errorf("join via %s: gave up after %v (the join timeout): %w", r.opts.Join, r.opts.JoinTimeout, last)
		case <-time.After(backoff):
		}
	}
}

// addNode adds a node as a non-voter, and records its client address. A node
// asks to join only when it has no state; if it is still a voter it lost its
// log, and it is removed first, before it can vote with an empty log.
//
// A member of that id at other addresses must be down: one that still
// answers heartbeats is a live member, and the JOIN someone else's, refused
// rather than demote the member to a non-voter at addresses where nothing
// runs. The same addresses are the member itself, wiped and restarted.
func (r *Raft) addNode(ctx context.Context, id, raftAddr, clientAddr string) error {
	if id == r.opts.NodeID {
		return fmt.Errorf("node %s is the leader", id)
	}
	cf := r.raft.GetConfiguration()
	if err := cf.Error(); err != nil {
		return err
	}
	for _, s := range cf.Configuration().Servers {
		if string(s.ID) != id {
			continue
		}
		known := r.memberAddr(id)
		if (string(s.Address) != raftAddr || known != "" && known != clientAddr) && r.heard(id) {
			return fmt.Errorf("node %s is a live member, at raft address %s and client address %s: a new node joins under an id of its own, and this one at other addresses once it is down or removed (LOCKSERVER REMOVE %s)",
				id, s.Address, known, id)
		}
		if s.Suffrage == raft.Voter {
			if err := r.raft.RemoveServer(s.ID, 0, 0).Error(); err != nil {
				return fmt.Errorf("remove the wiped voter %s: %w", id, err)
			}
		}
	}
	if err := r.raft.AddNonvoter(raft.ServerID(id), raft.ServerAddress(raftAddr), 0, 0).Error(); err != nil {
		return fmt.Errorf("add %s: %w", id, err)
	}
	r.log.Info("added a non-voter", "event", "membership", "change", "add", "id", id, "raft", raftAddr, "client", clientAddr)
	return r.proposeWait(ctx, &logcodec.LogEntry{Kind: logcodec.KindMemberSet, Member: id, Addr: clientAddr})
}

// removeNode forgets a node's address, then removes it from the configuration.
func (r *Raft) removeNode(ctx context.Context, id string) error {
	if err := r.proposeWait(ctx, &logcodec.LogEntry{Kind: logcodec.KindMemberDel, Member: id}); err != nil {
		return err
	}
	if err := r.raft.RemoveServer(raft.ServerID(id), 0, 0).Error(); err != nil {
		return fmt.Errorf("remove %s: %w", id, err)
	}
	r.log.Info("removed a node", "event", "membership", "change", "remove", "id", id)
	return nil
}

// registerNode records the client address of a member of the configuration.
func (r *Raft) registerNode(ctx context.Context, id, clientAddr string) error {
	if r.memberAddr(id) == clientAddr {
		return nil
	}
	if !r.inConfiguration(id) {
		return fmt.Errorf("node %s is not a member", id)
	}
	return r.proposeWait(ctx, &logcodec.LogEntry{Kind: logcodec.KindMemberSet, Member: id, Addr: clientAddr})
}

func (r *Raft) inConfiguration(id string) bool {
	cf := r.raft.GetConfiguration()
	if cf.Error() != nil {
		return false
	}
	for _, s := range cf.Configuration().Servers {
		if string(s.ID) == id {
			return true
		}
	}
	return false
}

// registerLoop makes sure the member map holds this node's client address, so
// that followers can forward to it when it leads.
func (r *Raft) registerLoop() {
	if r.opts.ClientAddr == "" {
		return
	}
	args := [][]byte{argLockserver, []byte("REGISTER"), []byte(r.opts.NodeID), []byte(r.opts.ClientAddr)}
	every(r.stop, 250*time.Millisecond, func() {
		if r.memberAddr(r.opts.NodeID) == r.opts.ClientAddr || r.leaderID() == "" {
			return
		}
		ctx, cancel := context.WithTimeout(r.ctx, time.Second)
		err := r.onLeader(ctx, args, func() error { return r.registerNode(ctx, r.opts.NodeID, r.opts.ClientAddr) })
		cancel()
		if err != nil {
			r.log.Debug("registering the client address failed; retrying", "err", err)
		}
	})
}

// promoteSlack is how far behind the leader's commit index a non-voter's
// applied index may be for the non-voter to count as caught up.
const promoteSlack = 1024

// promoteLoop, on the leader, promotes each non-voter to voter once it has
// applied about as much of the log as the leader has committed, and raises
// the cluster version once every voter runs a later release.
func (r *Raft) promoteLoop() {
	every(r.stop, 500*time.Millisecond, func() {
		if r.raft.State() != raft.Leader {
			return
		}
		cf := r.raft.GetConfiguration()
		if cf.Error() != nil {
			return
		}
		for _, s := range cf.Configuration().Servers {
			if s.Suffrage == raft.Nonvoter {
				r.promoteIfCaughtUp(s)
			}
		}
		r.raiseClusterVersion()
	})
}

func (r *Raft) promoteIfCaughtUp(s raft.Server) {
	commit := r.raft.CommitIndex()
	applied, err := r.memberApplied(replicaMember{id: string(s.ID), addr: string(s.Address)})
	if err != nil || applied+promoteSlack < commit {
		return
	}
	if err := r.raft.AddVoter(s.ID, s.Address, 0, 0).Error(); err != nil {
		r.log.Warn("promoting a non-voter failed", "id", s.ID, "err", err)
		return
	}
	r.log.Info("promoted a non-voter that caught up", "event", "membership", "change", "promote", "id", s.ID, "applied", applied, "commit", commit)
}

// Errors of TransferLeadership.
var (
	// ErrNoOtherVoter means that no voter but the leader could take over.
	ErrNoOtherVoter = errors.New("no other voter can take over leadership")
	// ErrTransferInProgress means that a leadership transfer is under way already.
	ErrTransferInProgress = raft.ErrLeadershipTransferInProgress
)

// TransferLeadership makes the leader hand leadership to the most up-to-date
// other voter, and returns once it has stepped down. A follower sends args,
// the command that asked for the transfer, to the leader, which serves it
// the same way; an error reply from there is returned as an error that carries it
// (keyspace.ReplyOf).
func (r *Raft) TransferLeadership(ctx context.Context, args [][]byte) error {
	return r.onLeader(ctx, args, func() error {
		if !r.hasOtherVoter() {
			return ErrNoOtherVoter
		}
		return r.raft.LeadershipTransfer().Error()
	})
}

func (r *Raft) hasOtherVoter() bool {
	cf := r.raft.GetConfiguration()
	if cf.Error() != nil {
		return false
	}
	for _, s := range cf.Configuration().Servers {
		if s.Suffrage == raft.Voter && string(s.ID) != r.opts.NodeID {
			return true
		}
	}
	return false
}

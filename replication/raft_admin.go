package replication

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/raft"
	"github.com/lockserver/lockserver/keyspace"
	"github.com/lockserver/lockserver/replication/internal/logcodec"
	"github.com/lockserver/lockserver/replication/internal/memberlink"
)

// isClusterCommand reports whether req is a LOCKSERVER command, which the node
// that receives it serves itself.
func isClusterCommand(req *Request) bool {
	return len(req.Cmds) == 1 && !req.Multi && req.WatchKeys == nil &&
		bytes.EqualFold(req.Cmds[0][0], []byte("lockserver"))
}

// The LOCKSERVER command administers the cluster. Any node serves it; the
// subcommands that change the membership run on the leader, to which the
// other nodes relay them. The command table (keyspace) holds the
// subcommands' arities and flags; those flagged Member are the calls
// members make to each other, which the server lets only members send.
//
//	LOCKSERVER STATUS                       this node: state, term, leader, indexes, readiness, cluster identity
//	LOCKSERVER MEMBERS                      the members, their addresses and roles
//	LOCKSERVER LEADER                       the leader's id and client address
//	LOCKSERVER SNAPSHOT                     take a snapshot of this node now
//	LOCKSERVER REMOVE id                    remove a node
//	LOCKSERVER JOIN id raft-addr client-addr  add a node, as a non-voter until it catches up (members only)
//	LOCKSERVER REGISTER id client-addr      record a member's client address (members only)
//	LOCKSERVER APPLIED                      this node's applied index (members only: the leader asks it)
//	LOCKSERVER ACKED                        on the leader: the index WAIT waits for (members only)
//	LOCKSERVER FORWARD batch                run requests forwarded by a follower (members only)
const clusterHelp = `LOCKSERVER <subcommand> [<arg> ...]. Subcommands are:
STATUS
    This node's Raft state, term, leader, log indexes, and whether it is ready
    for clients (it knows a leader and has applied what it knows committed).
MEMBERS
    Every member: id, Raft address, client address, voter or not.
LEADER
    The leader's id and client address.
SNAPSHOT
    Take a snapshot of this node's state now.
REMOVE <id>
    Remove a node from the cluster.
JOIN <id> <raft-addr> <client-addr>
    Add a node as a non-voter; the leader promotes it once it has caught up.
    The id of a live member at other addresses is refused. Members only: a
    joining node sends it.
REGISTER <id> <client-addr>
    Record a member's client address. Members only.
APPLIED
    The index of the last entry this node applied. Members only.
ACKED
    On the leader: an index at or above every write acknowledged so far.
    Members only.
FORWARD <batch>
    Run a batch of requests forwarded by another node. Members only.
HELP
    Print this help.`

// adminTimeout bounds a membership change.
const adminTimeout = 30 * time.Second

// clusterCommand serves a LOCKSERVER command on this node.
func (r *Raft) clusterCommand(req *Request) {
	args := req.Cmds[0]
	// The server has checked the command against the table; a caller that
	// submits to the engine directly gets the same errors.
	cmd := keyspace.Lookup(args[0])
	if len(args) < 2 {
		req.finish(keyspace.ErrWrongArity(cmd.Name))
		return
	}
	if cmd = cmd.Resolve(args); cmd == nil {
		req.finish(keyspace.ErrUnknownSubcommand(args))
		return
	}
	if !cmd.CheckArity(len(args)) {
		req.finish(keyspace.ErrWrongArity(cmd.Name))
		return
	}
	switch sub := strings.TrimPrefix(cmd.Name, "lockserver|"); {
	case sub == "forward":
		r.serveForward(req, args[2])
	case sub == "status":
		st := r.Status()
		if err := r.readyNow(); err != nil {
			st.NotReady = err.Error()
		}
		req.finish(st.reply())
	case sub == "members":
		st := r.Status()
		members := make([]keyspace.Reply, len(st.Members))
		for i, m := range st.Members {
			members[i] = m.reply(m.ID == st.LeaderID)
		}
		req.finish(keyspace.Array(members...))
	case sub == "leader":
		st := r.Status()
		if st.LeaderID == "" {
			req.finish(keyspace.Null)
			return
		}
		req.finish(keyspace.Map(keyspace.Bulk("id"), keyspace.Bulk(st.LeaderID), keyspace.Bulk("client"), keyspace.Bulk(st.LeaderAddr)))
	case sub == "applied":
		req.finish(keyspace.Bulk(strconv.FormatUint(r.applied.Load(), 10)))
	case sub == "acked":
		if target, ok := r.ackedIndex(); ok {
			req.finish(keyspace.Bulk(strconv.FormatUint(target, 10)))
			// The members learn that target is committed from the next append.
			r.sendCommitIndex()
		} else {
			req.finish(keyspace.Error(errTryAgain))
		}
	case sub == "help":
		req.finish(keyspace.BulkArray(strings.Split(clusterHelp, "\n")))
	default:
		// The rest wait for Raft: answer from a goroutine, as the engine does
		// every request, so that the connection is not held.
		go func() { req.finish(r.clusterChange(sub, args)) }()
	}
}

// clusterChange runs SNAPSHOT here and the membership changes on the leader.
func (r *Raft) clusterChange(sub string, args [][]byte) keyspace.Reply {
	ctx, cancel := context.WithTimeout(r.ctx, adminTimeout)
	defer cancel()
	var err error
	switch sub {
	case "snapshot":
		err = r.takeSnapshot()
	case "join":
		err = r.onLeader(ctx, args, func() error {
			return r.addNode(ctx, string(args[2]), string(args[3]), string(args[4]))
		})
	case "remove":
		err = r.onLeader(ctx, args, func() error { return r.removeNode(ctx, string(args[2])) })
	case "register":
		err = r.onLeader(ctx, args, func() error { return r.registerNode(ctx, string(args[2]), string(args[3])) })
	}
	var rerr ReplyError
	switch {
	case err == nil && sub == "join":
		// The joiner learns the cluster's identity: this member's, which
		// the leader's is, the link to it having checked that.
		return keyspace.Bulk(r.cluster.String())
	case err == nil:
		return keyspace.OK
	case errors.As(err, &rerr):
		return keyspace.Error(string(rerr))
	case errors.Is(err, raft.ErrNothingNewToSnapshot):
		return keyspace.Error("ERR nothing new to snapshot")
	}
	return keyspace.Error("ERR " + err.Error())
}

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
			return ReplyError(errClusterDown)
		case <-r.stop:
			return ReplyError(errClosed)
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

// heard reports whether the leader's heartbeats reach member id: none of
// them has failed since the last one that did, in this term.
func (r *Raft) heard(id string) bool {
	r.peerMu.Lock()
	defer r.peerMu.Unlock()
	return !r.unreachable[id]
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
// applied about as much of the log as the leader has committed.
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

// RaftStatus describes a node of the cluster, as LOCKSERVER STATUS shows it.
type RaftStatus struct {
	NodeID     string
	State      string // leader, follower, candidate or shutdown
	Term       uint64
	LeaderID   string
	LeaderAddr string // the leader's client address
	// CommitIndex is the last entry this node knows to be committed;
	// AppliedIndex the last its state machine applied; LastIndex the last in its log.
	CommitIndex, AppliedIndex, LastIndex uint64
	Members                              []Member
	// NotReady, filled in for LOCKSERVER STATUS only, says why the member is
	// not ready for clients (see Ready); it is empty when the member is ready.
	NotReady string
	// Cluster is the identity of the node's cluster.
	Cluster memberlink.ClusterID
}

// Member is a node of the configuration.
type Member struct {
	ID, RaftAddr, ClientAddr string
	Voter                    bool
}

// Status returns this node's view of the cluster.
func (r *Raft) Status() RaftStatus {
	leader := r.leaderID()
	st := RaftStatus{
		NodeID:       r.opts.NodeID,
		State:        strings.ToLower(r.raft.State().String()),
		Term:         r.raft.CurrentTerm(),
		LeaderID:     leader,
		LeaderAddr:   r.memberAddr(leader),
		CommitIndex:  r.raft.CommitIndex(),
		AppliedIndex: r.applied.Load(),
		LastIndex:    r.raft.LastIndex(),
		Cluster:      r.cluster,
	}
	if cf := r.raft.GetConfiguration(); cf.Error() == nil {
		for _, s := range cf.Configuration().Servers {
			st.Members = append(st.Members, Member{
				ID: string(s.ID), RaftAddr: string(s.Address), ClientAddr: r.memberAddr(string(s.ID)),
				Voter: s.Suffrage == raft.Voter,
			})
		}
	}
	return st
}

func (st RaftStatus) reply() keyspace.Reply {
	ready := 0
	if st.NotReady == "" {
		ready = 1
	}
	u := func(n uint64) keyspace.Reply { return keyspace.Int(int64(n)) }
	return keyspace.Map(
		keyspace.Bulk("node"), keyspace.Bulk(st.NodeID),
		keyspace.Bulk("state"), keyspace.Bulk(st.State),
		keyspace.Bulk("term"), u(st.Term),
		keyspace.Bulk("leader"), keyspace.Bulk(st.LeaderID),
		keyspace.Bulk("leader_client"), keyspace.Bulk(st.LeaderAddr),
		keyspace.Bulk("commit_index"), u(st.CommitIndex),
		keyspace.Bulk("applied_index"), u(st.AppliedIndex),
		keyspace.Bulk("last_index"), u(st.LastIndex),
		keyspace.Bulk("members"), keyspace.Int(int64(len(st.Members))),
		keyspace.Bulk("ready"), keyspace.Int(int64(ready)),
		keyspace.Bulk("not_ready_because"), keyspace.Bulk(st.NotReady),
		keyspace.Bulk("cluster"), keyspace.Bulk(st.Cluster.String()),
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
		keyspace.Bulk("raft"), keyspace.Bulk(m.RaftAddr),
		keyspace.Bulk("client"), keyspace.Bulk(m.ClientAddr),
		keyspace.Bulk("role"), keyspace.Bulk(role),
	)
}

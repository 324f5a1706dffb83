package replication

import (
	mrand "math/rand/v2"
	"slices"
	"time"

	"github.com/hashicorp/raft"
	"github.com/lockserver/lockserver/replication/internal/memberlink"
)

// What a cluster member tells the server about leadership, beyond Status, so
// that clients configured for Redis Sentinel can follow the leader: changes
// of leader as they happen, which members the leader cannot reach, the
// failure-detection timeouts, and a way to hand leadership over.

// Leader is the node that leads, as one node knows it.
type Leader struct {
	// ID is empty when this node knows of no leader (an election is under way,
	// or it lost touch with the leader).
	ID string
	// ClientAddr is the leader's client address; empty also while the leader
	// has not registered it yet.
	ClientAddr string
}

// leaderAddrPoll is how often WatchLeader looks for a leader's client
// address that the member map does not hold yet: members register it once a
// leader exists, so it arrives shortly after the election.
const leaderAddrPoll = 50 * time.Millisecond

// WatchLeader calls f with the current leader, and again each time the leader
// changes as this node sees it: when it learns of a new leader, when it loses
// touch with one, and when it learns a leader's client address. f runs on a
// goroutine of the engine's, one call at a time, until the engine closes; it
// must not block. Call it before Close.
func (r *Raft) WatchLeader(f func(Leader)) {
	obs := make(chan raft.Observation, 16)
	observer := raft.NewObserver(obs, false, func(o *raft.Observation) bool {
		_, ok := o.Data.(raft.LeaderObservation)
		return ok
	})
	r.raft.RegisterObserver(observer)
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		defer r.raft.DeregisterObserver(observer)
		var last Leader
		for {
			// Each wake-up reads the current state, so an observation dropped
			// while the channel was full loses nothing.
			id := r.leaderID()
			now := Leader{ID: id}
			if id != "" {
				now.ClientAddr = r.memberAddr(id)
			}
			if now != last {
				last = now
				f(now)
			}
			var poll <-chan time.Time
			if now.ID != "" && now.ClientAddr == "" {
				poll = time.After(leaderAddrPoll)
			}
			select {
			case <-r.stop:
				return
			case <-obs:
			case <-poll:
			}
		}
	}()
}

// leadershipLoop proposes the barrier as soon as this node wins an election,
// rather than at its first request; while it leads, it tracks which members
// fail heartbeats; and it tells the forwarder when the leader changes.
func (r *Raft) leadershipLoop() {
	obs := make(chan raft.Observation, 64)
	observer := raft.NewObserver(obs, false, func(o *raft.Observation) bool {
		switch o.Data.(type) {
		case raft.FailedHeartbeatObservation, raft.ResumedHeartbeatObservation, raft.LeaderObservation:
			return true
		}
		return false
	})
	r.raft.RegisterObserver(observer)
	defer r.raft.DeregisterObserver(observer)
	for {
		select {
		case <-r.stop:
			return
		case isLeader := <-r.raft.LeaderCh():
			r.peerMu.Lock()
			r.unreachable = map[string]bool{}
			r.peerMu.Unlock()
			if isLeader {
				r.leading()
			}
		case o := <-obs:
			if lo, ok := o.Data.(raft.LeaderObservation); ok {
				r.metrics.leaderChanges.Add(1)
				r.log.Info("leader changed", "event", "leader_change", "leader", string(lo.LeaderID),
					"leader_addr", r.memberAddr(string(lo.LeaderID)), "term", r.raft.CurrentTerm(), "state", lowerState(r.raft.State()))
				r.fwd.leaderChanged()
				continue
			}
			r.peerMu.Lock()
			switch d := o.Data.(type) {
			case raft.FailedHeartbeatObservation:
				r.unreachable[string(d.PeerID)] = true
			case raft.ResumedHeartbeatObservation:
				delete(r.unreachable, string(d.PeerID))
			}
			r.peerMu.Unlock()
		}
	}
}

// leaderID returns the id of the node this node believes leads, or "".
func (r *Raft) leaderID() string {
	_, id := r.raft.LeaderWithID()
	return string(id)
}

// leaderLink returns the id and the Raft address, which members call each
// other at, of the node this node believes leads; "" and "" if none.
func (r *Raft) leaderLink() (id, addr string) {
	a, i := r.raft.LeaderWithID()
	return string(i), string(a)
}

// Unreachable returns the ids of the members whose heartbeats fail, as the
// leader sees them. It is empty on a follower, which hears from the leader only.
func (r *Raft) Unreachable() []string {
	r.peerMu.Lock()
	defer r.peerMu.Unlock()
	ids := make([]string, 0, len(r.unreachable))
	for id := range r.unreachable {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// heard reports whether the leader's heartbeats reach member id: none of
// them has failed since the last one that did, in this term.
func (r *Raft) heard(id string) bool {
	r.peerMu.Lock()
	defer r.peerMu.Unlock()
	return !r.unreachable[id]
}

// Timeouts returns how long a follower goes without hearing from the leader
// before it may start an election (heartbeat), and how long an election may
// take before another starts (election).
func (r *Raft) Timeouts() (heartbeat, election time.Duration) {
	return r.opts.HeartbeatTimeout, r.opts.ElectionTimeout
}

// standSlack is how much longer than asked raft's heartbeat and election
// timeouts are until standUnheard lowers them.
const standSlack = time.Millisecond

// standUnheard has a member that hears from no leader after it starts stand
// for election soon: after a leader's heartbeat interval (a tenth of
// HeartbeatTimeout), so that a member that restarts in a cluster with a
// leader hears from it first, plus up to as much again at random, so that
// members that start together seldom stand at once. Raft's own first wait is
// one to two heartbeat timeouts: after a whole-cluster restart the members
// all waited that long with no leader, 1-2 s of the 3.7-4.2 s to the first
// write at 5M locks in bench/RESULTS.md, and a new cluster as long before
// its first.
//
// Raft stands when its heartbeat timer fires and it has heard from no leader
// for the heartbeat timeout; lowering that timeout fires the timer at once.
// So raft starts with timeouts standSlack longer than asked, and this lowers
// them to what was asked when it is time to stand.
//
// Standing early cannot unseat a leader, so it is done only with pre-vote
// (standsEarly): a member asked for its pre-vote refuses while it has a
// leader, and the candidate's term does not move until a majority grants it.
// A member that restarts in a cluster with a leader is refused, and is a
// follower again at the leader's next heartbeat.
func (r *Raft) standUnheard() {
	if !r.standsEarly() {
		return
	}
	wait := r.opts.firstStand
	if wait == 0 {
		beat := r.heartbeatInterval()
		wait = beat + mrand.N(beat)
	}
	select {
	case <-r.stop:
		return
	case <-time.After(wait):
	}
	r.reloadConfig("the heartbeat and election timeouts", func(rc *raft.ReloadableConfig) {
		rc.HeartbeatTimeout, rc.ElectionTimeout = r.opts.HeartbeatTimeout, r.opts.ElectionTimeout
	})
}

// standsEarly says whether the transport carries pre-vote requests, without
// which standUnheard leaves raft's timer alone.
func (r *Raft) standsEarly() bool {
	_, ok := r.trans.(raft.WithPreVote)
	return ok
}

// A leader whose process dies is noticed at once by the followers, not after
// the heartbeat timeout: the kernel closes the dead process's connections,
// so each follower's Raft link from it ends (memberlink's Config.Gone), and
// a connection to its Raft address is refused, as it is for nothing else: a
// leader paused by a busy machine, or starved of CPU, keeps its links, and
// its kernel still takes connections. Only a dead process (or a host that
// answers for it) makes a follower stand before its timeout; a partition or
// a host that is gone still waits the timeout out.
//
// A follower that finds the leader gone stands at once, as the target of a
// leadership transfer does (it sends itself Raft's TimeoutNow): the other
// members then vote though they have not yet noticed, and the vote is Raft's
// own, log check included. The surviving voters take turns, by id, each a
// heartbeat interval after the one before and only while no other leads, so
// that two seldom split the vote; one whose log is behind loses, and the
// next stands.

// peerGone is told that node's Raft link to this member ended.
func (r *Raft) peerGone(node string) {
	n := r.node.Load()
	if n == nil || r.closed.Load() || !r.standing.CompareAndSwap(false, true) {
		return
	}
	addr, id := n.LeaderWithID()
	if string(id) != node || n.State() != raft.Follower {
		r.standing.Store(false)
		return
	}
	// Not in r.wg: the transport's readers call this until it closes,
	// after Close waits for r.wg. It ends within a dial timeout and the
	// turns, and what it uses refuses calls once closed.
	go func() {
		defer r.standing.Store(false)
		r.standIfGone(n, node, addr)
	}()
}

// standIfGone stands for election if leader's process at addr is gone.
func (r *Raft) standIfGone(n *raft.Raft, leader string, addr raft.ServerAddress) {
	conn, err := r.link.Dial(addr, r.opts.HeartbeatTimeout/4)
	if err == nil {
		conn.Close()
		return
	}
	if !memberlink.Refused(err) {
		return
	}
	f := n.GetConfiguration()
	if f.Error() != nil {
		return
	}
	var turn []string
	for _, s := range f.Configuration().Servers {
		if s.Suffrage == raft.Voter && string(s.ID) != leader {
			turn = append(turn, string(s.ID))
		}
	}
	slices.Sort(turn)
	mine := slices.Index(turn, r.opts.NodeID)
	if mine < 0 {
		return // not a voter
	}
	select {
	case <-r.stop:
		return
	case <-time.After(time.Duration(mine) * r.heartbeatInterval()):
	}
	if _, id := n.LeaderWithID(); (id != "" && string(id) != leader) || n.State() != raft.Follower {
		return
	}
	r.log.Info("the leader's process is gone (its Raft address refuses connections): standing for election now",
		"event", "leader_gone", "leader", leader, "turn", mine)
	local := r.trans.LocalAddr()
	req := &raft.TimeoutNowRequest{RPCHeader: raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte(r.opts.NodeID), Addr: []byte(local)}}
	if err := r.trans.TimeoutNow(raft.ServerID(r.opts.NodeID), local, req, &raft.TimeoutNowResponse{}); err != nil {
		r.log.Warn("standing for election failed", "err", err)
	}
}

// heartbeatInterval is how often a leader sends heartbeats: a tenth of
// HeartbeatTimeout. A member waits about as long before it stands when it
// starts (standUnheard), and between turns when the leader is gone.
func (r *Raft) heartbeatInterval() time.Duration { return r.opts.HeartbeatTimeout / 10 }

package replication

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// WAIT on a cluster member.
//
// Every write acknowledged so far, on any node, lies at or below the index
// that the leader gives (ackedIndex). WAIT waits until enough members other
// than the leader report an applied index at or above it. The leader asks
// each member (LOCKSERVER APPLIED); a follower first asks the leader for the
// index (LOCKSERVER ACKED), then the other members the same way, and counts
// itself too. The waits of a node share one poller per member, which runs
// while some wait needs that member's progress, and one request for the
// leader's index at a time, which serves every wait that began before it.

// Bounds of the polling. A member applies an entry one to two CommitTimeouts
// after the leader commits it, when the next AppendEntries tells it of the
// commit, so a member that answers is asked again every pollMin, not to add
// to that wait; one that fails is asked less and less often, down to once
// every pollMax.
const (
	pollMin     = time.Millisecond
	pollMax     = 50 * time.Millisecond
	pollTimeout = 500 * time.Millisecond
)

// replicaMember is a member whose applied index WAIT counts.
type replicaMember struct {
	id   string
	addr string // its Raft address; "" for this node, which reads its own
}

// replicaWait is one WAIT under way.
type replicaWait struct {
	n    int
	done chan struct{} // closed once n members hold target
	// Guarded by replicaWaits.mu:
	target   uint64 // the index to hold, once targeted
	targeted bool
	ended    bool // the wait is over; a request for the index forgets it
}

// replicaWaits is what the WAITs of a node share; its zero value is ready.
type replicaWaits struct {
	// mu is held alone: the engine's state it needs (replicaSet,
	// ackedIndex) is read before it is taken.
	mu      sync.Mutex
	wake    chan struct{}     // wakes replicaLoop
	acked   map[string]uint64 // member id -> the applied index it reported last
	polling map[string]bool   // members whose poller runs
	waits   map[*replicaWait]bool
	// untargeted are the waits that began after the last request for the
	// leader's index; fetching is set while one is under way.
	untargeted []*replicaWait
	fetching   bool
}

// wakeChan returns the channel that wakes replicaLoop.
func (a *replicaWaits) wakeChan() chan struct{} {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.initLocked()
	return a.wake
}

func (a *replicaWaits) initLocked() {
	if a.wake == nil {
		a.wake = make(chan struct{}, 1)
		a.acked = map[string]uint64{}
		a.polling = map[string]bool{}
		a.waits = map[*replicaWait]bool{}
	}
}

func (a *replicaWaits) signal() {
	select {
	case a.wakeChan() <- struct{}{}:
	default:
	}
}

// WaitReplicas waits until n members other than the leader hold every write
// acknowledged before the call, for at most timeout (0: no limit) or until
// ctx ends, and returns how many hold them then. A follower that cannot
// learn the leader's index within forwardWait, or the timeout, answers
// CLUSTERDOWN.
func (r *Raft) WaitReplicas(ctx context.Context, n int, timeout time.Duration) (int, error) {
	a := &r.waits
	w := &replicaWait{n: n, done: make(chan struct{})}
	target, leading := r.ackedIndex()
	members := r.replicaSet()
	a.mu.Lock()
	a.initLocked()
	if leading {
		w.target, w.targeted = target, true
		a.waits[w] = true
		a.settleLocked(r, members)
	} else {
		a.untargeted = append(a.untargeted, w)
	}
	unsettled := a.waits[w]
	a.mu.Unlock()
	a.signal()
	if unsettled {
		// The members learn that target is committed from the next append.
		r.sendCommitIndex()
	}

	var expire, noLeader <-chan time.Time
	if timeout > 0 {
		t := time.NewTimer(timeout)
		defer t.Stop()
		expire = t.C
	}
	if !leading {
		t := time.NewTimer(r.opts.forwardWait)
		defer t.Stop()
		noLeader = t.C
	}
	var ctxErr error
	for {
		select {
		case <-w.done:
		case <-expire:
		case <-noLeader:
			a.mu.Lock()
			targeted := w.targeted
			a.mu.Unlock()
			if targeted {
				noLeader = nil
				continue
			}
		case <-ctx.Done():
			ctxErr = ctx.Err()
		case <-r.stop:
			a.end(w)
			return 0, replyErr(errClosed)
		}
		members := r.replicaSet()
		a.mu.Lock()
		a.endLocked(w)
		targeted, count := w.targeted, a.countLocked(r, w.target, members)
		a.mu.Unlock()
		switch {
		case targeted:
			return count, ctxErr
		case ctxErr != nil:
			return 0, ctxErr
		}
		return 0, replyErr(errClusterDown)
	}
}

func (a *replicaWaits) end(w *replicaWait) {
	a.mu.Lock()
	a.endLocked(w)
	a.mu.Unlock()
}

func (a *replicaWaits) endLocked(w *replicaWait) {
	w.ended = true
	delete(a.waits, w)
	a.untargeted = slices.DeleteFunc(a.untargeted, func(x *replicaWait) bool { return x == w })
}

// ackedIndex returns, if this node leads, an index at or above every write
// acknowledged so far. Once the barrier of its term is applied, every entry
// of earlier terms is, and its commit index covers every acknowledged write:
// a write is answered after it is committed. Before, an entry that another
// leader committed may be above this node's commit index, but it is in this
// node's log, as every committed entry is in a leader's.
func (r *Raft) ackedIndex() (uint64, bool) {
	r.proposeMu.Lock()
	defer r.proposeMu.Unlock()
	if !r.leadingLocked() {
		return 0, false
	}
	if r.ownDone.Load() > r.barrier {
		return r.raft.CommitIndex(), true
	}
	return r.raft.LastIndex(), true
}

// replicaSet returns the members that WAIT counts: every member but the
// leader whose applied index this node can learn. That is this node itself,
// when it does not lead, and the others that have registered a client
// address and, as the leader sees them, answer its heartbeats. Non-voters
// count, as Redis counts every replica.
func (r *Raft) replicaSet() []replicaMember {
	cf := r.raft.GetConfiguration()
	if cf.Error() != nil {
		return nil
	}
	// A node shutting down replicates to no one; raft has cleared its leader
	// by then, which would make it count itself as a follower below.
	state := r.raft.State()
	if state == raft.Shutdown {
		return nil
	}
	leader := r.leaderID()
	if state == raft.Leader {
		leader = r.opts.NodeID
	}
	var set []replicaMember
	r.peerMu.Lock()
	defer r.peerMu.Unlock()
	for _, s := range cf.Configuration().Servers {
		id := string(s.ID)
		switch {
		case id == leader:
		case id == r.opts.NodeID:
			set = append(set, replicaMember{id: id})
		case r.memberAddr(id) != "" && !r.unreachable[id]:
			set = append(set, replicaMember{id: id, addr: string(s.Address)})
		}
	}
	return set
}

// countLocked counts the members of set known to hold target.
func (a *replicaWaits) countLocked(r *Raft, target uint64, set []replicaMember) int {
	n := 0
	for _, m := range set {
		if applied, known := a.appliedLocked(r, m); known && applied >= target {
			n++
		}
	}
	return n
}

// appliedLocked returns the applied index of m as last known.
func (a *replicaWaits) appliedLocked(r *Raft, m replicaMember) (uint64, bool) {
	if m.addr == "" {
		return r.applied.Load(), true
	}
	applied, known := a.acked[m.id]
	return applied, known
}

// settleLocked ends the waits that enough members of set satisfy.
func (a *replicaWaits) settleLocked(r *Raft, set []replicaMember) {
	for w := range a.waits {
		if a.countLocked(r, w.target, set) >= w.n {
			close(w.done)
			delete(a.waits, w)
		}
	}
}

// needsLocked reports whether a wait needs news of m, a member of set.
func (a *replicaWaits) needsLocked(r *Raft, m replicaMember, set []replicaMember) bool {
	if !slices.Contains(set, m) {
		return false
	}
	applied, known := a.appliedLocked(r, m)
	for w := range a.waits {
		if !known || applied < w.target {
			return true
		}
	}
	return false
}

// replicaLoop starts the pollers and the requests for the leader's index that
// the waits under way need, and waits for them when the node closes.
func (r *Raft) replicaLoop() {
	a := &r.waits
	wake := a.wakeChan()
	var tasks sync.WaitGroup
	defer tasks.Wait()
	var recheck <-chan time.Time
	for {
		select {
		case <-r.stop:
			return
		case <-wake:
		case <-recheck:
		}
		set := r.replicaSet()
		a.mu.Lock()
		var polls []replicaMember
		for _, m := range set {
			if !a.polling[m.id] && a.needsLocked(r, m, set) {
				a.polling[m.id] = true
				polls = append(polls, m)
			}
		}
		var fetch []*replicaWait
		if !a.fetching && len(a.untargeted) > 0 {
			fetch, a.untargeted, a.fetching = a.untargeted, nil, true
		}
		// A member may become countable while waits go on (it registers its
		// address, its heartbeats resume): look again now and then.
		recheck = nil
		if len(a.waits) > 0 {
			recheck = time.After(pollMax)
		}
		a.mu.Unlock()
		for _, m := range polls {
			tasks.Go(func() { r.pollMember(m) })
		}
		if fetch != nil {
			tasks.Go(func() { r.fetchTarget(fetch) })
		}
	}
}

// pollMember asks m its applied index for as long as a wait needs it.
func (r *Raft) pollMember(m replicaMember) {
	a := &r.waits
	backoff := pollMin
	for {
		applied, err := r.memberApplied(m)
		set := r.replicaSet()
		a.mu.Lock()
		if err == nil {
			a.acked[m.id] = applied
			a.settleLocked(r, set)
		}
		more := a.needsLocked(r, m, set)
		if !more {
			delete(a.polling, m.id)
		}
		a.mu.Unlock()
		if !more {
			// The member may have left the set under another address.
			a.signal()
			return
		}
		if err != nil {
			backoff = min(2*backoff, pollMax)
		} else {
			backoff = pollMin
		}
		select {
		case <-r.stop:
			return
		case <-time.After(backoff):
		}
	}
}

// memberApplied asks m the index of the last entry it applied.
func (r *Raft) memberApplied(m replicaMember) (uint64, error) {
	if m.addr == "" {
		return r.applied.Load(), nil
	}
	ctx, cancel := context.WithTimeout(r.ctx, pollTimeout)
	defer cancel()
	res, err := r.peers.Call(ctx, m.addr, argLockserver, []byte("APPLIED"))
	if err != nil {
		return 0, err
	}
	return strconv.ParseUint(res, 10, 64)
}

// fetchTarget gets the leader's index for the waits of batch, which all began
// before it was called, and retries until it has it or all of them have
// ended; the waits that begin meanwhile join the next try.
func (r *Raft) fetchTarget(batch []*replicaWait) {
	a := &r.waits
	for backoff := pollMin; ; backoff = min(2*backoff, pollMax) {
		target, err := r.leaderAcked()
		set := r.replicaSet()
		a.mu.Lock()
		batch = slices.DeleteFunc(batch, func(w *replicaWait) bool { return w.ended })
		if err == nil {
			for _, w := range batch {
				w.target, w.targeted = target, true
				a.waits[w] = true
			}
			a.settleLocked(r, set)
		} else {
			batch = append(batch, a.untargeted...)
			a.untargeted = nil
		}
		over := err == nil || len(batch) == 0
		if over {
			a.fetching = false
		}
		a.mu.Unlock()
		if over {
			a.signal()
			return
		}
		select {
		case <-r.stop:
			return
		case <-time.After(backoff):
		}
	}
}

// leaderAcked returns the leader's ackedIndex: this node's if it leads.
func (r *Raft) leaderAcked() (uint64, error) {
	if target, ok := r.ackedIndex(); ok {
		return target, nil
	}
	leader, addr := r.leaderLink()
	if leader == "" || leader == r.opts.NodeID {
		return 0, errors.New("no leader")
	}
	ctx, cancel := context.WithTimeout(r.ctx, pollTimeout)
	defer cancel()
	res, err := r.peers.Call(ctx, addr, argLockserver, []byte("ACKED"))
	if err != nil {
		return 0, err
	}
	return strconv.ParseUint(res, 10, 64)
}

package replication

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
	"github.com/lockserver/lockserver/internal/acl"
	"github.com/lockserver/lockserver/keyspace"
	"github.com/lockserver/lockserver/luaexec"
	"github.com/lockserver/lockserver/replication/internal/logcodec"
)

// Proposals: the path of a write on the leader, top to bottom. Submit hands
// a request to submit, which has the state machine prepare it and, while
// this node leads, proposes it (proposeLocked): the proposal joins the
// pending batch, which goes to the log as one Raft entry (flushLocked) once
// the batch before it has committed and any hold after that has ended
// (holdLocked). waitLoop follows the batches in log order and answers the
// proposals of a batch raft refused or lost (failProposal). The FSM applies
// the committed entry on every node (fsm.go), and on this one answers the
// proposal's request with the reply (appliedLocal).

// Submit starts req: at once on the leader, through the forwarder on a
// follower. Its reply is available through req.Wait.
func (r *Raft) Submit(req *Request) {
	req.start()
	if cmd := clusterRow(req); cmd != nil {
		r.clusterCommand(cmd, req)
		return
	}
	r.submit(req, false)
}

// submit runs req on this node if it leads. Otherwise a request from a local
// client goes to the forwarder; one forwarded by another node gets TRYAGAIN,
// and the other node tries the new leader.
//
// A write goes to the log. A read, and a request that may write (Effect
// MayWrite) run dry, run on the state machine at their place (readPlace) and
// are answered once a leadership round confirms them (read.go); a dry run
// that reaches a write is abandoned, and its request goes to the log as if
// it had gone there first.
func (r *Raft) submit(req *Request, forwarded bool) {
	if r.closed.Load() {
		req.finish(keyspace.Error(errClosed))
		return
	}
	var prepared bool
	effect := keyspace.Reads // of WATCH
	for {
		r.proposeMu.Lock()
		// While the forwarder holds requests, new ones queue behind them, so that
		// a client's requests keep their order when this node becomes leader.
		if (!forwarded && r.fwd.busy()) || !r.leadingLocked() {
			r.proposeMu.Unlock()
			if forwarded {
				req.finish(keyspace.Error(errTryAgain))
			} else {
				r.fwd.enqueue(req)
			}
			return
		}
		if prepared || req.WatchKeys != nil {
			break
		}
		// prepare may compile a script: never hold proposeMu meanwhile.
		r.proposeMu.Unlock()
		var errReply *keyspace.Reply
		if effect, errReply = r.prepare(req); errReply != nil {
			req.finish(*errReply)
			return
		}
		if effect == keyspace.MayWrite && (req.dryFailed || r.wouldWriteNow(req)) {
			effect = keyspace.Writes
		}
		prepared = true
	}
	// proposeMu is held.
	at := r.readPlace(req, forwarded)
	// A dry run that waits for its place and then writes goes to the log after
	// requests submitted after it: no later request of its client may be
	// among them (Request.Unordered), which a forwarded batch cannot promise.
	if effect == keyspace.MayWrite && at > 0 && forwarded {
		effect = keyspace.Writes
	}
	if effect == keyspace.Writes {
		e := &logcodec.LogEntry{Kind: logcodec.KindCommand, Relay: req.relay, Entry: logcodec.Entry{
			DB: req.DB, Cmds: req.Cmds, Multi: req.Multi, Watch: req.Watch, OOM: req.OverMemory, User: req.User,
		}}
		r.proposeLocked(e, req, forwarded)
		r.proposeMu.Unlock()
		return
	}
	rd := &readOp{req: req, term: r.leadTerm.Load(), dry: effect == keyspace.MayWrite}
	rd.left.Store(2)
	// The place again, and the read placed there, under one hold of
	// localMu: the FSM may have applied proposals since readPlace, and
	// removed them from r.local (never added any: proposeMu is held).
	r.localMu.Lock()
	if at = r.readPlaceLocked(req, forwarded); at > 0 {
		r.local[at-1].reads = append(r.local[at-1].reads, rd)
		r.localMu.Unlock()
		req.unordered = rd.dry
		r.proposeMu.Unlock()
		r.verifier.push(rd)
		return
	}
	r.localMu.Unlock()
	r.proposeMu.Unlock()
	// Nothing this node sent the log is unapplied: the state machine holds
	// every write acknowledged before this request arrived.
	r.smMu.Lock()
	reply := r.read(rd)
	r.smMu.Unlock()
	if reply.IsWouldWrite() {
		req.dryFailed = true
		r.submit(req, forwarded)
		return
	}
	r.verifier.push(rd)
	r.readRan(rd, reply)
}

// wouldWriteNow reports whether a dry run of req on the state as it is now
// reaches a write. A request that writes as it finds the keyspace then goes
// to the log at once: run dry at its place, it would most likely write too,
// and wait for that place first (a lock attempt on a free lock). One that
// writes nothing now, most often a lock attempt on a lock held for longer
// than a commit, runs dry again at its place.
//
// Where nearly every such request writes (lock and unlock cycles on keys of
// their own), the dry run is a cost that saves nothing: dryOdds then skips
// most of them, and the requests go to the log at once.
func (r *Raft) wouldWriteNow(req *Request) bool {
	if !r.dryOdds.worth() {
		return true
	}
	r.smMu.Lock()
	sm := r.sm.Load()
	sm.record(false)
	write := sm.dryRun(req, r.clock.Now()).IsWouldWrite()
	sm.takeDenials() // the run at its place, or in the log, reports them
	r.smMu.Unlock()
	r.dryOdds.saw(write)
	return write
}

// dryOdds counts the recent dry runs at submission that were wasted: up by
// one for each that reached a write, down by dryNoWrite for each that wrote
// nothing (a log entry saved). Past dryWasted only one request in drySample
// runs dry, to notice when that changes.
type dryOdds struct {
	wasted, skipped atomic.Int32
}

const (
	dryNoWrite = 8
	dryWasted  = 64
	drySample  = 16
)

func (o *dryOdds) worth() bool {
	return o.wasted.Load() < dryWasted || o.skipped.Add(1)%drySample == 0
}

func (o *dryOdds) saw(write bool) {
	switch {
	case !write:
		if o.wasted.Add(-dryNoWrite) < 0 {
			o.wasted.Store(0)
		}
	case o.wasted.Add(1) > dryWasted:
		o.wasted.Store(dryWasted)
	}
}

// readPlace returns where a read runs: after the proposal r.local[at-1] is
// applied, or at once when at is 0. That is after every proposal of this
// node's that may have been acknowledged, to this client or any other: those
// sent to the log (a proposal still pending, not yet in the log, cannot
// be), and after this term's barrier. A request whose client has replies
// outstanding (not Alone), or that another node forwarded, also waits for
// the pending ones: its client's earlier requests may be among them.
// proposeMu is held.
func (r *Raft) readPlace(req *Request, forwarded bool) int {
	r.localMu.Lock()
	defer r.localMu.Unlock()
	return r.readPlaceLocked(req, forwarded)
}

// readPlaceLocked is readPlace with localMu held too.
func (r *Raft) readPlaceLocked(req *Request, forwarded bool) int {
	at := len(r.local)
	if req.Alone && !forwarded && r.ownDone.Load() > r.barrier {
		at -= len(r.pendingProps)
	}
	return at
}

// prepare validates req and says what it may do. A NOSCRIPT, or a function
// not found, while this node has proposals in flight may only mean that the
// SCRIPT LOAD or FUNCTION LOAD before it is not applied yet: such a request
// goes to the log, where apply decides.
func (r *Raft) prepare(req *Request) (effect keyspace.Effect, errReply *keyspace.Reply) {
	r.localMu.Lock()
	inflight := len(r.local) > 0
	r.localMu.Unlock()
	effect, errReply = r.sm.Load().prepare(req)
	if errReply != nil && inflight && luaexec.NotLoaded(*errReply) {
		return keyspace.Writes, nil
	}
	return effect, errReply
}

// leadingLocked reports whether this node leads, and on the first call in a
// new term proposes the barrier that reads of the term wait for. proposeMu is held.
func (r *Raft) leadingLocked() bool {
	if r.raft.State() != raft.Leader {
		r.leadTerm.Store(0)
		return false
	}
	if t := r.raft.CurrentTerm(); t != r.leadTerm.Load() {
		r.leadTerm.Store(t)
		r.barrier = r.nextSeq
		r.proposeLocked(&logcodec.LogEntry{Kind: logcodec.KindBarrier}, nil, false)
		// A cluster whose users were never seeded gets this node's. Should
		// the log hold a seed not yet applied here, the first one wins.
		if users := r.opts.Users; !users.Seeded() {
			seed := logcodec.Entry{Cmds: [][][]byte{LoadUsersCommand(users.Users(), true)}}
			r.proposeLocked(&logcodec.LogEntry{Kind: logcodec.KindCommand, Entry: seed}, nil, false)
		}
	}
	return true
}

// leading reports whether this node leads.
func (r *Raft) leading() bool {
	r.proposeMu.Lock()
	defer r.proposeMu.Unlock()
	return r.leadingLocked()
}

// proposal is an entry this node proposed.
type proposal struct {
	seq   uint64
	req   *Request  // nil for the entries the engine proposes itself
	reads []*readOp // reads submitted after it and before the next proposal
	done  bool      // req resolved; guarded by localMu
	// forwarded marks a request that a forwarder relayed: its client's next
	// request comes back through the forwarder, which holds its own batches.
	forwarded bool
	at        time.Time // when it was proposed
}

// proposeLocked proposes e with the next Seq: at once when fewer than
// maxInflight batches are being committed and no batch is held, else with the
// next batch. It does not wait for the commit. proposeMu is held.
func (r *Raft) proposeLocked(e *logcodec.LogEntry, req *Request, forwarded bool) {
	p := &proposal{seq: r.nextSeq, req: req, forwarded: forwarded, at: time.Now()}
	r.nextSeq++
	e.Origin, e.Seq = r.origin, p.seq
	r.localMu.Lock()
	r.local = append(r.local, p)
	r.localMu.Unlock()
	alone := e.Kind.Alone()
	if alone {
		r.flushLocked() // what is pending goes first, in a batch of its own
	}
	r.pending = append(r.pending, e)
	r.pendingSize += e.Size()
	r.pendingProps = append(r.pendingProps, p)
	if alone {
		r.flushLocked()
		return
	}
	r.sendReadyLocked()
}

// proposeWait proposes an entry of the engine's own and waits until it is applied.
func (r *Raft) proposeWait(ctx context.Context, e *logcodec.LogEntry) error {
	req := &Request{}
	req.start()
	r.proposeMu.Lock()
	if !r.leadingLocked() {
		r.proposeMu.Unlock()
		return replyErr(errTryAgain)
	}
	r.proposeLocked(e, req, false)
	r.proposeMu.Unlock()
	if reply := req.Wait(ctx); reply.IsError() {
		return reply.Err()
	}
	return nil
}

// sendReadyLocked sends the pending proposals if they may go now: fewer than
// maxInflight batches are being committed, no forwarded batch is being
// gathered and no hold waits for more; or they fill a batch. proposeMu is held.
func (r *Raft) sendReadyLocked() {
	full := len(r.pendingProps) >= maxBatchEntries || r.pendingSize >= maxBatchBytes
	if full || (r.inflight < maxInflight && r.gathering == 0 && len(r.pendingProps) >= r.holdFor) {
		r.flushLocked()
	}
}

// flushLocked sends the pending proposals to the log as one batch.
// proposeMu is held.
//
// The batch's commands are stamped now, which is after this term's barrier
// was applied: a batch waits for the one before it, and the barrier is the
// term's first. A new leader has then applied every entry of earlier terms
// and its clock follows their time line (see applyLog), whatever its own wall
// clock says. A batch that left with the barrier (its proposals were held
// when the term began) carries no stamp: its commands run at the time of the
// entry before them.
func (r *Raft) flushLocked() {
	r.holdFor = 0
	if len(r.pendingProps) == 0 {
		return
	}
	var stamp int64
	if r.ownDone.Load() > r.barrier {
		stamp = r.clock.Now()
	}
	for _, e := range r.pending {
		e.Entry.Time = stamp
	}
	b := &logBatch{props: r.pendingProps, sent: time.Now()}
	r.metrics.batch.Observe(int64(len(r.pendingProps)))
	b.future = r.raft.Apply(logcodec.EncodeBatch(r.pending, r.pendingSize), 0)
	r.pending, r.pendingSize, r.pendingProps = nil, 0, nil
	r.inflight++
	r.waiter.push(b)
}

// logBatch is a Raft log entry of this node's: proposals that go to the log,
// and to every disk, in one write.
type logBatch struct {
	props  []*proposal
	future raft.ApplyFuture
	sent   time.Time
}

// Bounds of proposal batching. With one batch being committed at a time, the
// proposals that arrive meanwhile form the next: a lone client waits for no
// one, and many clients share each commit (hashicorp/raft's own pipelining
// would split them into many small commits, one fsync each). Two or four
// batches in flight, a log entry per proposal, or a second batch once the
// first is on the leader's disk all measured slower here: smaller batches and
// more fsyncs on a shared disk. Two in flight still did with the leader's
// write in the background (see storage.Log).
//
// A client answered by a batch usually sends its next request at once, but
// that request arrives just after the next batch has left, so it waits a whole
// commit, and the clients split into cohorts that alternate between batches,
// each request waiting about two commits. So the next batch is held until the
// clients the last one answered have had their turn: until as many proposals
// are pending as were pending plus were answered. How long they take depends
// on how busy the machine is (on a small machine shared with many clients,
// most of a commit), and a client may not come back at all, so the hold goes
// in steps (see steppedHold): a holdDivisor'th of the last commit's time,
// then another each time more proposals arrived during the last, for at
// most the commit's time and holdMax. A request that no one follows loses
// one step.
const (
	maxInflight     = 1
	maxBatchEntries = 1024
	maxBatchBytes   = 1 << 20
	holdMax         = 2 * time.Millisecond
	holdDivisor     = 4
)

// waitLoop waits for this node's batches in log order: when one is done it
// sends the next, and it answers the proposals of those that failed.
func (r *Raft) waitLoop() {
	for {
		select {
		case <-r.waiter.wake:
		case <-r.stop:
			// Batches sent now fail at once, raft being shut down; a held
			// one is sent now, for its proposals to be answered.
			r.holdTimer.Stop()
			r.proposeMu.Lock()
			r.flushLocked()
			r.proposeMu.Unlock()
			for bs := r.waiter.take(); len(bs) > 0; bs = r.waiter.take() {
				for _, b := range bs {
					r.checkBatch(b)
				}
			}
			return
		}
		for _, b := range r.waiter.take() {
			r.checkBatch(b)
		}
	}
}

func (r *Raft) checkBatch(b *logBatch) {
	err := r.outcome(b.future)
	r.proposeMu.Lock()
	r.inflight--
	if err == nil {
		r.holdLocked(b)
	} else {
		r.sendReadyLocked()
	}
	r.proposeMu.Unlock()
	if err != nil {
		for _, p := range b.props {
			r.failProposal(p, err)
		}
	}
}

// outcome waits for the outcome of a batch sent to the log. hashicorp/raft
// never answers a batch still queued for its leader loop when it shuts
// down, and Close stops the node only once raft has shut down: a batch with
// no outcome then has none to come, and fails as raft's would.
func (r *Raft) outcome(f raft.ApplyFuture) error {
	err, ok := awaitOr(f.Error, r.stop)
	if !ok {
		return raft.ErrRaftShutdown
	}
	return err
}

// failProposal answers a proposal whose batch raft refused or lost, unless
// the FSM applied it meanwhile.
func (r *Raft) failProposal(p *proposal, err error) {
	var reply keyspace.Reply
	switch {
	case errors.Is(err, raft.ErrNotLeader), errors.Is(err, raft.ErrLeadershipTransferInProgress):
		reply = keyspace.Error(errTryAgain) // refused before it was appended
	case errors.Is(err, raft.ErrRaftShutdown):
		reply = keyspace.Error(errUnknownClose)
	default: // ErrLeadershipLost, and anything else: it may be in the log
		reply = keyspace.Error(errUnknownLost)
	}
	var reads []*readOp
	r.localMu.Lock()
	for i, q := range r.local {
		if q == p {
			r.local = append(r.local[:i], r.local[i+1:]...)
			reads = p.reads
			p.reads = nil
			break
		}
	}
	resolve := !p.done && p.req != nil
	p.done = true
	r.localMu.Unlock()
	for _, rd := range reads {
		r.readRan(rd, keyspace.Error(errTryAgain))
	}
	if resolve {
		p.req.finish(reply)
	}
}

// appliedLocal is called by the FSM, under smMu, when it has applied this
// node's proposal seq, whose scripts called calls (valid during the call):
// it answers the proposal's request, and runs the reads
// that were submitted after it, before this node's next proposal is applied.
func (r *Raft) appliedLocal(seq uint64, reply keyspace.Reply, denials []acl.Denial, calls []luaexec.ScriptCall) {
	r.ownDone.Store(seq + 1)
	var done *Request
	var reads []*readOp
	r.localMu.Lock()
	for len(r.local) > 0 && r.local[0].seq <= seq {
		p := r.local[0]
		r.local[0] = nil
		r.local = r.local[1:]
		// A proposal before seq that is still listed never made it into the
		// log; the waiter reports its error.
		if p.seq == seq && !p.done {
			p.done = true
			done = p.req
			if !r.committed.IsZero() {
				r.metrics.commit.Observe(int64(r.committed.Sub(p.at)))
				r.metrics.apply.Observe(int64(time.Since(p.at)))
			}
		}
		reads = append(reads, p.reads...)
	}
	r.localMu.Unlock()
	if done != nil {
		done.Denials, done.Calls = denials, append(done.Calls[:0], calls...)
		done.finish(reply)
	}
	for _, rd := range reads {
		r.readRan(rd, r.read(rd))
	}
}

// steppedHold is a hold after a batch (see holdDivisor): it goes on a step at
// a time while proposals keep arriving, up to its end.
type steppedHold struct {
	step time.Duration
	seen int // proposals pending when the last step began
	end  time.Time
}

// newHold starts a hold at now, after a batch whose commit took took, with
// seen proposals pending. Its first step is h.step.
func newHold(now time.Time, took time.Duration, seen int) steppedHold {
	limit := min(holdMax, took)
	return steppedHold{step: limit / holdDivisor, seen: seen, end: now.Add(limit)}
}

// next ends a step at now with n proposals pending: it returns how long the
// next step lasts, or 0 when none arrived during this one or the hold is over.
func (h *steppedHold) next(now time.Time, n int) time.Duration {
	if n <= h.seen || !now.Before(h.end) {
		return 0
	}
	h.seen = n
	return min(h.step, h.end.Sub(now))
}

// holdLocked starts the next batch once the clients that batch b answered
// on this node have had their turn to join it (see steppedHold), or at once if
// it answered none. proposeMu is held.
func (r *Raft) holdLocked(b *logBatch) {
	answered := 0
	for _, p := range b.props {
		if p.req != nil && !p.forwarded {
			answered++
		}
	}
	if answered > 0 {
		now := time.Now()
		r.holdFor = len(r.pendingProps) + answered
		r.hold = newHold(now, now.Sub(b.sent), len(r.pendingProps))
		r.holdUntil = now.Add(r.hold.step)
		r.holdTimer.Reset(r.hold.step)
	}
	r.sendReadyLocked()
}

// holdExpired ends a step of the hold: it waits another step if proposals
// arrived during this one, else sends the held batch. A timer set for an
// earlier hold may fire late: holdUntil tells.
func (r *Raft) holdExpired() {
	r.proposeMu.Lock()
	defer r.proposeMu.Unlock()
	now := time.Now()
	if r.holdFor == 0 || now.Before(r.holdUntil) {
		return
	}
	if next := r.hold.next(now, len(r.pendingProps)); next > 0 {
		r.holdUntil = now.Add(next)
		r.holdTimer.Reset(next)
		return
	}
	r.holdFor = 0
	r.sendReadyLocked()
}

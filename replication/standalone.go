package replication

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lockserver/lockserver/internal/acl"
	"github.com/lockserver/lockserver/internal/logclock"
	"github.com/lockserver/lockserver/keyspace"
	"github.com/lockserver/lockserver/luaexec"
	"github.com/lockserver/lockserver/replication/internal/logcodec"
)

// StandaloneOptions configure a Standalone engine.
type StandaloneOptions struct {
	Lua luaexec.Options
	// Users are the ACL users, which ACL SETUSER, DELUSER and LOAD change;
	// nil means the default user alone.
	Users *acl.Registry
	// Hub receives the messages that entries publish.
	Hub keyspace.Publisher
}

// Standalone is the engine of a single node without a log: it applies every
// write at once, under one mutex, stamped by the log clock.
//
// Under many goroutines running Lua scripts the mutex convoys: each hand-over
// parks one goroutine and wakes another, and on 2 cores the state machine sat
// idle about a quarter of the time. So a script that finds the mutex held
// while two goroutines already wait for it does not wait too: it queues, and
// whoever holds the mutex runs the queued scripts, in order, before letting
// it go (flat combining), back to back while their submitters do the rest of
// their work beside it. A queued submitter yields its turn a few times before
// it parks: the holder has usually answered by then, and parking and waking
// cost more than the script. Other commands keep the mutex: most are shorter
// than a hand-over through the queue, and the mutex lets a running goroutine
// take it when it is free without parking.
//
// Against the mutex alone, in bench/'s embedded systems, this runs more lock
// cycles at many goroutines with a shorter tail, and a goroutine that
// releases a hot lock no longer takes it straight back ahead of the others.
// Queueing every contended script, or every contended request, cost SET NX
// PX and hot locks more; so did queueing every request and parking at once.
type Standalone struct {
	mu sync.Mutex // the state machine
	sm *stateMachine
	// applied counts the entries applied; guarded by mu. It is each entry's
	// seed (see stateMachine.apply): the first is 0.
	applied uint64
	clock   *logclock.Clock
	hub     keyspace.Publisher
	stop    chan struct{}
	wg      sync.WaitGroup
	ret     osReturn

	// qmu is taken under mu, by the holder that takes the queue
	// (runQueued), never the other way: enqueue lets go of qmu before it
	// tries mu.
	qmu        sync.Mutex
	queue      []queued     // scripts submitted while mu was held, in order; guarded by qmu
	spare      []queued     // the other queue buffer, swapped with queue; guarded by mu
	waiting    atomic.Int32 // len(queue), read without qmu
	contending atomic.Int32 // goroutines waiting in mu.Lock
}

// queued is a request that waits for the holder of the state machine.
type queued struct {
	req   *Request
	write bool
	now   int64
}

// runBudget bounds the queued requests one holder runs before it hands the
// rest to a new goroutine, so that no caller waits long for others' requests.
const runBudget = 256

// NewStandalone returns a running standalone engine.
func NewStandalone(opts StandaloneOptions) *Standalone {
	s := &Standalone{
		sm:    newStateMachine(opts.Lua, opts.Users, false),
		clock: logclock.New(0, nil, nil),
		hub:   opts.Hub,
		stop:  make(chan struct{}),
	}
	s.wg.Add(1)
	go s.sweep()
	return s
}

// errStandalone answers LOCKSERVER, which administers a cluster.
var errStandalone = keyspace.Error("ERR LOCKSERVER needs a cluster member; this server is standalone")

// Submit runs req at once, or queues a script for the holder of the state
// machine (see Standalone). prepare runs beside it, and apply orders entry
// times itself, so that the clients of a busy node wait for each other as
// little as possible.
func (s *Standalone) Submit(req *Request) {
	if cmd := clusterRow(req); cmd != nil {
		if _, errReply := clusterSub(cmd, req.Cmds[0]); errReply != nil {
			req.resolve(*errReply)
		} else {
			req.resolve(errStandalone)
		}
		return
	}
	q := queued{req: req}
	if req.WatchKeys == nil {
		effect, errReply := s.sm.prepare(req)
		q.write = effect != keyspace.Reads // with no log, a dry run would save nothing
		if errReply != nil {
			// A NOSCRIPT, or a function not found, may only mean that a
			// script or library queued before req, which loads it, has not
			// run yet: the state machine answers in turn.
			if !luaexec.NotLoaded(*errReply) {
				req.resolve(*errReply)
				return
			}
			q.write = true
		}
		q.now = s.clock.Now()
	}
	if !s.mu.TryLock() {
		if s.contending.Load()+s.waiting.Load() >= 2 && req.WatchKeys == nil && scripting(req) {
			s.enqueue(q)
			return
		}
		s.contending.Add(1)
		s.mu.Lock()
		s.contending.Add(-1)
	}
	// What was queued before req runs first: a submitter's requests take
	// effect in the order it submitted them.
	ran := s.runQueued()
	req.resolve(s.exec(q))
	s.unlockAfter(ran)
}

// enqueue queues q for the holder of the state machine, and waits a little
// for its answer.
func (s *Standalone) enqueue(q queued) {
	q.req.start()
	s.qmu.Lock()
	s.queue = append(s.queue, q)
	s.waiting.Store(int32(len(s.queue)))
	s.qmu.Unlock()
	// The holder may have let go before it saw q: then run it here.
	if s.mu.TryLock() {
		s.unlock()
	}
	for i := 0; i < queuedYields && !q.req.Ready(); i++ {
		runtime.Gosched()
	}
}

// queuedYields is how many turns a queued submitter yields before it parks:
// with none, a submitter parks and is woken for nearly every queued script.
const queuedYields = 16

// scripting reports whether req runs Lua (or loads it).
func scripting(req *Request) bool {
	for _, args := range req.Cmds {
		if cmd := keyspace.Lookup(args[0]); cmd != nil && cmd.Has(keyspace.Scripting) {
			return true
		}
	}
	return false
}

// unlock runs the queued requests and lets the state machine go.
func (s *Standalone) unlock() { s.unlockAfter(0) }

// unlockAfter is unlock for a holder that has already run ran queued
// requests. A request queued after the holder's last look at the queue is run
// by taking the state machine again, unless another goroutine has it (which
// then runs it); past runBudget, a new goroutine takes over.
func (s *Standalone) unlockAfter(ran int) {
	for {
		ran += s.runQueued()
		s.mu.Unlock()
		if s.waiting.Load() == 0 {
			return
		}
		if ran >= runBudget {
			go func() {
				s.mu.Lock()
				s.unlock()
			}()
			return
		}
		if !s.mu.TryLock() {
			return
		}
	}
}

// runQueued runs the requests queued so far, in order, and returns how many
// it ran. mu is held.
func (s *Standalone) runQueued() int {
	if s.waiting.Load() == 0 {
		return 0
	}
	s.qmu.Lock()
	batch := s.queue
	s.queue, s.spare = s.spare[:0], nil
	s.waiting.Store(0)
	s.qmu.Unlock()
	for i, q := range batch {
		q.req.finish(s.exec(q))
		batch[i] = queued{}
	}
	s.spare = batch[:0]
	return len(batch)
}

// exec runs one request on the state machine. mu is held. A panic, which
// would be a bug, fails this request only: the holder may be running others'
// requests.
func (s *Standalone) exec(q queued) (reply keyspace.Reply) {
	req := q.req
	s.sm.record(true) // every request is this node's client's
	defer func() {
		if p := recover(); p != nil {
			reply = keyspace.Error(fmt.Sprintf("ERR internal error: %v", p))
		}
		req.Denials, req.Calls = s.sm.takeDenials(), append(req.Calls[:0], s.sm.calls()...)
	}()
	switch {
	case req.WatchKeys != nil:
		return versionsReply(s.sm.versions(req.DB, req.WatchKeys))
	case !q.write:
		// A function replaced since prepare may write now: it stops, having
		// changed nothing, and applies (luaexec runs a read FCALL dry).
		if reply = s.sm.readAs(req.DB, req.Cmds, req.Multi, req.Watch, q.now, req.User); !reply.IsWouldWrite() {
			return reply
		}
	}
	e := logcodec.Entry{Time: q.now, DB: req.DB, Cmds: req.Cmds, Multi: req.Multi, Watch: req.Watch, OOM: req.OverMemory, User: req.User}
	s.applied++
	return s.sm.apply(&e, s.applied-1, s.hub)
}

// Now returns the log clock's time.
func (s *Standalone) Now() int64 { return s.clock.Now() }

// Info describes the node: a master without replicas.
func (s *Standalone) Info() Info {
	info := Info{Role: "master"}
	s.mu.Lock()
	s.sm.figures(&info)
	s.unlock()
	info.Scripts = s.sm.scripts()
	info.Libraries, info.Functions = s.sm.lua.NumFunctions()
	return info
}

// WaitReplicas answers as Redis does without replicas: 0, at once for n <= 0,
// else once timeout has passed (never, for 0) or ctx has ended.
func (s *Standalone) WaitReplicas(ctx context.Context, n int, timeout time.Duration) (int, error) {
	if n <= 0 {
		return 0, nil
	}
	var expire <-chan time.Time
	if timeout > 0 {
		t := time.NewTimer(timeout)
		defer t.Stop()
		expire = t.C
	}
	select {
	case <-expire:
		return 0, nil
	case <-ctx.Done():
		return 0, ctx.Err()
	case <-s.stop:
		return 0, replyErr(errClosed)
	}
}

// Close stops the background sweep.
func (s *Standalone) Close() error {
	select {
	case <-s.stop:
	default:
		close(s.stop)
	}
	s.wg.Wait()
	s.ret.stop()
	return nil
}

// sweep runs the cycles of active expiry (see expiryTick) until Close.
func (s *Standalone) sweep() {
	defer s.wg.Done()
	var cur expiryCursor
	every(s.stop, expiryTick, func() { s.expireCycle(&cur) })
}

// expireCycle sweeps step by step while the steps find many keys expired,
// letting go of the state machine between steps.
func (s *Standalone) expireCycle(cur *expiryCursor) {
	start := time.Now()
	for time.Since(start) < expiryBusy {
		s.mu.Lock()
		now := s.clock.Now()
		db, from, shards, examined, expired := cur.look(s.sm, now)
		removed, left := 0, 0
		if expired > 0 {
			removed, left = s.sm.sweep(now, db, from, shards), s.sm.keyCount()
		}
		s.unlock()
		if removed > 0 {
			s.ret.swept(removed, left)
		}
		if !again(examined, expired) {
			return
		}
	}
}

func versionsReply(ws []Watch) keyspace.Reply {
	elems := make([]keyspace.Reply, len(ws))
	for i, w := range ws {
		elems[i] = keyspace.Int(int64(w.Version))
	}
	return keyspace.Array(elems...)
}

package replication

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/lockserver/lockserver/keyspace"
	"github.com/lockserver/lockserver/luaexec"
)

// StandaloneOptions configure a Standalone engine.
type StandaloneOptions struct {
	Lua luaexec.Options
	// Hub receives the messages that entries publish.
	Hub keyspace.Publisher
}

// Standalone is the engine of a single node without a log: it applies every
// write at once, stamped by the log clock, one request at a time.
//
// Requests submitted while another runs are not left to fight over a mutex:
// on a busy machine every hand-over of a contended lock parks one goroutine
// and wakes another, and the state machine sat idle between its users about a
// quarter of the time. The goroutine that finds the engine idle becomes the
// runner instead: it runs its own request, then those queued meanwhile, in the
// order they were queued, while their submitters wait for their replies (flat
// combining). The state machine stays with one goroutine, hot in one core's
// cache, while the submitters do the rest of their work beside it. A runner
// that has run runBudget queued requests hands what is left to a new
// goroutine and returns to its caller, so that no caller waits long for
// others' requests.
type Standalone struct {
	mu    sync.Mutex // the state machine: held by the runner while it runs, and by a sweep
	sm    *StateMachine
	clock *Clock
	hub   keyspace.Publisher
	stop  chan struct{}
	wg    sync.WaitGroup

	qmu     sync.Mutex
	running bool     // a runner is at work; guarded by qmu
	queue   []queued // requests submitted while running, in order; guarded by qmu
	spare   []queued // the runner's other queue buffer, swapped with queue
}

// queued is a request that waits for the runner.
type queued struct {
	req   *Request
	write bool
	now   int64
}

// runBudget bounds the queued requests one runner runs before it hands the
// rest to a new goroutine.
const runBudget = 256

// NewStandalone returns a running standalone engine.
func NewStandalone(opts StandaloneOptions) *Standalone {
	s := &Standalone{
		sm:    NewStateMachine(opts.Lua),
		clock: NewClock(0),
		hub:   opts.Hub,
		stop:  make(chan struct{}),
	}
	s.wg.Add(1)
	go s.sweep()
	return s
}

// Submit runs req at once when no other request runs, else queues it for the
// runner (see Standalone). Prepare runs beside the runner, and Apply orders
// entry times itself, so that the clients of a busy node wait for each other
// as little as possible.
func (s *Standalone) Submit(req *Request) {
	q := queued{req: req}
	if req.WatchKeys == nil {
		var errReply *keyspace.Reply
		q.write, errReply = s.sm.Prepare(req)
		if errReply != nil {
			// A NOSCRIPT may only mean that a SCRIPT LOAD queued before req has
			// not run yet: the state machine decides when req's turn comes.
			if !strings.HasPrefix(errReply.Str, "NOSCRIPT") {
				req.resolve(*errReply)
				return
			}
			q.write = true
		}
		q.now = s.clock.Now()
	}
	s.qmu.Lock()
	if s.running {
		req.start()
		s.queue = append(s.queue, q)
		s.qmu.Unlock()
		return
	}
	s.running = true
	s.qmu.Unlock()
	s.mu.Lock()
	req.resolve(s.exec(q))
	s.runQueued()
}

// runQueued runs the queued requests in order until none is left or the
// budget is spent, then stops being the runner or hands the rest to a new
// goroutine. mu is held, and released on return.
func (s *Standalone) runQueued() {
	ran := 0
	for {
		s.qmu.Lock()
		batch := s.queue
		if len(batch) == 0 {
			s.running = false
			s.qmu.Unlock()
			s.mu.Unlock()
			return
		}
		if ran >= runBudget {
			s.qmu.Unlock()
			s.mu.Unlock()
			go func() {
				s.mu.Lock()
				s.runQueued()
			}()
			return
		}
		s.queue, s.spare = s.spare[:0], nil
		s.qmu.Unlock()
		for i, q := range batch {
			q.req.reply = s.exec(q)
			close(q.req.done)
			batch[i] = queued{}
		}
		ran += len(batch)
		s.spare = batch[:0]
	}
}

// exec runs one request on the state machine. mu is held. A panic, which
// would be a bug, fails this request only: the runner goes on with the
// others, which are not its caller's.
func (s *Standalone) exec(q queued) (reply keyspace.Reply) {
	defer func() {
		if p := recover(); p != nil {
			reply = keyspace.Error(fmt.Sprintf("ERR internal error: %v", p))
		}
	}()
	req := q.req
	switch {
	case req.WatchKeys != nil:
		return versionsReply(s.sm.Versions(req.DB, req.WatchKeys))
	case !q.write:
		return s.sm.Read(req.DB, req.Cmds, req.Multi, req.Watch, q.now)
	}
	e := Entry{Time: q.now, DB: req.DB, Cmds: req.Cmds, Multi: req.Multi, Watch: req.Watch, OOM: req.OverMemory}
	return s.sm.Apply(&e, s.hub)
}

// Now returns the log clock's time.
func (s *Standalone) Now() int64 { return s.clock.Now() }

// Info describes the node: a master without replicas.
func (s *Standalone) Info() Info {
	info := Info{Role: "master"}
	s.mu.Lock()
	info.Keys, info.Expires = s.sm.KeyCounts()
	s.mu.Unlock()
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
		return 0, ReplyError(errClosed)
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
	return nil
}

// sweepInterval and sweepBudget pace the reclaiming of expired keys: at most
// sweepBudget keys every sweepInterval, so a sweep never holds the lock long.
const (
	sweepInterval = 100 * time.Millisecond
	sweepBudget   = 2000
)

func (s *Standalone) sweep() {
	defer s.wg.Done()
	t := time.NewTicker(sweepInterval)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
			s.mu.Lock()
			s.sm.Sweep(s.clock.Now(), sweepBudget)
			s.mu.Unlock()
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

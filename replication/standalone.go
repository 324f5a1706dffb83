package replication

import (
	"context"
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
// write at once, under one mutex, stamped by the log clock.
//
// Under many goroutines running Lua scripts the mutex convoys: each hand-over
// parks one goroutine and wakes another, and on 2 cores the state machine sat
// idle about a quarter of the time. Flat combining (the goroutine that finds
// the engine idle runs the requests queued meanwhile; 20d7d50, reverted) cured
// that, 486k -> 550k Redisson lock ops/s at 50 goroutines with p999 11 -> 1.3
// ms, but cost SET NX PX 732k -> 569k and hot-key locks 161k -> 130k: every
// request that finds the engine busy then parks, where the mutex lets a running
// goroutine take a free lock without parking. Spinning before the mutex or
// before queueing measured worse still. Combining only scripts, and only once
// two goroutines already wait (other commands keeping the mutex), made the
// same trade: lock cycles 447k -> 495k, SET NX PX 720k -> 663k, hot-key locks
// 155k -> 123k; most likely a goroutine that releases a hot lock and at once
// takes it again now queues behind the others, where the mutex let it through.
// Queued submitters that yield (runtime.Gosched, up to 16 times) before they
// park took lock cycles further, 402k -> 528k, and changed nothing else:
// SET NX PX 657k -> 604k (p99 0.23 -> 2.3 ms), hot-key locks 141k -> 120k.
type Standalone struct {
	mu    sync.Mutex
	sm    *StateMachine
	clock *Clock
	hub   keyspace.Publisher
	stop  chan struct{}
	wg    sync.WaitGroup
}

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

// Submit runs req at once. Only running it holds the lock: Prepare is safe
// beside it, and Apply orders entry times itself, so that the clients of a
// busy node wait for each other as little as possible.
func (s *Standalone) Submit(req *Request) {
	if req.WatchKeys != nil {
		s.mu.Lock()
		req.resolve(versionsReply(s.sm.Versions(req.DB, req.WatchKeys)))
		s.mu.Unlock()
		return
	}
	write, errReply := s.sm.Prepare(req)
	if errReply != nil {
		req.resolve(*errReply)
		return
	}
	now := s.clock.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if !write {
		req.resolve(s.sm.Read(req.DB, req.Cmds, req.Multi, req.Watch, now))
		return
	}
	e := Entry{Time: now, DB: req.DB, Cmds: req.Cmds, Multi: req.Multi, Watch: req.Watch, OOM: req.OverMemory}
	req.resolve(s.sm.Apply(&e, s.hub))
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

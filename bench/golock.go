package main

import (
	"context"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bsm/redislock"
	"github.com/go-redsync/redsync/v4"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/lockserver/lockserver/lock"
)

// The Go lock package's Mutex beside the Go clients users lock with today
// (redsync, bsm/redislock), Redisson's scripts and etcd's concurrency.Mutex.

// handoffClients are the contender counts of the hand-off workloads.
var handoffClients = []int{16, 256}

// handoff measures the time a lock takes to pass from one holder to the
// next: a holder notes when it starts releasing, and the next holder, once
// its acquisition returns, records the time since. The releaser taking the
// lock straight back (what a lock without a queue lets it do, ahead of
// waiters that poll) is no hand-off: the waiters are still waiting. It is
// counted apart, in retaken, and the hand-off that eventually comes is timed
// from the holder's first release, when the lock was first offered to them.
type handoff struct {
	mu       sync.Mutex
	released time.Time // when the holder first released; zero once handed off
	by       int       // the client that released
	retaken  atomic.Int64
}

// acquired records the hand-off that ended in client who's acquisition,
// just made.
func (h *handoff) acquired(m *meter, who int) {
	h.mu.Lock()
	r, by := h.released, h.by
	if by != who {
		h.released = time.Time{}
	}
	h.mu.Unlock()
	switch {
	case r.IsZero():
	case by == who:
		if m.recording.Load() {
			h.retaken.Add(1)
		}
	default:
		m.record(time.Since(r))
	}
}

// releasing notes that client who starts its release now, unless it
// released before and took the lock back since.
func (h *handoff) releasing(who int) {
	h.mu.Lock()
	if h.released.IsZero() || h.by != who {
		h.released, h.by = time.Now(), who
	}
	h.mu.Unlock()
}

// note says how often the releaser took the lock back, of the acquisitions
// measured.
func (h *handoff) note(handOffs int64) string {
	n := h.retaken.Load()
	if n == 0 {
		return ""
	}
	return fmt.Sprintf("the releaser took the lock back in %.0f%% of acquisitions (%d), not hand-offs", 100*float64(n)/float64(n+handOffs), n)
}

// lockBackend returns a lock Backend on the client's server: Do for direct
// calls, go-redis otherwise.
func lockBackend(c respClient) *lock.Backend {
	if d, ok := c.(directCalls); ok {
		return lock.Embedded(d.s, "")
	}
	return lock.Redis(c.(*goRedis).c)
}

// mutexSkip refuses systems the lock package cannot lock on: those that
// are not Redis-protocol servers, and go-redis-alone, which answers nothing
// a lock client could use. etcd3's row is its own concurrency.Mutex.
func mutexSkip(inst *instance) string {
	if inst.etcd == nil && (inst.client == nil || inst.only != nil) {
		return "not a Redis-protocol server"
	}
	return ""
}

// goRedisSkip refuses what mutexSkip does, etcd, and direct calls: redsync
// and redislock need a go-redis client.
func goRedisSkip(inst *instance) string {
	if inst.client == nil || inst.only != nil {
		return "not a Redis-protocol server"
	}
	c := inst.client(1)
	defer c.close()
	if _, ok := c.(*goRedis); !ok {
		return "direct calls, no go-redis client"
	}
	return ""
}

func mutexPoints(b *bench) []point {
	var out []point
	for _, clients := range b.cfg.clients {
		out = append(out, func(ctx context.Context, b *bench, sys system, inst *instance) row {
			b.progress.step(fmt.Sprintf("%s mutex c=%d", sys.name, clients))
			m := b.measure(ctx, inst, func(ctx context.Context) ([]stepFunc, func(), error) {
				if inst.etcd != nil {
					return etcdCycles(ctx, inst.etcd, b.prefix(), clients, 0, nil)
				}
				c := inst.client(clients)
				lb := lockBackend(c)
				steps := make([]stepFunc, clients)
				for i := range steps {
					mu := lock.NewMutex(lb, fmt.Sprintf("%s:mutex:%d", b.prefix(), i), nil)
					steps[i] = func(ctx context.Context, m *meter) error {
						start := time.Now()
						if err := mu.Lock(ctx); err != nil {
							return fmt.Errorf("Mutex.Lock: %w", err)
						}
						m.observe(start)
						start = time.Now()
						if err := mu.Unlock(context.WithoutCancel(ctx)); err != nil {
							return fmt.Errorf("Mutex.Unlock: %w", err)
						}
						m.observe(start)
						return nil
					}
				}
				return steps, func() { lb.Close(); c.close() }, nil
			})
			return row{Workload: "mutex", System: sys.name, Clients: clients}.fill(m, "ops/s", inst)
		})
	}
	return out
}

// handoffPrepare sets up one hand-off run: clients contending for one lock.
type handoffPrepare func(b *bench, ctx context.Context, inst *instance, clients int, h *handoff) ([]stepFunc, func(), error)

func handoffPoints(name string, prepare handoffPrepare) func(b *bench) []point {
	return func(b *bench) []point {
		var out []point
		for _, clients := range handoffClients {
			out = append(out, func(ctx context.Context, b *bench, sys system, inst *instance) row {
				b.progress.step(fmt.Sprintf("%s %s c=%d", sys.name, name, clients))
				var h *handoff
				m := b.measure(ctx, inst, func(ctx context.Context) ([]stepFunc, func(), error) {
					h = &handoff{}
					return prepare(b, ctx, inst, clients, h)
				})
				r := row{Workload: name, System: sys.name, Clients: clients}.fill(m, "hand-offs/s", inst)
				if r.Status == "" && r.Note == "" && h != nil {
					r.Note = h.note(m.ops)
				}
				return r
			})
		}
		return out
	}
}

// handoffSteps returns workers that take one lock with lockFn, hand it off with
// unlockFn and ask again, recording each hand-off. A lock call that gives up
// (a client's own retry limit) is not an error: it asks again.
func handoffSteps(clients int, h *handoff, locker func(i int) (lockFn func(context.Context) (bool, error), unlockFn func(context.Context) error)) []stepFunc {
	steps := make([]stepFunc, clients)
	for i := range steps {
		lockFn, unlockFn := locker(i)
		steps[i] = func(ctx context.Context, m *meter) error {
			for {
				ok, err := lockFn(ctx)
				if err != nil {
					if ctx.Err() != nil {
						return nil
					}
					return err
				}
				if ok {
					break
				}
			}
			h.acquired(m, i)
			h.releasing(i)
			// The release must happen even when the run ends meanwhile, or
			// the next run's holders would wait for the lease.
			return unlockFn(context.WithoutCancel(ctx))
		}
	}
	return steps
}

func (b *bench) mutexHandoff(ctx context.Context, inst *instance, clients int, h *handoff) ([]stepFunc, func(), error) {
	if inst.etcd != nil {
		return etcdCycles(ctx, inst.etcd, b.prefix(), clients, 1, h)
	}
	c := inst.client(clients)
	lb := lockBackend(c)
	name := b.prefix() + ":handoff"
	steps := handoffSteps(clients, h, func(int) (func(context.Context) (bool, error), func(context.Context) error) {
		mu := lock.NewMutex(lb, name, nil)
		return func(ctx context.Context) (bool, error) { return true, mu.Lock(ctx) }, mu.Unlock
	})
	return steps, func() { lb.Close(); c.close() }, nil
}

func (b *bench) redsyncHandoff(ctx context.Context, inst *instance, clients int, h *handoff) ([]stepFunc, func(), error) {
	c := inst.client(clients)
	rs := redsync.New(goredis.NewPool(c.(*goRedis).c))
	name := b.prefix() + ":handoff"
	steps := handoffSteps(clients, h, func(int) (func(context.Context) (bool, error), func(context.Context) error) {
		mu := rs.NewMutex(name, redsync.WithExpiry(leaseMs*time.Millisecond), redsync.WithTries(math.MaxInt32))
		return func(ctx context.Context) (bool, error) {
				return true, mu.LockContext(ctx)
			}, func(ctx context.Context) error {
				_, err := mu.UnlockContext(ctx)
				return err
			}
	})
	return steps, func() { c.close() }, nil
}

func (b *bench) redislockHandoff(ctx context.Context, inst *instance, clients int, h *handoff) ([]stepFunc, func(), error) {
	c := inst.client(clients)
	locker := redislock.New(c.(*goRedis).c)
	name := b.prefix() + ":handoff"
	opts := &redislock.Options{RetryStrategy: redislock.LinearBackoff(10 * time.Millisecond)}
	steps := handoffSteps(clients, h, func(int) (func(context.Context) (bool, error), func(context.Context) error) {
		var held *redislock.Lock
		return func(ctx context.Context) (bool, error) {
				l, err := locker.Obtain(ctx, name, leaseMs*time.Millisecond, opts)
				if err == redislock.ErrNotObtained {
					return false, nil
				}
				held = l
				return err == nil, err
			}, func(ctx context.Context) error {
				return held.Release(ctx)
			}
	})
	return steps, func() { c.close() }, nil
}

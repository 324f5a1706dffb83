package lock_test

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockserver/lockserver"
	"github.com/lockserver/lockserver/internal/clustertest/embedded"
	"github.com/lockserver/lockserver/lock"
	"github.com/redis/go-redis/v9"
)

func init() {
	// go-redis logs every failed dial; the failure tests make many.
	redis.SetLogger(quiet{})
}

type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

// A target is a server the tests lock on, reached in one way.
type target struct {
	name string
	// backend returns a new Backend on the target, closed at the test's end.
	backend func(t *testing.T) *lock.Backend
	// rdb is a plain client of the same server, to look at and cut locks.
	rdb *redis.Client
	// srv is the server, for a standalone target.
	srv *lockserver.Server
}

// testTimeout bounds one test's waits: generous, for -race on a loaded
// 2-core machine.
const testTimeout = 2 * time.Minute

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	t.Cleanup(cancel)
	return ctx
}

func openServer(t *testing.T, opts lockserver.Options) *lockserver.Server {
	t.Helper()
	srv, err := lockserver.Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	return srv
}

// newClient is a go-redis client of addr that retries what a cluster
// refuses during an election (CLUSTERDOWN, TRYAGAIN) for a few seconds
// rather than go-redis's default of three tries.
func newClient(t *testing.T, addr string) *redis.Client {
	rdb := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: 20, MaxRetryBackoff: 500 * time.Millisecond})
	t.Cleanup(func() { rdb.Close() })
	return rdb
}

// embeddedTarget is a standalone server in this process, locked through Do.
func embeddedTarget(t *testing.T) target {
	srv := openServer(t, lockserver.Options{})
	return target{name: "embedded", srv: srv, rdb: newClient(t, srv.Addr()), backend: func(t *testing.T) *lock.Backend {
		b := lock.Embedded(srv, "")
		t.Cleanup(func() { b.Close() })
		return b
	}}
}

// nodeTarget is a standalone server locked through go-redis over TCP.
func nodeTarget(t *testing.T) target {
	srv := openServer(t, lockserver.Options{})
	return target{name: "node", srv: srv, rdb: newClient(t, srv.Addr()), backend: func(t *testing.T) *lock.Backend {
		b := lock.Redis(newClient(t, srv.Addr()))
		t.Cleanup(func() { b.Close() })
		return b
	}}
}

// followerTargets are a cluster's follower reached through Do and through
// go-redis.
func followerTargets(t *testing.T) []target {
	c := embedded.Start(t, embedded.Options{})
	f := c.Followers(c.Leader(t))[0]
	rdb := newClient(t, f.Options.Addr)
	return []target{
		{name: "cluster-follower-embedded", rdb: rdb, backend: func(t *testing.T) *lock.Backend {
			b := lock.Embedded(f.Server(), "")
			t.Cleanup(func() { b.Close() })
			return b
		}},
		{name: "cluster-follower", rdb: rdb, backend: func(t *testing.T) *lock.Backend {
			b := lock.Redis(newClient(t, f.Options.Addr))
			t.Cleanup(func() { b.Close() })
			return b
		}},
	}
}

// allTargets are the targets every Mutex test runs on.
func allTargets(t *testing.T) []target {
	return append([]target{embeddedTarget(t), nodeTarget(t)}, followerTargets(t)...)
}

// raise sets most to n if n is greater, atomically.
func raise(most *atomic.Int32, n int32) {
	for {
		m := most.Load()
		if n <= m || most.CompareAndSwap(m, n) {
			return
		}
	}
}

// holders runs hold(i) for each i below n, each in a goroutine of its own,
// and fails the test with the first error one returned once all are done.
func holders(t *testing.T, n int, hold func(i int) error) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := hold(i); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// mutexExcludes has n holders, each its own Mutex on name, lock it rounds
// times and increment a counter inside by reading it and writing it back.
// Two holders inside at once would be seen, and would lose increments.
func mutexExcludes(t *testing.T, ctx context.Context, b *lock.Backend, name string, n, rounds int) {
	t.Helper()
	var inside, most atomic.Int32
	var counter atomic.Int64
	holders(t, n, func(int) error {
		m := lock.NewMutex(b, name, nil)
		for range rounds {
			if err := m.Lock(ctx); err != nil {
				return err
			}
			raise(&most, inside.Add(1))
			v := counter.Load()
			runtime.Gosched()
			counter.Store(v + 1)
			inside.Add(-1)
			if err := m.Unlock(ctx); err != nil {
				return err
			}
		}
		return nil
	})
	if most.Load() != 1 || counter.Load() != int64(n*rounds) {
		t.Fatalf("at most %d holders inside at once, counter %d; want 1 and %d", most.Load(), counter.Load(), n*rounds)
	}
}

// waitQueued waits until a waiter for the Mutex name is in its queue and
// listening for a hand-over.
func waitQueued(t *testing.T, ctx context.Context, rdb *redis.Client, name string) {
	t.Helper()
	queue, channel := "lockserver_lock_queue:{"+name+"}", "lockserver_lock__handover:{"+name+"}"
	for rdb.LLen(ctx, queue).Val() != 1 || rdb.PubSubNumSub(ctx, channel).Val()[channel] != 1 {
		if ctx.Err() != nil {
			t.Fatal("the waiter never queued")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

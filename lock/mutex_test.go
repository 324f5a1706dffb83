package lock_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lockserver/lockserver"
	"github.com/lockserver/lockserver/internal/testenv"
	"github.com/lockserver/lockserver/lock"
	"github.com/redis/go-redis/v9"
)

// Exclusion: 64 holders, each its own Mutex on one name, increment a counter
// by reading it and writing it back while holding the lock. Two holders
// inside at once would be seen, and would lose increments.
func TestMutexExcludes(t *testing.T) {
	testenv.Long(t)
	for _, tg := range allTargets(t) {
		t.Run(tg.name, func(t *testing.T) {
			ctx := testContext(t)
			b := tg.backend(t)
			mutexExcludes(t, ctx, b, "excl", 64, 4)
		})
	}
}

// holderCount returns the lock's hash: its one field's value (the re-entry
// count), or "" when the lock is free.
func holderCount(t *testing.T, rdb *redis.Client, name string) string {
	t.Helper()
	h, err := rdb.HGetAll(context.Background(), name).Result()
	if err != nil || len(h) > 1 {
		t.Fatalf("HGETALL %s = %v, %v; want at most one holder", name, h, err)
	}
	for _, v := range h {
		return v
	}
	return ""
}

// Re-entry counts in the hash as Redisson's RLock does, keeps the token, and
// needs one Unlock per entry; without Reentrant a second Lock is refused.
func TestMutexReentry(t *testing.T) {
	for _, tg := range allTargets(t) {
		t.Run(tg.name, func(t *testing.T) {
			ctx := testContext(t)
			b := tg.backend(t)
			m := lock.NewMutex(b, "re", &lock.Options{Reentrant: true})
			other := lock.NewMutex(b, "re", nil)
			if err := m.Lock(ctx); err != nil {
				t.Fatal(err)
			}
			token := m.Token()
			if err := m.Lock(ctx); err != nil {
				t.Fatal(err)
			}
			if got := holderCount(t, tg.rdb, "re"); got != "2" || m.Token() != token {
				t.Fatalf("after a re-entry the count is %q and the token %d; want 2 and %d", got, m.Token(), token)
			}
			if err := m.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
			if got := holderCount(t, tg.rdb, "re"); got != "1" {
				t.Fatalf("after one Unlock of two entries the count is %q, want 1", got)
			}
			if ok, err := other.TryLock(ctx); ok || err != nil {
				t.Fatalf("TryLock of a lock held once more = %v, %v; want false", ok, err)
			}
			if err := m.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
			if got := holderCount(t, tg.rdb, "re"); got != "" {
				t.Fatalf("after the last Unlock the lock is held %q times, want free", got)
			}
			if err := m.Unlock(ctx); !errors.Is(err, lock.ErrNotHeld) {
				t.Fatalf("an Unlock too many = %v, want ErrNotHeld", err)
			}
			if ok, err := other.TryLock(ctx); !ok || err != nil || other.Token() <= token {
				t.Fatalf("TryLock of the free lock = %v, %v, token %d; want true and a token above %d", ok, err, other.Token(), token)
			}
			if err := other.Lock(ctx); !errors.Is(err, lock.ErrHeld) {
				t.Fatalf("Lock again on a Mutex that is not re-entrant = %v, want ErrHeld", err)
			}
			if err := other.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// Extend sets the lease, longer or shorter; on a lock that is gone it says
// so and Lost closes.
func TestMutexExtend(t *testing.T) {
	for _, tg := range allTargets(t) {
		t.Run(tg.name, func(t *testing.T) {
			ctx := testContext(t)
			m := lock.NewMutex(tg.backend(t), "ext", nil)
			if err := m.Extend(ctx, time.Minute); !errors.Is(err, lock.ErrNotHeld) {
				t.Fatalf("Extend before Lock = %v, want ErrNotHeld", err)
			}
			if err := m.LockFor(ctx, 5*time.Second); err != nil {
				t.Fatal(err)
			}
			if ttl := tg.rdb.PTTL(ctx, "ext").Val(); ttl <= 0 || ttl > 5*time.Second {
				t.Fatalf("PTTL after LockFor 5s = %v", ttl)
			}
			if err := m.Extend(ctx, time.Hour); err != nil {
				t.Fatal(err)
			}
			if ttl := tg.rdb.PTTL(ctx, "ext").Val(); ttl <= 59*time.Minute || ttl > time.Hour {
				t.Fatalf("PTTL after Extend 1h = %v", ttl)
			}
			if err := m.Extend(ctx, 10*time.Second); err != nil {
				t.Fatal(err)
			}
			if ttl := tg.rdb.PTTL(ctx, "ext").Val(); ttl <= 0 || ttl > 10*time.Second {
				t.Fatalf("PTTL after Extend 10s = %v", ttl)
			}
			select {
			case <-m.Lost():
				t.Fatal("Lost closed while the lease lasts")
			default:
			}
			tg.rdb.Del(ctx, "ext")
			if err := m.Extend(ctx, time.Minute); !errors.Is(err, lock.ErrLost) {
				t.Fatalf("Extend of a deleted lock = %v, want ErrLost", err)
			}
			<-m.Lost()
			if err := m.Unlock(ctx); !errors.Is(err, lock.ErrLost) {
				t.Fatalf("Unlock of a deleted lock = %v, want ErrLost", err)
			}
		})
	}
}

// A waiter whose context ends returns and leaves nothing behind: no queue
// entry that would hold up the next holder, no lock taken late.
func TestMutexCancelWhileWaiting(t *testing.T) {
	for _, tg := range allTargets(t) {
		t.Run(tg.name, func(t *testing.T) {
			ctx := testContext(t)
			b := tg.backend(t)
			holder, waiter, next := lock.NewMutex(b, "cancel", nil), lock.NewMutex(b, "cancel", nil), lock.NewMutex(b, "cancel", nil)
			if err := holder.Lock(ctx); err != nil {
				t.Fatal(err)
			}
			wctx, cancel := context.WithCancel(ctx)
			done := make(chan error, 1)
			go func() { done <- waiter.Lock(wctx) }()
			waitQueued(t, ctx, tg.rdb, "cancel")
			// A Lock waiter asks for a short lease on a lock handed to it,
			// which its watchdog renews.
			if keys := tg.rdb.Keys(ctx, "lockserver_lock_waiter:{cancel}:*").Val(); len(keys) != 1 || !strings.HasPrefix(tg.rdb.Get(ctx, keys[0]).Val(), "5000 ") {
				t.Fatalf("the waiter's queue entry: %v, want one asking for a 5000 ms hand-over lease", keys)
			}
			cancel()
			if err := <-done; !errors.Is(err, context.Canceled) {
				t.Fatalf("Lock whose context was cancelled = %v", err)
			}
			queue := "lockserver_lock_queue:{cancel}"
			if n := tg.rdb.Exists(ctx, queue).Val(); n != 0 {
				t.Fatalf("the queue is still there after the waiter left: %v", tg.rdb.LRange(ctx, queue, 0, -1).Val())
			}
			if keys := tg.rdb.Keys(ctx, "lockserver_lock_waiter:*").Val(); len(keys) != 0 {
				t.Fatalf("waiter entries left behind: %v", keys)
			}
			if err := holder.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
			if ok, err := next.TryLock(ctx); !ok || err != nil {
				t.Fatalf("TryLock after the holder left and the waiter gave up = %v, %v; want true", ok, err)
			}
			if err := next.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// Lost closes when the server says the lock is gone: deleted, or expired
// after a PEXPIRE cut its lease.
func TestMutexLostWhenCut(t *testing.T) {
	testenv.Long(t)
	for _, tg := range allTargets(t) {
		t.Run(tg.name, func(t *testing.T) {
			ctx := testContext(t)
			b := tg.backend(t)
			for _, cut := range []func(){
				func() { tg.rdb.Del(ctx, "cut") },
				func() { tg.rdb.PExpire(ctx, "cut", time.Millisecond) },
			} {
				m := lock.NewMutex(b, "cut", &lock.Options{Lease: 3 * time.Second})
				if err := m.Lock(ctx); err != nil {
					t.Fatal(err)
				}
				select {
				case <-m.Lost():
					t.Fatal("Lost closed while the lock is held")
				default:
				}
				cut()
				select {
				case <-m.Lost():
				case <-ctx.Done():
					t.Fatal("Lost never closed after the lock was cut")
				}
				if err := m.Unlock(ctx); !errors.Is(err, lock.ErrLost) {
					t.Fatalf("Unlock of a lock that was cut = %v, want ErrLost", err)
				}
			}
		})
	}
}

// Lost closes when the server is gone and renewals fail.
func TestMutexLostWhenServerDies(t *testing.T) {
	testenv.Long(t)
	for _, tg := range []target{embeddedTarget(t), nodeTarget(t)} {
		t.Run(tg.name, func(t *testing.T) {
			ctx := testContext(t)
			m := lock.NewMutex(tg.backend(t), "dies", &lock.Options{Lease: 2 * time.Second})
			if err := m.Lock(ctx); err != nil {
				t.Fatal(err)
			}
			tg.srv.Close()
			select {
			case <-m.Lost():
			case <-ctx.Done():
				t.Fatal("Lost never closed after the server stopped")
			}
		})
	}
}

// cutDialer gives a client connections that the test can cut at once, with
// all later dials refused: a holder cut off from a server that goes on.
type cutDialer struct {
	mu    sync.Mutex
	cut   bool
	conns []net.Conn
}

func (d *cutDialer) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.cut {
		return nil, errors.New("cut off")
	}
	c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
	if err == nil {
		d.conns = append(d.conns, c)
	}
	return c, err
}

func (d *cutDialer) cutOff() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.cut = true
	for _, c := range d.conns {
		c.Close()
	}
}

// A holder cut off from the server while the server goes on: by the time
// another holder has the lock, the first one's Lost is closed. Its lease was
// counted from when it sent its last renewal, which the server ran later.
func TestMutexLostBeforeAnotherHolds(t *testing.T) {
	testenv.Long(t)
	tg := nodeTarget(t)
	ctx := testContext(t)
	d := &cutDialer{}
	rdb := redis.NewClient(&redis.Options{Addr: tg.srv.Addr(), Dialer: d.dial, MaxRetries: -1})
	defer rdb.Close()
	a := lock.NewMutex(lock.Redis(rdb), "cutoff", &lock.Options{Lease: 2 * time.Second})
	if err := a.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second) // a renewal or two
	d.cutOff()
	b := lock.NewMutex(tg.backend(t), "cutoff", nil)
	if err := b.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case <-a.Lost():
	default:
		t.Fatal("another holder has the lock and the cut-off holder's Lost is still open")
	}
	if err := b.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// Fairness: 100 holders lock and unlock one lock over and over, each taking
// it again at once. Waiters take turns: between two holdings of one holder,
// the others hold it at most about once each (a waiter that the queue lost
// under load goes to the back: 2x allows for that); a holder that unlocks
// and locks again does not jump the line.
func TestMutexFair(t *testing.T) {
	for _, tg := range []target{embeddedTarget(t), nodeTarget(t)} {
		t.Run(tg.name, func(t *testing.T) {
			ctx := testContext(t)
			b := tg.backend(t)
			const n, rounds = 100, 5
			var mu sync.Mutex
			var order []int
			holders(t, n, func(i int) error {
				m := lock.NewMutex(b, "fair", nil)
				for range rounds {
					if err := m.Lock(ctx); err != nil {
						return err
					}
					mu.Lock()
					order = append(order, i)
					mu.Unlock()
					if err := m.Unlock(ctx); err != nil {
						return err
					}
				}
				return nil
			})
			last := map[int]int{}
			worst := 0
			for at, h := range order {
				if prev, ok := last[h]; ok {
					worst = max(worst, at-prev-1)
				}
				last[h] = at
			}
			if worst > 2*n {
				t.Fatalf("a holder waited through %d holdings of others, want at most %d", worst, 2*n)
			}
		})
	}
}

// A Lock on a server that was closed, or through a client that was, fails
// at once instead of retrying until its context ends, as it does for a
// server that may come back.
func TestMutexOnClosed(t *testing.T) {
	tg := embeddedTarget(t)
	ctx := testContext(t)
	m := lock.NewMutex(tg.backend(t), "closed", nil)
	tg.srv.Close()
	if err := m.Lock(ctx); !errors.Is(err, lockserver.ErrClosed) {
		t.Fatalf("Lock on a closed server = %v, want ErrClosed", err)
	}
	rdb := redis.NewClient(&redis.Options{Addr: nodeTarget(t).srv.Addr()})
	rdb.Close()
	if err := lock.NewMutex(lock.Redis(rdb), "closed", nil).Lock(ctx); !errors.Is(err, redis.ErrClosed) {
		t.Fatalf("Lock through a closed client = %v, want redis.ErrClosed", err)
	}
}

// An unlock hands the lock to the waiter first in line in the same step. A
// waiter that died while queued (here a queue entry with no process behind
// it) is handed the lock with the short lease a Lock waiter asks for, so the
// line moves on after it, not after a whole lease.
func TestMutexHandOverToDeadWaiter(t *testing.T) {
	testenv.Long(t)
	for _, tg := range []target{embeddedTarget(t), nodeTarget(t)} {
		t.Run(tg.name, func(t *testing.T) {
			ctx := testContext(t)
			b := tg.backend(t)
			holder, next := lock.NewMutex(b, "ghost", nil), lock.NewMutex(b, "ghost", nil)
			if err := holder.Lock(ctx); err != nil {
				t.Fatal(err)
			}
			// The entry a Lock waiter leaves: its hand-over lease, 5 s.
			tg.rdb.RPush(ctx, "lockserver_lock_queue:{ghost}", "ghost:1")
			tg.rdb.Set(ctx, "lockserver_lock_waiter:{ghost}:ghost:1", "5000 1", 5*time.Second)
			token := holder.Token()
			if err := holder.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
			if got := tg.rdb.HGet(ctx, "ghost", "ghost:1").Val(); got != "1" {
				t.Fatalf("after the unlock the lock is %v, want handed to the waiter first in line", tg.rdb.HGetAll(ctx, "ghost").Val())
			}
			if ttl := tg.rdb.PTTL(ctx, "ghost").Val(); ttl <= 0 || ttl > 5*time.Second {
				t.Fatalf("the lease of the lock handed over is %v, want at most 5 s", ttl)
			}
			if got := tg.rdb.Get(ctx, "redisson_lock_token:{ghost}").Val(); got != fmt.Sprint(token+1) {
				t.Fatalf("the token counter after the hand-over is %s, want %d", got, token+1)
			}
			if err := next.Lock(ctx); err != nil {
				t.Fatal(err)
			}
			if next.Token() <= token+1 {
				t.Fatalf("the next holder's token %d, want above the hand-over's %d", next.Token(), token+1)
			}
			if err := next.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// A lock handed over to a LockFor waiter keeps the lease the waiter asked
// for, counted from when it queued: when another holder has the lock after
// that lease ran out, the first one's Lost is closed.
func TestMutexHandOverLease(t *testing.T) {
	testenv.Long(t)
	tg := nodeTarget(t)
	ctx := testContext(t)
	b := tg.backend(t)
	holder, a, c := lock.NewMutex(b, "handed", nil), lock.NewMutex(b, "handed", nil), lock.NewMutex(b, "handed", nil)
	if err := holder.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	locked := make(chan error, 1)
	go func() { locked <- a.LockFor(ctx, 2*time.Second) }()
	// Queued, and listening for the hand-over (a hand-over it did not hear
	// of, or heard after trying again, it finds on its next try, with the
	// token the hand-over counted).
	waitQueued(t, ctx, tg.rdb, "handed")
	token := holder.Token()
	if err := holder.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-locked; err != nil {
		t.Fatal(err)
	}
	if a.Token() != token+1 {
		t.Fatalf("the token of the lock handed over is %d, want %d, counted by the unlock", a.Token(), token+1)
	}
	if err := c.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case <-a.Lost():
	default:
		t.Fatal("another holder has the lock and the holder it was handed to still has Lost open")
	}
	if c.Token() <= a.Token() {
		t.Fatalf("tokens %d then %d, want growing", a.Token(), c.Token())
	}
	if err := c.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// A lock handed over to a Lock waiter has the short hand-over lease, which
// its watchdog renews to the whole lease before it runs out (not at once:
// that renewal would be a second commit in every hand-off).
func TestMutexHandOverLeaseIsRenewed(t *testing.T) {
	testenv.Long(t)
	tg := nodeTarget(t)
	ctx := testContext(t)
	b := tg.backend(t)
	holder, a := lock.NewMutex(b, "renewed", nil), lock.NewMutex(b, "renewed", nil)
	if err := holder.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	locked := make(chan error, 1)
	go func() { locked <- a.Lock(ctx) }()
	waitQueued(t, ctx, tg.rdb, "renewed")
	if err := holder.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-locked; err != nil {
		t.Fatal(err)
	}
	// Past the 5 s hand-over lease: the watchdog has renewed it to 30 s.
	time.Sleep(6 * time.Second)
	select {
	case <-a.Lost():
		t.Fatal("the lock handed over was lost when its short lease ran out")
	default:
	}
	if pttl := tg.rdb.PTTL(ctx, "renewed").Val(); pttl <= 5*time.Second {
		t.Fatalf("PTTL of the lock handed over, 6 s later: %v, want it renewed past the 5 s hand-over lease", pttl)
	}
	if err := a.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// A waiter that finds the lock already handed to it (the hand-over message
// lost, as here where the test hands it over without one, or an attempt
// whose reply was lost) holds it with the token the hand-over counted: one
// grant, one token.
func TestMutexFindsHandOver(t *testing.T) {
	for _, tg := range []target{embeddedTarget(t), nodeTarget(t)} {
		t.Run(tg.name, func(t *testing.T) {
			ctx := testContext(t)
			b := tg.backend(t)
			holder, a := lock.NewMutex(b, "found", nil), lock.NewMutex(b, "found", nil)
			if err := holder.Lock(ctx); err != nil {
				t.Fatal(err)
			}
			locked := make(chan error, 1)
			go func() { locked <- a.LockFor(ctx, 2*time.Second) }()
			waitQueued(t, ctx, tg.rdb, "found")
			id := tg.rdb.LIndex(ctx, "lockserver_lock_queue:{found}", 0).Val()
			// The unlock's hand-over, by hand and silent.
			pipe := tg.rdb.TxPipeline()
			pipe.Del(ctx, "found", "lockserver_lock_waiter:{found}:"+id)
			pipe.LPop(ctx, "lockserver_lock_queue:{found}")
			pipe.HSet(ctx, "found", id, 1)
			pipe.PExpire(ctx, "found", 2*time.Second)
			counted := pipe.Incr(ctx, "redisson_lock_token:{found}")
			if _, err := pipe.Exec(ctx); err != nil {
				t.Fatal(err)
			}
			tg.rdb.Publish(ctx, "redisson_lock__channel:{found}", "0")
			if err := <-locked; err != nil {
				t.Fatal(err)
			}
			if got := a.Token(); got != uint64(counted.Val()) {
				t.Fatalf("the token of the lock found handed over is %d, want %d, counted by the hand-over", got, counted.Val())
			}
			if err := a.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// A hand-over message names the wait it is for: one that comes late, from
// an earlier wait of the same holder, does not make a waiter think it holds
// the lock (here the test sends one, with a wait id the waiter is not in).
func TestMutexStaleHandOver(t *testing.T) {
	tg := nodeTarget(t)
	ctx := testContext(t)
	b := tg.backend(t)
	holder, waiter := lock.NewMutex(b, "stale", nil), lock.NewMutex(b, "stale", nil)
	if err := holder.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	locked := make(chan error, 1)
	go func() { locked <- waiter.Lock(ctx) }()
	const queue, channel = "lockserver_lock_queue:{stale}", "lockserver_lock__handover:{stale}"
	waitQueued(t, ctx, tg.rdb, "stale")
	id := tg.rdb.LIndex(ctx, queue, 0).Val()
	tg.rdb.Publish(ctx, channel, id+" 0 999")
	token := holder.Token()
	if err := holder.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-locked; err != nil {
		t.Fatal(err)
	}
	// The stale message may still wake the waiter into another attempt, which
	// can find the lock already handed to it and take it again with a newer
	// token: held once, with a token after the holder's and none the server
	// did not issue (999 was never issued).
	last, _ := tg.rdb.Get(ctx, "redisson_lock_token:{stale}").Uint64()
	if got := tg.rdb.HGet(ctx, "stale", id).Val(); got != "1" || waiter.Token() <= token || waiter.Token() > last {
		t.Fatalf("the waiter holds with token %d and the server says %q; want it held once, with a token after %d and at most the server's last, %d", waiter.Token(), got, token, last)
	}
	if err := waiter.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

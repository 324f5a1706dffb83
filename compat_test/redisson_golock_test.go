package compat_test

import (
	"context"
	"testing"
	"time"

	"github.com/lockserver/lockserver/internal/redisson"
	"github.com/lockserver/lockserver/lock"
	"github.com/redis/go-redis/v9"
)

// The Go lock package and Redisson on one lock name: Redisson's own scripts,
// sent as Redisson sends them (internal/redisson), against a lock the
// Go Mutex holds and the reverse; each one's unlock message wakes the
// other's waiter; both count fencing tokens on one counter. The same for
// RWMutex against RReadWriteLock and Semaphore against RSemaphore. On
// redis-server, a standalone lockserver and a cluster follower.
func TestRedissonAndGoLocks(t *testing.T) {
	c := startCluster(t)
	for _, tg := range []clientTarget{redisTarget(t, ""), lockserverTarget(t, ""), c.target("lockserver cluster follower", c.follower())} {
		t.Run(tg.name, func(t *testing.T) {
			for _, sc := range []struct {
				name string
				run  func(testing.TB, clientTarget)
			}{
				{"Mutex", goMutexWithRedisson},
				{"RWMutex", goRWMutexWithRedisson},
				{"Semaphore", goSemaphoreWithRedisson},
			} {
				t.Run(sc.name, func(t *testing.T) { sc.run(t, tg) })
			}
		})
	}
}

// goBackend is a lock Backend on the target through go-redis.
func goBackend(t testing.TB, tg clientTarget) *lock.Backend {
	b := lock.Redis(tg.goRedis(t, redis.Options{}))
	t.Cleanup(func() { b.Close() })
	return b
}

// eval runs one of Redisson's scripts as Redisson does, failing on error.
func redissonEval(t testing.TB, rdb *redis.Client, script string, keys []string, args ...any) any {
	t.Helper()
	v, err := redissonEvalSha(context.Background(), rdb, script, keys, args...)
	if err != nil && err != redis.Nil {
		t.Fatalf("%.40q...: %v", script, err)
	}
	return v
}

// subscribed opens a Redisson-style subscription to channel.
func subscribed(t testing.TB, rdb *redis.Client, channel string) <-chan *redis.Message {
	t.Helper()
	sub := rdb.Subscribe(context.Background(), channel)
	t.Cleanup(func() { sub.Close() })
	if _, err := sub.Receive(context.Background()); err != nil {
		t.Fatal(err)
	}
	return sub.Channel()
}

// message waits for the next message on ch and requires payload.
func message(t testing.TB, ch <-chan *redis.Message, payload string) {
	t.Helper()
	select {
	case m := <-ch:
		if m.Payload != payload {
			t.Fatalf("message %q on %s, want %q", m.Payload, m.Channel, payload)
		}
	case <-time.After(time.Minute):
		t.Fatalf("no message %q within a minute", payload)
	}
}

// waitingOn waits until n clients subscribe to channel (a Go waiter has
// joined it).
func waitingOn(t testing.TB, rdb *redis.Client, channel string, n int64) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for rdb.PubSubNumSub(context.Background(), channel).Val()[channel] != n {
		if time.Now().After(deadline) {
			t.Fatalf("%d subscribers on %s, want %d", rdb.PubSubNumSub(context.Background(), channel).Val()[channel], channel, n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func goMutexWithRedisson(t testing.TB, tg clientTarget) {
	ctx := context.Background()
	rdb := tg.goRedis(t, redis.Options{})
	rdb.Del(ctx, "golock", redisson.PrefixName("redisson_lock_token", "golock"))
	name, ch, token := "golock", redisson.PrefixName("redisson_lock__channel", "golock"), redisson.PrefixName("redisson_lock_token", "golock")
	owner := randomUUID() + ":1"
	fencedAcquire := func() []any {
		return redissonEval(t, rdb, redisson.FencedTryLockToken, []string{name, token}, redissonLease, owner).([]any)
	}
	redissonUnlock := func() any {
		return redissonEval(t, rdb, redisson.RLockUnlock, []string{name, ch, redisson.UnlockLatch(name, generateID())}, 0, redissonLease, owner, "PUBLISH", unlockLatchMs)
	}
	m := lock.NewMutex(goBackend(t, tg), name, &lock.Options{Reentrant: true})

	// The Go Mutex holds: Redisson's RLock and RFencedLock wait, the
	// hash is RLock's with the re-entry count.
	if err := m.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := m.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	if h := rdb.HGetAll(ctx, name).Val(); len(h) != 1 {
		t.Fatalf("the Go Mutex's hash %v, want one holder field", h)
	} else {
		for _, v := range h {
			if v != "2" {
				t.Fatalf("the Go Mutex entered twice counts %q, want 2", v)
			}
		}
	}
	if ttl, ok := redissonEval(t, rdb, redisson.RLockTryLock, []string{name}, redissonLease, owner).(int64); !ok || ttl <= 0 {
		t.Fatalf("RLock's tryLock on a lock the Go Mutex holds = %v, want the lease left", ttl)
	}
	if r := fencedAcquire(); r[1] != int64(-1) {
		t.Fatalf("RFencedLock's tryLock on a lock the Go Mutex holds = %v, want {pttl, -1}", r)
	}

	// Its unlock wakes Redisson's waiter, which takes the next token.
	msgs := subscribed(t, rdb, ch)
	goToken := m.Token()
	for range 2 {
		if err := m.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	message(t, msgs, "0")
	if r := fencedAcquire(); r[0] != int64(-1) || r[1] != int64(goToken+1) {
		t.Fatalf("RFencedLock's tryLock after the Go unlock = %v, want {-1, %d}", r, goToken+1)
	}

	// Redisson holds: the Go Mutex waits, on the same channel, until
	// Redisson's unlock message, and takes the next token.
	if ok, err := m.TryLock(ctx); ok || err != nil {
		t.Fatalf("TryLock on a lock Redisson holds = %v, %v; want false", ok, err)
	}
	locked := make(chan error, 1)
	go func() { locked <- m.Lock(ctx) }()
	waitingOn(t, rdb, ch, 2) // the Go waiter beside this test's subscriber
	if v := redissonUnlock(); v != int64(1) {
		t.Fatalf("Redisson's unlock = %v, want 1", v)
	}
	message(t, msgs, "0")
	if err := <-locked; err != nil {
		t.Fatal(err)
	}
	if m.Token() != goToken+2 {
		t.Fatalf("the Go Mutex's token after Redisson's = %d, want %d", m.Token(), goToken+2)
	}
	if err := m.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	message(t, msgs, "0")
}

func goRWMutexWithRedisson(t testing.TB, tg clientTarget) {
	ctx := context.Background()
	rdb := tg.goRedis(t, redis.Options{})
	name, ch := "gorw", redisson.PrefixName("redisson_rwlock", "gorw")
	rdb.Del(ctx, name)
	owner := randomUUID() + ":1"
	timeoutPrefix := redisson.SuffixName(name, owner) + ":rwlock_timeout"
	readLock := func() any {
		return redissonEval(t, rdb, redisson.ReadTryLock, []string{name, timeoutPrefix}, redissonLease, owner, owner+":write")
	}
	readUnlockR := func() any {
		return redissonEval(t, rdb, redisson.ReadUnlock, []string{name, ch, timeoutPrefix, "{gorw}", redisson.UnlockLatch(name, generateID())}, 0, owner, "PUBLISH", unlockLatchMs)
	}
	writeLock := func() any {
		return redissonEval(t, rdb, redisson.WriteTryLock, []string{name}, redissonLease, owner+":write")
	}
	writeUnlockR := func() any {
		return redissonEval(t, rdb, redisson.WriteUnlock, []string{name, ch, redisson.UnlockLatch(name, generateID())}, 1, redissonLease, owner+":write", "PUBLISH", unlockLatchMs)
	}
	rw := lock.NewRWMutex(goBackend(t, tg), name, nil)
	// Subscribed from the start: a cluster follower delivers a message when
	// it applies the write, which may be after a later subscription.
	msgs := subscribed(t, rdb, ch)

	// A Go reader shares with a Redisson reader and keeps out a Redisson
	// writer.
	if err := rw.RLock(ctx); err != nil {
		t.Fatal(err)
	}
	if v := readLock(); v != nil {
		t.Fatalf("Redisson's read lock beside a Go reader = %v, want nil (taken)", v)
	}
	if v, ok := writeLock().(int64); !ok || v <= 0 {
		t.Fatalf("Redisson's write lock beside readers = %v, want the lease left", v)
	}
	if err := rw.RUnlock(ctx); err != nil {
		t.Fatal(err)
	}
	if v := readUnlockR(); v != int64(1) {
		t.Fatalf("Redisson's read unlock, the last reader = %v, want 1", v)
	}
	message(t, msgs, "0")

	// A Redisson writer keeps out a Go reader, whose wait its unlock
	// message ends.
	if v := writeLock(); v != nil {
		t.Fatalf("Redisson's write lock on a free lock = %v, want nil", v)
	}
	if ok, err := rw.TryRLock(ctx); ok || err != nil {
		t.Fatalf("a Go TryRLock beside a Redisson writer = %v, %v; want false", ok, err)
	}
	locked := make(chan error, 1)
	go func() { locked <- rw.RLock(ctx) }()
	waitingOn(t, rdb, ch, 2)
	if v := writeUnlockR(); v != int64(1) {
		t.Fatalf("Redisson's write unlock = %v, want 1", v)
	}
	message(t, msgs, "1")
	if err := <-locked; err != nil {
		t.Fatal(err)
	}
	// The Go reader's unlock wakes Redisson's waiters with its message.
	if err := rw.RUnlock(ctx); err != nil {
		t.Fatal(err)
	}
	message(t, msgs, "0")
	if n := rdb.Exists(ctx, name).Val(); n != 0 {
		t.Fatalf("the lock is still there: %v", rdb.HGetAll(ctx, name).Val())
	}
}

func goSemaphoreWithRedisson(t testing.TB, tg clientTarget) {
	ctx := context.Background()
	rdb := tg.goRedis(t, redis.Options{})
	name, ch := "gosem", redisson.PrefixName("redisson_sc", "gosem")
	rdb.Del(ctx, name)
	s := lock.NewSemaphore(goBackend(t, tg), name)
	if v := redissonEval(t, rdb, redisson.SemTrySetPermits, []string{name, ch}, 1, "PUBLISH"); v != int64(1) {
		t.Fatalf("Redisson's trySetPermits = %v, want 1", v)
	}
	if err := s.Acquire(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if v := redissonEval(t, rdb, redisson.SemTryAcquire, []string{name}, 1); v != int64(0) {
		t.Fatalf("Redisson's tryAcquire with no permit left = %v, want 0", v)
	}
	if err := s.Release(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if v := redissonEval(t, rdb, redisson.SemTryAcquire, []string{name}, 1); v != int64(1) {
		t.Fatalf("Redisson's tryAcquire of the permit the Go side released = %v, want 1", v)
	}
	acquired := make(chan error, 1)
	go func() { acquired <- s.Acquire(ctx, 1) }()
	waitingOn(t, rdb, ch, 1)
	redissonEval(t, rdb, redisson.SemRelease, []string{name, ch}, 1, "PUBLISH")
	if err := <-acquired; err != nil {
		t.Fatal(err)
	}
	if n, err := s.AvailablePermits(ctx); n != 0 || err != nil {
		t.Fatalf("permits left = %d, %v; want 0", n, err)
	}
}

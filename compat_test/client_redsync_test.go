package compat_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-redsync/redsync/v4"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/lockserver/lockserver/internal/testenv"
	"github.com/redis/go-redis/v9"
)

// redsync v4 with its go-redis v9 pool, used as its users use it: a Mutex per
// lock name, Lock/TryLock, Extend, Unlock, contention between goroutines and
// a lease that runs out. What redsync reports is recorded and compared
// between redis-server and lockserver, and the outcomes are checked against
// what redsync documents.

// redsyncErr names the redsync error kinds a user tells apart.
func redsyncErr(err error) string {
	var taken *redsync.ErrTaken
	switch {
	case err == nil:
		return "ok"
	case errors.As(err, &taken):
		return fmt.Sprintf("ErrTaken%v", taken.Nodes)
	case errors.Is(err, redsync.ErrLockAlreadyExpired):
		return "ErrLockAlreadyExpired"
	case errors.Is(err, redsync.ErrFailed):
		return "ErrFailed"
	}
	return "error: " + err.Error()
}

func redsyncSession(t testing.TB, tg clientTarget) clientLog {
	ctx := context.Background()
	var log clientLog
	rdb := tg.goRedis(t, redis.Options{})
	rs := redsync.New(goredis.NewPool(rdb))
	opts := []redsync.Option{redsync.WithExpiry(5 * time.Second), redsync.WithTries(1), redsync.WithTimeoutFactor(0.5)}

	// The lease left is at most the expiry, and at least the expiry less
	// the time since the call that set it began (PTTL rounds down to the
	// millisecond), however slow the machine.
	leaseLeft := func(since time.Time) bool {
		ttl := rdb.PTTL(ctx, "redsync:lock").Val()
		return ttl <= 5*time.Second && ttl >= 5*time.Second-time.Since(since)-time.Millisecond
	}
	m := rs.NewMutex("redsync:lock", opts...)
	start := time.Now()
	log.addf("Lock: %s", redsyncErr(m.Lock()))
	log.addf("value stored: %v", rdb.Get(ctx, "redsync:lock").Val() == m.Value())
	log.addf("PTTL within the expiry: %v", leaseLeft(start))

	rival := rs.NewMutex("redsync:lock", opts...)
	log.addf("rival TryLock: %s", redsyncErr(rival.TryLock()))
	log.addf("holder still stored: %v", rdb.Get(ctx, "redsync:lock").Val() == m.Value())

	rdb.PExpire(ctx, "redsync:lock", time.Second)
	start = time.Now()
	ok, err := m.Extend()
	log.addf("Extend: %v %s", ok, redsyncErr(err))
	log.addf("PTTL after Extend: %v", leaseLeft(start))

	impostor := rs.NewMutex("redsync:lock", append(opts, redsync.WithValue("not-the-owner"))...)
	ok, err = impostor.Unlock()
	log.addf("Unlock by another value: %v %s", ok, redsyncErr(err))
	ok, err = impostor.Extend()
	log.addf("Extend by another value: %v %s", ok, redsyncErr(err))
	log.addf("holder still stored: %v", rdb.Get(ctx, "redsync:lock").Val() == m.Value())

	ok, err = m.Unlock()
	log.addf("Unlock: %v %s", ok, redsyncErr(err))
	ok, err = m.Unlock()
	log.addf("Unlock again: %v %s", ok, redsyncErr(err))
	log.addf("rival TryLock after Unlock: %s", redsyncErr(rival.TryLock()))
	ok, err = rival.Unlock()
	log.addf("rival Unlock: %v %s", ok, redsyncErr(err))

	// A lease that runs out lets another take the lock; the old holder can
	// then neither extend nor release it. redsync counts a lock it took as
	// failed when taking it used up the lease (less its drift allowance), so
	// the lease must outlast a round trip on a busy machine under -race:
	// 300 ms did not at load 20 (redis-server's TryLock after expiry was
	// ErrFailed). The test waits for the lease to run out rather than
	// sleeping for a fixed time.
	short := []redsync.Option{redsync.WithExpiry(2 * time.Second), redsync.WithTries(1), redsync.WithTimeoutFactor(1)}
	first := rs.NewMutex("redsync:expiring", short...)
	log.addf("Lock with a short expiry: %s", redsyncErr(first.Lock()))
	second := rs.NewMutex("redsync:expiring", short...)
	log.addf("TryLock before expiry: %s", redsyncErr(second.TryLock()))
	waitFor(t, func() string {
		if n := rdb.Exists(ctx, "redsync:expiring").Val(); n != 0 {
			return "the short lease of redsync:expiring to run out"
		}
		return ""
	})
	log.addf("TryLock after expiry: %s", redsyncErr(second.TryLock()))
	ok, err = first.Extend()
	log.addf("expired holder Extend: %v %s", ok, redsyncErr(err))
	ok, err = first.Unlock()
	log.addf("expired holder Unlock: %v %s", ok, redsyncErr(err))
	log.addf("new holder still stored: %v", rdb.Get(ctx, "redsync:expiring").Val() == second.Value())
	second.Unlock()

	// WithSetNXOnExtend re-creates a lock that expired while extending.
	renewed := rs.NewMutex("redsync:setnx", append(short, redsync.WithSetNXOnExtend())...)
	log.addf("Lock: %s", redsyncErr(renewed.Lock()))
	rdb.Del(ctx, "redsync:setnx")
	ok, err = renewed.Extend()
	log.addf("Extend with SET NX after the key vanished: %v %s", ok, redsyncErr(err))
	log.addf("value stored again: %v", rdb.Get(ctx, "redsync:setnx").Val() == renewed.Value())

	log.addf("contention: %s", lockContention(t, tg.name, func(i int) (lock, unlock func() error) {
		m := rs.NewMutex("redsync:contended", redsync.WithExpiry(5*time.Second), redsync.WithTries(10000),
			redsync.WithRetryDelay(2*time.Millisecond), redsync.WithTimeoutFactor(0.5))
		return m.Lock, func() error {
			ok, err := m.Unlock()
			if err == nil && !ok {
				err = errors.New("unlock reported false")
			}
			return err
		}
	}))
	return log
}

// lockContention has workers take and release a lock in a loop, each with
// the lock object newLock gives it, and checks the invariant of a lock: no
// two workers are ever inside the critical section at once. It returns a
// summary that is the same on every correct server.
func lockContention(t testing.TB, server string, newLock func(worker int) (lock, unlock func() error)) string {
	const workers, rounds = 6, 8
	var inside, maxInside, entered atomic.Int64
	var wg sync.WaitGroup
	for w := range workers {
		lock, unlock := newLock(w)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range rounds {
				if err := lock(); err != nil {
					t.Errorf("%s: worker %d lock: %v", server, w, err)
					return
				}
				n := inside.Add(1)
				for {
					m := maxInside.Load()
					if n <= m || maxInside.CompareAndSwap(m, n) {
						break
					}
				}
				entered.Add(1)
				time.Sleep(time.Millisecond)
				inside.Add(-1)
				if err := unlock(); err != nil {
					t.Errorf("%s: worker %d unlock: %v", server, w, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if maxInside.Load() != 1 || entered.Load() != workers*rounds {
		t.Errorf("%s: %d entries into the critical section (want %d), at most %d inside at once (want 1)",
			server, entered.Load(), workers*rounds, maxInside.Load())
	}
	return fmt.Sprintf("%d entries, at most %d inside at once", entered.Load(), maxInside.Load())
}

func TestClientRedsync(t *testing.T) {
	testenv.Long(t)
	redisT, ls := redisTarget(t, ""), lockserverTarget(t, "")
	want := redsyncSession(t, redisT)
	for _, line := range []string{
		"Lock: ok",
		"rival TryLock: ErrTaken[0]",
		"Extend: true ok",
		"Unlock by another value: false ErrTaken[0]",
		"Unlock again: false ErrLockAlreadyExpired",
		"TryLock after expiry: ok",
		"expired holder Unlock: false ErrTaken[0]",
		"Extend with SET NX after the key vanished: true ok",
		"contention: 48 entries, at most 1 inside at once",
	} {
		if !want.has(line) {
			t.Errorf("redis-server's record lacks %q: the scenario is wrong", line)
		}
	}
	compareLogs(t, "redis-server", want, ls.name, redsyncSession(t, ls))
}

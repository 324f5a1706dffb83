package compat_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/bsm/redislock"
	"github.com/redis/go-redis/v9"
)

// bsm/redislock used as its users use it: Obtain with and without retries,
// TTL, Refresh, Release, a token and metadata of their own, contention and
// a lease that runs out. Its scripts (SET NX PX, GETRANGE of the token
// prefix, compare-and-PEXPIRE, compare-and-DEL) run through Script.Run.

func redislockErr(err error) string {
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, redislock.ErrNotObtained):
		return "ErrNotObtained"
	case errors.Is(err, redislock.ErrLockNotHeld):
		return "ErrLockNotHeld"
	}
	return "error: " + err.Error()
}

func redislockSession(t testing.TB, tg clientTarget) clientLog {
	ctx := context.Background()
	var log clientLog
	rdb := tg.goRedis(t, redis.Options{})
	locker := redislock.New(rdb)

	lock, err := locker.Obtain(ctx, "redislock:a", 5*time.Second, &redislock.Options{Metadata: "meta"})
	log.addf("Obtain: %s", redislockErr(err))
	if err != nil {
		t.Fatalf("%s: Obtain: %v", tg.name, err)
	}
	log.addf("stored value is token+metadata: %v", rdb.Get(ctx, "redislock:a").Val() == lock.Token()+"meta")
	log.addf("Metadata: %s", lock.Metadata())
	ttl, err := lock.TTL(ctx)
	log.addf("TTL within the lease: %v %s", ttl > 4*time.Second && ttl <= 5*time.Second, redislockErr(err))

	_, err = locker.Obtain(ctx, "redislock:a", 5*time.Second, nil)
	log.addf("Obtain of a held lock: %s", redislockErr(err))
	_, err = locker.Obtain(ctx, "redislock:a", 5*time.Second, &redislock.Options{
		RetryStrategy: redislock.LimitRetry(redislock.LinearBackoff(20*time.Millisecond), 3)})
	log.addf("Obtain with three retries: %s", redislockErr(err))

	// The same token re-obtains its own lock (the GETRANGE branch).
	again, err := locker.Obtain(ctx, "redislock:a", 8*time.Second, &redislock.Options{Token: lock.Token(), Metadata: "new"})
	log.addf("Obtain with the holder's token: %s", redislockErr(err))
	if err == nil {
		ttl, _ = again.TTL(ctx)
		log.addf("re-obtained TTL: %v, metadata now %q", ttl > 7*time.Second && ttl <= 8*time.Second, rdb.Get(ctx, "redislock:a").Val()[len(lock.Token()):])
		lock = again
	}

	log.addf("Refresh: %s", redislockErr(lock.Refresh(ctx, 20*time.Second, nil)))
	ttl, _ = lock.TTL(ctx)
	log.addf("TTL after Refresh: %v", ttl > 19*time.Second && ttl <= 20*time.Second)
	log.addf("Release: %s", redislockErr(lock.Release(ctx)))
	log.addf("Release again: %s", redislockErr(lock.Release(ctx)))
	log.addf("Refresh after Release: %s", redislockErr(lock.Refresh(ctx, time.Second, nil)))
	ttl, err = lock.TTL(ctx)
	log.addf("TTL after Release: %v %s", ttl, redislockErr(err))

	// A lease that runs out: another obtains it, the old holder has lost it.
	old, err := locker.Obtain(ctx, "redislock:b", 300*time.Millisecond, nil)
	log.addf("Obtain with a short lease: %s", redislockErr(err))
	_, err = locker.Obtain(ctx, "redislock:b", time.Second, nil)
	log.addf("Obtain before it runs out: %s", redislockErr(err))
	waiter, err := locker.Obtain(ctx, "redislock:b", 5*time.Second, &redislock.Options{
		RetryStrategy: redislock.LinearBackoff(20 * time.Millisecond)})
	log.addf("Obtain retrying until it runs out: %s", redislockErr(err))
	if err == nil {
		log.addf("old holder Refresh: %s", redislockErr(old.Refresh(ctx, time.Second, nil)))
		log.addf("old holder Release: %s", redislockErr(old.Release(ctx)))
		log.addf("new holder still stored: %v", rdb.Get(ctx, "redislock:b").Val() == waiter.Token())
		log.addf("new holder Release: %s", redislockErr(waiter.Release(ctx)))
	}

	log.addf("contention: %s", lockContention(t, tg.name, func(int) (lock, unlock func() error) {
		c := redislock.New(tg.goRedis(t, redis.Options{}))
		var held *redislock.Lock
		return func() error {
				var err error
				held, err = c.Obtain(ctx, "redislock:contended", 5*time.Second, &redislock.Options{
					RetryStrategy: redislock.LinearBackoff(2 * time.Millisecond)})
				return err
			}, func() error {
				return held.Release(ctx)
			}
	}))
	return log
}

func TestClientRedislock(t *testing.T) {
	redisT, ls := redisTarget(t, ""), lockserverTarget(t, "")
	want := redislockSession(t, redisT)
	for _, line := range []string{
		"Obtain: ok",
		"Obtain of a held lock: ErrNotObtained",
		"Obtain with the holder's token: ok",
		"Release again: ErrLockNotHeld",
		"Obtain retrying until it runs out: ok",
		"old holder Release: ErrLockNotHeld",
		"contention: 48 entries, at most 1 inside at once",
	} {
		if !want.has(line) {
			t.Errorf("redis-server's record lacks %q: the scenario is wrong", line)
		}
	}
	compareLogs(t, "redis-server", want, ls.name, redislockSession(t, ls))
}

package compat_test

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lockserver/lockserver/internal/redisson"
	"github.com/redis/go-redis/v9"
)

// Threads of several Redisson clients contending for one lock, each
// following RedissonLock.lock(): try the script; when the lock is held,
// wait for the unlock message on the lock's channel (or for the lease the
// script returned) and try again. No two may ever be inside at once.

// redissonEvalSha sends a script with Redisson's script-cache protocol
// through go-redis.
func redissonEvalSha(ctx context.Context, rdb *redis.Client, script string, keys []string, args ...any) (any, error) {
	sum := sha1.Sum([]byte(script))
	sha := hex.EncodeToString(sum[:])
	v, err := rdb.EvalSha(ctx, sha, keys, args...).Result()
	if err != nil && strings.HasPrefix(err.Error(), "NOSCRIPT") {
		if err := rdb.ScriptLoad(ctx, script).Err(); err != nil {
			return nil, err
		}
		v, err = rdb.EvalSha(ctx, sha, keys, args...).Result()
	}
	return v, err
}

// redissonWaiter is one Redisson thread's side of a lock: the lock and
// unlock calls that lockContention drives.
type redissonWaiter struct {
	ctx      context.Context
	rdb      *redis.Client
	messages <-chan *redis.Message
}

// newRedissonWaiter connects a thread and subscribes it to channel.
func newRedissonWaiter(t testing.TB, tg clientTarget, channel string) *redissonWaiter {
	ctx := context.Background()
	w := &redissonWaiter{ctx: ctx, rdb: tg.goRedis(t, redis.Options{})}
	sub := w.rdb.Subscribe(ctx, channel)
	t.Cleanup(func() { sub.Close() })
	if _, err := sub.Receive(ctx); err != nil {
		t.Fatalf("%s: SUBSCRIBE %s: %v", tg.name, channel, err)
	}
	w.messages = sub.Channel()
	return w
}

// acquire runs try until it reports the lock taken (a nil reply), waiting
// between tries for a message or for the returned lease, capped so that a
// lost wake-up costs little.
func (w *redissonWaiter) acquire(try func() (any, error)) error {
	for {
		v, err := try()
		if err == redis.Nil {
			return nil
		}
		if err != nil {
			return err
		}
		wait := 100 * time.Millisecond
		if ttl, ok := v.(int64); ok && ttl >= 0 && time.Duration(ttl)*time.Millisecond < wait {
			wait = time.Duration(ttl) * time.Millisecond
		}
		select {
		case <-w.messages:
		case <-time.After(wait):
		}
	}
}

// released checks an unlock script's reply: 1 when the lock was released.
func released(v any, err error) error {
	if err != nil {
		return err
	}
	if v != int64(1) {
		return fmt.Errorf("unlock replied %v, want 1", v)
	}
	return nil
}

// redissonLockContention: RLock's lock() and unlock() from several threads.
func redissonLockContention(t testing.TB, tg clientTarget) string {
	name := "contended:rlock"
	ch := redisson.PrefixName("redisson_lock__channel", name)
	id := randomUUID()
	return lockContention(t, tg.name, func(worker int) (lock, unlock func() error) {
		w := newRedissonWaiter(t, tg, ch)
		owner := id + ":" + strconv.Itoa(worker)
		lock = func() error {
			return w.acquire(func() (any, error) {
				return redissonEvalSha(w.ctx, w.rdb, redisson.RLockTryLock, []string{name}, redissonLease, owner)
			})
		}
		unlock = func() error {
			return released(redissonEvalSha(w.ctx, w.rdb, redisson.RLockUnlock, []string{name, ch, redisson.UnlockLatch(name, generateID())},
				0, redissonLease, owner, "PUBLISH", unlockLatchMs))
		}
		return lock, unlock
	})
}

// redissonFairLockContention: RFairLock's lock() and unlock(), each thread
// woken on its own channel when it reaches the head of the queue.
func redissonFairLockContention(t testing.TB, tg clientTarget) string {
	name := "contended:fair"
	queue, timeouts := redisson.PrefixName("redisson_lock_queue", name), redisson.PrefixName("redisson_lock_timeout", name)
	ch := redisson.PrefixName("redisson_lock__channel", name)
	keys := []string{name, queue, timeouts}
	id := randomUUID()
	return lockContention(t, tg.name, func(worker int) (lock, unlock func() error) {
		owner := id + ":" + strconv.Itoa(worker)
		w := newRedissonWaiter(t, tg, ch+":"+owner)
		lock = func() error {
			return w.acquire(func() (any, error) {
				return redissonEvalSha(w.ctx, w.rdb, redisson.FairTryLock, keys, redissonLease, owner, 5000, time.Now().UnixMilli())
			})
		}
		unlock = func() error {
			return released(redissonEvalSha(w.ctx, w.rdb, redisson.FairUnlock, append(keys, ch, redisson.UnlockLatch(name, generateID())),
				0, redissonLease, owner, time.Now().UnixMilli(), "PUBLISH", unlockLatchMs))
		}
		return lock, unlock
	})
}

func TestRedissonContention(t *testing.T) {
	redisT, ls := redisTarget(t, ""), lockserverTarget(t, "")
	for _, c := range []struct {
		name string
		run  func(testing.TB, clientTarget) string
	}{{"RLock", redissonLockContention}, {"FairLock", redissonFairLockContention}} {
		t.Run(c.name, func(t *testing.T) {
			want := c.run(t, redisT)
			if got := c.run(t, ls); got != want {
				t.Errorf("redis-server: %s; lockserver: %s", want, got)
			}
		})
	}
}

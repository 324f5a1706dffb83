package compat_test

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/lockserver/lockserver/internal/redisson"
)

// Redisson's lock family, sent as Redisson sends it (see internal/redisson
// and redisson_driver_test.go), on redis-server and lockserver side by side.
// Each step's reply must be the same on both; the replies that follow from
// the scripts' text are also checked against worked examples.

const (
	redissonLease = 30000 // Config.lockWatchdogTimeout's default, the lease of lock()
	okReply       = "$2\r\nOK\r\n"
)

// bulk is the RESP2 bulk string of s.
func respBulk(s string) string { return "$" + strconv.Itoa(len(s)) + "\r\n" + s + "\r\n" }

// array is the RESP2 array of bulk strings.
func respArray(items ...string) string {
	out := "*" + strconv.Itoa(len(items)) + "\r\n"
	for _, s := range items {
		out += respBulk(s)
	}
	return out
}

// redissonScenarios run against a standalone lockserver (TestRedisson) and
// against a member of an in-process cluster (TestClientsOnCluster).
var redissonScenarios = []struct {
	name string
	run  func(t testing.TB, r *redissonClient)
}{
	{"RLock", redissonRLock},
	{"Watchdog", redissonWatchdog},
	{"FencedLock", redissonFencedLock},
	{"SpinLock", redissonSpinLock},
	{"FairLock", redissonFairLock},
	{"ReadWriteLock", redissonReadWriteLock},
	{"Semaphore", redissonSemaphore},
	{"PermitExpirableSemaphore", redissonPermitExpirableSemaphore},
	{"CountDownLatch", redissonCountDownLatch},
	{"ShardedPubSub", redissonShardedPubSub},
}

// runRedissonScenarios runs every scenario on fresh connections to p's
// servers, emptied first, over each protocol Redisson speaks: each in a
// subtest, whose body run runs (directly, or as attempts on a cluster).
func runRedissonScenarios(t *testing.T, p *pair, run func(t *testing.T, body func(t testing.TB))) {
	for _, proto := range []int{2, 3} {
		for _, sc := range redissonScenarios {
			t.Run(fmt.Sprintf("%s/RESP%d", sc.name, proto), func(t *testing.T) {
				run(t, func(t testing.TB) {
					r := newRedisson(t, p.connect(t), proto)
					r.do("FLUSHALL").is("+OK\r\n")
					sc.run(t, r)
				})
			})
		}
	}
}

// direct runs body in t itself.
func direct(t *testing.T, body func(t testing.TB)) { body(t) }

func TestRedisson(t *testing.T) {
	runRedissonScenarios(t, newPair(t), direct)
}

// redissonRLock: RedissonLock's acquire, re-entry, contention, unlock with
// its latch (a retried unlock repeats its outcome), the unlock message,
// forceUnlock, and a lease that runs out.
func redissonRLock(t testing.TB, r *redissonClient) {
	name := "rlock"
	ch := redisson.PrefixName("redisson_lock__channel", name)
	sub := r.subscribe("SUBSCRIBE", ch)
	t1, t2 := r.lockName(1), r.lockName(2)

	r.rlockTryLock(name, t1).is(nilReply)
	r.do("HGET", name, t1).is(respBulk("1"))
	r.do("PTTL", name).within(redissonLease-1000, redissonLease)
	r.rlockTryLock(name, t1).is(nilReply) // re-entry
	r.do("HGET", name, t1).is(respBulk("2"))
	r.rlockTryLock(name, t2).within(redissonLease-1000, redissonLease) // the holder's lease left

	request := generateID()
	r.rlockUnlock(name, t2, request).is(nilReply) // not the owner: IllegalMonitorStateException
	r.do("EXISTS", redisson.UnlockLatch(name, request)).is(intReply(0))

	request = generateID()
	r.rlockUnlock(name, t1, request).is(intReply(0)) // still held once
	r.do("GET", redisson.UnlockLatch(name, request)).is(respBulk("0"))
	r.do("PTTL", redisson.UnlockLatch(name, request)).within(unlockLatchMs-1000, unlockLatchMs)
	r.rlockUnlock(name, t1, request).is(intReply(0)) // the same request again counts nothing
	r.do("HGET", name, t1).is(respBulk("1"))
	r.do("DEL", redisson.UnlockLatch(name, request)).is(intReply(1)) // as unlockInnerAsync does after
	sub.quiet()

	request = generateID()
	r.rlockUnlock(name, t1, request).is(intReply(1))
	sub.message("message", ch, "0")
	r.do("EXISTS", name).is(intReply(0))
	r.rlockUnlock(name, t1, request).is(intReply(1)) // retried: released once, announced once
	sub.quiet()
	r.rlockUnlock(name, t1, generateID()).is(nilReply)
	r.rlockTryLock(name, t2).is(nilReply) // the waiter, woken, takes it

	force := func() replies { return r.eval(redisson.RLockForceUnlock, []string{name, ch}, 0, r.publish) }
	force().is(intReply(1))
	sub.message("message", ch, "0")
	force().is(intReply(0))
	sub.quiet()

	// A lease that runs out lets another owner in.
	r.eval(redisson.RLockTryLock, []string{name}, 300, t1).is(nilReply)
	r.rlockTryLock(name, t2).within(1, 300)
	time.Sleep(400 * time.Millisecond)
	r.rlockTryLock(name, t2).is(nilReply)
	r.do("HGET", name, t1).is(nilReply)
	r.do("HGET", name, t2).is(respBulk("1"))
}

// redissonWatchdog: the lease renewal scripts, today's batched LockTask and
// the single-lock renewExpirationAsync of Redisson 3.x.
func redissonWatchdog(t testing.TB, r *redissonClient) {
	a, b := "watchdog:a", "watchdog:b"
	t1, t2 := r.lockName(1), r.lockName(2)
	r.eval(redisson.RLockTryLock, []string{a}, 5000, t1).is(nilReply)
	r.eval(redisson.RLockTryLock, []string{b}, 5000, t2).is(nilReply)
	// Renew a, b (held by another thread) and a lock that is gone.
	r.eval(redisson.LockTaskRenew, []string{a, b, "watchdog:gone"}, redissonLease, t1, t1, t1).is("*3\r\n:1\r\n:0\r\n:0\r\n")
	r.do("PTTL", a).within(redissonLease-1000, redissonLease)
	r.do("PTTL", b).within(4000, 5000)
	r.eval(redisson.BaseLockRenew2021, []string{b}, redissonLease, t1).is(intReply(0))
	r.eval(redisson.BaseLockRenew2021, []string{b}, redissonLease, t2).is(intReply(1))
	r.do("PTTL", b).within(redissonLease-1000, redissonLease)
}

// redissonFencedLock: each acquisition, re-entries included, takes the next
// fencing token.
func redissonFencedLock(t testing.TB, r *redissonClient) {
	name := "fenced"
	token := redisson.PrefixName("redisson_lock_token", name)
	t1, t2 := r.lockName(1), r.lockName(2)
	acquire := func(owner string) replies {
		return r.eval(redisson.FencedTryLockToken, []string{name, token}, redissonLease, owner)
	}
	acquire(t1).is("*2\r\n:-1\r\n:1\r\n")
	acquire(t1).is("*2\r\n:-1\r\n:2\r\n")
	acquire(t2).near() // {pttl, -1}
	r.do("GET", token).is(respBulk("2"))
	r.rlockUnlock(name, t1, generateID()).is(intReply(0))
	r.rlockUnlock(name, t1, generateID()).is(intReply(1))
	acquire(t2).is("*2\r\n:-1\r\n:3\r\n")
	r.eval(redisson.FencedTryLock, []string{name, token}, redissonLease, t2).is(nilReply)
	r.eval(redisson.FencedTryLock, []string{name, token}, redissonLease, t1).within(redissonLease-1000, redissonLease)
	r.do("GET", token).is(respBulk("4"))
	r.do("HGET", name, t2).is(respBulk("2"))
}

// redissonSpinLock: acquire, re-entry, contention and unlock without pub/sub.
func redissonSpinLock(t testing.TB, r *redissonClient) {
	name := "spin"
	t1, t2 := r.lockName(1), r.lockName(2)
	acquire := func(owner string) replies { return r.eval(redisson.SpinTryLock, []string{name}, redissonLease, owner) }
	unlock := func(owner, request string) replies {
		return r.eval(redisson.SpinUnlock, []string{name, redisson.UnlockLatch(name, request)}, redissonLease, owner, unlockLatchMs)
	}
	acquire(t1).is(nilReply)
	acquire(t1).is(nilReply)
	r.do("HGET", name, t1).is(respBulk("2"))
	acquire(t2).within(redissonLease-1000, redissonLease)
	unlock(t2, generateID()).is(nilReply)
	unlock(t1, generateID()).is(intReply(0))
	request := generateID()
	unlock(t1, request).is(intReply(1))
	unlock(t1, request).is(intReply(1))
	r.do("GET", redisson.UnlockLatch(name, request)).is(respBulk("1"))
	acquire(t2).is(nilReply)
	r.eval(redisson.SpinForceUnlock, []string{name}).is(intReply(1))
	r.eval(redisson.SpinForceUnlock, []string{name}).is(intReply(0))
}

// redissonShardedPubSub: with sharded pub/sub (Redisson's cluster mode after
// its PUBSUB SHARDNUMSUB probe), waiters SSUBSCRIBE and unlocks SPUBLISH.
func redissonShardedPubSub(t testing.TB, r *redissonClient) {
	r.do("PUBSUB", "SHARDNUMSUB", 0).same()
	r.publish = "SPUBLISH"
	name := "{sharded}lock"
	ch := redisson.PrefixName("redisson_lock__channel", name)
	sub := r.subscribe("SSUBSCRIBE", ch)
	r.do("PUBSUB", "SHARDNUMSUB", ch).same()
	t1 := r.lockName(1)
	r.rlockTryLock(name, t1).is(nilReply)
	r.rlockUnlock(name, t1, generateID()).is(intReply(1))
	sub.message("smessage", ch, "0")
	sub.quiet()
}

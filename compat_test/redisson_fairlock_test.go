package compat_test

import (
	"testing"
	"time"

	"github.com/lockserver/lockserver/internal/redisson"
)

// redissonFairLock: RedissonFairLock's queue of waiters. The scripts take
// the client's clock as an argument, so a waiter's deadline passing is shown
// by passing a later clock, with no sleeping.
func redissonFairLock(t testing.TB, r *redissonClient) {
	name := "fair"
	queue, timeouts := redisson.PrefixName("redisson_lock_queue", name), redisson.PrefixName("redisson_lock_timeout", name)
	ch := redisson.PrefixName("redisson_lock__channel", name)
	keys := []string{name, queue, timeouts}
	const wait = 5000 // Config.fairLockWaitTimeout's default
	now := time.Now().UnixMilli()
	t1, t2, t3, t4 := r.lockName(1), r.lockName(2), r.lockName(3), r.lockName(4)
	// Each waiter listens on its own channel: channel:uuid:threadId.
	sub := r.subscribe("SUBSCRIBE", ch+":"+t2, ch+":"+t3, ch+":"+t4)

	tryLock := func(owner string, clock int64) replies {
		return r.eval(redisson.FairTryLock, keys, redissonLease, owner, wait, clock)
	}
	tryLockNow := func(owner string, clock int64) replies {
		return r.eval(redisson.FairTryLockNow, keys, redissonLease, owner, clock, wait)
	}
	unlock := func(owner string) replies {
		return r.eval(redisson.FairUnlock, append(keys, ch, redisson.UnlockLatch(name, generateID())), 0, redissonLease, owner, now, r.publish, unlockLatchMs)
	}
	deadline := func(owner string) replies { return r.do("ZSCORE", timeouts, owner) }

	tryLock(t1, now).is(nilReply)
	// t2 queues behind the holder: it waits the lease out, and its deadline
	// is that plus the thread wait time.
	tryLock(t2, now).within(redissonLease-1000, redissonLease)
	deadline(t2).within(now+redissonLease+wait-1000, now+redissonLease+wait)
	// t3 queues behind t2: it waits for t2's deadline.
	tryLock(t3, now).within(redissonLease+wait-1000, redissonLease+wait)
	deadline(t3).within(now+redissonLease+2*wait-1000, now+redissonLease+2*wait)
	tryLock(t2, now).within(redissonLease-1000, redissonLease) // already queued: the lease left
	r.do("LRANGE", queue, 0, -1).is(respArray(t2, t3))
	tryLockNow(t3, now).is(intReply(1)) // tryLock() without waiting: not first in line

	unlock(t1).is(intReply(1))
	sub.message("message", ch+":"+t2, "0") // only the head of the queue is told
	sub.quiet()
	tryLock(t3, now).is(intReply(0)) // free, but t2 is first: wait
	tryLock(t2, now).is(nilReply)
	r.do("LRANGE", queue, 0, -1).is(respArray(t3))
	deadline(t3).within(now+redissonLease+wait-1000, now+redissonLease+wait) // moved up by one wait

	// t4 queues behind t3; t3 gives up, and t4's deadline moves up.
	tryLock(t4, now).within(redissonLease+wait-1000, redissonLease+wait)
	r.eval(redisson.FairAcquireFailed, []string{queue, timeouts}, t3, wait).is(nilReply)
	r.do("LRANGE", queue, 0, -1).is(respArray(t4))
	deadline(t4).within(now+redissonLease+wait-1000, now+redissonLease+wait)

	// t4 never comes back. Once its deadline has passed, the next caller
	// drops it from the queue and takes its place.
	later := now + 10*60*1000
	tryLock(t3, later).within(redissonLease-1000, redissonLease)
	r.do("LRANGE", queue, 0, -1).is(respArray(t3))
	deadline(t4).is(nilReply)

	unlock(t4).is(nilReply) // not the owner
	tryLock(t2, now).is(nilReply)
	r.do("HGET", name, t2).is(respBulk("2"))
	unlock(t2).is(intReply(0))
	sub.quiet()

	r.eval(redisson.FairForceUnlock, []string{name, queue, timeouts, ch}, 0, now, r.publish).is(intReply(1))
	sub.message("message", ch+":"+t3, "0")
	tryLockNow(t3, now).is(nilReply)
	r.do("EXISTS", queue, timeouts).is(intReply(0))
	unlock(t3).is(intReply(1)) // nobody waits: no message
	sub.quiet()
	r.eval(redisson.FairForceUnlock, []string{name, queue, timeouts, ch}, 0, now, r.publish).is(intReply(0))
}

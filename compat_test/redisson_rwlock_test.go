package compat_test

import (
	"testing"

	"github.com/lockserver/lockserver/internal/redisson"
)

// redissonReadWriteLock: RedissonReadWriteLock's read and write locks on one
// hash: shared readers, a writer waiting for them, readers waiting for a
// writer, a writer that also reads, the read-lock watchdogs, and the unlock
// messages (0 from readers, 1 from the writer).
func redissonReadWriteLock(t testing.TB, r *redissonClient) {
	name := "rw"
	ch := redisson.PrefixName("redisson_rwlock", name)
	const keyPrefix = "{rw}" // RedissonReadLock.getKeyPrefix of "rw"
	timeoutPrefix := func(thread int) string { return redisson.SuffixName(name, r.lockName(thread)) + ":rwlock_timeout" }
	sub := r.subscribe("SUBSCRIBE", ch)

	readLock := func(thread int) replies {
		return r.eval(redisson.ReadTryLock, []string{name, timeoutPrefix(thread)}, redissonLease, r.lockName(thread), r.lockName(thread)+":write")
	}
	readUnlockBy := func(thread int) replies {
		return r.eval(redisson.ReadUnlock, []string{name, ch, timeoutPrefix(thread), keyPrefix, redisson.UnlockLatch(name, generateID())},
			0, r.lockName(thread), r.publish, unlockLatchMs)
	}
	writeLock := func(thread int) replies {
		return r.eval(redisson.WriteTryLock, []string{name}, redissonLease, r.lockName(thread)+":write")
	}
	writeUnlockBy := func(thread int) replies {
		return r.eval(redisson.WriteUnlock, []string{name, ch, redisson.UnlockLatch(name, generateID())},
			1, redissonLease, r.lockName(thread)+":write", r.publish, unlockLatchMs)
	}
	isLocked := func() replies { return r.eval(redisson.ReadIsLocked, []string{name}) }

	isLocked().is(intReply(0))
	readLock(1).is(nilReply)
	r.do("HGET", name, "mode").is(respBulk("read"))
	r.do("PTTL", timeoutPrefix(1)+":1").within(redissonLease-1000, redissonLease)
	readLock(2).is(nilReply) // readers share
	readLock(1).is(nilReply) // re-entry: a second lease key
	r.do("HGET", name, r.lockName(1)).is(respBulk("2"))
	r.do("EXISTS", timeoutPrefix(1)+":2").is(intReply(1))
	writeLock(3).within(redissonLease-1000, redissonLease) // the writer waits
	isLocked().is(intReply(1))

	readUnlockBy(1).is(intReply(0))
	r.do("EXISTS", timeoutPrefix(1)+":2").is(intReply(0))
	readUnlockBy(1).is(intReply(0)) // thread 2 still reads
	readUnlockBy(1).is(nilReply)    // no longer a reader
	sub.quiet()
	readUnlockBy(2).is(intReply(1))
	sub.message("message", ch, "0")

	writeLock(3).is(nilReply)
	r.do("HGET", name, "mode").is(respBulk("write"))
	writeLock(3).is(nilReply) // re-entry adds a lease to what is left
	r.do("PTTL", name).within(2*redissonLease-1000, 2*redissonLease)
	readLock(1).within(2*redissonLease-1000, 2*redissonLease) // readers wait for the writer
	readLock(3).is(nilReply)                                  // but the writer may read
	isLocked().is(intReply(1))
	writeUnlockBy(3).is(intReply(0))
	writeUnlockBy(3).is(intReply(1)) // the writer's read entry remains: read mode, no message
	sub.quiet()
	r.do("HGET", name, "mode").is(respBulk("read"))

	// The read-lock watchdogs renew the hash and every lease key of it.
	r.do("PEXPIRE", timeoutPrefix(3)+":1", 5000).is(intReply(1))
	r.eval(redisson.ReadLockTaskRenew, []string{name, keyPrefix, "rw:gone", "{rw:gone}"}, redissonLease, r.lockName(3), r.lockName(3)).is("*2\r\n:1\r\n:0\r\n")
	r.do("PTTL", timeoutPrefix(3)+":1").within(redissonLease-1000, redissonLease)
	r.do("PEXPIRE", timeoutPrefix(3)+":1", 5000).is(intReply(1))
	r.eval(redisson.ReadLockRenew2019, []string{name, keyPrefix}, redissonLease, r.lockName(3)).is(intReply(1))
	r.do("PTTL", timeoutPrefix(3)+":1").within(redissonLease-1000, redissonLease)
	r.eval(redisson.ReadLockRenew2019, []string{name, keyPrefix}, redissonLease, r.lockName(9)).is(intReply(0))
	readUnlockBy(3).is(intReply(1))
	sub.message("message", ch, "0")

	// forceUnlock of each kind only frees a lock in its own mode.
	readForce := func() replies { return r.eval(redisson.ReadForceUnlock, []string{name, ch}, 0, r.publish) }
	writeForce := func() replies { return r.eval(redisson.WriteForceUnlock, []string{name, ch}, 1, r.publish) }
	readLock(1).is(nilReply)
	writeForce().is(intReply(0))
	readForce().is(intReply(1))
	sub.message("message", ch, "0")
	writeLock(4).is(nilReply)
	readForce().is(intReply(0))
	writeForce().is(intReply(1))
	sub.message("message", ch, "1")
	// Unlocking a lock that is not held wakes the waiters anyway.
	writeUnlockBy(4).is(nilReply)
	sub.message("message", ch, "1")
}

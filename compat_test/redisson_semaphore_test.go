package compat_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/lockserver/lockserver/internal/redisson"
)

// redissonSemaphore: RSemaphore's permits as an integer string, and the
// messages that wake waiters with the new count.
func redissonSemaphore(t testing.TB, r *redissonClient) {
	name := "sem"
	ch := redisson.PrefixName("redisson_sc", name)
	sub := r.subscribe("SUBSCRIBE", ch)
	acquire := func(n int) replies { return r.eval(redisson.SemTryAcquire, []string{name}, n) }

	acquire(1).is(intReply(0)) // no permits set yet
	r.eval(redisson.SemTrySetPermits, []string{name, ch}, 3, r.publish).is(intReply(1))
	sub.message("message", ch, "3")
	r.eval(redisson.SemTrySetPermits, []string{name, ch}, 5, r.publish).is(intReply(0))
	acquire(2).is(intReply(1))
	acquire(2).is(intReply(0))
	r.do("GET", name).is(respBulk("1"))
	r.eval(redisson.SemRelease, []string{name, ch}, 2, r.publish).is(nilReply)
	sub.message("message", ch, "3")
	r.eval(redisson.SemReleaseIfExists, []string{name, ch}, 1, r.publish).is(intReply(1))
	sub.message("message", ch, "4")
	r.eval(redisson.SemReleaseIfExists, []string{"sem:gone", redisson.PrefixName("redisson_sc", "sem:gone")}, 1, r.publish).is(intReply(0))
	r.eval(redisson.SemAddPermits, []string{name, ch}, -2, r.publish).is(nilReply)
	sub.message("message", ch, "2")
	r.do("GET", name).is(respBulk("2"))
	r.eval(redisson.SemDrain, []string{name}).is(respBulk("2"))
	r.eval(redisson.SemDrain, []string{name}).is(respBulk("0"))
	acquire(1).is(intReply(0))
	r.eval(redisson.SemAddPermits, []string{"sem:new", ch}, 4, r.publish).is(nilReply) // from nothing
	sub.message("message", ch, "4")
	r.do("GET", "sem:new").is(respBulk("4"))
	r.eval(redisson.SemTrySetPermitsTTL, []string{"sem:ttl", ch}, 5, r.publish, 60000).is(intReply(1))
	sub.message("message", ch, "5")
	r.do("PTTL", "sem:ttl").within(59000, 60000)
}

// permitID is a permit id as RPermitExpirableSemaphore sends it: the 16
// random bytes behind its hex form, here with the bytes most likely to be
// mishandled (NUL, CR, LF, bytes above 0x7f).
func permitID(first byte) []byte {
	return []byte{first, 0x00, '\r', '\n', 0xff, 0xfe, 0x80, ' ', '"', '\\', 0x7f, 0x01, 0xc3, 0x28, 0x00, first}
}

// redissonPermitExpirableSemaphore: permits with ids and leases. Each
// script takes the client's clock, so a lease ending is shown by a later
// clock, with no sleeping.
func redissonPermitExpirableSemaphore(t testing.TB, r *redissonClient) {
	name := "pes"
	timeouts := redisson.SuffixName(name, "timeout")
	ch := redisson.PrefixName("redisson_sc", name)
	keys := []string{name, timeouts, ch}
	const never = 922337203685477 // nonExpirableTimeout
	now := time.Now().UnixMilli()
	a, b, c := permitID('a'), permitID('b'), permitID('c')
	sub := r.subscribe("SUBSCRIBE", ch)
	acquire := func(clock, expiry int64, ids ...[]byte) replies {
		args := []any{len(ids), expiry, clock, never, r.publish}
		for _, id := range ids {
			args = append(args, id)
		}
		return r.eval(redisson.PESTryAcquire, keys, args...)
	}
	leaseLeft := func(id []byte, clock int64) replies {
		return r.eval(redisson.PESGetLeaseTime, keys, id, never, clock, r.publish)
	}

	acquire(now, now+1000, a).is(nilReply) // no permits, none held
	r.eval(redisson.SemTrySetPermits, []string{name, ch}, 2, r.publish).is(intReply(1))
	sub.message("message", ch, "2")
	acquire(now, now+1000, a).is(okReply)
	acquire(now, never, b).is(okReply)
	// None left: the reply is the earliest expiry among the permits held.
	acquire(now, now+5000, c).is(respBulk(":" + strconv.FormatInt(now+1000, 10)))
	r.eval(redisson.PESAvailable, keys, now, r.publish).is(respBulk("0"))
	r.eval(redisson.PESGetPermits, keys, now, r.publish).is(intReply(2))
	r.eval(redisson.PESAcquired, keys, now, r.publish).is(intReply(2))
	leaseLeft(b, now).is(intReply(-1))
	leaseLeft(a, now).is(intReply(1000))
	sub.quiet()

	// a's lease ends: the next script returns it to the semaphore.
	later := now + 2000
	r.eval(redisson.PESAvailable, keys, later, r.publish).is(intReply(1))
	sub.message("message", ch, "1")
	acquire(later, later+5000, c).is(okReply)
	leaseLeft(c, later).is(intReply(5000))
	r.eval(redisson.PESUpdateLease, keys, c, later+9000, later, r.publish).is(intReply(1))
	leaseLeft(c, later).is(intReply(9000))
	r.eval(redisson.PESUpdateLease, keys, a, later+9000, later, r.publish).is(intReply(0))
	leaseLeft(a, later).is(intReply(0))

	release := func(id []byte) replies {
		return r.eval(redisson.PESTryRelease, []string{name, ch, timeouts}, id, 1, later, r.publish)
	}
	release(a).is(intReply(0)) // gone already
	sub.quiet()
	release(c).is(intReply(1))
	sub.message("message", ch, "1")
	releaseIDs := func(ids ...[]byte) replies {
		args := []any{len(ids), later, r.publish}
		for _, id := range ids {
			args = append(args, id)
		}
		return r.eval(redisson.PESTryReleaseIDs, []string{name, ch, timeouts}, args...)
	}
	releaseIDs(b).is(intReply(1))
	sub.message("message", ch, "1")
	releaseIDs(b).is(intReply(0))
	r.do("GET", name).is(respBulk("2"))

	r.eval(redisson.PESSetPermits, []string{name, ch, timeouts}, 5, r.publish).is(nilReply)
	sub.message("message", ch, "5")
	r.do("GET", name).is(respBulk("5"))
	r.eval(redisson.PESAddPermits, []string{name, ch}, 2, r.publish).is(nilReply)
	sub.message("message", ch, "2")
	r.do("GET", name).is(respBulk("7"))

	// Several binary ids at once, stored byte for byte.
	acquire(later, never, a, b, c).is(okReply)
	r.do("ZRANGE", timeouts, 0, -1, "WITHSCORES").same()
	r.do("ZRANGE", timeouts, 0, -1).is(respArray(string(a), string(b), string(c)))
	r.do("ZSCORE", timeouts, b).same()
	r.eval(redisson.PESGetPermits, keys, later, r.publish).is(intReply(7))
	releaseIDs(a, c).is(intReply(2))
	sub.message("message", ch, "2")
	r.eval(redisson.PESAcquired, keys, later, r.publish).is(intReply(1))
}

// redissonCountDownLatch: RCountDownLatch's count and the messages that
// open (0) and reset (1) it.
func redissonCountDownLatch(t testing.TB, r *redissonClient) {
	name := "latch"
	ch := "redisson_countdownlatch__channel__{" + name + "}"
	sub := r.subscribe("SUBSCRIBE", ch)
	countDown := func() replies { return r.eval(redisson.LatchCountDown, []string{name, ch}, 0, r.publish) }
	setCount := func(n int) replies { return r.eval(redisson.LatchTrySetCount, []string{name, ch}, 1, n, r.publish) }
	remove := func() replies { return r.eval(redisson.LatchDelete, []string{name, ch}, 1, r.publish) }

	countDown().is(nilReply) // a latch that was never set stays absent
	r.do("EXISTS", name).is(intReply(0))
	sub.quiet()
	setCount(2).is(intReply(1))
	sub.message("message", ch, "1")
	setCount(5).is(intReply(0))
	r.do("GET", name).is(respBulk("2"))
	countDown().is(nilReply)
	r.do("GET", name).is(respBulk("1"))
	sub.quiet()
	countDown().is(nilReply)
	sub.message("message", ch, "0")
	r.do("EXISTS", name).is(intReply(0))
	setCount(1).is(intReply(1))
	sub.message("message", ch, "1")
	remove().is(intReply(1))
	sub.message("message", ch, "1")
	remove().is(intReply(0))
}

package lock

import (
	"crypto/sha1"
	"encoding/hex"
	"strings"
)

// A script is a Lua script and the SHA1 that EVALSHA names it by.
type script struct {
	src, sha string
}

func newScript(src string) *script {
	sum := sha1.Sum([]byte(src))
	return &script{src: src, sha: hex.EncodeToString(sum[:])}
}

// Key names follow Redisson's RedissonObject, so that a Redisson client
// locking the same name uses the same keys and channels. Every key of a lock
// is in the hash slot of its name.

// prefixName is RedissonObject.prefixName.
func prefixName(prefix, name string) string {
	if strings.Contains(name, "{") {
		return prefix + ":" + name
	}
	return prefix + ":{" + name + "}"
}

// suffixName is RedissonObject.suffixName.
func suffixName(name, suffix string) string {
	if strings.Contains(name, "{") {
		return name + ":" + suffix
	}
	return "{" + name + "}:" + suffix
}

// The Mutex's scripts. The lock is RedissonLock's hash (one field, the
// holder's id, whose value is its re-entry count) with RedissonFencedLock's
// token counter beside it; the unlock message is RedissonLock's. The wait
// queue is the Mutex's own: Redisson's clients do not read it, and it makes
// Go waiters take turns.

// mutexAcquire takes the lock when it is free and no live waiter is ahead
// of the caller, counting a new token. KEYS lock, token counter, queue,
// queue entry prefix; ARGV lease ms, holder id, queue entry lease ms (0: do
// not queue, as TryLock), "<lease ms> <wait id>" for a lock handed over to
// it (kept in its queue entry). {-1, token, next waiter or ""} when taken; else
// {ms to wait, 0, first waiter or ""} with the lock's lease left, or, while
// the lock is free but it is another waiter's turn, {that waiter's entry's
// lease left, 1, that waiter}. A holder that finds its own id
// in the hash (its earlier attempt took the lock and the reply was lost)
// takes it again with a new token, so the script may be retried.
var mutexAcquire = newScript(`local function entry(id) return KEYS[4] .. ':' .. id end
local head = redis.call('lindex', KEYS[3], 0)
while head and redis.call('exists', entry(head)) == 0 do
  redis.call('lpop', KEYS[3])
  head = redis.call('lindex', KEYS[3], 0)
end
if redis.call('hexists', KEYS[1], ARGV[2]) == 1
  or (redis.call('exists', KEYS[1]) == 0 and (not head or head == ARGV[2])) then
  if redis.call('del', entry(ARGV[2])) == 1 then
    redis.call('lrem', KEYS[3], 1, ARGV[2])
  end
  local token = redis.call('incr', KEYS[2])
  redis.call('hset', KEYS[1], ARGV[2], 1)
  redis.call('pexpire', KEYS[1], ARGV[1])
  return {-1, token, redis.call('lindex', KEYS[3], 0) or ''}
end
if ARGV[3] ~= '0' then
  if redis.call('exists', entry(ARGV[2])) == 0 then
    redis.call('lrem', KEYS[3], 0, ARGV[2])
    redis.call('rpush', KEYS[3], ARGV[2])
  end
  redis.call('set', entry(ARGV[2]), ARGV[4], 'px', ARGV[3])
  redis.call('pexpire', KEYS[3], ARGV[3])
  head = redis.call('lindex', KEYS[3], 0)
end
local wait, free = redis.call('pttl', KEYS[1]), 0
if wait == -2 and head then
  wait, free = redis.call('pttl', entry(head)), 1
end
return {wait, free, head or ''}`)

// mutexUnlock releases the lock its holder has entered once. When a live
// waiter is first in line, the lock passes to it in the same step, with a
// new token and the lease the waiter asked for (short when it renews at
// once), and "<waiter> <wait id> <token>" goes to the Mutex's hand-over channel: the hand-off is
// one write, and the lock is never free for anyone to overtake the line
// (Redisson's waiters are owed no message: for them the lock stayed taken).
// The wait id, which the waiter chose for this wait, keeps a message that
// comes late from being taken for a hand-over in a later wait.
// Otherwise it wakes the waiters with RedissonLock's unlock message. KEYS
// lock, channel, token counter, queue, queue entry prefix, hand-over
// channel; ARGV holder id. 1 when released, 0 when the holder did not hold
// it.
var mutexUnlock = newScript(`if redis.call('hexists', KEYS[1], ARGV[1]) == 0 then
  return 0
end
redis.call('del', KEYS[1])
local head = redis.call('lpop', KEYS[4])
while head do
  local entry = redis.call('get', KEYS[5] .. ':' .. head)
  if entry then
    local lease, wait = string.match(entry, '^(%d+) (.*)$')
    redis.call('del', KEYS[5] .. ':' .. head)
    local token = redis.call('incr', KEYS[3])
    redis.call('hset', KEYS[1], head, 1)
    redis.call('pexpire', KEYS[1], lease)
    redis.call('publish', KEYS[6], head .. ' ' .. wait .. ' ' .. token)
    return 1
  end
  head = redis.call('lpop', KEYS[4])
end
redis.call('publish', KEYS[2], 0)
return 1`)

// mutexSetCount sets a holder's re-entry count and renews its lease: a
// re-entry or an unlock of one re-entry. The count is absolute, so a retry
// counts nothing twice. KEYS lock; ARGV lease ms, holder id, count. 1, or 0
// when the holder does not hold the lock.
var mutexSetCount = newScript(`if redis.call('hexists', KEYS[1], ARGV[2]) == 0 then
  return 0
end
redis.call('hset', KEYS[1], ARGV[2], ARGV[3])
redis.call('pexpire', KEYS[1], ARGV[1])
return 1`)

// mutexLeave takes a waiter that gives up out of the queue and releases the
// lock if an attempt whose reply it did not wait for took it; if the waiter
// was first in line and the lock is free, the next one is woken. KEYS lock,
// queue, queue entry prefix, channel; ARGV holder id.
var mutexLeave = newScript(`local first = redis.call('lindex', KEYS[2], 0) == ARGV[1]
redis.call('lrem', KEYS[2], 0, ARGV[1])
redis.call('del', KEYS[3] .. ':' .. ARGV[1])
if redis.call('hexists', KEYS[1], ARGV[1]) == 1 then
  redis.call('del', KEYS[1])
  first = true
end
if first and redis.call('exists', KEYS[1]) == 0 then
  redis.call('publish', KEYS[4], 0)
end
return 0`)

// Redisson's own scripts, byte for byte, so that their SHA1s are the ones
// Redisson loads (github.com/redisson/redisson, redisson/src/main/java/org/
// redisson/, at commit c5e0aee04746ba3b0e4c1dc49f20c6f308cd3f32, as
// compat_test/redisson_scripts_test.go transcribes them).

// renewLease is RedissonBaseLock.renewExpirationAsync of Redisson 3.x: KEYS
// lock; ARGV lease ms, holder id. 1 renewed, 0 not held.
var renewLease = newScript("if (redis.call('hexists', KEYS[1], ARGV[2]) == 1) then " +
	"redis.call('pexpire', KEYS[1], ARGV[1]); " +
	"return 1; " +
	"end; " +
	"return 0;")

// readAcquire is RedissonReadLock.tryLockInnerAsync: KEYS lock, the
// holder's lease-key prefix; ARGV lease ms, holder id, holder id:write. nil
// when taken, else the lease left.
var readAcquire = newScript("local mode = redis.call('hget', KEYS[1], 'mode'); " +
	"if (mode == false) then " +
	"redis.call('hset', KEYS[1], 'mode', 'read'); " +
	"redis.call('hset', KEYS[1], ARGV[2], 1); " +
	"redis.call('set', KEYS[2] .. ':1', 1); " +
	"redis.call('pexpire', KEYS[2] .. ':1', ARGV[1]); " +
	"redis.call('pexpire', KEYS[1], ARGV[1]); " +
	"return nil; " +
	"end; " +
	"if (mode == 'read') or (mode == 'write' and redis.call('hexists', KEYS[1], ARGV[3]) == 1) then " +
	"local ind = redis.call('hincrby', KEYS[1], ARGV[2], 1); " +
	"local key = KEYS[2] .. ':' .. ind;" +
	"redis.call('set', key, 1); " +
	"redis.call('pexpire', key, ARGV[1]); " +
	"local remainTime = redis.call('pttl', KEYS[1]); " +
	"redis.call('pexpire', KEYS[1], math.max(remainTime, ARGV[1])); " +
	"return nil; " +
	"end;" +
	"return redis.call('pttl', KEYS[1]);")

// readUnlock is RedissonReadLock.unlockInnerAsync: KEYS lock, channel,
// lease-key prefix, key prefix, unlock latch; ARGV unlock message (0),
// holder id, publish command, latch ms. 1 released, 0 still held (by this
// or another reader), nil not held.
var readUnlock = newScript("local val = redis.call('get', KEYS[5]); " +
	"if val ~= false then " +
	"return tonumber(val);" +
	"end; " +
	"local mode = redis.call('hget', KEYS[1], 'mode'); " +
	"if (mode == false) then " +
	"redis.call(ARGV[3], KEYS[2], ARGV[1]); " +
	"redis.call('set', KEYS[5], 1, 'px', ARGV[4]); " +
	"return nil; " +
	"end; " +
	"local lockExists = redis.call('hexists', KEYS[1], ARGV[2]); " +
	"if (lockExists == 0) then " +
	"return nil;" +
	"end; " +
	"local counter = redis.call('hincrby', KEYS[1], ARGV[2], -1); " +
	"if (counter == 0) then " +
	"redis.call('hdel', KEYS[1], ARGV[2]); " +
	"end;" +
	"redis.call('del', KEYS[3] .. ':' .. (counter+1)); " +
	"if (redis.call('hlen', KEYS[1]) > 1) then " +
	"local maxRemainTime = -3; " +
	"local keys = redis.call('hkeys', KEYS[1]); " +
	"for n, key in ipairs(keys) do " +
	"counter = tonumber(redis.call('hget', KEYS[1], key)); " +
	"if type(counter) == 'number' then " +
	"for i=counter, 1, -1 do " +
	"local remainTime = redis.call('pttl', KEYS[4] .. ':' .. key .. ':rwlock_timeout:' .. i); " +
	"maxRemainTime = math.max(remainTime, maxRemainTime);" +
	"end; " +
	"end; " +
	"end; " +
	"if maxRemainTime > 0 then " +
	"redis.call('pexpire', KEYS[1], maxRemainTime); " +
	"redis.call('set', KEYS[5], 0, 'px', ARGV[4]); " +
	"return 0; " +
	"end;" +
	"if mode == 'write' then " +
	"redis.call('set', KEYS[5], 0, 'px', ARGV[4]); " +
	"return 0;" +
	"end; " +
	"end; " +
	"redis.call('del', KEYS[1]); " +
	"redis.call(ARGV[3], KEYS[2], ARGV[1]); " +
	"redis.call('set', KEYS[5], 1, 'px', ARGV[4]); " +
	"return 1; ")

// readRenew is RedissonReadLock.renewExpirationAsync of Redisson 3.x: KEYS
// lock, key prefix; ARGV lease ms, holder id. It renews the hash and every
// reader's lease key.
var readRenew = newScript("local counter = redis.call('hget', KEYS[1], ARGV[2]); " +
	"if (counter ~= false) then " +
	"redis.call('pexpire', KEYS[1], ARGV[1]); " +
	"if (redis.call('hlen', KEYS[1]) > 1) then " +
	"local keys = redis.call('hkeys', KEYS[1]); " +
	"for n, key in ipairs(keys) do " +
	"counter = tonumber(redis.call('hget', KEYS[1], key)); " +
	"if type(counter) == 'number' then " +
	"for i=counter, 1, -1 do " +
	"redis.call('pexpire', KEYS[2] .. ':' .. key .. ':rwlock_timeout:' .. i, ARGV[1]); " +
	"end; " +
	"end; " +
	"end; " +
	"end; " +
	"return 1; " +
	"end; " +
	"return 0;")

// writeAcquire is RedissonWriteLock.tryLockInnerAsync: KEYS lock; ARGV
// lease ms, holder id:write.
var writeAcquire = newScript("local mode = redis.call('hget', KEYS[1], 'mode'); " +
	"if (mode == false) then " +
	"redis.call('hset', KEYS[1], 'mode', 'write'); " +
	"redis.call('hset', KEYS[1], ARGV[2], 1); " +
	"redis.call('pexpire', KEYS[1], ARGV[1]); " +
	"return nil; " +
	"end; " +
	"if (mode == 'write') then " +
	"if (redis.call('hexists', KEYS[1], ARGV[2]) == 1) then " +
	"redis.call('hincrby', KEYS[1], ARGV[2], 1); " +
	"local currentExpire = redis.call('pttl', KEYS[1]); " +
	"redis.call('pexpire', KEYS[1], currentExpire + ARGV[1]); " +
	"return nil; " +
	"end; " +
	"end;" +
	"return redis.call('pttl', KEYS[1]);")

// writeUnlock is RedissonWriteLock.unlockInnerAsync: KEYS lock, channel,
// unlock latch; ARGV read-unlock message (1), lease ms, holder id:write,
// publish command, latch ms.
var writeUnlock = newScript("local val = redis.call('get', KEYS[3]); " +
	"if val ~= false then " +
	"return tonumber(val);" +
	"end; " +
	"local mode = redis.call('hget', KEYS[1], 'mode'); " +
	"if (mode == false) then " +
	"redis.call(ARGV[4], KEYS[2], ARGV[1]); " +
	"redis.call('set', KEYS[3], 1, 'px', ARGV[5]); " +
	"return nil; " +
	"end;" +
	"if (mode == 'write') then " +
	"local lockExists = redis.call('hexists', KEYS[1], ARGV[3]); " +
	"if (lockExists == 0) then " +
	"return nil;" +
	"else " +
	"local counter = redis.call('hincrby', KEYS[1], ARGV[3], -1); " +
	"if (counter > 0) then " +
	"redis.call('pexpire', KEYS[1], ARGV[2]); " +
	"redis.call('set', KEYS[3], 0, 'px', ARGV[5]); " +
	"return 0; " +
	"else " +
	"redis.call('hdel', KEYS[1], ARGV[3]); " +
	"if (redis.call('hlen', KEYS[1]) == 1) then " +
	"redis.call('del', KEYS[1]); " +
	"redis.call(ARGV[4], KEYS[2], ARGV[1]); " +
	"else " +
	"redis.call('hset', KEYS[1], 'mode', 'read'); " +
	"end; " +
	"redis.call('set', KEYS[3], 1, 'px', ARGV[5]); " +
	"return 1; " +
	"end; " +
	"end; " +
	"end; " +
	"return nil;")

// semAcquire is RedissonSemaphore.tryAcquireAsync0: KEYS semaphore; ARGV
// permits. 1 taken, 0 not.
var semAcquire = newScript("local value = redis.call('get', KEYS[1]); " +
	"if (value ~= false and tonumber(value) >= tonumber(ARGV[1])) then " +
	"local val = redis.call('decrby', KEYS[1], ARGV[1]); " +
	"return 1; " +
	"end; " +
	"return 0;")

// semRelease is RedissonSemaphore.releaseAsync: KEYS semaphore, channel;
// ARGV permits, publish command. It publishes the new count.
var semRelease = newScript("local value = redis.call('incrby', KEYS[1], ARGV[1]); " +
	"redis.call(ARGV[2], KEYS[2], value); ")

// semTrySetPermits is RedissonSemaphore.trySetPermitsAsync: KEYS semaphore,
// channel; ARGV permits, publish command. 1 when set, 0 when it had a count.
var semTrySetPermits = newScript("local value = redis.call('get', KEYS[1]); " +
	"if (value == false) then " +
	"redis.call('set', KEYS[1], ARGV[1]); " +
	"redis.call(ARGV[2], KEYS[2], ARGV[1]); " +
	"return 1;" +
	"end;" +
	"return 0;")

// semAddPermits is RedissonSemaphore.addPermitsAsync: KEYS semaphore,
// channel; ARGV permits (may be negative), publish command.
var semAddPermits = newScript("local value = redis.call('get', KEYS[1]); " +
	"if (value == false) then " +
	"value = 0;" +
	"end;" +
	"redis.call('set', KEYS[1], value + ARGV[1]); " +
	"redis.call(ARGV[2], KEYS[2], value + ARGV[1]); ")

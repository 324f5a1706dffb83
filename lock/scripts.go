package lock

import (
	"crypto/sha1"
	"encoding/hex"

	"github.com/lockserver/lockserver/internal/redisson"
)

// A script is a Lua script and the SHA1 that EVALSHA names it by.
type script struct {
	src, sha string
}

func newScript(src string) *script {
	sum := sha1.Sum([]byte(src))
	return &script{src: src, sha: hex.EncodeToString(sum[:])}
}

// The Mutex's scripts. The lock is RedissonLock's hash (one field, the
// holder's id, whose value is its re-entry count) with RedissonFencedLock's
// token counter beside it; the unlock message is RedissonLock's. A token is
// the counter plus the server's epoch times 2^40 (redis.LOCKSERVER_EPOCH,
// which a lockserver raises at each restore from a backup or recovery, and
// which redis-server does not have). The wait
// queue is the Mutex's own: Redisson's clients do not read it, and it makes
// Go waiters take turns.

// mutexAcquire takes the lock when it is free and no live waiter is ahead
// of the caller, counting a new token. KEYS lock, token counter, queue,
// queue entry prefix; ARGV lease ms, holder id, queue entry lease ms (0: do
// not queue, as TryLock), "<lease ms> <wait id>" for a lock handed over to
// it (kept in its queue entry). {-1, token, next waiter or ""} when taken; else
// {ms to wait, 0, first waiter or ""} with the lock's lease left, or, while
// the lock is free but it is another waiter's turn, {that waiter's entry's
// lease left, 1, that waiter}. A holder that finds its own id in the hash
// (an unlock handed it the lock, or its earlier attempt took it and the
// reply was lost) has the grant it finds, with that grant's token: the
// counter, which no one else can have counted since, as they would have had
// to take the lock. So the script may be retried.
var mutexAcquire = newScript(`local function entry(id) return KEYS[4] .. ':' .. id end
local head = redis.call('lindex', KEYS[3], 0)
while head and redis.call('exists', entry(head)) == 0 do
  redis.call('lpop', KEYS[3])
  head = redis.call('lindex', KEYS[3], 0)
end
local held = redis.call('hexists', KEYS[1], ARGV[2]) == 1
if held or (redis.call('exists', KEYS[1]) == 0 and (not head or head == ARGV[2])) then
  if redis.call('del', entry(ARGV[2])) == 1 then
    redis.call('lrem', KEYS[3], 1, ARGV[2])
  end
  local n = held and tonumber(redis.call('get', KEYS[2]) or '')
  if not n then
    n = redis.call('incr', KEYS[2])
  end
  local token = n + (redis.LOCKSERVER_EPOCH or 0) * 1099511627776
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
    local token = redis.call('incr', KEYS[3]) + (redis.LOCKSERVER_EPOCH or 0) * 1099511627776
    redis.call('hset', KEYS[1], head, 1)
    redis.call('pexpire', KEYS[1], lease)
    redis.call('publish', KEYS[6], head .. ' ' .. wait .. ' ' .. string.format('%d', token))
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
// Redisson loads; internal/redisson documents each with its KEYS and ARGV.
var (
	// renewLease renews a Mutex's lease, and a write lock's, as Redisson
	// 3.x's watchdog does. 1 renewed, 0 not held.
	renewLease = newScript(redisson.BaseLockRenew2021)

	readAcquire  = newScript(redisson.ReadTryLock)
	readUnlock   = newScript(redisson.ReadUnlock)
	readRenew    = newScript(redisson.ReadLockRenew2019)
	writeAcquire = newScript(redisson.WriteTryLock)
	writeUnlock  = newScript(redisson.WriteUnlock)

	semAcquire       = newScript(redisson.SemTryAcquire)
	semRelease       = newScript(redisson.SemRelease)
	semTrySetPermits = newScript(redisson.SemTrySetPermits)
	semAddPermits    = newScript(redisson.SemAddPermits)
)

package redisson

// The Lua scripts Redisson sends, transcribed byte for byte from
// github.com/redisson/redisson, redisson/src/main/java/org/redisson/, at
// commit c5e0aee04746ba3b0e4c1dc49f20c6f308cd3f32 (2026) unless a comment
// names an older one. Each is the exact string Redisson's Java concatenation
// produces, so its SHA1 is the one Redisson's EVALSHA sends; the pieces
// follow the Java source's line breaks. Each comment names the file and the
// method, and the KEYS and ARGV Redisson passes. The lock package sends some
// of them; the compat tests send all of them to redis-server and lockserver
// and compare the replies.

// RedissonLock

// RLockTryLock is RedissonLock.tryLockInnerAsync: KEYS[1] lock; ARGV lease ms,
// uuid:threadId. nil when acquired or re-entered, else the holder's PTTL.
const RLockTryLock = "if ((redis.call('exists', KEYS[1]) == 0) " +
	"or (redis.call('hexists', KEYS[1], ARGV[2]) == 1)) then " +
	"redis.call('hincrby', KEYS[1], ARGV[2], 1); " +
	"redis.call('pexpire', KEYS[1], ARGV[1]); " +
	"return nil; " +
	"end; " +
	"return redis.call('pttl', KEYS[1]);"

// RLockUnlock is RedissonLock.unlockInnerAsync: KEYS lock, channel, unlock
// latch; ARGV UNLOCK_MESSAGE (0), lease ms, uuid:threadId, publish command,
// latch ms. The latch makes a retried unlock return the first outcome again.
const RLockUnlock = "local val = redis.call('get', KEYS[3]); " +
	"if val ~= false then " +
	"return tonumber(val);" +
	"end; " +
	"if (redis.call('hexists', KEYS[1], ARGV[3]) == 0) then " +
	"return nil;" +
	"end; " +
	"local counter = redis.call('hincrby', KEYS[1], ARGV[3], -1); " +
	"if (counter > 0) then " +
	"redis.call('pexpire', KEYS[1], ARGV[2]); " +
	"redis.call('set', KEYS[3], 0, 'px', ARGV[5]); " +
	"return 0; " +
	"else " +
	"redis.call('del', KEYS[1]); " +
	"redis.call(ARGV[4], KEYS[2], ARGV[1]); " +
	"redis.call('set', KEYS[3], 1, 'px', ARGV[5]); " +
	"return 1; " +
	"end; "

// RLockForceUnlock is RedissonLock.forceUnlockAsync: KEYS lock, channel; ARGV
// UNLOCK_MESSAGE, publish command.
const RLockForceUnlock = "if (redis.call('del', KEYS[1]) == 1) then " +
	"redis.call(ARGV[2], KEYS[2], ARGV[1]); " +
	"return 1 " +
	"else " +
	"return 0 " +
	"end"

// LockTaskRenew is renewal/LockTask.buildChunk, the watchdog today: one script
// renews a chunk of locks. KEYS locks; ARGV lease ms, then uuid:threadId per
// lock.
const LockTaskRenew = "local result = {} " +
	"for i = 1, #KEYS, 1 do " +
	"if (redis.call('hexists', KEYS[i], ARGV[i + 1]) == 1) then " +
	"redis.call('pexpire', KEYS[i], ARGV[1]); " +
	"table.insert(result, 1); " +
	"else " +
	"table.insert(result, 0); " +
	"end; " +
	"end; " +
	"return result;"

// BaseLockRenew2021 is RedissonBaseLock.renewExpirationAsync at commit
// 28f5d195379b3cb42c225f3a41dfa0d0cb47626c (2021), the watchdog of Redisson
// 3.x still in wide use: KEYS lock; ARGV lease ms, uuid:threadId. 1
// renewed, 0 not held.
const BaseLockRenew2021 = "if (redis.call('hexists', KEYS[1], ARGV[2]) == 1) then " +
	"redis.call('pexpire', KEYS[1], ARGV[1]); " +
	"return 1; " +
	"end; " +
	"return 0;"

// RedissonFencedLock

// FencedTryLockToken is RedissonFencedLock.tryLockInnerAsync(leaseTime, unit,
// threadId): KEYS lock, token counter; ARGV lease ms, uuid:threadId. {-1,
// token} when acquired, else {pttl, -1}.
const FencedTryLockToken = "if (redis.call('exists', KEYS[1]) == 0 " +
	"or (redis.call('hexists', KEYS[1], ARGV[2]) == 1)) then " +
	"local token = redis.call('incr', KEYS[2]);" +
	"redis.call('hincrby', KEYS[1], ARGV[2], 1); " +
	"redis.call('pexpire', KEYS[1], ARGV[1]); " +
	"return {-1, token}; " +
	"end; " +
	"return {redis.call('pttl', KEYS[1]), -1};"

// FencedTryLock is RedissonFencedLock.tryLockInnerAsync(waitTime, leaseTime,
// unit, threadId, command), the RLock override: as RLockTryLock, counting the
// token too.
const FencedTryLock = "if ((redis.call('exists', KEYS[1]) == 0) " +
	"or (redis.call('hexists', KEYS[1], ARGV[2]) == 1)) then " +
	"redis.call('incr', KEYS[2]);" +
	"redis.call('hincrby', KEYS[1], ARGV[2], 1); " +
	"redis.call('pexpire', KEYS[1], ARGV[1]); " +
	"return nil; " +
	"end; " +
	"return redis.call('pttl', KEYS[1]);"

// RedissonSpinLock

// SpinTryLock is RedissonSpinLock.tryLockInnerAsync: KEYS lock; ARGV lease ms,
// uuid:threadId.
const SpinTryLock = "if (redis.call('exists', KEYS[1]) == 0) then " +
	"redis.call('hincrby', KEYS[1], ARGV[2], 1); " +
	"redis.call('pexpire', KEYS[1], ARGV[1]); " +
	"return nil; " +
	"end; " +
	"if (redis.call('hexists', KEYS[1], ARGV[2]) == 1) then " +
	"redis.call('hincrby', KEYS[1], ARGV[2], 1); " +
	"redis.call('pexpire', KEYS[1], ARGV[1]); " +
	"return nil; " +
	"end; " +
	"return redis.call('pttl', KEYS[1]);"

// SpinUnlock is RedissonSpinLock.unlockInnerAsync: KEYS lock, unlock latch;
// ARGV lease ms, uuid:threadId, latch ms. No message: spinning waiters poll.
const SpinUnlock = "local val = redis.call('get', KEYS[2]); " +
	"if val ~= false then " +
	"return tonumber(val);" +
	"end; " +
	"if (redis.call('hexists', KEYS[1], ARGV[2]) == 0) then " +
	"return nil;" +
	"end; " +
	"local counter = redis.call('hincrby', KEYS[1], ARGV[2], -1); " +
	"if (counter > 0) then " +
	"redis.call('pexpire', KEYS[1], ARGV[1]); " +
	"redis.call('set', KEYS[2], 0, 'px', ARGV[3]); " +
	"return 0; " +
	"else " +
	"redis.call('del', KEYS[1]); " +
	"redis.call('set', KEYS[2], 1, 'px', ARGV[3]); " +
	"return 1; " +
	"end; "

// SpinForceUnlock is RedissonSpinLock.forceUnlockAsync: KEYS lock.
const SpinForceUnlock = "if (redis.call('del', KEYS[1]) == 1) then " +
	"return 1 " +
	"else " +
	"return 0 " +
	"end"

// RedissonFairLock: KEYS lock, redisson_lock_queue:{lock} (a list of waiting
// uuid:threadId), redisson_lock_timeout:{lock} (a sorted set of their
// deadlines); the client's clock comes in ARGV.

// FairTryLockNow is RedissonFairLock.tryLockInnerAsync with EVAL_NULL_BOOLEAN
// (tryLock without waiting): ARGV lease ms, uuid:threadId, now ms, thread wait
// ms. nil when acquired, 1 when not.
const FairTryLockNow = "while true do " +
	"local firstThreadId2 = redis.call('lindex', KEYS[2], 0);" +
	"if firstThreadId2 == false then " +
	"break;" +
	"end;" +
	"local timeout = redis.call('zscore', KEYS[3], firstThreadId2);" +
	"if timeout ~= false and tonumber(timeout) <= tonumber(ARGV[3]) then " +
	"redis.call('zrem', KEYS[3], firstThreadId2);" +
	"redis.call('lpop', KEYS[2]);" +
	"else " +
	"break;" +
	"end;" +
	"end;" +
	"if (redis.call('exists', KEYS[1]) == 0) " +
	"and ((redis.call('exists', KEYS[2]) == 0) " +
	"or (redis.call('lindex', KEYS[2], 0) == ARGV[2])) then " +
	"redis.call('lpop', KEYS[2]);" +
	"redis.call('zrem', KEYS[3], ARGV[2]);" +
	"local keys = redis.call('zrange', KEYS[3], 0, -1);" +
	"for i = 1, #keys, 1 do " +
	"redis.call('zincrby', KEYS[3], -tonumber(ARGV[4]), keys[i]);" +
	"end;" +
	"redis.call('hset', KEYS[1], ARGV[2], 1);" +
	"redis.call('pexpire', KEYS[1], ARGV[1]);" +
	"return nil;" +
	"end;" +
	"if (redis.call('hexists', KEYS[1], ARGV[2]) == 1) then " +
	"redis.call('hincrby', KEYS[1], ARGV[2], 1);" +
	"redis.call('pexpire', KEYS[1], ARGV[1]);" +
	"return nil;" +
	"end;" +
	"return 1;"

// FairTryLock is RedissonFairLock.tryLockInnerAsync with EVAL_LONG (lock,
// tryLock with a wait): ARGV lease ms, uuid:threadId, thread wait ms, now ms.
// nil when acquired; else the thread joins the queue and gets a TTL to wait.
const FairTryLock = "while true do " +
	"local firstThreadId2 = redis.call('lindex', KEYS[2], 0);" +
	"if firstThreadId2 == false then " +
	"break;" +
	"end;" +
	"local timeout = redis.call('zscore', KEYS[3], firstThreadId2);" +
	"if timeout ~= false and tonumber(timeout) <= tonumber(ARGV[4]) then " +
	"redis.call('zrem', KEYS[3], firstThreadId2);" +
	"redis.call('lpop', KEYS[2]);" +
	"else " +
	"break;" +
	"end;" +
	"end;" +
	"if (redis.call('exists', KEYS[1]) == 0) " +
	"and ((redis.call('exists', KEYS[2]) == 0) " +
	"or (redis.call('lindex', KEYS[2], 0) == ARGV[2])) then " +
	"redis.call('lpop', KEYS[2]);" +
	"redis.call('zrem', KEYS[3], ARGV[2]);" +
	"local keys = redis.call('zrange', KEYS[3], 0, -1);" +
	"for i = 1, #keys, 1 do " +
	"redis.call('zincrby', KEYS[3], -tonumber(ARGV[3]), keys[i]);" +
	"end;" +
	"redis.call('hset', KEYS[1], ARGV[2], 1);" +
	"redis.call('pexpire', KEYS[1], ARGV[1]);" +
	"return nil;" +
	"end;" +
	"if redis.call('hexists', KEYS[1], ARGV[2]) == 1 then " +
	"redis.call('hincrby', KEYS[1], ARGV[2],1);" +
	"redis.call('pexpire', KEYS[1], ARGV[1]);" +
	"return nil;" +
	"end;" +
	"local timeout = redis.call('zscore', KEYS[3], ARGV[2]);" +
	"if timeout ~= false then " +
	"local ttl = redis.call('pttl', KEYS[1]);" +
	"return math.max(0, ttl); " +
	"end;" +
	"local lastThreadId = redis.call('lindex', KEYS[2], -1);" +
	"local ttl;" +
	"if lastThreadId ~= false and lastThreadId ~= ARGV[2] and redis.call('zscore', KEYS[3], lastThreadId) ~= false then " +
	"ttl = tonumber(redis.call('zscore', KEYS[3], lastThreadId)) - tonumber(ARGV[4]);" +
	"else " +
	"ttl = redis.call('pttl', KEYS[1]);" +
	"end;" +
	"local timeout = ttl + tonumber(ARGV[3]) + tonumber(ARGV[4]);" +
	"if redis.call('zadd', KEYS[3], timeout, ARGV[2]) == 1 then " +
	"redis.call('rpush', KEYS[2], ARGV[2]);" +
	"end;" +
	"return ttl;"

// FairAcquireFailed is RedissonFairLock.acquireFailedAsync: a waiter that
// gives up leaves the queue and shortens the deadlines behind it. KEYS queue,
// timeouts; ARGV uuid:threadId, thread wait ms.
const FairAcquireFailed = "local queue = redis.call('lrange', KEYS[1], 0, -1);" +
	"local i = 1;" +
	"while i <= #queue and queue[i] ~= ARGV[1] do " +
	"i = i + 1;" +
	"end;" +
	"i = i + 1;" +
	"while i <= #queue do " +
	"redis.call('zincrby', KEYS[2], -tonumber(ARGV[2]), queue[i]);" +
	"i = i + 1;" +
	"end;" +
	"redis.call('zrem', KEYS[2], ARGV[1]);" +
	"redis.call('lrem', KEYS[1], 0, ARGV[1]);"

// FairUnlock is RedissonFairLock.unlockInnerAsync: KEYS lock, queue, timeouts,
// channel, unlock latch; ARGV UNLOCK_MESSAGE, lease ms, uuid:threadId, now ms,
// publish command, latch ms. The message goes to the next waiter's own
// channel, channel:uuid:threadId.
const FairUnlock = "local val = redis.call('get', KEYS[5]); " +
	"if val ~= false then " +
	"return tonumber(val);" +
	"end; " +
	"while true do " +
	"local firstThreadId2 = redis.call('lindex', KEYS[2], 0);" +
	"if firstThreadId2 == false then " +
	"break;" +
	"end; " +
	"local timeout = redis.call('zscore', KEYS[3], firstThreadId2);" +
	"if timeout ~= false and tonumber(timeout) <= tonumber(ARGV[4]) then " +
	"redis.call('zrem', KEYS[3], firstThreadId2); " +
	"redis.call('lpop', KEYS[2]); " +
	"else " +
	"break;" +
	"end; " +
	"end;" +
	"if (redis.call('exists', KEYS[1]) == 0) then " +
	"local nextThreadId = redis.call('lindex', KEYS[2], 0); " +
	"if nextThreadId ~= false then " +
	"redis.call(ARGV[5], KEYS[4] .. ':' .. nextThreadId, ARGV[1]); " +
	"end; " +
	"redis.call('set', KEYS[5], 1, 'px', ARGV[6]); " +
	"return 1; " +
	"end;" +
	"if (redis.call('hexists', KEYS[1], ARGV[3]) == 0) then " +
	"return nil;" +
	"end; " +
	"local counter = redis.call('hincrby', KEYS[1], ARGV[3], -1); " +
	"if (counter > 0) then " +
	"redis.call('pexpire', KEYS[1], ARGV[2]); " +
	"redis.call('set', KEYS[5], 0, 'px', ARGV[6]); " +
	"return 0; " +
	"end; " +
	"redis.call('del', KEYS[1]); " +
	"redis.call('set', KEYS[5], 1, 'px', ARGV[6]); " +
	"local nextThreadId = redis.call('lindex', KEYS[2], 0); " +
	"if nextThreadId ~= false then " +
	"redis.call(ARGV[5], KEYS[4] .. ':' .. nextThreadId, ARGV[1]); " +
	"end; " +
	"return 1; "

// FairForceUnlock is RedissonFairLock.forceUnlockAsync: KEYS lock, queue,
// timeouts, channel; ARGV UNLOCK_MESSAGE, now ms, publish command.
const FairForceUnlock = "while true do " +
	"local firstThreadId2 = redis.call('lindex', KEYS[2], 0);" +
	"if firstThreadId2 == false then " +
	"break;" +
	"end; " +
	"local timeout = redis.call('zscore', KEYS[3], firstThreadId2);" +
	"if timeout ~= false and tonumber(timeout) <= tonumber(ARGV[2]) then " +
	"redis.call('zrem', KEYS[3], firstThreadId2); " +
	"redis.call('lpop', KEYS[2]); " +
	"else " +
	"break;" +
	"end; " +
	"end;" +
	"if (redis.call('del', KEYS[1]) == 1) then " +
	"local nextThreadId = redis.call('lindex', KEYS[2], 0); " +
	"if nextThreadId ~= false then " +
	"redis.call(ARGV[3], KEYS[4] .. ':' .. nextThreadId, ARGV[1]); " +
	"end; " +
	"return 1; " +
	"end; " +
	"return 0;"

// RedissonReadLock and RedissonWriteLock share one hash: field mode (read or
// write) and a re-entry count per holder; each read entry also has its own
// key {lock}:uuid:threadId:rwlock_timeout:n with the lease.

// ReadTryLock is RedissonReadLock.tryLockInnerAsync: KEYS lock,
// {lock}:uuid:threadId:rwlock_timeout; ARGV lease ms, uuid:threadId,
// uuid:threadId:write. nil when taken, else the lease left.
const ReadTryLock = "local mode = redis.call('hget', KEYS[1], 'mode'); " +
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
	"return redis.call('pttl', KEYS[1]);"

// ReadUnlock is RedissonReadLock.unlockInnerAsync: KEYS lock, channel, timeout
// prefix, key prefix ({lock}), unlock latch; ARGV UNLOCK_MESSAGE,
// uuid:threadId, publish command, latch ms. 1 released, 0 still held (by
// this or another reader), nil not held.
const ReadUnlock = "local val = redis.call('get', KEYS[5]); " +
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
	"return 1; "

// ReadForceUnlock is RedissonReadLock.forceUnlockAsync: KEYS lock, channel;
// ARGV UNLOCK_MESSAGE, publish command.
const ReadForceUnlock = "if (redis.call('hget', KEYS[1], 'mode') == 'read') then " +
	"redis.call('del', KEYS[1]); " +
	"redis.call(ARGV[2], KEYS[2], ARGV[1]); " +
	"return 1; " +
	"end; " +
	"return 0; "

// ReadIsLocked is RedissonReadLock.isLocked: KEYS lock.
const ReadIsLocked = "local mode = redis.call('hget', KEYS[1], 'mode'); " +
	"if (mode == 'read') or (mode == 'write' and redis.call('hlen', KEYS[1]) > 2) then " +
	"return 1; " +
	"end; " +
	"return 0; "

// ReadLockTaskRenew is renewal/ReadLockTask.buildChunk, the read-lock
// watchdog: KEYS pairs of lock and key prefix; ARGV lease ms, then
// uuid:threadId per lock.
const ReadLockTaskRenew = "local result = {} " +
	"local j = 1 " +
	"for i = 1, #KEYS, 2 do " +
	"j = j + 1; " +
	"local counter = redis.call('hget', KEYS[i], ARGV[j]); " +
	"if (counter ~= false) then " +
	"redis.call('pexpire', KEYS[i], ARGV[1]); " +
	"if (redis.call('hlen', KEYS[i]) > 1) then " +
	"local keys = redis.call('hkeys', KEYS[i]); " +
	"for n, key in ipairs(keys) do " +
	"counter = tonumber(redis.call('hget', KEYS[i], key)); " +
	"if type(counter) == 'number' then " +
	"for c=counter, 1, -1 do " +
	"redis.call('pexpire', KEYS[i+1] .. ':' .. key .. ':rwlock_timeout:' .. c, ARGV[1]); " +
	"end; " +
	"end; " +
	"end; " +
	"end; " +
	"table.insert(result, 1); " +
	"else " +
	"table.insert(result, 0); " +
	"end; " +
	"end; " +
	"return result;"

// ReadLockRenew2019 is RedissonReadLock.renewExpirationAsync at commit
// 4339c99bd6244a1168d16a7802567544b84010e1 (2019), the Redisson 3.x read-lock
// watchdog: KEYS lock, key prefix; ARGV lease ms, uuid:threadId. It renews
// the hash and every reader's lease key.
const ReadLockRenew2019 = "local counter = redis.call('hget', KEYS[1], ARGV[2]); " +
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
	"return 0;"

// WriteTryLock is RedissonWriteLock.tryLockInnerAsync: KEYS lock; ARGV lease
// ms, uuid:threadId:write. A re-entry adds the lease to what is left.
const WriteTryLock = "local mode = redis.call('hget', KEYS[1], 'mode'); " +
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
	"return redis.call('pttl', KEYS[1]);"

// WriteUnlock is RedissonWriteLock.unlockInnerAsync: KEYS lock, channel,
// unlock latch; ARGV READ_UNLOCK_MESSAGE (1), lease ms, uuid:threadId:write,
// publish command, latch ms. A writer that also holds read entries leaves the
// lock in read mode.
const WriteUnlock = "local val = redis.call('get', KEYS[3]); " +
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
	"return nil;"

// WriteForceUnlock is RedissonWriteLock.forceUnlockAsync: KEYS lock, channel;
// ARGV READ_UNLOCK_MESSAGE, publish command.
const WriteForceUnlock = "if (redis.call('hget', KEYS[1], 'mode') == 'write') then " +
	"redis.call('del', KEYS[1]); " +
	"redis.call(ARGV[2], KEYS[2], ARGV[1]); " +
	"return 1; " +
	"end; " +
	"return 0; "

// RedissonSemaphore: KEYS[1] holds the free permits as an integer string.

// SemTryAcquire is RedissonSemaphore.tryAcquireAsync0: KEYS semaphore; ARGV
// permits. 1 taken, 0 not.
const SemTryAcquire = "local value = redis.call('get', KEYS[1]); " +
	"if (value ~= false and tonumber(value) >= tonumber(ARGV[1])) then " +
	"local val = redis.call('decrby', KEYS[1], ARGV[1]); " +
	"return 1; " +
	"end; " +
	"return 0;"

// SemRelease is RedissonSemaphore.releaseAsync: KEYS semaphore, channel; ARGV
// permits, publish command. Publishes the new count.
const SemRelease = "local value = redis.call('incrby', KEYS[1], ARGV[1]); " +
	"redis.call(ARGV[2], KEYS[2], value); "

// SemReleaseIfExists is RedissonSemaphore.releaseIfExistsAsync: as SemRelease,
// only if it exists.
const SemReleaseIfExists = "if redis.call('exists', KEYS[1]) == 0 then " +
	"return 0 " +
	"end " +
	"local value = redis.call('incrby', KEYS[1], ARGV[1]) " +
	"redis.call(ARGV[2], KEYS[2], value) " +
	"return 1 "

// SemDrain is RedissonSemaphore.drainPermitsAsync: KEYS semaphore.
const SemDrain = "local value = redis.call('get', KEYS[1]); " +
	"if (value == false) then " +
	"return 0; " +
	"end; " +
	"redis.call('set', KEYS[1], 0); " +
	"return value;"

// SemTrySetPermits is RedissonSemaphore.trySetPermitsAsync(permits), and the
// same text in RedissonPermitExpirableSemaphore.trySetPermitsAsync: KEYS
// semaphore, channel; ARGV permits, publish command. 1 when set, 0 when it
// had a count.
const SemTrySetPermits = "local value = redis.call('get', KEYS[1]); " +
	"if (value == false) then " +
	"redis.call('set', KEYS[1], ARGV[1]); " +
	"redis.call(ARGV[2], KEYS[2], ARGV[1]); " +
	"return 1;" +
	"end;" +
	"return 0;"

// SemTrySetPermitsTTL is RedissonSemaphore.trySetPermitsAsync(permits,
// timeToLive): ARGV permits, publish command, ttl ms.
const SemTrySetPermitsTTL = "local value = redis.call('get', KEYS[1]); " +
	"if (value == false) then " +
	"redis.call('set', KEYS[1], ARGV[1], 'px', ARGV[3]); " +
	"redis.call(ARGV[2], KEYS[2], ARGV[1]); " +
	"return 1;" +
	"end;" +
	"return 0;"

// SemAddPermits is RedissonSemaphore.addPermitsAsync: ARGV permits (may be
// negative), publish command. Adds a string to a string, as Lua 5.1 allows.
const SemAddPermits = "local value = redis.call('get', KEYS[1]); " +
	"if (value == false) then " +
	"value = 0;" +
	"end;" +
	"redis.call('set', KEYS[1], value + ARGV[1]); " +
	"redis.call(ARGV[2], KEYS[2], value + ARGV[1]); "

// RedissonPermitExpirableSemaphore: KEYS semaphore, {semaphore}:timeout (a
// sorted set of permit ids, 16 random bytes each, scored by the epoch ms at
// which they expire; 922337203685477 for never), channel.

// pesExpire is how each of its scripts opens: permits whose lease ended by
// ARGV[now] go back to the semaphore, and waiters hear the new count.
func pesExpire(now, publish, limit string) string {
	return "local expiredIds = redis.call('zrangebyscore', KEYS[2], 0, " + now + ", 'limit', 0, " + limit + "); " +
		"if #expiredIds > 0 then " +
		"redis.call('zrem', KEYS[2], unpack(expiredIds)); " +
		"local value = redis.call('incrby', KEYS[1], #expiredIds); " +
		"if tonumber(value) > 0 then " +
		"redis.call(" + publish + ", KEYS[3], value); " +
		"end;"
}

// PESTryAcquire is RedissonPermitExpirableSemaphore.tryAcquireAsync(ids,
// timeoutDate): ARGV permits, expiry epoch ms, now ms, the never-expires
// score, publish command, then the permit ids. 'OK', or ':' and the earliest
// expiry among the permits held, or nil.
var PESTryAcquire = pesExpire("ARGV[3]", "ARGV[5]", "ARGV[1]") +
	"end; " +
	"local value = redis.call('get', KEYS[1]); " +
	"if (value ~= false and tonumber(value) >= tonumber(ARGV[1])) then " +
	"redis.call('decrby', KEYS[1], ARGV[1]); " +
	"for i = 6, #ARGV, 1 do " +
	"redis.call('zadd', KEYS[2], ARGV[2], ARGV[i]); " +
	"end; " +
	"local ttl = redis.call('pttl', KEYS[1]); " +
	"if ttl > 0 then " +
	"redis.call('pexpire', KEYS[2], ttl); " +
	"end; " +
	"return 'OK'; " +
	"end; " +
	"local v = redis.call('zrange', KEYS[2], 0, 0, 'WITHSCORES'); " +
	"if v[1] ~= nil and v[2] ~= ARGV[4] then " +
	"return ':' .. tostring(v[2]); " +
	"end " +
	"return nil;"

// PESTryRelease is RedissonPermitExpirableSemaphore.tryReleaseAsync(permitId):
// KEYS semaphore, channel, timeouts; ARGV permit id, 1, now ms, publish
// command.
const PESTryRelease = "local expire = redis.call('zscore', KEYS[3], ARGV[1]);" +
	"local removed = redis.call('zrem', KEYS[3], ARGV[1]);" +
	"if tonumber(removed) ~= 1 then " +
	"return 0;" +
	"end;" +
	"local value = redis.call('incrby', KEYS[1], ARGV[2]); " +
	"redis.call(ARGV[4], KEYS[2], value); " +
	"if tonumber(expire) <= tonumber(ARGV[3]) then " +
	"return 0;" +
	"end;" +
	"return 1;"

// PESTryReleaseIDs is
// RedissonPermitExpirableSemaphore.tryReleaseAsync(permitsIds): KEYS
// semaphore, channel, timeouts; ARGV count, now ms, publish command, ids.
const PESTryReleaseIDs = "for i = 4, #ARGV, 1 do " +
	"local expire = redis.call('zscore', KEYS[3], ARGV[i]);" +
	"if expire== false or tonumber(expire) <= tonumber(ARGV[2]) then " +
	"return 0;" +
	"end; " +
	"end; " +
	"local expiredIds = redis.call('zrangebyscore', KEYS[3], 0, ARGV[2], 'limit', 0, -1); " +
	"if #expiredIds > 0 then " +
	"redis.call('zrem', KEYS[3], unpack(expiredIds)); " +
	"local value = redis.call('incrby', KEYS[1], #expiredIds); " +
	"if tonumber(value) > 0 then " +
	"redis.call(ARGV[3], KEYS[2], value); " +
	"end; " +
	"end; " +
	"local keys = {}; " +
	"for i = 4, #ARGV, 1 do " +
	"table.insert(keys, ARGV[i]); " +
	"end; " +
	"local removed = redis.call('zrem', KEYS[3], unpack(keys)); " +
	"redis.call('incrby', KEYS[1], removed); " +
	"redis.call(ARGV[3], KEYS[2], removed); " +
	"return removed;"

// PESAvailable is RedissonPermitExpirableSemaphore.availablePermitsAsync: KEYS
// semaphore, timeouts, channel; ARGV now ms, publish command.
var PESAvailable = pesExpire("ARGV[1]", "ARGV[2]", "-1") +
	"return value; " +
	"end; " +
	"local ret = redis.call('get', KEYS[1]); " +
	"return ret == false and 0 or ret;"

// PESGetPermits is RedissonPermitExpirableSemaphore.getPermitsAsync: free plus
// held permits.
var PESGetPermits = pesExpire("ARGV[1]", "ARGV[2]", "-1") +
	"end; " +
	"local available = redis.call('get', KEYS[1]); " +
	"if available == false then " +
	"return 0 " +
	"end;" +
	"local acquired = redis.call('zcount', KEYS[2], 0, '+inf'); " +
	"if acquired == false then " +
	"return tonumber(available) " +
	"end;" +
	"return tonumber(available) + acquired;"

// PESAcquired is RedissonPermitExpirableSemaphore.acquiredPermitsAsync.
var PESAcquired = pesExpire("ARGV[1]", "ARGV[2]", "-1") +
	"end; " +
	"local acquired = redis.call('zcount', KEYS[2], 0, '+inf'); " +
	"return acquired == false and 0 or acquired;"

// PESSetPermits is RedissonPermitExpirableSemaphore.setPermitsAsync: KEYS
// semaphore, channel, timeouts; ARGV permits, publish command.
const PESSetPermits = "local available = redis.call('get', KEYS[1]); " +
	"if (available == false) then " +
	"redis.call('set', KEYS[1], ARGV[1]); " +
	"redis.call(ARGV[2], KEYS[2], ARGV[1]); " +
	"return;" +
	"end;" +
	"local acquired = redis.call('zcount', KEYS[3], 0, '+inf'); " +
	"local maximum = (acquired == false and 0 or acquired) + tonumber(available); " +
	"if (maximum == tonumber(ARGV[1])) then " +
	"return;" +
	"end;" +
	"redis.call('incrby', KEYS[1], tonumber(ARGV[1]) - maximum); " +
	"redis.call(ARGV[2], KEYS[2], ARGV[1]);"

// PESAddPermits is RedissonPermitExpirableSemaphore.addPermitsAsync: KEYS
// semaphore, channel; ARGV permits, publish command.
const PESAddPermits = "local value = redis.call('get', KEYS[1]); " +
	"if (value == false) then " +
	"value = 0;" +
	"end;" +
	"redis.call('set', KEYS[1], tonumber(value) + tonumber(ARGV[1])); " +
	"if tonumber(ARGV[1]) > 0 then " +
	"redis.call(ARGV[2], KEYS[2], ARGV[1]); " +
	"end;"

// PESUpdateLease is RedissonPermitExpirableSemaphore.updateLeaseTimeAsync:
// KEYS semaphore, timeouts, channel; ARGV permit id, new expiry epoch ms, now
// ms, publish.
var PESUpdateLease = pesExpire("ARGV[3]", "ARGV[4]", "-1") +
	"end; " +
	"local value = redis.call('zscore', KEYS[2], ARGV[1]); " +
	"if (value ~= false) then " +
	"redis.call('zadd', KEYS[2], ARGV[2], ARGV[1]); " +
	"return 1;" +
	"end;" +
	"return 0;"

// PESGetLeaseTime is RedissonPermitExpirableSemaphore.getLeaseTimeAsync: ARGV
// permit id, the never-expires score, now ms, publish. -1 for a permit that
// never expires.
var PESGetLeaseTime = pesExpire("ARGV[3]", "ARGV[4]", "-1") +
	"end; " +
	"local value = redis.call('zscore', KEYS[2], ARGV[1]); " +
	"if (value ~= false) then " +
	"return tonumber(value) == tonumber(ARGV[2]) and -1 or tonumber(value) - tonumber(ARGV[3]);" +
	"end;" +
	"return 0;"

// RedissonCountDownLatch: KEYS latch, redisson_countdownlatch__channel__{latch}.

// LatchCountDown is RedissonCountDownLatch.countDownAsync: ARGV
// ZERO_COUNT_MESSAGE (0), publish command.
const LatchCountDown = "local v = redis.call('decr', KEYS[1]);" +
	"if v <= 0 then redis.call('del', KEYS[1]) end;" +
	"if v == 0 then redis.call(ARGV[2], KEYS[2], ARGV[1]) end;"

// LatchTrySetCount is RedissonCountDownLatch.trySetCountAsync: ARGV
// NEW_COUNT_MESSAGE (1), count, publish command.
const LatchTrySetCount = "if redis.call('exists', KEYS[1]) == 0 then " +
	"redis.call('set', KEYS[1], ARGV[2]); " +
	"redis.call(ARGV[3], KEYS[2], ARGV[1]); " +
	"return 1 " +
	"else " +
	"return 0 " +
	"end"

// LatchDelete is RedissonCountDownLatch.deleteAsync: ARGV NEW_COUNT_MESSAGE,
// publish command.
const LatchDelete = "if redis.call('del', KEYS[1]) == 1 then " +
	"redis.call(ARGV[2], KEYS[2], ARGV[1]); " +
	"return 1 " +
	"else " +
	"return 0 " +
	"end"

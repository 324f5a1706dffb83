// Package lock is a Go lock API for lockserver: a Mutex with fencing
// tokens, an RWMutex and a Semaphore, on an embedded server or on any server
// a go-redis client reaches, sharing their locks with Redisson's Java
// clients.
//
//	b := lock.Embedded(srv, "")            // or lock.Redis(redisClient)
//	m := lock.NewMutex(b, "orders", nil)
//	if err := m.Lock(ctx); err != nil { ... }
//	defer m.Unlock(ctx)
//	err := store.Write(m.Token(), ...)     // the resource checks the token
//
// # Leases and Lost
//
// A lock is a lease: held until its holder releases it or its lease runs
// out, so that a holder that dies does not hold it forever. Lock renews the
// lease every third of it in the background, as Redisson's watchdog does,
// until Unlock or until Lock's context is done. Lost returns a channel that
// closes as soon as the holder can no longer be sure it holds the lock: the
// server said it is gone, or a renewal failed and the lease may have run
// out, counted from when the last good renewal was sent. A holder should
// stop touching what the lock guards when it closes.
//
// # Fencing tokens
//
// Lost cannot help a holder that is paused (a GC pause, a stalled VM, a slow
// network) while its lease runs out: when it resumes, it may act before it
// looks. Each acquisition of a Mutex therefore returns a token, Token,
// greater than that of every acquisition of the same name before it, on any
// holder. Pass it with every write to the guarded resource, and have the
// resource remember the highest token it has seen and refuse writes with a
// lower one (Example_fencedStore): a holder whose lease ran out and whose
// lock was taken by another can then no longer write, however late it
// wakes. This is the guarantee etcd's revisions and ZooKeeper's zxids give.
//
// The token counter lives beside the lock, at "redisson_lock_token:{name}",
// and the acquire script increments it in the same atomic step that takes
// the lock. A token is that counter plus lockserver's epoch times 2^40: a
// cluster restored from a backup, or recovered from a minority of its
// members, is of the next epoch, so that every token it issues is above
// every token issued before, by the cluster the backup came from too,
// though the restored counters are those of the backup. That holds while
// fewer than 2^40 tokens of one name are issued in an epoch (a year at
// 30,000 a second) and for 8,191 epochs, below the 2^53 that Lua's numbers
// hold exactly. On redis-server, which has no epoch, a token is the
// counter.
//
// # What holds where
//
// On a lockserver cluster every lock operation is a Raft log entry,
// acknowledged once a majority has it on disk. Exclusion and token growth
// then survive the loss of any minority of members, a leader failover, and
// the restart of every member from its data directory. A follower forwards
// to the leader, and pub/sub wake-ups reach waiters on any member.
//
// On a single lockserver node (embedded or not) and on redis-server, locks
// and tokens are as durable as that one process: with redis-server, as its
// appendfsync setting makes them. Redis replicas are asynchronous, so after
// a failover to a replica an acknowledged lock may be gone and a token may
// be issued twice; tokens then prove nothing. Use a lockserver cluster where
// that matters.
//
// Lease timing assumes the holder's clock and the server's run at about the
// same rate: lockserver's log clock runs at most logclock.SlewRate off
// real time, and a holder counts its lease that much short.
//
// # Redisson
//
// A Mutex keeps the data layout of Redisson's RLock and RFencedLock: the
// hash at the name with one field "<id>:<n>" holding the re-entry count,
// its expiry as the lease, the token counter, and the unlock message "0" on
// "redisson_lock__channel:{name}". So a Java service's RLock or RFencedLock
// and a Go Mutex of the same name exclude each other, and each one's unlock
// wakes the other's waiters. RWMutex and Semaphore use RReadWriteLock's and
// RSemaphore's layouts and Redisson's own scripts. Two differences: a Mutex
// re-entry keeps its holding's token (RFencedLock counts a new one), and Go
// waiters queue (see below) where Redisson's RLock waiters do not, so a
// Redisson waiter may overtake Go waiters but never holds the lock with
// them. An unlock that hands the lock to a queued Go waiter publishes no
// unlock message: for a Redisson waiter the lock never became free. Waiters
// are woken through PUBLISH and SUBSCRIBE, not Redis Cluster's sharded
// SPUBLISH.
//
// # Waiting
//
// Waiters never poll. They subscribe to the lock's channel and sleep until
// an unlock message, with a timed retry at the holder's remaining lease as a
// fallback for a message that was lost. A Mutex's waiters queue on the
// server, in a list beside the lock, and take the lock in turn: one that
// unlocks and locks again goes to the back, so no waiter starves however
// many contend. An unlock hands the lock to the waiter whose turn it is, in
// the same atomic step, and tells it on a channel of the Mutex's own: a
// hand-off costs one write, and the lock is never free in between.
//
// # Retries
//
// Replies that say nothing was written (CLUSTERDOWN, TRYAGAIN) are retried,
// and so are commands whose outcome is unknown (lockserver's UNKNOWN, a
// broken connection): every script of a Mutex can be run twice without
// effect, so Lock, Unlock and Extend read the outcome from a retry.
// Semaphore's Release and AddPermits are not retried: they would count
// twice.
package lock

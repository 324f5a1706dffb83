package lock

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/lockserver/lockserver/internal/redisson"
)

// unlockLatch is how long the unlock latch of an RWMutex unlock lives if
// deleting it afterwards fails: Redisson's scripts keep an unlock's outcome
// there, so that a retried unlock repeats it instead of counting twice.
const unlockLatch = 10 * time.Second

// An RWMutex is one holder of a named read-write lock in the layout of
// Redisson's RReadWriteLock, with Redisson's own scripts: readers share the
// lock, a writer holds it alone, and RReadWriteLock's Java clients of the
// same name take part. The hash at the name holds the mode ("read" or
// "write") and a re-entry count per holder ("<id>" for a reader,
// "<id>:write" for the writer); each read entry also has a lease key
// "{name}:<id>:rwlock_timeout:<n>". An unlock publishes on
// "redisson_rwlock:{name}": "0" from a reader, "1" from the writer.
//
// A writer may also take the read lock, and keeps it after its Unlock (a
// downgrade), as Redisson allows. Leases are renewed as a Mutex's are. It
// has no fencing tokens and no wait queue: use a Mutex where those matter.
// Its methods must not be called concurrently with each other, except Lost
// and RLost.
type RWMutex struct {
	b                   *Backend
	name, id, writeID   string
	ttl                 time.Duration
	reentrant           bool
	channel, keyPrefix  string
	timeoutPrefix       string
	readKeys, writeKeys []string

	mu             sync.Mutex
	reads, writes  int
	rlease, wlease *lease
}

// NewRWMutex returns a holder of the read-write lock name on b.
func NewRWMutex(b *Backend, name string, opts *Options) *RWMutex {
	id := b.holderID()
	rw := &RWMutex{
		b: b, name: name, id: id, writeID: id + ":write", ttl: opts.lease(), reentrant: opts != nil && opts.Reentrant,
		channel: redisson.PrefixName("redisson_rwlock", name), timeoutPrefix: redisson.SuffixName(name, id) + ":rwlock_timeout",
	}
	// RedissonReadLock.getKeyPrefix: the lease-key prefix up to the holder.
	rw.keyPrefix = strings.TrimSuffix(redisson.SuffixName(name, ""), ":")
	rw.readKeys = []string{name, rw.timeoutPrefix}
	rw.writeKeys = []string{name}
	return rw
}

// RLock waits until it shares the lock with other readers; ctx bounds the
// wait and the holding, as Mutex.Lock's does.
func (rw *RWMutex) RLock(ctx context.Context) error { return rw.acquire(ctx, false, true) }

// TryRLock takes a read lock if it can at once, and reports whether it did.
func (rw *RWMutex) TryRLock(ctx context.Context) (bool, error) {
	return rw.tryAcquire(ctx, false)
}

// Lock waits until it holds the lock alone; ctx bounds the wait and the
// holding, as Mutex.Lock's does.
func (rw *RWMutex) Lock(ctx context.Context) error { return rw.acquire(ctx, true, true) }

// TryLock takes the write lock if it can at once, and reports whether it
// did.
func (rw *RWMutex) TryLock(ctx context.Context) (bool, error) { return rw.tryAcquire(ctx, true) }

func (rw *RWMutex) tryAcquire(ctx context.Context, write bool) (bool, error) {
	err := rw.acquire(ctx, write, false)
	if err == errBusy {
		return false, nil
	}
	return err == nil, err
}

// Lost is the write lock's Mutex.Lost; RLost the read lock's.
func (rw *RWMutex) Lost() <-chan struct{} { return rw.lost(true) }

// RLost returns a channel closed once the holder can no longer be sure it
// holds the read lock, as Mutex.Lost.
func (rw *RWMutex) RLost() <-chan struct{} { return rw.lost(false) }

func (rw *RWMutex) lost(write bool) <-chan struct{} {
	rw.mu.Lock()
	defer rw.mu.Unlock()
	l := rw.rlease
	if write {
		l = rw.wlease
	}
	if l == nil {
		return closedChan
	}
	l.check()
	return l.lost
}

// mode returns the count, the lease and the scripts of one mode.
func (rw *RWMutex) mode(write bool) (count *int, l **lease) {
	if write {
		return &rw.writes, &rw.wlease
	}
	return &rw.reads, &rw.rlease
}

func (rw *RWMutex) acquire(ctx context.Context, write, wait bool) error {
	rw.mu.Lock()
	count, lp := rw.mode(write)
	held := *count > 0
	rw.mu.Unlock()
	if held && !rw.reentrant {
		return ErrHeld
	}
	attempt := func() (try, error) {
		sent := time.Now()
		var v any
		var err error
		if write {
			v, _, err = rw.b.evalRetry(ctx, writeAcquire, rw.writeKeys, rw.ttl.Milliseconds(), rw.writeID)
		} else {
			v, _, err = rw.b.evalRetry(ctx, readAcquire, rw.readKeys, rw.ttl.Milliseconds(), rw.id, rw.writeID)
		}
		if err != nil {
			return try{}, err
		}
		if v != nil {
			wait, _ := v.(int64)
			return try{wait: time.Duration(wait) * time.Millisecond}, nil
		}
		rw.mu.Lock()
		defer rw.mu.Unlock()
		*count++
		if *lp == nil {
			*lp = newLease(ctx, sent, rw.ttl, rw.ttl, rw.renewer(write))
		} else {
			(*lp).extended(sent, rw.ttl)
		}
		return try{acquired: true}, nil
	}
	abandon := func() { rw.abandon(ctx, write) }
	if !wait {
		r, err := attempt()
		switch {
		case err != nil:
			abandon()
			return err
		case !r.acquired:
			return errBusy
		}
		return nil
	}
	return rw.b.waitFor(ctx, rw.channel, "", "", "", attempt, nil, abandon)
}

// renewer returns the watchdog's renewal of one mode: RedissonWriteLock's
// (RedissonBaseLock's) and RedissonReadLock's.
func (rw *RWMutex) renewer(write bool) func(context.Context, time.Duration) (bool, error) {
	return func(ctx context.Context, ttl time.Duration) (bool, error) {
		var v any
		var err error
		if write {
			v, err = rw.b.eval(ctx, renewLease, rw.writeKeys, ttl.Milliseconds(), rw.writeID)
		} else {
			v, err = rw.b.eval(ctx, readRenew, []string{rw.name, rw.keyPrefix}, ttl.Milliseconds(), rw.id)
		}
		return v == int64(1), err
	}
}

// abandon releases what an attempt whose reply was not read may have taken,
// if this holder held nothing in that mode before.
func (rw *RWMutex) abandon(ctx context.Context, write bool) {
	rw.mu.Lock()
	count, _ := rw.mode(write)
	held := *count > 0
	rw.mu.Unlock()
	if !held {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), queueLease)
		defer cancel()
		rw.unlock(ctx, write)
	}
}

// RUnlock leaves one read entry. It returns ErrNotHeld when this holder had
// no read lock, and ErrLost when the server no longer counted it as a
// reader.
func (rw *RWMutex) RUnlock(ctx context.Context) error { return rw.release(ctx, false) }

// Unlock leaves one write entry, as RUnlock.
func (rw *RWMutex) Unlock(ctx context.Context) error { return rw.release(ctx, true) }

func (rw *RWMutex) release(ctx context.Context, write bool) error {
	rw.mu.Lock()
	count, lp := rw.mode(write)
	n, l := *count, *lp
	rw.mu.Unlock()
	if n == 0 {
		return ErrNotHeld
	}
	if n == 1 {
		l.halt()
	}
	v, err := rw.unlock(ctx, write)
	rw.mu.Lock()
	if err == nil || n == 1 {
		*count = n - 1
	}
	if *count == 0 {
		*lp = nil
	}
	rw.mu.Unlock()
	if n == 1 {
		l.markLost()
	}
	switch {
	case err != nil:
		return fmt.Errorf("lock: unlock %s: %w (the lock is released when its lease runs out)", rw.name, err)
	case v == nil:
		return ErrLost
	}
	return nil
}

// unlock runs Redisson's unlock script of one mode with a fresh unlock
// latch, and deletes the latch after, as Redisson does.
func (rw *RWMutex) unlock(ctx context.Context, write bool) (any, error) {
	var raw [16]byte
	rand.Read(raw[:])
	latch := redisson.UnlockLatch(rw.name, hex.EncodeToString(raw[:]))
	var v any
	var err error
	if write {
		v, _, err = rw.b.evalRetry(ctx, writeUnlock, []string{rw.name, rw.channel, latch},
			1, rw.ttl.Milliseconds(), rw.writeID, "PUBLISH", unlockLatch.Milliseconds())
	} else {
		v, _, err = rw.b.evalRetry(ctx, readUnlock, []string{rw.name, rw.channel, rw.timeoutPrefix, rw.keyPrefix, latch},
			0, rw.id, "PUBLISH", unlockLatch.Milliseconds())
	}
	if err == nil {
		rw.b.do(ctx, "DEL", latch)
	}
	return v, err
}

package lock

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lockserver/lockserver/internal/redisson"
)

var (
	// ErrNotHeld is returned by Unlock and Extend on a lock object that does
	// not hold its lock.
	ErrNotHeld = errors.New("lock: not held")
	// ErrLost is returned when the server says the lock is no longer this
	// holder's: its lease ran out (and another holder may have taken it) or
	// the lock was deleted.
	ErrLost = errors.New("lock: lost: the lease ran out or the lock was deleted")
	// ErrHeld is returned by Lock on a Mutex that already holds its lock
	// and is not re-entrant: waiting would wait for itself.
	ErrHeld = errors.New("lock: this Mutex holds the lock already; set Options.Reentrant to enter it again")
)

// DefaultLease is the lease of Lock when Options.Lease is zero: Redisson's
// lockWatchdogTimeout.
const DefaultLease = 30 * time.Second

// queueLease is how long a waiter keeps its place in a Mutex's queue without
// trying again; a waiter tries at least every third of it. A waiter whose
// process died holds up the line for at most this long.
const queueLease = 5 * time.Second

// Options configure a Mutex or an RWMutex; nil means the zero value.
type Options struct {
	// Lease is how long the lock stays held without renewal. Lock renews it
	// every third of it while held, so a holder that dies frees the lock
	// after at most this long. Zero means DefaultLease.
	Lease time.Duration
	// Reentrant lets a holder that holds the lock take it again, as
	// Redisson's RLock does: each entry counts and needs its own Unlock. The
	// holder is the lock object, not a goroutine (Go has no thread
	// identity): share a re-entrant Mutex only along one call chain.
	Reentrant bool
}

func (o *Options) lease() time.Duration {
	if o == nil || o.Lease <= 0 {
		return DefaultLease
	}
	return o.Lease
}

// A Mutex is one holder of a named lock that every holder on the same
// server shares: other Mutexes of this process or of others, and Redisson's
// RLock and RFencedLock of the same name, which it excludes and wakes as
// they exclude and wake each other.
//
// Its methods must not be called concurrently with each other, except Token
// and Lost, which any goroutine may call at any time. For several goroutines,
// give each its own Mutex: they then take turns on the server.
//
// Layout (Redisson's RFencedLock): the lock is the hash at the name, whose
// one field is the holder's id "<backend id>:<n>" and its re-entry count;
// its lease is the hash's expiry; the fencing token counter is the integer at
// "redisson_lock_token:{name}", incremented by each acquisition; an unlock
// publishes "0" on "redisson_lock__channel:{name}". Waiters queue in a list
// at "lockserver_lock_queue:{name}", each with a key
// "lockserver_lock_waiter:{name}:<id>" that keeps its place while it lasts;
// an unlock that finds a waiter first in line hands the lock to it and says
// so on "lockserver_lock__handover:{name}".
type Mutex struct {
	b         *Backend
	name, id  string
	ttl       time.Duration
	reentrant bool
	channel   string
	handOver  string // the channel of hand-overs
	// The keys of each script, in its order.
	acquireKeys, unlockKeys, leaveKeys []string

	waits atomic.Int64 // numbers the waits, for hand-overs

	mu    sync.Mutex
	count int // entries; 0 when not held
	token uint64
	l     *lease
}

// NewMutex returns a holder of the lock name on b.
func NewMutex(b *Backend, name string, opts *Options) *Mutex {
	m := &Mutex{
		b: b, name: name, id: b.holderID(), ttl: opts.lease(), reentrant: opts != nil && opts.Reentrant,
		channel: redisson.PrefixName("redisson_lock__channel", name),
	}
	m.handOver = redisson.PrefixName("lockserver_lock__handover", name)
	queue, entries, token := redisson.PrefixName("lockserver_lock_queue", name), redisson.PrefixName("lockserver_lock_waiter", name), redisson.PrefixName("redisson_lock_token", name)
	m.acquireKeys = []string{name, token, queue, entries}
	m.unlockKeys = []string{name, m.channel, token, queue, entries, m.handOver}
	m.leaveKeys = []string{name, queue, entries, m.channel}
	return m
}

// Lock waits until it holds the lock, for as long as ctx allows. The lease
// is renewed in the background until Unlock, or until ctx is done: ctx
// bounds the holding as well as the wait, and once it is done the lease runs
// out unless Unlock comes first.
func (m *Mutex) Lock(ctx context.Context) error { return m.lock(ctx, m.ttl, true, true) }

// LockFor waits until it holds the lock, with a lease of ttl that is not
// renewed: the lock is released when ttl has passed, unless Extend or
// Unlock comes first.
func (m *Mutex) LockFor(ctx context.Context, ttl time.Duration) error {
	return m.lock(ctx, ttl, false, true)
}

// TryLock takes the lock if it is free and no one waits for it, as Lock
// would, and reports whether it did; it does not wait.
func (m *Mutex) TryLock(ctx context.Context) (bool, error) {
	err := m.lock(ctx, m.ttl, true, false)
	if err == errBusy {
		return false, nil
	}
	return err == nil, err
}

// errBusy is a TryLock that found the lock taken.
var errBusy = errors.New("lock: busy")

// Token returns the fencing token of the current holding: greater than the
// token of every acquisition of this lock that came before it, on any
// holder. Zero when the lock is not held. A re-entry keeps its holding's
// token.
func (m *Mutex) Token() uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.token
}

// Lost returns a channel closed once the holder can no longer be sure it
// holds the lock: its lease may have run out (a renewal failed, or was never
// due) or the server said it is gone. It is also closed by Unlock, and is
// closed already when the lock is not held. Stop touching what the lock
// guards when it closes.
func (m *Mutex) Lost() <-chan struct{} {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.l == nil {
		return closedChan
	}
	m.l.check()
	return m.l.lost
}

var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

func (m *Mutex) lock(ctx context.Context, ttl time.Duration, watchdog, wait bool) error {
	if ttl < time.Millisecond {
		return fmt.Errorf("lock: lease %v is below a millisecond", ttl)
	}
	m.mu.Lock()
	count, l := m.count, m.l
	m.mu.Unlock()
	if count > 0 {
		if !m.reentrant {
			return ErrHeld
		}
		return m.setCount(ctx, l, count+1)
	}

	qttl := int64(0)
	if wait {
		qttl = queueLease.Milliseconds()
	}
	var renew func(context.Context, time.Duration) (bool, error)
	// A lock handed over by an unlock has the lease this holder leaves in
	// its queue entry: with a watchdog, a short one that it renews a third of
	// the way through (see newLease), so that a waiter that died leaves the
	// lock held only briefly.
	handOverTTL := ttl
	if watchdog {
		renew = m.renew
		handOverTTL = min(ttl, queueLease)
	}
	var queued time.Time // when the last attempt that queued was sent
	// This wait's id: a hand-over names it, so that one meant for an
	// earlier wait of this holder, delivered late, is not taken for one.
	waitID := strconv.FormatInt(m.waits.Add(1), 10)
	entry := strconv.FormatInt(handOverTTL.Milliseconds(), 10) + " " + waitID
	attempt := func() (try, error) {
		sent := time.Now()
		v, _, err := m.b.evalRetry(ctx, mutexAcquire, m.acquireKeys, ttl.Milliseconds(), m.id, qttl, entry)
		if err != nil {
			return try{}, err
		}
		r, ok := v.([]any)
		if !ok || len(r) != 3 {
			return try{}, fmt.Errorf("lock: the acquire script replied %v", v)
		}
		n, _ := r[0].(int64)
		first, _ := r[2].(string)
		if n != -1 {
			queued = sent
			return try{wait: time.Duration(n) * time.Millisecond, first: first, free: r[1] == int64(1)}, nil
		}
		token, _ := r[1].(int64)
		m.mu.Lock()
		m.count, m.token, m.l = 1, uint64(token), newLease(ctx, sent, ttl, ttl, renew)
		m.mu.Unlock()
		return try{acquired: true, first: first}, nil
	}
	// handed takes a lock an unlock handed over: the hand-over ran after the
	// last attempt that queued this holder, so its lease is counted from
	// when that attempt was sent.
	handed := func(token uint64) {
		m.mu.Lock()
		m.count, m.token, m.l = 1, token, newLease(ctx, queued, handOverTTL, ttl, renew)
		m.mu.Unlock()
	}
	if !wait {
		r, err := attempt()
		switch {
		case err != nil:
			m.leave(ctx)
			return err
		case !r.acquired:
			return errBusy
		}
		return nil
	}
	return m.b.waitFor(ctx, m.channel, m.handOver, m.id, waitID, attempt, handed, func() { m.leave(ctx) })
}

// leave takes the holder out of the queue after it gave up waiting, and
// releases the lock if an attempt whose reply it did not read took it. It
// does not wait long: an entry left behind lapses by itself.
func (m *Mutex) leave(ctx context.Context) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), queueLease)
	defer cancel()
	m.b.evalRetry(ctx, mutexLeave, m.leaveKeys, m.id)
}

// renew is the watchdog's renewal: RedissonBaseLock's.
func (m *Mutex) renew(ctx context.Context, ttl time.Duration) (bool, error) {
	v, err := m.b.eval(ctx, renewLease, m.unlockKeys[:1], ttl.Milliseconds(), m.id)
	return v == int64(1), err
}

// setCount enters the lock again or leaves one entry, renewing the lease.
func (m *Mutex) setCount(ctx context.Context, l *lease, count int) error {
	l.mu.Lock()
	ttl := l.ttl
	l.mu.Unlock()
	sent := time.Now()
	v, _, err := m.b.evalRetry(ctx, mutexSetCount, m.unlockKeys[:1], ttl.Milliseconds(), m.id, count)
	if err != nil {
		return err
	}
	if v != int64(1) {
		l.markLost()
		return ErrLost
	}
	m.mu.Lock()
	m.count = count
	m.mu.Unlock()
	l.extended(sent, ttl)
	return nil
}

// Unlock leaves one entry; the last one releases the lock and wakes a
// waiter. It returns ErrLost when the lock was no longer this holder's, and
// ErrNotHeld when this Mutex did not hold it. When it returns another error
// the lock may still be held, until its lease runs out: Unlock tries only as
// long as ctx allows and the lease lasts.
func (m *Mutex) Unlock(ctx context.Context) error {
	m.mu.Lock()
	count, l := m.count, m.l
	m.mu.Unlock()
	if count == 0 {
		return ErrNotHeld
	}
	if count > 1 {
		return m.setCount(ctx, l, count-1)
	}
	l.halt() // no renewal may follow the release
	l.mu.Lock()
	deadline := l.deadline
	l.mu.Unlock()
	uctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	v, uncertain, err := m.b.evalRetry(uctx, mutexUnlock, m.unlockKeys, m.id)
	lostBefore := l.isLost()
	m.mu.Lock()
	m.count, m.token, m.l = 0, 0, nil
	m.mu.Unlock()
	l.markLost()
	switch {
	case err != nil:
		return fmt.Errorf("lock: unlock %s: %w (the lock is released when its lease runs out)", m.name, err)
	case v == int64(1):
		return nil
	case uncertain && !lostBefore:
		// An earlier try whose reply was lost released it: the lease was
		// still good, so nothing else could have.
		return nil
	}
	return ErrLost
}

// Extend sets the lease to ttl from now: later renewals of Lock renew it to
// ttl too, and a lease of LockFor then ends ttl from now.
func (m *Mutex) Extend(ctx context.Context, ttl time.Duration) error {
	if ttl < time.Millisecond {
		return fmt.Errorf("lock: lease %v is below a millisecond", ttl)
	}
	m.mu.Lock()
	count, l := m.count, m.l
	m.mu.Unlock()
	if count == 0 {
		return ErrNotHeld
	}
	sent := time.Now()
	v, _, err := m.b.evalRetry(ctx, renewLease, m.unlockKeys[:1], ttl.Milliseconds(), m.id)
	if err != nil {
		return err
	}
	if v != int64(1) {
		l.markLost()
		return ErrLost
	}
	l.extended(sent, ttl)
	return nil
}

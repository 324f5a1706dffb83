package lock

import (
	"context"
	"sync"
	"time"

	"github.com/lockserver/lockserver/internal/logclock"
)

// A lease is the holder's side of one holding: until when it can be sure
// the lock is still its own, the watchdog that renews it, and the channel
// Lost returns.
//
// The holder counts a lease from the moment it sent the command that began
// or renewed it, on this process's monotonic clock: the server starts the
// lease when it runs the command, which is later. lockserver's log clock may
// run up to logclock.SlewRate fast while it converges on the wall clock,
// so a lease is taken to end that fraction early.
type lease struct {
	lost     chan struct{}
	lostOnce sync.Once
	stop     chan struct{} // closed to stop the watchdog
	stopOnce sync.Once
	changed  chan struct{} // Extend moved the deadline
	done     chan struct{} // closed when the watchdog has stopped

	mu       sync.Mutex
	ttl      time.Duration
	deadline time.Time // the holder can be sure until then
	next     time.Time // the next renewal
}

// leaseEnd is when a lease of ttl that a command sent at sent began can be
// relied on until.
func leaseEnd(sent time.Time, ttl time.Duration) time.Time {
	return sent.Add(ttl - time.Duration(float64(ttl)*logclock.SlewRate))
}

// newLease starts the holder's lease, renewed to ttl: the server set it to
// first by a command sent at sent (first is ttl but for a lock handed over by
// an unlock, whose lease is shorter until the new holder renews it). With
// renew, a watchdog renews it every third of its ttl, the first time a third
// of the way through first, until ctx is done or the lease is ended; without,
// it runs out at its end unless extended. Either way Lost's channel closes
// once the holder can no longer be sure.
//
// A lock handed over is not renewed at once: the renewal would be a second
// write, committed while the holder works, and on a cluster the holder's
// unlock, the next hand-over, would wait for its commit (a Mutex hand-off's
// p50 was two commits). A third of the short lease is still far ahead of
// its end, and a holder that dies meanwhile leaves the lock held only for
// the short lease.
func newLease(ctx context.Context, sent time.Time, first, ttl time.Duration, renew func(ctx context.Context, ttl time.Duration) (bool, error)) *lease {
	l := &lease{
		lost: make(chan struct{}), stop: make(chan struct{}), changed: make(chan struct{}, 1), done: make(chan struct{}),
		ttl: ttl, deadline: leaseEnd(sent, first), next: sent.Add(ttl / 3),
	}
	if first < ttl {
		l.next = sent.Add(first / 3)
	}
	go l.watch(ctx, renew)
	return l
}

// watch renews the lease, or waits for its end, until it is stopped or lost.
func (l *lease) watch(ctx context.Context, renew func(context.Context, time.Duration) (bool, error)) {
	defer close(l.done)
	timer := time.NewTimer(0)
	defer timer.Stop()
	<-timer.C
	cancelled := ctx.Done()
	backoff := 10 * time.Millisecond
	for {
		l.mu.Lock()
		deadline, next, ttl := l.deadline, l.next, l.ttl
		l.mu.Unlock()
		if renew == nil || next.After(deadline) {
			next = deadline
		}
		timer.Reset(time.Until(next))
		select {
		case <-l.stop:
			return
		case <-l.changed:
			timer.Stop()
			continue
		case <-cancelled:
			// The holder's context ended: no more renewals.
			renew, cancelled = nil, nil
			timer.Stop()
			continue
		case <-timer.C:
		}
		if !time.Now().Before(deadline) {
			l.markLost()
			return
		}
		sent := time.Now()
		rctx, cancel := context.WithDeadline(context.Background(), deadline)
		result := make(chan error, 1)
		held := false
		go func() {
			ok, err := renew(rctx, ttl)
			held = ok
			result <- err
		}()
		timer.Reset(time.Until(deadline))
		select {
		case <-l.stop:
			cancel()
			return
		case err := <-result:
			cancel()
			timer.Stop()
			switch {
			case err == nil && !held:
				l.markLost()
				return
			case err == nil:
				backoff = 10 * time.Millisecond
				l.mu.Lock()
				if l.ttl == ttl { // else Extend set another lease meanwhile
					l.deadline, l.next = leaseEnd(sent, ttl), sent.Add(ttl/3)
				}
				l.mu.Unlock()
			default:
				// Not renewed, and maybe not: try again soon, while the
				// lease lasts.
				l.mu.Lock()
				l.next = time.Now().Add(jitter(backoff))
				l.mu.Unlock()
				backoff = min(2*backoff, ttl/10)
			}
		case <-timer.C:
			// The lease ended while the renewal was on its way.
			cancel()
			l.markLost()
			return
		}
	}
}

// extended records a renewal to ttl sent at sent (by Extend or a re-entry).
func (l *lease) extended(sent time.Time, ttl time.Duration) {
	l.mu.Lock()
	// PEXPIRE replaces the lease, longer or shorter.
	l.ttl, l.deadline, l.next = ttl, leaseEnd(sent, ttl), sent.Add(ttl/3)
	l.mu.Unlock()
	select {
	case l.changed <- struct{}{}:
	default:
	}
}

func (l *lease) markLost() { l.lostOnce.Do(func() { close(l.lost) }) }

// check closes Lost's channel if the lease's end has passed, whether or not
// the watchdog has run since: a holder that looks is never told more than it
// can be sure of.
func (l *lease) check() {
	l.mu.Lock()
	deadline := l.deadline
	l.mu.Unlock()
	if !time.Now().Before(deadline) {
		l.markLost()
	}
}

// isLost reports whether the holder stopped being sure.
func (l *lease) isLost() bool {
	select {
	case <-l.lost:
		return true
	default:
		return false
	}
}

// halt stops the watchdog and waits until it has.
func (l *lease) halt() {
	l.stopOnce.Do(func() { close(l.stop) })
	<-l.done
}

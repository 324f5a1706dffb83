package lock

import (
	"context"
	"fmt"
	"strconv"

	"github.com/lockserver/lockserver/internal/redisson"
)

// A Semaphore is a named count of permits in the layout of Redisson's
// RSemaphore, with Redisson's own scripts: the free permits are an integer
// string at the name, and a release publishes the new count on
// "redisson_sc:{name}", waking waiters of either kind.
//
// Permits have no lease and no owner, as in RSemaphore: a holder that dies
// without releasing keeps them, and an Acquire whose context ends while an
// attempt is on its way may have taken permits it does not report. Use a
// Mutex where a dead holder must free what it held.
type Semaphore struct {
	b       *Backend
	name    string
	channel string
}

// NewSemaphore returns the semaphore name on b.
func NewSemaphore(b *Backend, name string) *Semaphore {
	return &Semaphore{b: b, name: name, channel: redisson.PrefixName("redisson_sc", name)}
}

// TrySetPermits sets the count of permits if it has none yet, and reports
// whether it did.
func (s *Semaphore) TrySetPermits(ctx context.Context, permits int64) (bool, error) {
	v, _, err := s.b.evalRetry(ctx, semTrySetPermits, []string{s.name, s.channel}, permits, "PUBLISH")
	return v == int64(1), err
}

// AddPermits adds permits (or takes them away, when negative), whatever the
// count.
func (s *Semaphore) AddPermits(ctx context.Context, permits int64) error {
	_, err := s.b.eval(ctx, semAddPermits, []string{s.name, s.channel}, permits, "PUBLISH")
	return err
}

// AvailablePermits returns the count of free permits.
func (s *Semaphore) AvailablePermits(ctx context.Context) (int64, error) {
	v, err := s.b.do(ctx, "GET", s.name)
	if err != nil || v == nil {
		return 0, err
	}
	return strconv.ParseInt(fmt.Sprint(v), 10, 64)
}

// TryAcquire takes permits if that many are free, and reports whether it
// did.
func (s *Semaphore) TryAcquire(ctx context.Context, permits int64) (bool, error) {
	v, err := s.b.eval(ctx, semAcquire, []string{s.name}, permits)
	return v == int64(1), err
}

// Acquire waits until it has taken permits, for as long as ctx allows.
func (s *Semaphore) Acquire(ctx context.Context, permits int64) error {
	if permits <= 0 {
		return fmt.Errorf("lock: acquire %d permits", permits)
	}
	return s.b.waitFor(ctx, s.channel, "", "", "", func() (try, error) {
		ok, err := s.TryAcquire(ctx, permits)
		return try{acquired: ok, wait: -1}, err
	}, nil, func() {})
}

// Release gives permits back and wakes the waiters.
func (s *Semaphore) Release(ctx context.Context, permits int64) error {
	if permits <= 0 {
		return fmt.Errorf("lock: release %d permits", permits)
	}
	_, err := s.b.eval(ctx, semRelease, []string{s.name, s.channel}, permits, "PUBLISH")
	return err
}

package lock_test

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockserver/lockserver/lock"
)

// Two permits among 8 holders: never more than two inside, waiters woken by
// releases, and both permits back at the end.
func TestSemaphore(t *testing.T) {
	for _, tg := range allTargets(t) {
		t.Run(tg.name, func(t *testing.T) {
			ctx := testContext(t)
			b := tg.backend(t)
			s := lock.NewSemaphore(b, "sem:"+tg.name)
			if ok, err := s.TrySetPermits(ctx, 2); !ok || err != nil {
				t.Fatalf("TrySetPermits on a new semaphore = %v, %v; want true", ok, err)
			}
			if ok, err := s.TrySetPermits(ctx, 5); ok || err != nil {
				t.Fatalf("TrySetPermits again = %v, %v; want false", ok, err)
			}
			var inside, most atomic.Int32
			holders(t, 8, func(int) error {
				s := lock.NewSemaphore(b, "sem:"+tg.name)
				for range 4 {
					if err := s.Acquire(ctx, 1); err != nil {
						return err
					}
					raise(&most, inside.Add(1))
					time.Sleep(time.Millisecond)
					inside.Add(-1)
					if err := s.Release(ctx, 1); err != nil {
						return err
					}
				}
				return nil
			})
			if n, err := s.AvailablePermits(ctx); most.Load() > 2 || n != 2 || err != nil {
				t.Fatalf("at most %d inside, %d permits left (%v); want at most 2 and 2", most.Load(), n, err)
			}
			if ok, err := s.TryAcquire(ctx, 3); ok || err != nil {
				t.Fatalf("TryAcquire of 3 of 2 permits = %v, %v; want false", ok, err)
			}
		})
	}
}

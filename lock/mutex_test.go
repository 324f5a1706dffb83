package lock_test

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockserver/lockserver/lock"
)

// Exclusion: 64 holders, each its own Mutex on one name, increment a counter
// by reading it and writing it back while holding the lock. Two holders
// inside at once would be seen, and would lose increments.
func TestMutexExcludes(t *testing.T) {
	for _, tg := range allTargets(t) {
		t.Run(tg.name, func(t *testing.T) {
			ctx := testContext(t)
			b := tg.backend(t)
			const holders, rounds = 64, 4
			var inside, most atomic.Int32
			var counter atomic.Int64
			var wg sync.WaitGroup
			errs := make(chan error, holders)
			for range holders {
				wg.Add(1)
				go func() {
					defer wg.Done()
					m := lock.NewMutex(b, "excl", nil)
					for range rounds {
						if err := m.Lock(ctx); err != nil {
							errs <- err
							return
						}
						n := inside.Add(1)
						if n > most.Load() {
							most.Store(n)
						}
						v := counter.Load()
						runtime.Gosched()
						counter.Store(v + 1)
						inside.Add(-1)
						if err := m.Unlock(ctx); err != nil {
							errs <- err
							return
						}
					}
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatal(err)
			}
			if most.Load() != 1 || counter.Load() != holders*rounds {
				t.Fatalf("at most %d holders inside at once, counter %d; want 1 and %d", most.Load(), counter.Load(), holders*rounds)
			}
		})
	}
}

var _ = errors.Is
var _ = time.Second
var _ context.Context

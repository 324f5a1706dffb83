package lock_test

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockserver/lockserver/internal/testenv"
	"github.com/lockserver/lockserver/lock"
)

// Readers share, a writer is alone, a writer may read and keeps the read
// lock after its Unlock; the hash follows RReadWriteLock's layout.
func TestRWMutexModes(t *testing.T) {
	for _, tg := range allTargets(t) {
		t.Run(tg.name, func(t *testing.T) {
			ctx := testContext(t)
			b := tg.backend(t)
			r1, r2, w := lock.NewRWMutex(b, "rw", nil), lock.NewRWMutex(b, "rw", nil), lock.NewRWMutex(b, "rw", nil)
			if err := r1.RLock(ctx); err != nil {
				t.Fatal(err)
			}
			if ok, err := r2.TryRLock(ctx); !ok || err != nil {
				t.Fatalf("a second reader's TryRLock = %v, %v; want true", ok, err)
			}
			if mode := tg.rdb.HGet(ctx, "rw", "mode").Val(); mode != "read" {
				t.Fatalf("mode %q, want read", mode)
			}
			if ok, err := w.TryLock(ctx); ok || err != nil {
				t.Fatalf("a writer's TryLock among readers = %v, %v; want false", ok, err)
			}
			locked := make(chan error, 1)
			go func() { locked <- w.Lock(ctx) }()
			if err := r1.RUnlock(ctx); err != nil {
				t.Fatal(err)
			}
			if err := r2.RUnlock(ctx); err != nil {
				t.Fatal(err)
			}
			if err := <-locked; err != nil {
				t.Fatalf("the waiting writer: %v", err)
			}
			if mode := tg.rdb.HGet(ctx, "rw", "mode").Val(); mode != "write" {
				t.Fatalf("mode %q, want write", mode)
			}
			if ok, err := r1.TryRLock(ctx); ok || err != nil {
				t.Fatalf("a reader's TryRLock beside a writer = %v, %v; want false", ok, err)
			}
			if err := w.RLock(ctx); err != nil {
				t.Fatalf("the writer's RLock: %v", err)
			}
			if err := w.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
			if mode := tg.rdb.HGet(ctx, "rw", "mode").Val(); mode != "read" {
				t.Fatalf("after the writer's Unlock with a read entry, mode %q, want read", mode)
			}
			if ok, err := r1.TryRLock(ctx); !ok || err != nil {
				t.Fatalf("a reader's TryRLock beside the downgraded writer = %v, %v; want true", ok, err)
			}
			for _, u := range []func() error{func() error { return w.RUnlock(ctx) }, func() error { return r1.RUnlock(ctx) }} {
				if err := u(); err != nil {
					t.Fatal(err)
				}
			}
			if n := tg.rdb.Exists(ctx, "rw").Val(); n != 0 {
				t.Fatalf("the lock is still there after every holder left: %v", tg.rdb.HGetAll(ctx, "rw").Val())
			}
			if err := w.Unlock(ctx); !errors.Is(err, lock.ErrNotHeld) {
				t.Fatalf("an Unlock too many = %v, want ErrNotHeld", err)
			}
		})
	}
}

// 16 holders, a quarter of them writers, take the lock over and over: a
// writer is never inside with anyone.
func TestRWMutexExcludes(t *testing.T) {
	for _, tg := range allTargets(t) {
		t.Run(tg.name, func(t *testing.T) {
			ctx := testContext(t)
			b := tg.backend(t)
			var readers, writers atomic.Int32
			var bad atomic.Bool
			holders(t, 16, func(i int) error {
				rw := lock.NewRWMutex(b, "rwx", nil)
				for range 4 {
					if i%4 == 0 {
						if err := rw.Lock(ctx); err != nil {
							return err
						}
						if writers.Add(1) != 1 || readers.Load() != 0 {
							bad.Store(true)
						}
						time.Sleep(time.Millisecond)
						writers.Add(-1)
						if err := rw.Unlock(ctx); err != nil {
							return err
						}
					} else {
						if err := rw.RLock(ctx); err != nil {
							return err
						}
						readers.Add(1)
						if writers.Load() != 0 {
							bad.Store(true)
						}
						time.Sleep(time.Millisecond)
						readers.Add(-1)
						if err := rw.RUnlock(ctx); err != nil {
							return err
						}
					}
				}
				return nil
			})
			if bad.Load() {
				t.Fatal("a writer was inside with another holder")
			}
		})
	}
}

// A cut write or read lock closes its Lost.
func TestRWMutexLost(t *testing.T) {
	testenv.Long(t)
	tg := nodeTarget(t)
	ctx := testContext(t)
	b := tg.backend(t)
	w := lock.NewRWMutex(b, "rwlost", &lock.Options{Lease: 3 * time.Second})
	if err := w.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	tg.rdb.Del(ctx, "rwlost")
	<-w.Lost()
	if err := w.Unlock(ctx); !errors.Is(err, lock.ErrLost) {
		t.Fatalf("Unlock of a cut write lock = %v, want ErrLost", err)
	}
	r := lock.NewRWMutex(b, "rwlost", &lock.Options{Lease: 3 * time.Second})
	if err := r.RLock(ctx); err != nil {
		t.Fatal(err)
	}
	tg.rdb.Del(ctx, "rwlost")
	<-r.RLost()
}

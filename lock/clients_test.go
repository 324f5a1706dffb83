package lock_test

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/lockserver/lockserver/lock"
	"github.com/redis/go-redis/v9"
)

// The Mutex through the other go-redis clients a Backend takes: a
// ClusterClient (lockserver answers as one shard owning every slot) and a
// FailoverClient that finds the leader through the Sentinel commands, each
// given a follower's address. 16 holders exclude each other.
func TestMutexThroughClusterAndFailoverClients(t *testing.T) {
	ms := startCluster(t)
	addr := follower(t, ms).opts.Addr
	for _, c := range []struct {
		name   string
		client redis.UniversalClient
	}{
		{"ClusterClient", redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{addr}})},
		{"FailoverClient", redis.NewFailoverClient(&redis.FailoverOptions{MasterName: "mymaster", SentinelAddrs: []string{addr}})},
	} {
		t.Run(c.name, func(t *testing.T) {
			defer c.client.Close()
			ctx := testContext(t)
			b := lock.Redis(c.client)
			defer b.Close()
			var inside, most atomic.Int32
			var counter atomic.Int64
			var wg sync.WaitGroup
			errs := make(chan error, 16)
			for range 16 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					m := lock.NewMutex(b, "clients:"+c.name, nil)
					for range 4 {
						if err := m.Lock(ctx); err != nil {
							errs <- err
							return
						}
						raise(&most, inside.Add(1))
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
			if most.Load() != 1 || counter.Load() != 64 {
				t.Fatalf("at most %d holders inside at once, counter %d; want 1 and 64", most.Load(), counter.Load())
			}
		})
	}
}

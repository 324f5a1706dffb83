package replication_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// BenchmarkClusterRedissonWait measures Redisson's lock cycle as its
// replicated and sentinel modes send it to a 3-node cluster: each lock and
// unlock script is followed, in the same pipeline, by WAIT 2 1000 (2 being
// connected_slaves), which replies once both other members have applied the
// script's write. "wait=false" is the same cycle without WAIT. It reports
// lock operations per second and their p50 and p99 latencies, WAIT included.
//
//	go test ./replication -run '^$' -bench ClusterRedissonWait -benchtime 2000x
func BenchmarkClusterRedissonWait(b *testing.B) {
	leader, follower := startRedissonCluster(b)
	ctx := context.Background()
	info := redis.NewClient(&redis.Options{Addr: leader})
	defer info.Close()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if s, _ := info.Info(ctx, "replication").Result(); strings.Contains(s, "connected_slaves:2\r\n") {
			break
		}
		if time.Now().After(deadline) {
			b.Fatal("the leader does not report connected_slaves:2")
		}
	}
	lock, unlock := redissonScript(b, "redisson_lock.lua"), redissonScript(b, "redisson_unlock_v2.lua")
	for _, target := range []struct{ name, addr string }{{"leader", leader}, {"follower", follower}} {
		for _, clients := range []int{1, 16} {
			for _, wait := range []bool{false, true} {
				b.Run(fmt.Sprintf("%s/clients=%d/wait=%v", target.name, clients, wait), func(b *testing.B) {
					rdb := redis.NewClient(&redis.Options{Addr: target.addr, PoolSize: clients, MinIdleConns: clients, MaxRetries: -1})
					defer rdb.Close()
					if err := errors.Join(lock.Load(ctx, rdb).Err(), unlock.Load(ctx, rdb).Err()); err != nil {
						b.Fatal(err)
					}
					benchWaitCycles(b, rdb, lock, unlock, fmt.Sprintf("%s:%d:%v", target.name, clients, wait), clients, wait)
				})
			}
		}
	}
}

func benchWaitCycles(b *testing.B, rdb *redis.Client, lock, unlock *redis.Script, prefix string, clients int, wait bool) {
	ctx := context.Background()
	var next atomic.Int64
	lat := make([][]time.Duration, clients)
	var wg sync.WaitGroup
	// step runs a script, then WAIT 2 1000 in the same pipeline if wait is set.
	step := func(s *redis.Script, keys []string, args ...any) (any, error) {
		var ev *redis.Cmd
		var synced *redis.Cmd
		_, err := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			ev = s.EvalSha(ctx, p, keys, args...)
			if wait {
				synced = p.Do(ctx, "WAIT", 2, 1000)
			}
			return nil
		})
		if err != nil && err != redis.Nil {
			return nil, err
		}
		if synced != nil && synced.Val() != int64(2) {
			return nil, fmt.Errorf("WAIT 2 1000 replied %v", synced.Val())
		}
		return ev.Result()
	}
	b.ResetTimer()
	start := time.Now()
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			key := fmt.Sprintf("%s:lock:%d", prefix, c)
			keys := []string{key, "redisson_lock__channel:{" + key + "}"}
			owner := fmt.Sprintf("6f1b3c52-8d0e-4d7a-9a43-2f5e8c1d7b90:%d", c)
			for next.Add(1) <= int64(b.N) {
				t := time.Now()
				if v, err := step(lock, keys[:1], 30000, owner); err != redis.Nil {
					b.Errorf("redisson_lock.lua on a free key: %v, %v; want nil", v, err)
					return
				}
				lat[c] = append(lat[c], time.Since(t))
				t = time.Now()
				if v, err := step(unlock, keys, 0, 30000, owner); err != nil || v != int64(1) {
					b.Errorf("redisson_unlock_v2.lua by the holder: %v, %v; want 1", v, err)
					return
				}
				lat[c] = append(lat[c], time.Since(t))
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	all := slices.Concat(lat...)
	slices.Sort(all)
	if len(all) == 0 {
		return
	}
	b.ReportMetric(float64(len(all))/elapsed.Seconds(), "lockops/s")
	b.ReportMetric(float64(all[len(all)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(all[len(all)*99/100].Microseconds())/1000, "p99-ms")
	b.ReportMetric(0, "ns/op")
}

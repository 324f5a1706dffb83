package replication_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/lockserver/lockserver/internal/lockscripts"
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
	lock, unlock := redis.NewScript(lockscripts.MustSource(b, "redisson_lock.lua")), redis.NewScript(lockscripts.MustSource(b, "redisson_unlock_v2.lua"))
	for _, target := range []struct{ name, addr string }{{"leader", leader}, {"follower", follower}} {
		for _, clients := range []int{1, 16} {
			for _, wait := range []bool{false, true} {
				b.Run(fmt.Sprintf("%s/clients=%d/wait=%v", target.name, clients, wait), func(b *testing.B) {
					rdb := redis.NewClient(&redis.Options{Addr: target.addr, PoolSize: clients, MinIdleConns: clients, MaxRetries: -1})
					defer rdb.Close()
					benchRedissonCycles(b, rdb, lock, unlock, target.name, clients, wait)
				})
			}
		}
	}
}

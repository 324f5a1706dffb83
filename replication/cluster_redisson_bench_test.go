package replication_test

import (
	"context"
	"errors"
	"fmt"
	"runtime/pprof"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockserver/lockserver"
	"github.com/lockserver/lockserver/internal/freeport"
	"github.com/lockserver/lockserver/internal/lockscripts"
	"github.com/lockserver/lockserver/replication"
	"github.com/redis/go-redis/v9"
)

// BenchmarkClusterRedisson measures what users of a 3-node cluster see:
// go-redis clients running Redisson's lock and unlock scripts over TCP, on the
// leader and on a follower, which forwards to the leader. The members are
// embedded in this process, keep their logs in bolt with fsync and share this
// machine's disk. Each client locks and unlocks its own key; it reports lock
// operations (locks plus unlocks) per second and their p50 and p99 latencies.
//
//	go test ./replication -run '^$' -bench ClusterRedisson -benchtime 3000x
//
// A CPU profile splits by member: each member's goroutines carry the pprof
// label member=m1, m2 or m3 (the log names the leader), and the clients'
// none. For one member's top entries:
//
//	go test ./replication -run '^$' -bench 'ClusterRedisson/leader/clients=16$' -benchtime 100000x -cpuprofile /tmp/cpu.prof
//	go tool pprof -top -tagfocus member=m1 /tmp/cpu.prof
func BenchmarkClusterRedisson(b *testing.B) {
	leader, follower := startRedissonCluster(b)
	lock, unlock := redis.NewScript(lockscripts.MustSource(b, "redisson_lock.lua")), redis.NewScript(lockscripts.MustSource(b, "redisson_unlock_v2.lua"))
	for _, target := range []struct{ name, addr string }{{"leader", leader}, {"follower", follower}} {
		for _, clients := range []int{1, 16, 256} {
			b.Run(fmt.Sprintf("%s/clients=%d", target.name, clients), func(b *testing.B) {
				rdb := redis.NewClient(&redis.Options{Addr: target.addr, PoolSize: clients, MinIdleConns: clients, MaxRetries: -1})
				defer rdb.Close()
				benchRedissonCycles(b, rdb, lock, unlock, target.name, clients, false)
			})
		}
	}
}

// benchRedissonCycles runs lock and unlock cycles from clients goroutines, each
// on its own key, and reports lock operations per second and their p50 and
// p99 latencies. With wait, each script is followed in the same pipeline by
// WAIT 2 1000, as Redisson's replicated and sentinel modes send it, and a
// reply below 2 is an error.
func benchRedissonCycles(b *testing.B, rdb *redis.Client, lock, unlock *redis.Script, prefix string, clients int, wait bool) {
	ctx := context.Background()
	if err := errors.Join(lock.Load(ctx, rdb).Err(), unlock.Load(ctx, rdb).Err()); err != nil {
		b.Fatal(err)
	}
	step := func(s *redis.Script, keys []string, args ...any) (any, error) {
		if !wait {
			return s.EvalSha(ctx, rdb, keys, args...).Result()
		}
		var ev, synced *redis.Cmd
		_, err := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			ev = s.EvalSha(ctx, p, keys, args...)
			synced = p.Do(ctx, "WAIT", 2, 1000)
			return nil
		})
		if err != nil && err != redis.Nil {
			return nil, err
		}
		if synced.Val() != int64(2) {
			return nil, fmt.Errorf("WAIT 2 1000 replied %v", synced.Val())
		}
		return ev.Result()
	}
	var next atomic.Int64
	lat := make([][]time.Duration, clients)
	var wg sync.WaitGroup
	b.ResetTimer()
	start := time.Now()
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			key := fmt.Sprintf("%s:%d:%v:lock:%d", prefix, clients, wait, c)
			keys := []string{key, "redisson_lock__channel:{" + key + "}"}
			owner := fmt.Sprintf("6f1b3c52-8d0e-4d7a-9a43-2f5e8c1d7b90:%d", c)
			for next.Add(1) <= int64(b.N) {
				t := time.Now()
				// nil (redis.Nil) when acquired, else the holder's remaining lease.
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
	replication.ReportLockOps(b, lat, time.Since(start))
}

// startRedissonCluster opens three bootstrapped members on loopback ports and
// returns the client addresses of the leader and of a follower, once a write
// through each member has succeeded.
func startRedissonCluster(b *testing.B) (leader, follower string) {
	var peers []lockserver.Peer
	var opts []lockserver.Options
	for i := range 3 {
		id := fmt.Sprint("m", i+1)
		peers = append(peers, lockserver.Peer{ID: id, RaftAddr: freeport.MustAddr(b)})
		opts = append(opts, lockserver.Options{Addr: freeport.MustAddr(b), Cluster: lockserver.ClusterOptions{
			NodeID: id, RaftAddr: peers[i].RaftAddr, DataDir: b.TempDir(),
		}})
	}
	clients := map[string]*redis.Client{}
	for _, o := range opts {
		o.Cluster.Bootstrap = peers
		// Each member's goroutines carry its id (pprof labels), so that a
		// CPU profile of the benchmark splits by member (see above).
		var s *lockserver.Server
		var err error
		pprof.Do(context.Background(), pprof.Labels("member", o.Cluster.NodeID), func(context.Context) { s, err = lockserver.Open(o) })
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { s.Close() })
		c := redis.NewClient(&redis.Options{Addr: o.Addr})
		b.Cleanup(func() { c.Close() })
		clients[o.Cluster.NodeID] = c
	}
	ctx := context.Background()
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		ready := 0
		for _, c := range clients {
			if c.Set(ctx, "ready", "1", 0).Err() == nil {
				ready++
			}
		}
		v, err := clients["m1"].Do(ctx, "LOCKSERVER", "LEADER").Result()
		if err != nil || ready < len(clients) {
			continue
		}
		id := fmt.Sprint(v.(map[any]any)["id"])
		for _, o := range opts {
			if o.Cluster.NodeID == id {
				leader = o.Addr
			} else {
				follower = o.Addr
			}
		}
		if leader != "" {
			b.Logf("the leader is %s", id)
			return leader, follower
		}
	}
	b.Fatal("the cluster did not accept writes through every member")
	return "", ""
}

package replication

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/lockserver/lockserver/internal/freeport"
	"github.com/lockserver/lockserver/keyspace"
	"github.com/lockserver/lockserver/luaexec"
	"github.com/lockserver/lockserver/replication/internal/logcodec"
)

// BenchmarkClusterLock measures lock cycles on the leader of a 3-node cluster
// whose nodes talk over TCP on loopback and keep their logs in bolt with
// fsync, as in production (all three share this machine's disk). A cycle is
// an acquire (SET key token NX PX 30000) and a release (DEL key) by one of
// the concurrent clients; each client has its own lock key. It reports lock
// operations (acquires plus releases) per second and their p50 and p99
// latencies.
//
//	go test ./replication -run '^$' -bench ClusterLock -benchtime 20000x
func BenchmarkClusterLock(b *testing.B) {
	nodes := startTCPCluster(b, 3)
	var leader *Raft
	deadline := time.Now().Add(10 * time.Second)
	for leader == nil && time.Now().Before(deadline) {
		for _, n := range nodes {
			if n.raft.State() == raft.Leader && n.leading() {
				leader = n
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	if leader == nil {
		b.Fatal("no leader")
	}
	for _, clients := range []int{1, 4, 16, 64, 256} {
		b.Run(fmt.Sprintf("clients=%d", clients), func(b *testing.B) {
			benchLockCycles(b, leader, clients)
		})
	}
}

func benchLockCycles(b *testing.B, eng Engine, clients int) {
	var next atomic.Int64
	lat := make([][]time.Duration, clients)
	var wg sync.WaitGroup
	ctx := context.Background()
	op := func(c int, args ...string) keyspace.Reply {
		start := time.Now()
		req := &Request{Cmds: [][][]byte{words(args...)}}
		eng.Submit(req)
		r := req.Wait(ctx)
		lat[c] = append(lat[c], time.Since(start))
		return r
	}
	b.ResetTimer()
	start := time.Now()
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			key := fmt.Sprint("lock:", c)
			for next.Add(1) <= int64(b.N) {
				if r := op(c, "SET", key, "token", "NX", "PX", "30000"); r.Kind != keyspace.KindStatus {
					b.Errorf("acquire: %+v", r)
					return
				}
				if r := op(c, "DEL", key); r.Kind != keyspace.KindInt || r.Int != 1 {
					b.Errorf("release: %+v", r)
					return
				}
			}
		}()
	}
	wg.Wait()
	reportLockOps(b, lat, time.Since(start))
}

// reportLockOps stops b's timer and reports the lock operations timed in lat
// (one slice per client) over elapsed: per second, and their p50 and p99.
func reportLockOps(b *testing.B, lat [][]time.Duration, elapsed time.Duration) {
	b.StopTimer()
	all := slices.Concat(lat...)
	slices.Sort(all)
	if len(all) == 0 {
		return
	}
	b.ReportMetric(float64(len(all))/elapsed.Seconds(), "lockops/s")
	b.ReportMetric(float64(all[len(all)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(all[len(all)*99/100].Microseconds())/1000, "p99-ms")
	b.ReportMetric(0, "ns/op") // a cycle's wall time says nothing with many clients
}

// startTCPCluster starts size bootstrapped nodes on loopback TCP transports
// with their data in temporary directories (bolt, fsync on).
func startTCPCluster(tb testing.TB, size int) []*Raft {
	var peers []Peer
	for i := range size {
		peers = append(peers, Peer{ID: fmt.Sprintf("n%d", i+1), RaftAddr: freeport.MustAddr(tb)})
	}
	nodes := make([]*Raft, size)
	for i, p := range peers {
		n, err := NewRaft(RaftOptions{
			NodeID: p.ID, RaftAddr: p.RaftAddr, DataDir: tb.TempDir(), Bootstrap: peers,
		})
		if err != nil {
			tb.Fatal(err)
		}
		nodes[i] = n
		tb.Cleanup(func() { n.Close() })
	}
	return nodes
}

// BenchmarkSnapshotPause measures how long taking a snapshot holds the state
// machine's lock, during which nothing is applied: freezing 1M held locks (a
// string key with a value and a deadline each), which copies a pointer per
// shard and the WATCH counters (0.8 ms here, against 1 s when it copied the
// key table). Sorting each shard, encoding and writing happen afterwards,
// beside Apply; write-ms reports that part.
//
//	go test ./replication -run '^$' -bench SnapshotPause -benchtime 3x
func BenchmarkSnapshotPause(b *testing.B) {
	const keys = 1_000_000
	r := &Raft{}
	r.members.Store(&map[string]string{"n1": "127.0.0.1:6379"})
	sm := newStateMachine(luaexec.Options{}, nil, false)
	r.sm.Store(sm)
	for i := range keys {
		e := logcodec.Entry{Time: 1_700_000_000_000, Cmds: [][][]byte{words("SET", fmt.Sprint("lock:", i), "owner-uuid:1", "PX", "30000")}}
		sm.apply(&e, uint64(i), nil)
	}
	var size int
	var write time.Duration
	b.ResetTimer()
	for range b.N {
		snap := r.freeze()
		b.StopTimer()
		start := time.Now()
		var buf bytes.Buffer
		if err := snap.write(&buf); err != nil {
			b.Fatal(err)
		}
		write += time.Since(start)
		size = buf.Len()
		snap.Release()
		b.StartTimer()
	}
	b.ReportMetric(float64(size)/(1<<20), "MB")
	b.ReportMetric(float64(write.Milliseconds())/float64(b.N), "write-ms")
}

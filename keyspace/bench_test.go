package keyspace

import (
	"fmt"
	"math/rand"
	"os"
	"runtime"
	"runtime/metrics"
	"strconv"
	"sync"
	"testing"
	"time"
)

// heapInUse returns the live heap after a full collection.
func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// The two lock shapes of the memory target, as clients write them.
var lockShapes = []struct {
	name string
	cmds func(key string) [][]string
}{
	{"SetNXPX", func(key string) [][]string {
		return [][]string{{"SET", key, "AbCdEfGhIjKlMnOpQrStUv", "NX", "PX", "3600000"}}
	}},
	{"RedissonHash", func(key string) [][]string {
		return [][]string{
			{"HINCRBY", key, "8743c9c0-0795-4907-87fd-6c719a6b4586:57", "1"},
			{"PEXPIRE", key, "3600000"},
		}
	}},
}

// BenchmarkMemoryPerLock reports the heap each held lock costs with 1M locks
// held (keys lock:1 .. lock:1000000), for comparison with redis-server's
// used_memory for the same keys. Run it once:
//
//	go test -run '^$' -bench MemoryPerLock -benchtime 1x ./keyspace
func BenchmarkMemoryPerLock(b *testing.B) {
	const locks = 1_000_000
	for _, shape := range lockShapes {
		b.Run(shape.name, func(b *testing.B) {
			for range b.N {
				before := heapInUse()
				s := New()
				for i := 1; i <= locks; i++ {
					for _, cmd := range shape.cmds("lock:" + strconv.Itoa(i)) {
						args := make([][]byte, len(cmd))
						for j, a := range cmd {
							args[j] = []byte(a)
						}
						s.Exec(&Call{Store: s, Now: 1_700_000_000_000, Args: args})
					}
				}
				after := heapInUse()
				b.ReportMetric(float64(after-before)/locks, "bytes/lock")
				runtime.KeepAlive(s)
			}
		})
	}
}

// benchCommand runs one command over and over against a store holding keys.
func benchCommand(b *testing.B, setup [][]string, cmd []string) {
	s := New()
	c := &Call{Store: s, Now: 1_700_000_000_000}
	run := func(args [][]byte) Reply {
		c.Args = args
		return s.Exec(c)
	}
	for _, c := range setup {
		run(toArgs(c))
	}
	args := toArgs(cmd)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		run(args)
	}
}

func toArgs(cmd []string) [][]byte {
	args := make([][]byte, len(cmd))
	for i, a := range cmd {
		args[i] = []byte(a)
	}
	return args
}

func BenchmarkGet(b *testing.B) {
	benchCommand(b, [][]string{{"SET", "lock:1", "AbCdEfGhIjKlMnOpQrStUv"}}, []string{"GET", "lock:1"})
}

func BenchmarkSet(b *testing.B) {
	benchCommand(b, nil, []string{"SET", "lock:1", "AbCdEfGhIjKlMnOpQrStUv", "PX", "30000"})
}

func BenchmarkSetNXHeld(b *testing.B) {
	benchCommand(b, [][]string{{"SET", "lock:1", "holder"}}, []string{"SET", "lock:1", "AbCdEfGhIjKlMnOpQrStUv", "NX", "PX", "30000"})
}

func BenchmarkHIncrBy(b *testing.B) {
	benchCommand(b, nil, []string{"HINCRBY", "lock:1", "8743c9c0-0795-4907-87fd-6c719a6b4586:57", "1"})
}

func BenchmarkHExists(b *testing.B) {
	benchCommand(b, [][]string{{"HSET", "lock:1", "8743c9c0-0795-4907-87fd-6c719a6b4586:57", "1"}},
		[]string{"HEXISTS", "lock:1", "8743c9c0-0795-4907-87fd-6c719a6b4586:57"})
}

func BenchmarkPExpire(b *testing.B) {
	benchCommand(b, [][]string{{"SET", "lock:1", "v"}}, []string{"PEXPIRE", "lock:1", "30000"})
}

func BenchmarkLookup(b *testing.B) {
	name := []byte("HINCRBY")
	b.ReportAllocs()
	for range b.N {
		Lookup(name)
	}
}

// BenchmarkSweepLive looks for expired keys 2000 keys at a time in a store of
// 100k held locks of which none has expired: what an engine spends when
// there is nothing to reclaim.
//
//	go test ./keyspace -run '^$' -bench SweepLive
func BenchmarkSweepLive(b *testing.B) {
	const now = 1_700_000_000_000
	s := New()
	c := &Call{Store: s, Now: now}
	for i := range 100_000 {
		c.Args = toArgs([]string{"SET", "lock:" + strconv.Itoa(i), "owner", "PX", "30000"})
		s.Exec(c)
	}
	b.ResetTimer()
	from := 0
	for range b.N {
		n, _, expired := s.Expired(0, from, now, 2000)
		if expired != 0 {
			b.Fatalf("%d live keys expired", expired)
		}
		from = (from + n) % numShards
	}
}

// BenchmarkAppendToLargeValue appends one byte to a 64 MB value, which Redis
// does in a few microseconds: the value grows in place.
func BenchmarkAppendToLargeValue(b *testing.B) {
	s := New()
	run := func(args ...string) Reply {
		bargs := make([][]byte, len(args))
		for i, a := range args {
			bargs[i] = []byte(a)
		}
		return s.Exec(&Call{Store: s, Args: bargs})
	}
	run("SETRANGE", "k", strconv.Itoa(64<<20-1), "x")
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		run("APPEND", "k", "y")
	}
}

// BenchmarkSnapshotStall loads held locks as bench/'s held-growth workload
// does (a Redisson hash with a one-hour deadline each). Then one goroutine
// applies single-key commands, one at a time under a mutex as the state
// machine does and at most STALL_RATE a second (20,000 by default), while a
// snapshot of the store is written to a writer that sleeps after each 64 kB
// frame (about 100 MB/s). It reports the longest command before and during
// the snapshot (from when it was due: one that waits behind others counts
// the wait), the commands a second, the time they took in all during the
// snapshot and the time they took to run in its first half second, and what the process allocated and spent on GC assists
// meanwhile. STALL_LOCKS sets the number of held locks (2M by default). The
// commands lock and unlock 16 keys of their own (the bench's lock clients),
// or with STALL_SPREAD=1 renew held locks picked at random (a lease
// watchdog's PEXPIRE), which reach every part of the keyspace:
//
//	STALL_SPREAD=1 go test -run '^$' -bench SnapshotStall -benchtime 1x ./keyspace/
func BenchmarkSnapshotStall(b *testing.B) {
	locks := 2_000_000
	if v, err := strconv.Atoi(os.Getenv("STALL_LOCKS")); err == nil {
		locks = v
	}
	rate := 20_000
	if v, err := strconv.Atoi(os.Getenv("STALL_RATE")); err == nil {
		rate = v
	}
	spread := os.Getenv("STALL_SPREAD") == "1"
	const now = 1_700_000_000_000
	const owner = "8743c9c0-0795-4907-87fd-6c719a6b4586:57"
	s := New()
	exec := func(args ...string) {
		if r := s.Exec(&Call{Store: s, Now: now, Args: toArgs(args)}); r.Kind == KindError {
			b.Fatalf("%v: %s", args, r.Str)
		}
	}
	for i := range locks {
		key := fmt.Sprintf("bench:held:%08d", i)
		exec("HINCRBY", key, owner, "1")
		exec("PEXPIRE", key, "3600000")
	}
	runtime.GC()
	for range b.N {
		// The commands' figures, before the snapshot and during it.
		type window struct {
			commands      int
			longest, busy time.Duration
		}
		var (
			mu             sync.Mutex
			before, during window
			snapshotting   bool
			// frozen is when Freeze returned; early the time the
			// commands took to run (without waiting) in the half
			// second after it, where whole shards were copied.
			frozen time.Time
			early  time.Duration
		)
		stop, done := make(chan struct{}), make(chan struct{})
		go func() {
			defer close(done)
			r := rand.New(rand.NewSource(1))
			t0 := time.Now()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				// A command's time runs from when it is due, as a
				// client's would from when it sent it: one that
				// waits behind a slow one counts the wait.
				due := t0.Add(time.Duration(i) * time.Second / time.Duration(rate))
				time.Sleep(time.Until(due))
				var cmd []string
				if key := "bench:client:" + strconv.Itoa(i/3%16); spread {
					cmd = []string{"PEXPIRE", fmt.Sprintf("bench:held:%08d", r.Intn(locks)), "3600000"}
				} else {
					cmd = [][]string{{"HINCRBY", key, owner, "1"}, {"PEXPIRE", key, "30000"}, {"DEL", key}}[i%3]
				}
				mu.Lock()
				start := time.Now()
				exec(cmd...)
				took := time.Since(due)
				w := &before
				if snapshotting {
					w = &during
					if start.Sub(frozen) < time.Second/2 {
						early += time.Since(start)
					}
				}
				w.commands++
				w.longest, w.busy = max(w.longest, took), w.busy+took
				mu.Unlock()
			}
		}()
		time.Sleep(time.Second)
		var m0, m1 runtime.MemStats
		assist := []metrics.Sample{{Name: "/cpu/classes/gc/mark/assist:cpu-seconds"}}
		metrics.Read(assist)
		a0 := assist[0].Value.Float64()
		runtime.ReadMemStats(&m0)
		start := time.Now()
		mu.Lock()
		f := s.Freeze()
		snapshotting, frozen = true, time.Now()
		mu.Unlock()
		w := &pacedWriter{pause: time.Second * snapshotFrame / (100 << 20)}
		if err := f.WriteSnapshot(w, nil); err != nil {
			b.Fatal(err)
		}
		mu.Lock()
		s.Release(f)
		snapshotting = false
		mu.Unlock()
		took := time.Since(start)
		runtime.ReadMemStats(&m1)
		metrics.Read(assist)
		close(stop)
		<-done
		b.ReportMetric(float64(before.longest.Microseconds()), "longest-before-µs")
		b.ReportMetric(float64(during.longest.Microseconds()), "longest-µs")
		b.ReportMetric(float64(before.commands), "cmds/s-before")
		b.ReportMetric(float64(during.commands)/took.Seconds(), "cmds/s")
		b.ReportMetric(float64(during.busy.Milliseconds()), "cmds-ms")
		b.ReportMetric(float64(early.Microseconds())/1000, "first-0.5s-run-ms")
		b.ReportMetric(took.Seconds(), "snapshot-s")
		b.ReportMetric(float64(w.n)/(1<<20), "snapshot-MB")
		b.ReportMetric(float64(m1.TotalAlloc-m0.TotalAlloc)/(1<<20), "alloc-MB")
		b.ReportMetric(float64(m1.NumGC-m0.NumGC), "GCs")
		b.ReportMetric((assist[0].Value.Float64()-a0)*1000, "assist-ms")
	}
}

// pacedWriter counts what it is given and sleeps after each write.
type pacedWriter struct {
	n     int64
	pause time.Duration
}

func (w *pacedWriter) Write(p []byte) (int, error) {
	w.n += int64(len(p))
	time.Sleep(w.pause)
	return len(p), nil
}

// BenchmarkSetRandomKey sets keys picked at random among 100k, as
// redis-benchmark -r 100000 does: the cost of finding a key that is not in
// the CPU's cache.
func BenchmarkSetRandomKey(b *testing.B) {
	s := New()
	c := &Call{Store: s, Now: 1_700_000_000_000}
	const keys = 100_000
	args := toArgs([]string{"SET", "key:000000000000", "xxx"})
	key := args[1]
	setKey := func(n int) {
		for i := len(key) - 1; i >= 4; i-- {
			key[i] = byte('0' + n%10)
			n /= 10
		}
	}
	for n := range keys {
		setKey(n)
		c.Args = args
		s.Exec(c)
	}
	rng := rand.New(rand.NewSource(1))
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		setKey(rng.Intn(keys))
		c.Args = args
		s.Exec(c)
	}
}

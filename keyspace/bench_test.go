package keyspace

import (
	"runtime"
	"strconv"
	"testing"
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

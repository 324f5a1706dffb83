package keyspace

import (
	"strconv"
	"strings"
	"testing"
)

// usageOf runs MEMORY USAGE key and returns its figure, failing unless it is
// a positive integer.
func (f *fixture) usageOf(key string) int64 {
	f.t.Helper()
	got := f.do("MEMORY USAGE " + key)
	n, err := strconv.ParseInt(strings.TrimPrefix(got, ":"), 10, 64)
	if !strings.HasPrefix(got, ":") || err != nil || n <= 0 {
		f.t.Fatalf("MEMORY USAGE %s = %s, want a positive integer", key, got)
	}
	return n
}

// A missing or expired key has no figure, and the arguments are checked as
// redis-server checks them (compat_test compares the errors with it).
func TestMemoryUsageNullAndErrors(t *testing.T) {
	f := newFixture(t)
	f.do("SET k v PX 10")
	f.expect(
		"MEMORY USAGE nokey", "(nil)",
		"MEMORY USAGE nokey SAMPLES 5", "(nil)",
		"MEMORY USAGE nokey SAMPLES x", "-ERR value is not an integer or out of range",
		"MEMORY USAGE nokey foo", "-ERR syntax error",
		"MEMORY USAGE k SAMPLES", "-ERR syntax error",
		"MEMORY USAGE k SAMPLES -1", "-ERR syntax error",
		"MEMORY USAGE k samples 1 SAMPLES 2 foo", "-ERR syntax error",
		"MEMORY USAGE", "-ERR wrong number of arguments for 'memory|usage' command",
		"MEMORY", "-ERR wrong number of arguments for 'memory' command",
		"MEMORY STATS", "-ERR unknown subcommand 'STATS'. Try MEMORY HELP.",
	)
	f.usageOf("k")
	for _, opts := range []string{" SAMPLES 0", " samples 5 SAMPLES 1"} {
		if got := f.do("MEMORY USAGE k" + opts); got != f.do("MEMORY USAGE k") {
			t.Errorf("MEMORY USAGE k%s = %s, want the figure without SAMPLES", opts, got)
		}
	}
	f.now += 10
	f.expect("MEMORY USAGE k", "(nil)")
}

// The figure grows with what the key holds, for every type and form.
func TestMemoryUsageGrows(t *testing.T) {
	f := newFixture(t)
	f.do("SET short v")
	f.do("SET along " + strings.Repeat("v", 100))
	f.do("SET " + strings.Repeat("k", 105) + " v")
	if s, l := f.usageOf("short"), f.usageOf("along"); l < s+99 {
		t.Errorf("a value 99 bytes longer: %d, then %d bytes", s, l)
	}
	if s, l := f.usageOf("short"), f.usageOf(strings.Repeat("k", 105)); l < s+100 {
		t.Errorf("a key 100 bytes longer: %d, then %d bytes", s, l)
	}
	grows := func(what string, add func(i int)) {
		t.Helper()
		add(0)
		prev := f.usageOf(what)
		for i := 1; i < 200; i++ {
			add(i)
			if n := f.usageOf(what); n <= prev {
				t.Fatalf("%s with %d elements: %d bytes, with %d: %d", what, i, prev, i+1, n)
			} else {
				prev = n
			}
		}
	}
	// A hash is packed up to 128 fields, then a map.
	grows("hash", func(i int) { f.do("HSET hash field" + strconv.Itoa(i) + " v") })
	grows("list", func(i int) { f.do("RPUSH list e" + strconv.Itoa(i)) })
	grows("set", func(i int) { f.do("SADD set m" + strconv.Itoa(i)) })
	grows("zset", func(i int) { f.do("ZADD zset " + strconv.Itoa(i) + " m" + strconv.Itoa(i)) })
	// A hash with a value past 64 bytes is a map from its first field.
	grows("bighash", func(i int) { f.do("HSET bighash field" + strconv.Itoa(i) + " " + strings.Repeat("v", 65)) })
}

// The figure depends on the value, not on how it was built: every node gives
// a script the same one, whatever its history (a follower restored from a
// snapshot built its values afresh).
func TestMemoryUsageIgnoresHistory(t *testing.T) {
	f := newFixture(t)
	for i := range 300 {
		e := " e" + strconv.Itoa(i)
		f.do("RPUSH churned" + e)
		f.do("SADD churnedset" + e)
		f.do("ZADD churnedz " + strconv.Itoa(i) + e)
		f.do("HSET churnedh" + e + " " + strings.Repeat("v", 65))
	}
	f.do("LTRIM churned 0 2")
	for i := 3; i < 300; i++ {
		e := " e" + strconv.Itoa(i)
		f.do("SREM churnedset" + e)
		f.do("ZREM churnedz" + e)
		f.do("HDEL churnedh" + e)
	}
	f.do("RPUSH fresh e0 e1 e2")
	f.do("SADD freshset e2 e1 e0")
	f.do("ZADD freshz 2 e2 1 e1 0 e0")
	for i := range 3 {
		f.do("HSET freshh e" + strconv.Itoa(i) + " " + strings.Repeat("v", 65))
	}
	for _, p := range [][2]string{{"churned", "fresh"}, {"churnedset", "freshset"}, {"churnedz", "freshz"}, {"churnedh", "freshh"}} {
		// The churned key's name is longer by 2 bytes.
		if a, b := f.usageOf(p[0]), f.usageOf(p[1]); a != b+2 {
			t.Errorf("%s: %d bytes, %s with the same elements: %d", p[0], a, p[1], b)
		}
	}
}

// The estimate is near what held locks really cost the heap: for each lock
// shape of the memory target, the figures of 20,000 locks add up to within
// a factor of 1.5 of the heap they took.
func TestMemoryUsageNearHeap(t *testing.T) {
	const locks = 20_000
	for _, shape := range lockShapes {
		f := newFixture(t)
		before := heapInUse() // the Store's own tables are no lock's
		for i := range locks {
			for _, cmd := range shape.cmds("lock:" + strconv.Itoa(i)) {
				f.doArgs(cmd...)
			}
		}
		heap := float64(heapInUse()-before) / locks
		var sum int64
		for i := range locks {
			sum += f.usageOf("lock:" + strconv.Itoa(i))
		}
		estimate := float64(sum) / locks
		if estimate > heap*1.5 || estimate < heap/1.5 {
			t.Errorf("%s: MEMORY USAGE says %.0f bytes a lock, the heap grew by %.0f", shape.name, estimate, heap)
		}
		t.Logf("%s: MEMORY USAGE says %.0f bytes a lock, the heap grew by %.0f", shape.name, estimate, heap)
	}
}

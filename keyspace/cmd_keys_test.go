package keyspace

import (
	"strconv"
	"strings"
	"testing"
)

func TestKeysExpire(t *testing.T) {
	f := newFixture(t) // now = 1_700_000_000_000
	f.expect(
		"SET k v", "+OK",
		"TTL k", ":-1",
		"TTL nope", ":-2",
		"PTTL nope", ":-2",
		"EXPIRE k 100", ":1",
		"PEXPIRETIME k", ":1700000100000",
		"EXPIRE k 50 NX", ":0",
		"EXPIRE k 50 GT", ":0",
		"EXPIRE k 200 GT", ":1",
		"EXPIRE k 300 LT", ":0",
		"EXPIRE k 10 LT", ":1",
		"EXPIRE k 10 XX", ":1",
		"EXPIRE k 10 NX XX", "-ERR NX and XX, GT or LT options at the same time are not compatible",
		"EXPIRE k 10 GT LT", "-ERR GT and LT options at the same time are not compatible",
		"EXPIRE k 10 FOO", "-ERR Unsupported option FOO",
		"EXPIRE k 9223372036854775807", "-ERR invalid expire time in 'expire' command",
		"PEXPIRE k 9223372036854775807", "-ERR invalid expire time in 'pexpire' command",
		"PEXPIREAT k 9223372036854775807", ":1",
		"EXPIRETIME k", ":9223372036854776",
		"PERSIST k", ":1",
		"PERSIST k", ":0",
		"EXPIRE k 10 XX", ":0",
		"EXPIRE k 10 GT", ":0", // no deadline counts as infinite
		"EXPIRE k 10 LT", ":1",
		"PEXPIREAT k 1700000000000", ":1", // at now: deleted at once
		"EXISTS k", ":0",
		"SET k v", "+OK",
		"PEXPIREAT k 0", ":1",
		"EXISTS k", ":0",
		"SET k v", "+OK",
		"EXPIRE k -1", ":1",
		"EXISTS k", ":0",
		"EXPIRE nope 10", ":0",
	)
}

// TestKeysExpiredInvisible checks that a key is gone the millisecond its
// deadline is reached, for every kind of read and write.
func TestKeysExpiredInvisible(t *testing.T) {
	f := newFixture(t)
	f.expect("SET s v PX 10", "+OK", "HSET h f v", ":1", "PEXPIRE h 10", ":1")
	f.now += 9
	f.expect("PTTL s", ":1", "EXISTS s h", ":2")
	f.now++
	f.expect("PTTL s", ":-2", "EXISTS s h", ":0", "GET s", "(nil)", "HGET h f", "(nil)", "TYPE h", "+none",
		"KEYS *", "[]", "SET s w NX", "+OK", "PTTL s", ":-1", "HINCRBY h f 1", ":1", "TTL h", ":-1",
		"DEL s h", ":2", "DBSIZE", ":0")
}

func TestKeysRenameCopyMove(t *testing.T) {
	f := newFixture(t)
	f.expect(
		"SET a 1 PX 5000", "+OK",
		"RENAME a b", "+OK",
		"PTTL b", ":5000",
		"RENAME a c", "-ERR no such key",
		"RENAMENX b b", ":0",
		"SET c 2", "+OK",
		"RENAMENX b c", ":0",
		"COPY b c", ":0",
		"COPY b c REPLACE", ":1",
		"GET c", `"1"`,
		"PTTL c", ":5000",
		"COPY b b", "-ERR source and destination objects are the same",
		"COPY b x DB 16", "-ERR DB index is out of range",
		"MOVE b 0", "-ERR source and destination objects are the same",
		"MOVE b 3", ":1",
		"EXISTS b", ":0",
		"SELECT 3", "+OK",
		"GET b", `"1"`,
		"SWAPDB 3 0", "+OK",
		"GET c", `"1"`,
		"DBSIZE", ":1",
		"FLUSHALL", "+OK",
		"DBSIZE", ":0",
		"FLUSHDB FOO", "-ERR syntax error",
	)
}

// TestKeysScanCoversAll checks SCAN's guarantee: a key present for the whole
// iteration is returned exactly once, however many keys are added and removed.
func TestKeysScanCoversAll(t *testing.T) {
	f := newFixture(t)
	for i := 0; i < 2000; i++ {
		f.do("SET k" + strconv.Itoa(i) + " v")
	}
	seen := map[string]int{}
	cursor := "0"
	for round := 0; ; round++ {
		r := f.do("SCAN " + cursor + " COUNT 37")
		// r is ["cursor" ["k1" "k2" ...]]
		fields := strings.Fields(strings.NewReplacer("[", " ", "]", " ", `"`, " ").Replace(r))
		cursor = fields[0]
		for _, k := range fields[1:] {
			seen[k]++
		}
		// Churn: add and remove other keys between calls.
		f.do("SET churn" + strconv.Itoa(round) + " v")
		f.do("DEL churn" + strconv.Itoa(round-1))
		if cursor == "0" {
			break
		}
	}
	for i := 0; i < 2000; i++ {
		if k := "k" + strconv.Itoa(i); seen[k] != 1 {
			t.Errorf("%s returned %d times", k, seen[k])
		}
	}
}

// TestKeysScriptSorted checks that a script's KEYS is sorted, so that every
// node running the script sees the same order.
func TestKeysScriptSorted(t *testing.T) {
	f := newFixture(t)
	f.expect("MSET c 1 a 1 b 1 d 1", "+OK")
	f.script = true
	f.expect("KEYS *", `["a" "b" "c" "d"]`)
}

func TestKeysSweep(t *testing.T) {
	f := newFixture(t)
	for i := 0; i < 1000; i++ {
		f.do("SET v" + strconv.Itoa(i) + " x PX " + strconv.Itoa(1+i%2*1000))
		f.do("SET p" + strconv.Itoa(i) + " x")
	}
	if keys, volatile := f.s.KeyCounts(0); keys != 2000 || volatile != 1000 {
		t.Fatalf("KeyCounts = %d, %d; want 2000, 1000", keys, volatile)
	}
	// At now+1 the 500 keys with a 1 ms deadline have expired; a sweep with a
	// budget of 100 removes exactly 100 of them.
	if n := f.s.Sweep(f.now+1, 100); n != 100 {
		t.Fatalf("Sweep removed %d, want 100", n)
	}
	total := 100
	for i := 0; i < 100 && total < 500; i++ {
		total += f.s.Sweep(f.now+1, 100)
	}
	if total != 500 {
		t.Fatalf("sweeps removed %d in all, want 500", total)
	}
	if keys, volatile := f.s.KeyCounts(0); keys != 1500 || volatile != 500 {
		t.Errorf("after sweeping: KeyCounts = %d, %d; want 1500, 500", keys, volatile)
	}
	// Nothing live was touched.
	f.now++
	f.expect("DBSIZE", ":1500", "EXISTS v1 p0 p999", ":3")
	if n := f.s.Sweep(f.now+5000, 10000); n != 500 {
		t.Errorf("final sweep removed %d, want 500", n)
	}
}

// TestKeysSweepFewExpired: among 10,000 live locks, 10 expired ones are not
// searched for in one sweep (it stops once a sample shows that few have
// expired), but the sweeps that follow, each resuming where the last one
// stopped, reclaim them all within one turn of the shards.
func TestKeysSweepFewExpired(t *testing.T) {
	f := newFixture(t)
	for i := 0; i < 10_000; i++ {
		f.do("SET live" + strconv.Itoa(i) + " x PX 60000")
	}
	for i := 0; i < 10; i++ {
		f.do("SET gone" + strconv.Itoa(i) + " x PX 1")
	}
	later := f.now + 1000
	if n := f.s.Sweep(later, 2000); n >= 10 {
		t.Fatalf("one sweep removed %d: it searched the whole store for 10 expired keys", n)
	}
	for range numShards {
		f.s.Sweep(later, 2000)
	}
	if keys, volatile := f.s.KeyCounts(0); keys != 10_000 || volatile != 10_000 {
		t.Errorf("after a turn of sweeps: KeyCounts = %d, %d; want 10000, 10000", keys, volatile)
	}
}

// TestKeysVersions checks WATCH's counters: every write moves the key's
// version, reads do not.
func TestKeysVersions(t *testing.T) {
	f := newFixture(t)
	v := func() uint64 { return f.s.Version(0, "k") }
	steps := []struct {
		cmd   string
		moves bool
	}{
		{"SET k v", true}, {"GET k", false}, {"EXISTS k", false}, {"APPEND k x", true}, {"PEXPIRE k 100", true},
		{"PTTL k", false}, {"PERSIST k", true}, {"PERSIST k", false}, {"SET k v NX", false}, {"DEL k", true},
		{"DEL k", false}, {"HSET k f v", true}, {"HGET k f", false}, {"HDEL k nope", false}, {"HDEL k f", true},
		{"RPUSH k a", true}, {"LRANGE k 0 -1", false}, {"LPOP k", true}, {"SADD k a", true}, {"SADD k a", false},
		{"FLUSHDB", true}, {"ZADD k 1 a", true}, {"ZADD k 1 a", false}, {"ZINCRBY k 1 a", true},
	}
	for _, s := range steps {
		before := v()
		f.do(s.cmd)
		if moved := v() != before; moved != s.moves {
			t.Errorf("%s: version moved = %v, want %v", s.cmd, moved, s.moves)
		}
	}
}

package keyspace

import (
	"bytes"
	"math/rand"
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
	// At now+1 the 500 keys with a 1 ms deadline have expired. Expired with
	// a limit of 100 looks at whole shards from shard 3 until it has
	// examined 100 keys; a sweep of those shards removes exactly their
	// expired keys, counted here from the maps.
	wantExamined, wantExpired, shards := 0, 0, 0
	for ; wantExamined < 100; shards++ {
		for _, o := range f.s.dbs[0].shardKeys(3 + shards) {
			wantExamined++
			if o.deadline == f.now+1 {
				wantExpired++
			}
		}
	}
	if n, ex, exp := f.s.Expired(0, 3, f.now+1, 100); n != shards || ex != wantExamined || exp != wantExpired {
		t.Fatalf("Expired = %d shards, %d, %d; want %d shards, %d, %d", n, ex, exp, shards, wantExamined, wantExpired)
	}
	if keys, _ := f.s.KeyCounts(0); keys != 2000 {
		t.Fatalf("Expired removed keys: %d left", keys)
	}
	if rm := f.s.Sweep(0, 3, shards, f.now+1); rm != wantExpired {
		t.Fatalf("Sweep removed %d, want %d", rm, wantExpired)
	}
	// Sweeps of the shards that follow, to the last and then from the first,
	// reclaim the rest.
	removed := wantExpired
	for from := 3 + shards; from != 3; {
		n, _, _ := f.s.Expired(0, from, f.now+1, 100)
		if from < 3 {
			n = min(n, 3-from)
		}
		removed += f.s.Sweep(0, from, n, f.now+1)
		from = (from + n) % numShards
	}
	if removed != 500 {
		t.Fatalf("a turn of sweeps removed %d in all, want 500", removed)
	}
	if keys, volatile := f.s.KeyCounts(0); keys != 1500 || volatile != 500 {
		t.Errorf("after sweeping: KeyCounts = %d, %d; want 1500, 500", keys, volatile)
	}
	// Nothing live was touched.
	f.now++
	f.expect("DBSIZE", ":1500", "EXISTS v1 p0 p999", ":3")
	if rm := f.s.Sweep(0, 0, numShards, f.now+5000); rm != 500 {
		t.Errorf("final sweep removed %d, want 500", rm)
	}
	if n, ex, _ := f.s.Expired(0, 0, f.now+5000, 1<<30); n != 0 || ex != 0 {
		t.Errorf("a database with no deadline left: Expired looked at %d shards, %d keys", n, ex)
	}
}

// TestKeysSweepSameOnEveryNode builds one state in two orders, so that Go's
// maps iterate differently, and sweeps both alike in small steps: every step
// must leave both in the same state, as a replicated sweep must on every
// node.
func TestKeysSweepSameOnEveryNode(t *testing.T) {
	a, b := newFixture(t), newFixture(t)
	var cmds []string
	for i := 0; i < 5000; i++ {
		cmds = append(cmds, "SET k"+strconv.Itoa(i)+" x PX "+strconv.Itoa(1+i%7*100))
	}
	for _, c := range cmds {
		a.do(c)
	}
	rand.New(rand.NewSource(5)).Shuffle(len(cmds), func(i, j int) { cmds[i], cmds[j] = cmds[j], cmds[i] })
	for _, c := range cmds {
		b.do(c)
	}
	from := 0
	for step := 0; step < 40; step++ {
		now := a.now + int64(step*20)
		nA, exA, expA := a.s.Expired(0, from, now, 50)
		nB, exB, expB := b.s.Expired(0, from, now, 50)
		if nA != nB || exA != exB || expA != expB {
			t.Fatalf("step %d: Expired %d, %d, %d against %d, %d, %d", step, nA, exA, expA, nB, exB, expB)
		}
		if rmA, rmB := a.s.Sweep(0, from, nA, now), b.s.Sweep(0, from, nA, now); rmA != expA || rmB != expA {
			t.Fatalf("step %d: removed %d and %d, want %d", step, rmA, rmB, expA)
		}
		if !bytes.Equal(snapshot(t, a.s), snapshot(t, b.s)) {
			t.Fatalf("step %d: the two states differ after the same sweep", step)
		}
		from = (from + nA) % numShards
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

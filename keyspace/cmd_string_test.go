package keyspace

import (
	"bytes"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

func TestStringSetGet(t *testing.T) {
	f := newFixture(t)
	f.expect(
		"GET k", "(nil)",
		"SET k v", "+OK",
		"GET k", `"v"`,
		"SET k w NX", "(nil)",
		"SET k w XX GET", `"v"`,
		"SET n w XX", "(nil)",
		"SET n w NX GET", "(nil)",
		"GET n", `"w"`,
		"SET k v NX XX", "-ERR syntax error",
		"SET k v EX 0", "-ERR invalid expire time in 'set' command",
		"SET k v EX x", "-ERR value is not an integer or out of range",
		"SET k v KEEPTTL PX 5", "-ERR syntax error",
		"SETNX k x", ":0",
		"SETNX fresh x", ":1",
		"GETSET fresh y", `"x"`,
		"GETDEL fresh", `"y"`,
		"GETDEL fresh", "(nil)",
		"MSET a 1 b 2", "+OK",
		"MGET a b nope", `["1" "2" (nil)]`,
		"MSET a", "-ERR wrong number of arguments for 'mset' command",
		"MSETNX a 5 c 3", ":0",
		"MSETNX c 3 d 4", ":1",
		"HSET h f v", ":1",
		"GET h", "-WRONGTYPE Operation against a key holding the wrong kind of value",
		"MGET h a", `[(nil) "1"]`,
		"SET h s GET", "-WRONGTYPE Operation against a key holding the wrong kind of value",
		"SET h s", "+OK",
		"GET h", `"s"`,
	)
}

// TestStringExpiry works through SET's expiry options at a fixed time: now is
// 1_700_000_000_000 ms.
func TestStringExpiry(t *testing.T) {
	f := newFixture(t)
	f.expect(
		"SET k v PX 1500", "+OK",
		"PTTL k", ":1500",
		"TTL k", ":2", // 1.5 s rounds to 2
		"SET k v KEEPTTL", "+OK",
		"PTTL k", ":1500",
		"SET k v", "+OK",
		"PTTL k", ":-1",
		"SET k v EXAT 1700000100", "+OK",
		"PEXPIRETIME k", ":1700000100000",
		"SET k v PXAT 1700000000001", "+OK",
		"SETEX s 10 v", "+OK",
		"PTTL s", ":10000",
		"PSETEX s 0 v", "-ERR invalid expire time in 'psetex' command",
		"SET k v EX 9223372036854775807", "-ERR invalid expire time in 'set' command",
		"SET k v PX 9223372036854775807", "-ERR invalid expire time in 'set' command",
	)
	f.now += 1
	f.expect("GET k", "(nil)", "EXISTS k", ":0", "DBSIZE", ":2")
}

func TestStringGetEx(t *testing.T) {
	f := newFixture(t)
	f.expect(
		"GETEX nope EX x", "(nil)",
		"SET k v", "+OK",
		"GETEX k PX 100", `"v"`,
		"PTTL k", ":100",
		"GETEX k PERSIST", `"v"`,
		"PTTL k", ":-1",
		"GETEX k EX 0", "-ERR invalid expire time in 'getex' command",
		"GETEX k NX", "-ERR syntax error",
		"GETEX k PXAT 1", `"v"`,
		"EXISTS k", ":0",
	)
}

func TestStringCounters(t *testing.T) {
	f := newFixture(t)
	f.expect(
		"INCR c", ":1",
		"INCRBY c 41", ":42",
		"DECR c", ":41",
		"DECRBY c 50", ":-9",
		"INCRBY c x", "-ERR value is not an integer or out of range",
		"DECRBY c -9223372036854775808", "-ERR decrement would overflow",
		"SET m 9223372036854775807", "+OK",
		"INCR m", "-ERR increment or decrement would overflow",
		"SET s 01", "+OK",
		"INCR s", "-ERR value is not an integer or out of range",
		"SET t 5 PX 1000", "+OK",
		"INCR t", ":6",
		"PTTL t", ":1000", // INCR keeps the deadline
		// Long double arithmetic: 10.5 + 0.1 is 10.6 exactly as printed, which
		// float64 would print 10.59999999999999964.
		"INCRBYFLOAT f 10.5", `"10.5"`,
		"INCRBYFLOAT f 0.1", `"10.6"`,
		"INCRBYFLOAT f -0.5e1", `"5.6"`,
		"INCRBYFLOAT f inf", "-ERR increment would produce NaN or Infinity",
		"INCRBYFLOAT f abc", "-ERR value is not a valid float",
		"INCRBYFLOAT g 0x10", `"16"`,
		"INCRBYFLOAT g 1_0", "-ERR value is not a valid float",
	)
}

func TestStringRanges(t *testing.T) {
	f := newFixture(t)
	f.expect(
		"APPEND s Hello", ":5",
		"APPEND s World", ":10",
		"STRLEN s", ":10",
		"GETRANGE s 0 4", `"Hello"`,
		"GETRANGE s -5 -1", `"World"`,
		"GETRANGE s 7 2", `""`,
		"GETRANGE s 0 100", `"HelloWorld"`,
		"GETRANGE nope 0 1", `""`,
		"SETRANGE s 5 _", ":10",
		"GET s", `"Hello_orld"`,
		"SETRANGE z 3 ab", ":5",
		"GET z", "\"\x00\x00\x00ab\"",
		"SETRANGE z -1 a", "-ERR offset is out of range",
		"SETRANGE z 536870911 ab", "-ERR string exceeds maximum allowed size (proto-max-bulk-len)",
		"SETRANGE e 5 ", "-ERR wrong number of arguments for 'setrange' command",
	)
}

// APPEND and SETRANGE write into a value in place, as Redis does: a thousand
// one-byte appends to a 1 MB value, or a thousand one-byte SETRANGEs within
// or past its end, allocate far less than a copy of it each (they allocate
// nothing once the value has a buffer of its own with room).
func TestStringWritesInPlace(t *testing.T) {
	f := newFixture(t)
	const size = 1 << 20
	f.doArgs("SET", "k", strings.Repeat("x", size))
	f.do("APPEND k y") // the value moves once, to a buffer with room
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for i := 0; i < 1000; i++ {
		f.do("APPEND k y")
	}
	for i := 0; i < 1000; i++ {
		f.do("SETRANGE k " + strconv.Itoa(size+1001+i) + " z")
	}
	for i := 0; i < 1000; i++ {
		f.do("SETRANGE k " + strconv.Itoa(i) + " w")
	}
	runtime.ReadMemStats(&after)
	if got := after.TotalAlloc - before.TotalAlloc; got > 100*size {
		t.Errorf("3000 one-byte writes into a 1 MB value allocated %d bytes: each copied the value", got)
	}
	want := strings.Repeat("w", 1000) + strings.Repeat("x", size-1000) + strings.Repeat("y", 1001) + strings.Repeat("z", 1000)
	if got := f.doArgs("GET", "k"); got != `"`+want+`"` {
		t.Errorf("the grown value is wrong (%d bytes)", len(got)-2)
	}
}

// A grown value shares its buffer with every string taken from it: replies
// in flight, copies, frozen snapshots. Growing or changing it must leave
// each of those as it was.
func TestStringGrowthNeverChangesSharedBytes(t *testing.T) {
	f := newFixture(t)
	get := func(key string) string {
		return f.s.Exec(&Call{Store: f.s, Now: f.now, Args: [][]byte{[]byte("GET"), []byte(key)}}).Str
	}
	f.do("SET k abc")
	f.do("APPEND k d") // k now has a buffer with room
	reply := get("k")
	frozen := f.s.Freeze()
	f.expect(
		"COPY k c", ":1", // c shares k's buffer
		"APPEND k K", ":5",
		"APPEND c C", ":5", // must not write where k's K is
		"SETRANGE k 6 Z", ":7",
		"SETRANGE c 4 Y", ":5",
		"GET k", "\"abcdK\x00Z\"",
		"GET c", `"abcdY"`,
		"SETRANGE k 0 _", ":7", // inside the value: a copy, never in place
		"GET k", "\"_bcdK\x00Z\"",
	)
	if reply != "abcd" {
		t.Errorf("a GET reply taken before the writes reads %q, want abcd", reply)
	}
	g := newFixture(t)
	var buf bytes.Buffer
	if err := frozen.WriteSnapshot(&buf, nil); err != nil {
		t.Fatal(err)
	}
	f.s.Release(frozen)
	if _, err := g.s.ReadSnapshot(&buf); err != nil {
		t.Fatal(err)
	}
	g.expect("GET k", `"abcd"`, "GET c", "(nil)")
}

// Every reader that may keep a value's bytes (a reply in flight, a Lua
// string) takes them before a write within the value, which must then leave
// them as they were, as a copy of the value would.
func TestStringWriteWithinNeverChangesWhatWasRead(t *testing.T) {
	for _, read := range [][]string{
		{"GET", "k"},
		{"GETRANGE", "k", "1", "3"},
		{"MGET", "x", "k"},
		{"GETEX", "k", "PERSIST"},
		{"SET", "k", "abcd", "GET"},
	} {
		t.Run(read[0], func(t *testing.T) {
			f := newFixture(t)
			f.do("SET k abcd")
			f.do("SETRANGE k 0 a") // k now has a buffer of its own, unread
			f.do("SETRANGE k 0 a") // and writes there in place
			r := f.s.Exec(&Call{Store: f.s, Now: f.now, Args: toArgs(read)})
			if r.Kind == KindArray {
				r = r.Elems[1]
			}
			before := strings.Clone(r.Str)
			f.expect("SETRANGE k 1 XY", ":4", "GET k", `"aXYd"`)
			if r.Str != before {
				t.Errorf("%v replied %q, which reads %q after a SETRANGE", read, before, r.Str)
			}
		})
	}
}

// COPY and a frozen snapshot share a value's bytes too: a write within
// either the value or its copy leaves the other as it was.
func TestStringWriteWithinNeverChangesACopy(t *testing.T) {
	f := newFixture(t)
	f.do("SET k abcd")
	f.do("SETRANGE k 0 a") // k now has a buffer of its own, unread
	frozen := f.s.Freeze()
	f.expect(
		"SETRANGE k 1 XY", ":4",
		"COPY k c", ":1",
		"SETRANGE k 3 Z", ":4",
		"SETRANGE c 0 W", ":4",
		"GET k", `"aXYZ"`,
		"GET c", `"WXYd"`,
	)
	var buf bytes.Buffer
	if err := frozen.WriteSnapshot(&buf, nil); err != nil {
		t.Fatal(err)
	}
	f.s.Release(frozen)
	g := newFixture(t)
	if _, err := g.s.ReadSnapshot(&buf); err != nil {
		t.Fatal(err)
	}
	g.expect("GET k", `"abcd"`)
}

// Call.Work counts what a command does beyond its arguments and reply, for
// a script's budget: elements scanned or copied, and bytes copied or
// cleared by 16. Worked examples.
func TestCommandWork(t *testing.T) {
	f := newFixture(t)
	work := func(args ...string) int64 {
		bargs := make([][]byte, len(args))
		for i, a := range args {
			bargs[i] = []byte(a)
		}
		c := &Call{Store: f.s, Now: f.now, Args: bargs}
		if r := f.s.Exec(c); r.IsError() {
			t.Fatalf("%v: %s", args, r.Str)
		}
		return c.Work
	}
	f.do("SADD s1 a b c")
	f.do("SADD s2 a b c d e")
	f.do("RPUSH l a b c d")
	f.do("HSET h f1 v f2 v f3 v")
	for _, c := range []struct {
		args []string
		want int64
	}{
		{[]string{"SINTER", "s1", "s2"}, 8},         // both sets' members
		{[]string{"SUNION", "s1", "nope"}, 3},       // a missing set has none
		{[]string{"KEYS", "*"}, 4},                  // every key of the database
		{[]string{"SCAN", "0", "COUNT", "1000"}, 4}, // every shard, and the keys in them
		{[]string{"LREM", "l", "0", "x"}, 4},        // the list's elements
		{[]string{"LPOS", "l", "x"}, 4},             //
		{[]string{"LINSERT", "l", "BEFORE", "x", "y"}, 4},
		{[]string{"COPY", "s2", "s3"}, 5},           // the copied set's members
		{[]string{"SETRANGE", "r", "319", "x"}, 20}, // 320 bytes cleared or written
		{[]string{"APPEND", "r", "y"}, 20},          // moved to a buffer with room: 320 bytes copied
		{[]string{"APPEND", "r", "z"}, 0},           // then in place
		{[]string{"GET", "r"}, 0},
		{[]string{"HSCAN", "h", "0"}, 0}, // a small hash is one packed string
	} {
		if got := work(c.args...); got != c.want {
			t.Errorf("%v: Work = %d, want %d", c.args, got, c.want)
		}
	}
}

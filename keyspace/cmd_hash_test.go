package keyspace

import (
	"strconv"
	"strings"
	"testing"
)

func TestHashCommands(t *testing.T) {
	f := newFixture(t)
	f.expect(
		"HSET h b 1 a 2", ":2",
		"HSET h b 3 c 4", ":1",
		"HGETALL h", `{"b" "3" "a" "2" "c" "4"}`, // insertion order, b kept its place
		"HKEYS h", `["b" "a" "c"]`,
		"HVALS h", `["3" "2" "4"]`,
		"HLEN h", ":3",
		"HGET h a", `"2"`,
		"HGET h z", "(nil)",
		"HMGET h a z c", `["2" (nil) "4"]`,
		"HEXISTS h a", ":1",
		"HSTRLEN h a", ":1",
		"HSETNX h a 9", ":0",
		"HSETNX h d 9", ":1",
		"HDEL h a z", ":1",
		"HGETALL h", `{"b" "3" "c" "4" "d" "9"}`,
		"HSET h x", "-ERR wrong number of arguments for 'hset' command",
		"HMSET h x 1", "+OK",
		"HDEL h b c d x", ":4",
		"EXISTS h", ":0",
		"HGETALL h", "{}",
	)
}

// TestHashRedissonLock runs the commands of Redisson's lock script by hand:
// acquire (HINCRBY + PEXPIRE), re-enter, release.
func TestHashRedissonLock(t *testing.T) {
	f := newFixture(t)
	owner := "8743c9c0-0795-4907-87fd-6c719a6b4586:1"
	f.expect(
		"EXISTS lock", ":0",
		"HINCRBY lock "+owner+" 1", ":1",
		"PEXPIRE lock 30000", ":1",
		"HEXISTS lock "+owner, ":1",
		"HINCRBY lock "+owner+" 1", ":2",
		"HINCRBY lock "+owner+" -1", ":1",
		"PTTL lock", ":30000",
		"HINCRBY lock "+owner+" -1", ":0",
		"DEL lock", ":1",
		"HINCRBY lock f x", "-ERR value is not an integer or out of range",
		"HSET lock f abc", ":1",
		"HINCRBY lock f 1", "-ERR hash value is not an integer",
		"HINCRBYFLOAT lock f 1", "-ERR hash value is not a float",
		"HINCRBYFLOAT lock g 10.5", `"10.5"`,
		"HINCRBYFLOAT lock g 0.1", `"10.6"`,
		"HINCRBYFLOAT lock g inf", "-ERR value is NaN or Infinity",
		"HSET lock big 9223372036854775807", ":1",
		"HINCRBY lock big 1", "-ERR increment or decrement would overflow",
	)
}

// TestHashLeavesPackedForm checks the switch to a map past Redis's listpack
// limits, after which replies come in field order.
func TestHashLeavesPackedForm(t *testing.T) {
	f := newFixture(t)
	for i := 128; i > 0; i-- {
		f.do("HSET h f" + strconv.Itoa(i) + " v")
	}
	o := entry(&f.s.dbs[0], "h", hashKey("h"))
	if o.hashMap() != nil {
		t.Fatal("a hash of 128 short fields left the packed form")
	}
	if got := f.do("HKEYS h"); !strings.HasPrefix(got, `["f128" "f127"`) {
		t.Errorf("packed HKEYS starts %.30s, want insertion order", got)
	}
	f.do("HSET h f129 v")
	if o.hashMap() == nil || o.hashLen() != 129 {
		t.Fatal("the 129th field did not move the hash to a map")
	}
	if got := f.do("HKEYS h"); !strings.HasPrefix(got, `["f1" "f10" "f100"`) {
		t.Errorf("map HKEYS starts %.30s, want sorted", got)
	}
	f.expect("HSET long f "+strings.Repeat("v", 65), ":1", "HGET long f", `"`+strings.Repeat("v", 65)+`"`)
}

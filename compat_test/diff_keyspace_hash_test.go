package compat_test

import (
	"strconv"
	"strings"
	"testing"
)

func TestDiffKeyspaceHash(t *testing.T) {
	p := newPair(t)
	long := strings.Repeat("f", 65)
	p.Run([][]string{
		{"HSET", "h", "f1", "v1"}, {"HSET", "h", "f2", "v2", "f3", "v3"}, {"HSET", "h", "f1", "x", "f4", "v4"},
		{"HGETALL", "h"}, {"HKEYS", "h"}, {"HVALS", "h"}, {"HLEN", "h"}, {"HSET", "h", "f1"}, {"HSET", "h"},
		{"HSET", "h", "a", "1", "b"}, {"HMSET", "h", "f5", "v5"}, {"HMSET", "h", "f5"}, {"HMSET", "h", "a", "1", "b"},
		{"HGET", "h", "f1"}, {"HGET", "h", "nope"}, {"HGET", "nokey", "f"}, {"HGET", "h"},
		{"HMGET", "h", "f1", "nope", "f2"}, {"HMGET", "nokey", "a", "b"}, {"HMGET", "h"},
		{"HEXISTS", "h", "f1"}, {"HEXISTS", "h", "nope"}, {"HEXISTS", "nokey", "f"},
		{"HSTRLEN", "h", "f1"}, {"HSTRLEN", "h", "nope"}, {"HSTRLEN", "nokey", "f"},
		{"HSETNX", "h", "f1", "y"}, {"HSETNX", "h", "f9", "y"}, {"HSETNX", "new", "f", "v"}, {"HSETNX", "h", "f"},
		{"HDEL", "h", "f2", "nope", "f2"}, {"HDEL", "nokey", "f"}, {"HDEL", "h"}, {"HGETALL", "h"},
		{"HDEL", "h", "f1", "f3", "f4", "f5", "f9"}, {"EXISTS", "h"}, {"HGETALL", "h"}, {"HKEYS", "h"}, {"HLEN", "h"},
		// Wrong types.
		{"SET", "s", "v"}, {"HSET", "s", "f", "v"}, {"HGET", "s", "f"}, {"HMGET", "s", "f"}, {"HDEL", "s", "f"},
		{"HEXISTS", "s", "f"}, {"HLEN", "s"}, {"HKEYS", "s"}, {"HVALS", "s"}, {"HGETALL", "s"}, {"HSTRLEN", "s", "f"},
		{"HSETNX", "s", "f", "v"}, {"HINCRBY", "s", "f", "1"}, {"HINCRBYFLOAT", "s", "f", "1"}, {"HSCAN", "s", "0"},
		{"HMSET", "s", "f", "v"},
		// HINCRBY: the Redisson lock's counter.
		{"HINCRBY", "lock", "uuid:1", "1"}, {"HINCRBY", "lock", "uuid:1", "1"}, {"HINCRBY", "lock", "uuid:1", "-2"},
		{"HGETALL", "lock"}, {"HINCRBY", "lock", "uuid:1", "x"}, {"HINCRBY", "lock", "uuid:1", "1.5"},
		{"HSET", "lock", "s", "abc", "sp", " 1", "big", "9223372036854775807", "neg", "-9223372036854775808"},
		{"HINCRBY", "lock", "s", "1"}, {"HINCRBY", "lock", "sp", "1"}, {"HINCRBY", "lock", "big", "1"},
		{"HINCRBY", "lock", "neg", "-1"}, {"HINCRBY", "lock", "big", "-1"}, {"HINCRBY", "lock", "big", "9223372036854775808"},
		{"HINCRBY", "nokey2", "f", "x"}, {"EXISTS", "nokey2"},
		// HINCRBYFLOAT.
		{"HINCRBYFLOAT", "hf", "f", "10.5"}, {"HINCRBYFLOAT", "hf", "f", "0.1"}, {"HINCRBYFLOAT", "hf", "f", "-10.6"},
		{"HINCRBYFLOAT", "hf", "f", "x"}, {"HINCRBYFLOAT", "hf", "f", "inf"}, {"HINCRBYFLOAT", "hf2", "f", "-inf"},
		{"EXISTS", "hf2"}, {"HINCRBYFLOAT", "hf", "f", "1e308"}, {"HINCRBYFLOAT", "hf", "f", "1e308"},
		{"HSET", "hf", "s", "abc"}, {"HINCRBYFLOAT", "hf", "s", "1"}, {"HINCRBYFLOAT", "hf", "g", "5.0e3"},
		{"HINCRBYFLOAT", "lock", "neg", "1.5"},
		// HSCAN of a small hash: everything at once, in insertion order.
		{"HSET", "sc", "b", "1", "a", "2", "c", "3", "ab", "4"}, {"HSCAN", "sc", "0"}, {"HSCAN", "sc", "0", "MATCH", "a*"},
		{"HSCAN", "sc", "0", "COUNT", "1"}, {"HSCAN", "sc", "x"}, {"HSCAN", "sc", "0", "COUNT", "0"},
		{"HSCAN", "sc", "0", "TYPE", "hash"}, {"HSCAN", "nokey", "0"}, {"HSCAN", "nokey", "0", "FOO"},
		{"HSCAN", "sc", "0", "MATCH"},
		// Long fields and values leave the packed form, for good.
		{"HSET", "lf", long, "v", "a", "b"}, {"HGET", "lf", long}, {"HLEN", "lf"}, {"HSTRLEN", "lf", long},
		{"HSET", "lv", "f", long}, {"HGET", "lv", "f"},
	})
	p.DoSorted("HGETALL", "hf") // a value past 64 bytes made it a hash table
	p.DoSorted("HKEYS", "lf")
	p.DoSorted("HVALS", "lf")
	// A hash past 128 fields: sorted comparison, and HSCAN covers every field once.
	for i := 0; i < 200; i++ {
		p.Do("HSET", "big", "field:"+strconv.Itoa(i), strconv.Itoa(i))
	}
	p.Run([][]string{{"HLEN", "big"}, {"HGET", "big", "field:150"}, {"HDEL", "big", "field:0"}, {"HLEN", "big"}})
	p.DoSorted("HKEYS", "big")
	p.DoSorted("HVALS", "big")
	seen := map[string]int{}
	cursor := "0"
	for {
		lines := strings.Split(p.ls.Do("HSCAN", "big", cursor, "COUNT", "17"), "\r\n")
		cursor = lines[2]
		for i := 4; i+3 < len(lines); i += 4 {
			seen[lines[i+1]]++
		}
		if cursor == "0" {
			break
		}
	}
	if len(seen) != 199 {
		t.Errorf("HSCAN of 199 fields returned %d distinct fields", len(seen))
	}
	for f, n := range seen {
		if n != 1 {
			t.Errorf("HSCAN returned %q %d times", f, n)
		}
	}
	// RESP3: HGETALL is a map.
	p.useRESP3()
	p.Run([][]string{{"HGETALL", "sc"}, {"HGETALL", "nokey"}, {"HKEYS", "sc"}, {"HMGET", "sc", "a", "zz"},
		{"HGET", "sc", "zz"}, {"HINCRBYFLOAT", "hf", "f", "1.5"}, {"HSCAN", "sc", "0"}})
}

package compat_test

import (
	"strconv"
	"testing"
)

func TestDiffKeyspaceZSet(t *testing.T) {
	p := newPair(t)
	cmds := [][]string{
		// ZADD and its options.
		{"ZADD", "z", "1", "a", "2", "b", "3", "c"}, {"ZADD", "z", "NX", "5", "a", "4", "d"}, {"ZADD", "z", "XX", "6", "a", "7", "e"},
		{"ZADD", "z", "XX", "CH", "1", "a", "7", "e"}, {"ZADD", "z", "GT", "CH", "0", "a", "9", "b"}, {"ZADD", "z", "LT", "CH", "5", "b", "2", "c"},
		{"ZADD", "z", "GT", "XX", "CH", "3", "c"}, {"ZADD", "z", "NX", "XX", "1", "a"}, {"ZADD", "z", "GT", "LT", "1", "a"},
		{"ZADD", "z", "NX", "GT", "1", "a"}, {"ZADD", "z", "INCR", "1", "a", "2", "b"}, {"ZADD", "z", "1"}, {"ZADD", "z", "1", "a", "2"},
		{"ZADD", "z", "x", "a"}, {"ZADD", "z", "nan", "a"}, {"ZADD", "z", "1", "a", "x", "b"}, {"ZADD", "z", "NX"}, {"ZADD", "z", "FOO", "1", "a"},
		{"ZADD", "z", "INCR", "10", "a"}, {"ZADD", "z", "INCR", "NX", "10", "a"}, {"ZADD", "z", "INCR", "XX", "1", "new"},
		{"ZADD", "z", "INCR", "GT", "-1", "a"}, {"ZADD", "z", "XX", "1", "q"}, {"ZADD", "noz", "XX", "1", "q"}, {"EXISTS", "noz"},
		{"ZADD", "noz", "XX", "INCR", "1", "q"}, {"ZRANGE", "z", "0", "-1", "WITHSCORES"}, {"ZCARD", "z"}, {"ZCARD", "noz"},
		// Scores as Redis formats them.
		{"ZADD", "f", "0.1", "a", "1e20", "b", "123456789012345678", "c", "-0", "d", "5e-324", "e", "inf", "f", "-inf", "g",
			"1.5", "h", "0x10", "i", "1e-5", "j", "3.0", "k", "+2", "l", "100000000000000000000000", "m", ".5", "n"},
		{"ZRANGE", "f", "0", "-1", "WITHSCORES"}, {"ZINCRBY", "f", "0.1", "a"}, {"ZINCRBY", "f", "0.2", "a"}, {"ZSCORE", "f", "a"},
		{"ZSCORE", "f", "f"}, {"ZSCORE", "f", "g"}, {"ZINCRBY", "f", "-inf", "f"}, {"ZINCRBY", "f", "1", "f"}, {"ZINCRBY", "f", "x", "a"},
		{"ZADD", "f", "1e400", "x"}, {"ZADD", "f", "1e-400", "x"}, {"ZADD", "f", " 1", "x"}, {"ZADD", "f", "1 ", "x"}, {"ZADD", "f", "", "x"},
		{"ZADD", "f", "infinity", "x"}, {"ZADD", "f", "-Infinity", "y"}, {"ZADD", "f", "1_0", "x"}, {"ZADD", "f", "0x", "x"},
		{"ZSCORE", "f", "nope"}, {"ZSCORE", "noz", "a"}, {"ZMSCORE", "f", "a", "nope", "f"}, {"ZMSCORE", "noz", "a", "b"},
		{"ZINCRBY", "f", "1.5", "newm"}, {"ZINCRBY", "fz", "2.5", "m"}, {"ZINCRBY", "fz", "-2.5", "m"}, {"ZSCORE", "fz", "m"},
		{"ZADD", "f", "1e16", "p"}, {"ZADD", "f", "1e17", "p2"}, {"ZADD", "f", "12345.678", "p3"}, {"ZADD", "f", "-1.25e-10", "p4"},
		{"ZRANGE", "f", "0", "-1", "WITHSCORES"},
		// ZREM, ZRANK, ZCOUNT.
		{"ZREM", "z", "a", "nope", "a"}, {"ZREM", "noz", "a"}, {"ZRANK", "z", "b"}, {"ZREVRANK", "z", "b"}, {"ZRANK", "z", "nope"},
		{"ZRANK", "noz", "a"}, {"ZCOUNT", "f", "-inf", "+inf"}, {"ZCOUNT", "f", "(0", "1"}, {"ZCOUNT", "f", "0", "(1.5"},
		{"ZCOUNT", "f", "x", "1"}, {"ZCOUNT", "f", "1", "(x"}, {"ZCOUNT", "f", "5", "1"}, {"ZCOUNT", "f", "(1", "(1"},
		{"ZCOUNT", "noz", "0", "1"}, {"ZCOUNT", "f", "", ""}, {"ZCOUNT", "f", " 1", "2"}, {"ZCOUNT", "f", "(", "1e400"},
		{"ZCOUNT", "noz", "x", "1"}, {"ZCOUNT", "f", "nan", "1"},
		// ZRANGE family.
		{"ZADD", "r", "1", "a", "2", "b", "3", "c", "4", "d", "5", "e", "5", "ee"},
		{"ZRANGE", "r", "0", "-1"}, {"ZRANGE", "r", "1", "3", "WITHSCORES"}, {"ZRANGE", "r", "-2", "-1"}, {"ZRANGE", "r", "3", "1"},
		{"ZRANGE", "r", "0", "100"}, {"ZRANGE", "r", "100", "200"}, {"ZRANGE", "r", "0", "-1", "REV"}, {"ZRANGE", "r", "0", "1", "REV", "WITHSCORES"},
		{"ZRANGE", "r", "1", "4", "BYSCORE"}, {"ZRANGE", "r", "(1", "4", "BYSCORE", "WITHSCORES"}, {"ZRANGE", "r", "4", "1", "BYSCORE", "REV"},
		{"ZRANGE", "r", "-inf", "+inf", "BYSCORE", "LIMIT", "1", "2"}, {"ZRANGE", "r", "+inf", "-inf", "BYSCORE", "REV", "LIMIT", "1", "2"},
		{"ZRANGE", "r", "-inf", "+inf", "BYSCORE", "LIMIT", "0", "-1"}, {"ZRANGE", "r", "-inf", "+inf", "BYSCORE", "LIMIT", "-1", "2"},
		{"ZRANGE", "r", "-inf", "+inf", "BYSCORE", "LIMIT", "10", "2"}, {"ZRANGE", "r", "-inf", "+inf", "BYSCORE", "LIMIT", "2", "0"},
		{"ZRANGE", "r", "0", "-1", "LIMIT", "1", "2"}, {"ZRANGE", "r", "[a", "[c", "BYLEX"}, {"ZRANGE", "r", "[c", "[a", "BYLEX", "REV"},
		{"ZRANGE", "r", "-", "+", "BYLEX", "WITHSCORES"}, {"ZRANGE", "r", "0", "-1", "BYSCORE", "BYLEX"}, {"ZRANGE", "r", "0", "-1", "REV", "REV"},
		{"ZRANGE", "r", "0", "-1", "FOO"}, {"ZRANGE", "r", "x", "1"}, {"ZRANGE", "r", "0", "1", "BYSCORE", "LIMIT", "x", "1"},
		{"ZRANGE", "r", "0", "1", "BYSCORE", "LIMIT", "1"}, {"ZRANGE", "r", "a", "b", "BYSCORE"}, {"ZRANGE", "r", "a", "b", "BYLEX"},
		{"ZRANGE", "noz", "0", "-1"}, {"ZRANGE", "noz", "x", "1"}, {"ZRANGE", "r", "0", "-1", "withscores", "withscores"},
		{"ZREVRANGE", "r", "0", "2"}, {"ZREVRANGE", "r", "0", "2", "WITHSCORES"}, {"ZREVRANGE", "r", "0", "2", "REV"}, {"ZREVRANGE", "r", "-1", "-1"},
		{"ZRANGEBYSCORE", "r", "2", "4"}, {"ZRANGEBYSCORE", "r", "2", "4", "WITHSCORES", "LIMIT", "1", "1"}, {"ZRANGEBYSCORE", "r", "(2", "(5"},
		{"ZRANGEBYSCORE", "r", "2", "4", "REV"}, {"ZRANGEBYSCORE", "r", "2", "4", "BYSCORE"}, {"ZRANGEBYSCORE", "r", "-inf", "+inf", "LIMIT", "0", "1"},
		{"ZREVRANGEBYSCORE", "r", "4", "2"}, {"ZREVRANGEBYSCORE", "r", "+inf", "-inf", "WITHSCORES", "LIMIT", "1", "3"}, {"ZREVRANGEBYSCORE", "r", "2", "4"},
		{"ZRANGEBYLEX", "r", "-", "+"}, {"ZRANGEBYLEX", "r", "(a", "[d"}, {"ZRANGEBYLEX", "r", "[e", "+", "LIMIT", "0", "1"}, {"ZRANGEBYLEX", "r", "a", "+"},
		{"ZRANGEBYLEX", "r", "+", "-"}, {"ZRANGEBYLEX", "r", "-", "-"}, {"ZRANGEBYLEX", "r", "[a", "(a"}, {"ZRANGEBYLEX", "r", "-x", "+"},
		{"ZREVRANGEBYLEX", "r", "+", "-"}, {"ZREVRANGEBYLEX", "r", "[d", "(a", "LIMIT", "1", "5"},
		// ZREMRANGEBY*, ZPOP*.
		{"ZREMRANGEBYSCORE", "r", "(1", "2"}, {"ZREMRANGEBYSCORE", "r", "x", "2"}, {"ZREMRANGEBYSCORE", "noz", "0", "1"},
		{"ZREMRANGEBYRANK", "r", "0", "0"}, {"ZREMRANGEBYRANK", "r", "-1", "-1"}, {"ZREMRANGEBYRANK", "r", "5", "10"}, {"ZREMRANGEBYRANK", "r", "x", "1"},
		{"ZRANGE", "r", "0", "-1", "WITHSCORES"}, {"ZREMRANGEBYLEX", "r", "[c", "[d"}, {"ZREMRANGEBYLEX", "r", "c", "d"},
		{"ZREMRANGEBYRANK", "r", "0", "-1"}, {"EXISTS", "r"},
		{"ZADD", "q", "1", "a", "2", "b", "3", "c", "4", "d"}, {"ZPOPMIN", "q"}, {"ZPOPMAX", "q"}, {"ZPOPMIN", "q", "0"}, {"ZPOPMIN", "q", "-1"},
		{"ZPOPMIN", "q", "x"}, {"ZPOPMIN", "q", "1", "2"}, {"ZPOPMAX", "q", "5"}, {"EXISTS", "q"}, {"ZPOPMIN", "q"}, {"ZPOPMIN", "q", "2"},
		// ZSCAN of a small sorted set: whole, in order.
		{"ZSCAN", "f", "0"}, {"ZSCAN", "f", "0", "MATCH", "p*"}, {"ZSCAN", "noz", "0"}, {"ZSCAN", "f", "x"}, {"ZSCAN", "f", "0", "COUNT", "0"},
		// Wrong types.
		{"SET", "str", "v"}, {"ZADD", "str", "1", "a"}, {"ZADD", "str", "x", "a"}, {"ZINCRBY", "str", "1", "a"}, {"ZSCORE", "str", "a"},
		{"ZMSCORE", "str", "a"}, {"ZREM", "str", "a"}, {"ZCARD", "str"}, {"ZCOUNT", "str", "0", "1"}, {"ZRANK", "str", "a"},
		{"ZRANGE", "str", "0", "1"}, {"ZRANGEBYSCORE", "str", "0", "1"}, {"ZREMRANGEBYSCORE", "str", "0", "1"}, {"ZPOPMIN", "str"},
		{"ZSCAN", "str", "0"},
	}
	p.Run(cmds)
	// A sorted set past 128 members: the same replies.
	for i := 0; i < 300; i++ {
		p.Do("ZADD", "big", strconv.Itoa(i%37), "m"+strconv.Itoa(i))
	}
	p.Run([][]string{{"ZCARD", "big"}, {"ZRANGE", "big", "100", "120", "WITHSCORES"}, {"ZRANK", "big", "m250"},
		{"ZREVRANK", "big", "m250"}, {"ZCOUNT", "big", "5", "(9"}, {"ZRANGEBYSCORE", "big", "(30", "+inf", "LIMIT", "3", "20"},
		{"ZREVRANGE", "big", "0", "10"}, {"ZREMRANGEBYRANK", "big", "10", "50"}, {"ZREMRANGEBYSCORE", "big", "20", "25"},
		{"ZRANGE", "big", "0", "-1", "WITHSCORES"}, {"ZADD", "big", "-0", "negzero"}, {"ZSCORE", "big", "negzero"},
		{"ZPOPMAX", "big", "3"}})
	p.useRESP3()
	p.Run([][]string{{"ZRANGE", "f", "0", "-1", "WITHSCORES"}, {"ZRANGE", "f", "0", "2"}, {"ZSCORE", "f", "a"},
		{"ZMSCORE", "f", "a", "nope"}, {"ZINCRBY", "f", "1", "a"}, {"ZADD", "f", "INCR", "1", "a"}, {"ZPOPMIN", "f"},
		{"ZPOPMIN", "f", "2"}, {"ZPOPMAX", "f", "1"}, {"ZPOPMIN", "noz"}, {"ZPOPMIN", "noz", "2"}, {"ZSCAN", "f", "0"},
		{"ZRANGEBYSCORE", "f", "-inf", "+inf", "WITHSCORES"}, {"ZREVRANGE", "f", "0", "-1", "WITHSCORES"}, {"ZSCORE", "f", "f"},
		{"ZRANGE", "noz", "0", "-1", "WITHSCORES"}, {"ZADD", "noz", "XX", "INCR", "1", "a"}})
}

package compat_test

import (
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestDiffKeyspaceString(t *testing.T) {
	p := newPair(t)
	long := strings.Repeat("x", 100)
	p.Run([][]string{
		// GET / SET and every SET option, with the option rules.
		{"GET", "s"}, {"SET", "s", "v"}, {"GET", "s"}, {"GET", "s", "x"}, {"SET", "s"},
		{"SET", "s", "v", "NX"}, {"SET", "s", "v2", "XX"}, {"GET", "s"},
		{"SET", "n", "v", "XX"}, {"SET", "n", "v", "NX"}, {"SET", "n", "w", "NX", "GET"},
		{"SET", "n", "w", "XX", "GET"}, {"SET", "m", "w", "XX", "GET"}, {"SET", "m2", "w", "GET"},
		{"SET", "s", "v", "NX", "XX"}, {"SET", "s", "v", "XX", "NX"}, {"SET", "s", "v", "nx", "nx"},
		{"SET", "s", "v", "EX"}, {"SET", "s", "v", "EX", "x"}, {"SET", "s", "v", "EX", "0"},
		{"SET", "s", "v", "EX", "-1"}, {"SET", "s", "v", "PX", "0"}, {"SET", "s", "v", "EX", "9223372036854775807"},
		{"SET", "s", "v", "EX", "9223372036854775"}, {"SET", "s", "v", "PX", "9223372036854775807"},
		{"SET", "s", "v", "EX", "10", "PX", "10"}, {"SET", "s", "v", "EX", "10", "EX", "20"},
		{"SET", "s", "v", "EX", "10", "KEEPTTL"}, {"SET", "s", "v", "KEEPTTL", "EX", "10"},
		{"SET", "s", "v", "EXAT", "4102444800"}, {"EXPIRETIME", "s"}, {"PEXPIRETIME", "s"},
		{"SET", "s", "v", "KEEPTTL"}, {"PEXPIRETIME", "s"}, {"SET", "s", "v2"}, {"PEXPIRETIME", "s"},
		{"SET", "s", "v", "PXAT", "4102444800123"}, {"PEXPIRETIME", "s"}, {"EXPIRETIME", "s"},
		{"SET", "s", "v", "PERSIST"}, {"SET", "s", "v", "FOO"}, {"SET", "s", "v", "GET", "GET"},
		{"SET", "s", "v", "PXAT", "1"}, {"GET", "s"}, {"EXISTS", "s"},
		{"SET", "s", "", "EXAT", "0"}, {"SET", "s", "v", "exat", "-5"},
		{"HSET", "h", "f", "v"}, {"SET", "h", "v", "GET"}, {"SET", "h", "v", "NX"}, {"SET", "h", "v", "XX"}, {"GET", "h"},
		{"HSET", "h2", "f", "v"}, {"GET", "h2"},
		// SETNX, SETEX, PSETEX, GETSET, GETDEL.
		{"SETNX", "nx", "1"}, {"SETNX", "nx", "2"}, {"GET", "nx"}, {"SETNX", "nx"},
		{"SETEX", "ex", "100", "v"}, {"TTL", "ex"}, {"SETEX", "ex", "0", "v"}, {"SETEX", "ex", "-3", "v"},
		{"SETEX", "ex", "x", "v"}, {"SETEX", "ex", "9223372036854775807", "v"},
		{"PSETEX", "pex", "0", "v"}, {"PSETEX", "pex", "100000", "v"}, {"GET", "pex"},
		{"PSETEX", "pex", "9223372036854775807", "v"},
		{"GETSET", "gs", "a"}, {"GETSET", "gs", "b"}, {"GETSET", "h2", "b"}, {"GETSET", "gs"},
		{"SETEX", "gs", "1000", "c"}, {"GETSET", "gs", "d"}, {"TTL", "gs"},
		{"GETDEL", "gs"}, {"GETDEL", "gs"}, {"GETDEL", "h2"}, {"GETDEL"},
		// GETEX.
		{"SET", "ge", "v"}, {"GETEX", "ge"}, {"GETEX", "missing", "EX", "x"}, {"GETEX", "ge", "EX", "x"},
		{"GETEX", "ge", "EX", "0"}, {"GETEX", "ge", "PX", "-1"}, {"GETEX", "ge", "EXAT", "4102444800"},
		{"EXPIRETIME", "ge"}, {"GETEX", "ge", "PERSIST"}, {"TTL", "ge"}, {"GETEX", "ge", "PERSIST", "EX", "10"},
		{"GETEX", "ge", "KEEPTTL"}, {"GETEX", "ge", "NX"}, {"GETEX", "ge", "GET"}, {"GETEX", "ge", "EX"},
		{"GETEX", "ge", "PXAT", "1"}, {"EXISTS", "ge"}, {"GETEX", "h", "PERSIST"}, {"HSET", "hh", "f", "v"},
		{"GETEX", "hh"}, {"GETEX", "hh", "EX", "x"}, {"GETEX", "ge", "FOO"},
		// MGET, MSET, MSETNX.
		{"MSET", "a", "1", "b", "2"}, {"MGET", "a", "b", "c", "hh"}, {"MSET", "a"}, {"MSET", "a", "1", "b"},
		{"MSETNX", "c", "3", "d", "4"}, {"MSETNX", "d", "5", "e", "6"}, {"MGET", "c", "d", "e"},
		{"MSETNX", "x", "1", "y"}, {"MGET"},
		// INCR family.
		{"INCR", "i"}, {"INCR", "i"}, {"DECR", "i"}, {"INCRBY", "i", "10"}, {"DECRBY", "i", "-5"},
		{"INCRBY", "i", "x"}, {"INCRBY", "i", "1.5"}, {"INCRBY", "i", " 1"}, {"INCRBY", "i", "+1"}, {"INCRBY", "i", "01"},
		{"SET", "big", "9223372036854775807"}, {"INCR", "big"}, {"DECRBY", "big", "-1"},
		{"SET", "small", "-9223372036854775808"}, {"DECR", "small"}, {"DECRBY", "small", "-9223372036854775808"},
		{"DECRBY", "i", "-9223372036854775808"}, {"INCRBY", "i", "9223372036854775808"},
		{"SET", "str", "abc"}, {"INCR", "str"}, {"INCR", "hh"}, {"SET", "sp", " 1"}, {"INCR", "sp"},
		{"SET", "z0", "007"}, {"INCR", "z0"}, {"SET", "ttl", "1", "EX", "1000"}, {"INCR", "ttl"}, {"TTL", "ttl"},
		// INCRBYFLOAT, in long double arithmetic.
		{"INCRBYFLOAT", "f", "10.5"}, {"INCRBYFLOAT", "f", "0.1"}, {"INCRBYFLOAT", "f", "-5.0e3"},
		{"INCRBYFLOAT", "f", "1e-5"}, {"INCRBYFLOAT", "f", "x"}, {"INCRBYFLOAT", "f", "inf"},
		{"INCRBYFLOAT", "f", "nan"}, {"INCRBYFLOAT", "f", " 1"}, {"INCRBYFLOAT", "f", "1e"},
		{"INCRBYFLOAT", "f", "0x10"}, {"INCRBYFLOAT", "f", "1_000"}, {"INCRBYFLOAT", "f", ""},
		{"INCRBYFLOAT", "g", "3.0"}, {"INCRBYFLOAT", "g", "1.0000000000000000001"}, {"INCRBYFLOAT", "g", "-4"},
		{"INCRBYFLOAT", "g", "0.3333333333333333333333"}, {"INCRBYFLOAT", "g", "1e300"}, {"INCRBYFLOAT", "g", "-1e300"},
		{"SET", "huge", "1e4000"}, {"INCRBYFLOAT", "huge", "1"}, {"INCRBYFLOAT", "huge", "1e4932"},
		{"INCRBYFLOAT", "h3", "1e5000"}, {"INCRBYFLOAT", "h3", "1e-5000"}, {"INCRBYFLOAT", "h3", "-0"},
		{"INCRBYFLOAT", "str", "1"}, {"INCRBYFLOAT", "hh", "1"}, {"INCRBYFLOAT", "i", "2.5"},
		// APPEND, STRLEN, GETRANGE, SETRANGE.
		{"APPEND", "ap", "hello"}, {"APPEND", "ap", " world"}, {"GET", "ap"}, {"STRLEN", "ap"},
		{"STRLEN", "missing"}, {"STRLEN", "hh"}, {"APPEND", "hh", "x"}, {"APPEND", "i", "0"}, {"GET", "i"},
		{"GETRANGE", "ap", "0", "4"}, {"GETRANGE", "ap", "-5", "-1"}, {"GETRANGE", "ap", "5", "2"},
		{"GETRANGE", "ap", "-1", "-5"}, {"GETRANGE", "ap", "0", "1000"}, {"GETRANGE", "ap", "-1000", "2"},
		{"GETRANGE", "ap", "100", "200"}, {"GETRANGE", "missing", "0", "-1"}, {"GETRANGE", "ap", "x", "1"},
		{"GETRANGE", "hh", "0", "1"}, {"SET", "empty", ""}, {"GETRANGE", "empty", "0", "-1"},
		{"GETRANGE", "i", "0", "-1"},
		{"SETRANGE", "sr", "5", "abc"}, {"GET", "sr"}, {"SETRANGE", "sr", "0", "XY"}, {"GET", "sr"},
		{"SETRANGE", "sr", "-1", "a"}, {"SETRANGE", "sr", "x", "a"}, {"SETRANGE", "sr", "2", ""},
		{"SETRANGE", "nope", "2", ""}, {"EXISTS", "nope"}, {"SETRANGE", "sr", "536870911", "ab"},
		{"SETRANGE", "hh", "0", "a"}, {"SETRANGE", "sr", "9223372036854775807", "a"},
	})
	// A long value stays exact.
	p.Run([][]string{{"SET", "long", long}, {"GET", "long"}, {"APPEND", "long", long}, {"STRLEN", "long"}})
}

// A deadline set from the client's wall clock is never further away than
// asked: PTTL right after SET PXAT <now + 10000> answers at most 10000, on
// redis-server as on lockserver (whose log clock once ran up to a
// millisecond behind the wall clock and answered 10001).
func TestDiffPXATNeverAnswersMoreThanAsked(t *testing.T) {
	p := newPair(t)
	for _, srv := range []struct {
		name string
		c    *rawClient
	}{{"redis-server", p.redis}, {"lockserver", p.ls}} {
		for i := range 300 {
			deadline := time.Now().UnixMilli() + 10_000
			srv.c.Do("SET", "k", "v", "PXAT", strconv.FormatInt(deadline, 10))
			r := srv.c.Do("PTTL", "k")
			ttl, err := strconv.ParseInt(strings.TrimSpace(strings.TrimPrefix(r, ":")), 10, 64)
			if err != nil || ttl > 10_000 || ttl < 0 {
				t.Fatalf("%s, try %d: PTTL after SET PXAT now+10000 = %q", srv.name, i, r)
			}
		}
	}
}

package compat_test

import (
	"strconv"
	"testing"
)

func TestDiffKeyspaceSet(t *testing.T) {
	p := newPair(t)
	p.Run([][]string{
		// An intset replies in numeric order.
		{"SADD", "n", "10", "2", "-3", "2"}, {"SMEMBERS", "n"}, {"SCARD", "n"}, {"SISMEMBER", "n", "2"},
		{"SISMEMBER", "n", "7"}, {"SMISMEMBER", "n", "2", "7", "10"}, {"SMISMEMBER", "nos", "a"}, {"SISMEMBER", "nos", "a"},
		{"SSCAN", "n", "0"}, {"SSCAN", "n", "0", "MATCH", "1*"}, {"SSCAN", "n", "x"}, {"SSCAN", "nos", "0"},
		{"SSCAN", "n", "0", "COUNT", "0"}, {"SSCAN", "n", "0", "TYPE", "set"},
		{"SREM", "n", "2", "99"}, {"SREM", "nos", "1"}, {"SMEMBERS", "n"}, {"SREM", "n", "10", "-3"}, {"EXISTS", "n"},
		{"SMEMBERS", "nos"}, {"SCARD", "nos"},
		{"SADD", "a", "1", "2", "3", "4"}, {"SADD", "b", "3", "4", "5"}, {"SADD", "c", "4", "6"},
		{"SINTER", "a", "b"}, {"SINTER", "a", "b", "c"}, {"SINTER", "a", "nos"}, {"SUNION", "a", "b", "c"},
		{"SUNION", "nos"}, {"SDIFF", "a", "b"}, {"SDIFF", "a", "b", "c"}, {"SDIFF", "nos", "a"}, {"SDIFF", "a", "nos"},
		{"SDIFF", "a", "a"}, {"SUNION", "a", "nos", "b"},
		// Wrong types, the error reaching past missing keys.
		{"SET", "str", "v"}, {"SADD", "str", "a"}, {"SREM", "str", "a"}, {"SMEMBERS", "str"}, {"SISMEMBER", "str", "a"},
		{"SMISMEMBER", "str", "a"}, {"SCARD", "str"}, {"SSCAN", "str", "0"}, {"SINTER", "nos", "str"}, {"SINTER", "a", "str"},
		{"SUNION", "a", "str"}, {"SDIFF", "nos", "str"}, {"SDIFF", "str", "a"}, {"SADD", "a"}, {"SMISMEMBER", "a"},
	})
	// Sets of strings are hash tables in Redis: compare as sets.
	p.Run([][]string{{"SADD", "w", "x", "y", "z", "1"}, {"SADD", "v", "y", "q"}, {"SCARD", "w"}})
	p.DoSorted("SMEMBERS", "w")
	p.DoSorted("SINTER", "w", "v")
	p.DoSorted("SUNION", "w", "v", "a")
	p.DoSorted("SDIFF", "w", "v")
	// More than 512 integers leave the intset form.
	for i := 0; i < 600; i++ {
		p.Do("SADD", "big", strconv.Itoa(i*7))
	}
	p.Run([][]string{{"SCARD", "big"}, {"SISMEMBER", "big", "700"}})
	p.DoSorted("SMEMBERS", "big")
	p.useRESP3()
	p.Run([][]string{{"SMEMBERS", "a"}, {"SMEMBERS", "nos"}, {"SINTER", "a", "b"}, {"SINTER", "a", "nos"},
		{"SUNION", "a", "b"}, {"SDIFF", "a", "b"}, {"SMISMEMBER", "a", "1", "9"}, {"SISMEMBER", "a", "1"}, {"SSCAN", "a", "0"}})
}

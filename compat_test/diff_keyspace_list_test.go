package compat_test

import "testing"

func TestDiffKeyspaceList(t *testing.T) {
	p := newPair(t)
	p.Run([][]string{
		{"RPUSH", "l", "a", "b", "c"}, {"LPUSH", "l", "z", "y"}, {"LRANGE", "l", "0", "-1"}, {"LLEN", "l"},
		{"LPUSHX", "l", "x"}, {"RPUSHX", "l", "d"}, {"LPUSHX", "nol", "x"}, {"RPUSHX", "nol", "x"}, {"EXISTS", "nol"},
		{"LRANGE", "l", "0", "-1"}, {"LRANGE", "l", "-3", "-1"}, {"LRANGE", "l", "5", "2"}, {"LRANGE", "l", "-100", "100"},
		{"LRANGE", "l", "100", "200"}, {"LRANGE", "l", "0", "-100"}, {"LRANGE", "l", "x", "1"}, {"LRANGE", "nol", "0", "-1"},
		{"LINDEX", "l", "0"}, {"LINDEX", "l", "-1"}, {"LINDEX", "l", "100"}, {"LINDEX", "l", "-100"}, {"LINDEX", "l", "x"},
		{"LINDEX", "nol", "x"}, {"LPOP", "l"}, {"RPOP", "l"}, {"LPOP", "l", "2"}, {"RPOP", "l", "2"}, {"LRANGE", "l", "0", "-1"},
		{"LPOP", "l", "0"}, {"LPOP", "l", "-1"}, {"LPOP", "l", "x"}, {"LPOP", "l", "1", "2"}, {"LPOP", "nol"}, {"LPOP", "nol", "2"},
		{"LPOP", "nol", "0"}, {"LPOP", "nol", "-1"}, {"RPOP", "l", "100"}, {"EXISTS", "l"}, {"LPOP", "l"},
		// LREM, LSET, LTRIM, LINSERT.
		{"RPUSH", "r", "a", "b", "a", "c", "a", "b"}, {"LREM", "r", "1", "a"}, {"LRANGE", "r", "0", "-1"},
		{"LREM", "r", "-1", "b"}, {"LRANGE", "r", "0", "-1"}, {"LREM", "r", "0", "a"}, {"LRANGE", "r", "0", "-1"},
		{"LREM", "r", "0", "zz"}, {"LREM", "r", "x", "a"}, {"LREM", "nol", "1", "a"}, {"LREM", "r", "0", "b"},
		{"LREM", "r", "0", "c"}, {"EXISTS", "r"},
		{"RPUSH", "s", "a", "b", "c"}, {"LSET", "s", "1", "B"}, {"LSET", "s", "-1", "C"}, {"LSET", "s", "3", "x"},
		{"LSET", "s", "-4", "x"}, {"LSET", "s", "x", "x"}, {"LSET", "nol", "0", "x"}, {"LSET", "nol", "x", "x"},
		{"LRANGE", "s", "0", "-1"},
		{"RPUSH", "t", "1", "2", "3", "4", "5"}, {"LTRIM", "t", "1", "-2"}, {"LRANGE", "t", "0", "-1"}, {"LTRIM", "t", "x", "1"},
		{"LTRIM", "nol", "0", "1"}, {"LTRIM", "t", "-100", "100"}, {"LRANGE", "t", "0", "-1"}, {"LTRIM", "t", "2", "1"},
		{"EXISTS", "t"},
		{"RPUSH", "i", "a", "b", "a"}, {"LINSERT", "i", "BEFORE", "a", "x"}, {"LINSERT", "i", "after", "a", "y"},
		{"LINSERT", "i", "AFTER", "zz", "y"}, {"LINSERT", "i", "MIDDLE", "a", "y"}, {"LINSERT", "nol", "BEFORE", "a", "y"},
		{"LINSERT", "nol", "FOO", "a", "y"}, {"LRANGE", "i", "0", "-1"},
		// LPOS.
		{"RPUSH", "p", "a", "b", "c", "1", "2", "3", "c", "c"}, {"LPOS", "p", "c"}, {"LPOS", "p", "c", "RANK", "2"},
		{"LPOS", "p", "c", "RANK", "-1"}, {"LPOS", "p", "c", "RANK", "-2"}, {"LPOS", "p", "c", "COUNT", "2"},
		{"LPOS", "p", "c", "COUNT", "0"}, {"LPOS", "p", "c", "COUNT", "0", "RANK", "2"}, {"LPOS", "p", "c", "RANK", "-1", "COUNT", "2"},
		{"LPOS", "p", "c", "MAXLEN", "3"}, {"LPOS", "p", "c", "MAXLEN", "2"}, {"LPOS", "p", "c", "COUNT", "0", "MAXLEN", "7"},
		{"LPOS", "p", "zz"}, {"LPOS", "p", "zz", "COUNT", "1"}, {"LPOS", "p", "c", "RANK", "0"}, {"LPOS", "p", "c", "RANK", "x"},
		{"LPOS", "p", "c", "COUNT", "-1"}, {"LPOS", "p", "c", "COUNT", "x"}, {"LPOS", "p", "c", "MAXLEN", "x"}, {"LPOS", "p", "c", "MAXLEN", "-1"}, {"LPOS", "p", "c", "FOO"}, {"LPOS", "p", "c", "RANK"},
		{"LPOS", "nol", "c"}, {"LPOS", "nol", "c", "COUNT", "0"}, {"LPOS", "p", "c", "RANK", "-9223372036854775808"},
		{"LPOS", "p", "c", "RANK", "9223372036854775807"},
		// RPOPLPUSH, LMOVE, rotation of one list.
		{"RPUSH", "m", "1", "2", "3"}, {"RPOPLPUSH", "m", "n"}, {"LMOVE", "m", "n", "LEFT", "RIGHT"}, {"LRANGE", "n", "0", "-1"},
		{"LMOVE", "m", "m", "LEFT", "RIGHT"}, {"LRANGE", "m", "0", "-1"}, {"LMOVE", "m", "n", "RIGHT", "LEFT"},
		{"EXISTS", "m"}, {"LRANGE", "n", "0", "-1"}, {"RPOPLPUSH", "nol", "n"}, {"LMOVE", "n", "n", "up", "LEFT"},
		{"LMOVE", "n", "n", "LEFT", "down"}, {"RPUSH", "one", "x"}, {"RPOPLPUSH", "one", "one"}, {"LRANGE", "one", "0", "-1"},
		// Wrong types.
		{"SET", "str", "v"}, {"LPUSH", "str", "a"}, {"RPUSHX", "str", "a"}, {"LPOP", "str"}, {"LLEN", "str"},
		{"LINDEX", "str", "0"}, {"LRANGE", "str", "0", "1"}, {"LREM", "str", "0", "a"}, {"LSET", "str", "0", "a"},
		{"LTRIM", "str", "0", "1"}, {"LINSERT", "str", "BEFORE", "a", "b"}, {"LPOS", "str", "a"}, {"RPOPLPUSH", "str", "n"},
		{"RPOPLPUSH", "n", "str"}, {"LRANGE", "n", "0", "-1"}, {"LMOVE", "n", "str", "LEFT", "LEFT"},
	})
	p.useRESP3()
	p.Run([][]string{{"LPOP", "nol"}, {"LPOP", "nol", "1"}, {"LRANGE", "n", "0", "-1"}, {"LPOS", "nol", "a"}, {"LPOS", "n", "zz", "COUNT", "0"}})
}

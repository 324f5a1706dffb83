package compat_test

import (
	"slices"
	"strings"
	"testing"
)

// watchCase is one write command, run by another client between WATCH and
// EXEC: setup makes the watched key (and any other the command needs),
// touch changes the watched key, and noop, where one exists, is the same
// command when Redis leaves the key as it is.
type watchCase struct {
	cmd   string // the command's name, as COMMAND lists it
	key   string // the key the connection watches
	setup [][]string
	touch []string
	noop  []string
}

// watchCases: one for every write command (TestDiffWatchEveryWrite checks
// that none is missing). Keys are the case's own: w:<command>.
var watchCases = []watchCase{
	{"append", "w:append", [][]string{{"SET", "w:append", "a"}}, []string{"APPEND", "w:append", "b"}, nil},
	{"copy", "w:copy:dst", [][]string{{"SET", "w:copy", "a"}, {"SET", "w:copy:dst", "b"}}, []string{"COPY", "w:copy", "w:copy:dst", "REPLACE"},
		[]string{"COPY", "w:copy", "w:copy:dst"}},
	{"decr", "w:decr", [][]string{{"SET", "w:decr", "5"}}, []string{"DECR", "w:decr"}, nil},
	{"decrby", "w:decrby", [][]string{{"SET", "w:decrby", "5"}}, []string{"DECRBY", "w:decrby", "2"}, []string{"DECRBY", "w:decrby", "x"}},
	{"del", "w:del", [][]string{{"SET", "w:del", "a"}}, []string{"DEL", "w:del"}, []string{"DEL", "w:del:missing"}},
	{"expire", "w:expire", [][]string{{"SET", "w:expire", "a", "EX", "100"}}, []string{"EXPIRE", "w:expire", "200"},
		[]string{"EXPIRE", "w:expire", "200", "NX"}},
	{"expireat", "w:expireat", [][]string{{"SET", "w:expireat", "a"}}, []string{"EXPIREAT", "w:expireat", "4000000000"},
		[]string{"EXPIREAT", "w:expireat", "4000000000", "XX"}},
	{"flushall", "w:flushall", [][]string{{"SET", "w:flushall", "a"}}, []string{"FLUSHALL"}, nil},
	{"flushdb", "w:flushdb", [][]string{{"SET", "w:flushdb", "a"}}, []string{"FLUSHDB"}, nil},
	{"geoadd", "w:geoadd", [][]string{{"GEOADD", "w:geoadd", "13", "38", "a"}}, []string{"GEOADD", "w:geoadd", "14", "38", "a"},
		[]string{"GEOADD", "w:geoadd", "13", "38", "a"}},
	{"getdel", "w:getdel", [][]string{{"SET", "w:getdel", "a"}}, []string{"GETDEL", "w:getdel"}, []string{"GETDEL", "w:getdel:missing"}},
	{"getex", "w:getex", [][]string{{"SET", "w:getex", "a"}}, []string{"GETEX", "w:getex", "EX", "100"}, []string{"GETEX", "w:getex"}},
	{"getset", "w:getset", [][]string{{"SET", "w:getset", "a"}}, []string{"GETSET", "w:getset", "b"}, nil},
	{"hdel", "w:hdel", [][]string{{"HSET", "w:hdel", "f", "v", "g", "v"}}, []string{"HDEL", "w:hdel", "f"}, []string{"HDEL", "w:hdel", "missing"}},
	{"hincrby", "w:hincrby", [][]string{{"HSET", "w:hincrby", "f", "1"}}, []string{"HINCRBY", "w:hincrby", "f", "1"},
		[]string{"HINCRBY", "w:hincrby", "f", "x"}},
	{"hincrbyfloat", "w:hincrbyfloat", [][]string{{"HSET", "w:hincrbyfloat", "f", "1"}}, []string{"HINCRBYFLOAT", "w:hincrbyfloat", "f", "0.5"}, nil},
	{"hmset", "w:hmset", [][]string{{"HSET", "w:hmset", "f", "1"}}, []string{"HMSET", "w:hmset", "f", "1"}, nil},
	{"hset", "w:hset", [][]string{{"HSET", "w:hset", "f", "1"}}, []string{"HSET", "w:hset", "g", "2"}, nil},
	{"hsetnx", "w:hsetnx", [][]string{{"HSET", "w:hsetnx", "f", "1"}}, []string{"HSETNX", "w:hsetnx", "g", "2"}, []string{"HSETNX", "w:hsetnx", "f", "2"}},
	{"incr", "w:incr", [][]string{{"SET", "w:incr", "5"}}, []string{"INCR", "w:incr"}, nil},
	{"incrby", "w:incrby", [][]string{{"SET", "w:incrby", "5"}}, []string{"INCRBY", "w:incrby", "3"}, nil},
	{"incrbyfloat", "w:incrbyfloat", [][]string{{"SET", "w:incrbyfloat", "5"}}, []string{"INCRBYFLOAT", "w:incrbyfloat", "0.5"}, nil},
	{"linsert", "w:linsert", [][]string{{"RPUSH", "w:linsert", "a"}}, []string{"LINSERT", "w:linsert", "BEFORE", "a", "b"},
		[]string{"LINSERT", "w:linsert", "BEFORE", "missing", "b"}},
	{"lmove", "w:lmove", [][]string{{"RPUSH", "w:lmove", "a", "b"}}, []string{"LMOVE", "w:lmove", "w:lmove:dst", "LEFT", "RIGHT"},
		[]string{"LMOVE", "w:lmove:missing", "w:lmove", "LEFT", "RIGHT"}},
	{"lpop", "w:lpop", [][]string{{"RPUSH", "w:lpop", "a", "b"}}, []string{"LPOP", "w:lpop"}, []string{"LPOP", "w:lpop", "0"}},
	{"lpush", "w:lpush", [][]string{{"RPUSH", "w:lpush", "a"}}, []string{"LPUSH", "w:lpush", "b"}, nil},
	{"lpushx", "w:lpushx", [][]string{{"RPUSH", "w:lpushx", "a"}}, []string{"LPUSHX", "w:lpushx", "b"}, nil},
	{"lrem", "w:lrem", [][]string{{"RPUSH", "w:lrem", "a", "b"}}, []string{"LREM", "w:lrem", "0", "a"}, []string{"LREM", "w:lrem", "0", "missing"}},
	{"lset", "w:lset", [][]string{{"RPUSH", "w:lset", "a"}}, []string{"LSET", "w:lset", "0", "b"}, []string{"LSET", "w:lset", "5", "b"}},
	{"ltrim", "w:ltrim", [][]string{{"RPUSH", "w:ltrim", "a", "b", "c"}}, []string{"LTRIM", "w:ltrim", "0", "0"}, []string{"LTRIM", "w:ltrim", "0", "-1"}},
	{"move", "w:move", [][]string{{"SET", "w:move", "a"}}, []string{"MOVE", "w:move", "3"}, []string{"MOVE", "w:move:missing", "3"}},
	{"mset", "w:mset", [][]string{{"SET", "w:mset", "a"}}, []string{"MSET", "w:mset:other", "x", "w:mset", "b"}, nil},
	{"msetnx", "w:msetnx", [][]string{{"SET", "w:msetnx:taken", "a"}}, []string{"MSETNX", "w:msetnx", "b"},
		[]string{"MSETNX", "w:msetnx:taken", "x", "w:msetnx", "b"}},
	{"persist", "w:persist", [][]string{{"SET", "w:persist", "a", "EX", "100"}}, []string{"PERSIST", "w:persist"}, nil},
	{"pexpire", "w:pexpire", [][]string{{"SET", "w:pexpire", "a", "EX", "100"}}, []string{"PEXPIRE", "w:pexpire", "200000"},
		[]string{"PEXPIRE", "w:pexpire", "1000", "GT"}},
	{"pexpireat", "w:pexpireat", [][]string{{"SET", "w:pexpireat", "a"}}, []string{"PEXPIREAT", "w:pexpireat", "4000000000000"},
		[]string{"PEXPIREAT", "w:pexpireat", "4000000000000", "XX"}},
	{"psetex", "w:psetex", [][]string{{"SET", "w:psetex", "a"}}, []string{"PSETEX", "w:psetex", "100000", "b"}, nil},
	{"rename", "w:rename", [][]string{{"SET", "w:rename", "a"}}, []string{"RENAME", "w:rename", "w:rename:new"}, nil},
	{"renamenx", "w:renamenx", [][]string{{"SET", "w:renamenx", "a"}, {"SET", "w:renamenx:taken", "b"}}, []string{"RENAMENX", "w:renamenx", "w:renamenx:new"},
		[]string{"RENAMENX", "w:renamenx", "w:renamenx:taken"}},
	{"rpop", "w:rpop", [][]string{{"RPUSH", "w:rpop", "a", "b"}}, []string{"RPOP", "w:rpop"}, nil},
	{"rpoplpush", "w:rpoplpush", [][]string{{"RPUSH", "w:rpoplpush", "a"}, {"RPUSH", "w:rpoplpush:src", "x"}}, []string{"RPOPLPUSH", "w:rpoplpush:src", "w:rpoplpush"},
		[]string{"RPOPLPUSH", "w:rpoplpush:missing", "w:rpoplpush"}},
	{"rpush", "w:rpush", [][]string{{"RPUSH", "w:rpush", "a"}}, []string{"RPUSH", "w:rpush", "b"}, nil},
	{"rpushx", "w:rpushx", [][]string{{"RPUSH", "w:rpushx", "a"}}, []string{"RPUSHX", "w:rpushx", "b"}, nil},
	{"sadd", "w:sadd", [][]string{{"SADD", "w:sadd", "a"}}, []string{"SADD", "w:sadd", "b"}, []string{"SADD", "w:sadd", "a"}},
	{"set", "w:set", [][]string{{"SET", "w:set", "a"}}, []string{"SET", "w:set", "a"}, []string{"SET", "w:set", "b", "NX"}},
	{"setex", "w:setex", [][]string{{"SET", "w:setex", "a"}}, []string{"SETEX", "w:setex", "100", "b"}, nil},
	{"setnx", "w:setnx", [][]string{{"DEL", "w:setnx"}}, []string{"SETNX", "w:setnx", "a"}, nil},
	{"setrange", "w:setrange", [][]string{{"SET", "w:setrange", "abc"}}, []string{"SETRANGE", "w:setrange", "1", "x"},
		[]string{"SETRANGE", "w:setrange", "1", ""}},
	{"srem", "w:srem", [][]string{{"SADD", "w:srem", "a", "b"}}, []string{"SREM", "w:srem", "a"}, []string{"SREM", "w:srem", "missing"}},
	{"swapdb", "w:swapdb", [][]string{{"SET", "w:swapdb", "a"}}, []string{"SWAPDB", "0", "1"}, nil},
	{"unlink", "w:unlink", [][]string{{"SET", "w:unlink", "a"}}, []string{"UNLINK", "w:unlink"}, []string{"UNLINK", "w:unlink:missing"}},
	{"zadd", "w:zadd", [][]string{{"ZADD", "w:zadd", "1", "a"}}, []string{"ZADD", "w:zadd", "2", "a"}, []string{"ZADD", "w:zadd", "1", "a"}},
	{"zincrby", "w:zincrby", [][]string{{"ZADD", "w:zincrby", "1", "a"}}, []string{"ZINCRBY", "w:zincrby", "1", "a"}, nil},
	{"zpopmax", "w:zpopmax", [][]string{{"ZADD", "w:zpopmax", "1", "a", "2", "b"}}, []string{"ZPOPMAX", "w:zpopmax"}, []string{"ZPOPMAX", "w:zpopmax", "0"}},
	{"zpopmin", "w:zpopmin", [][]string{{"ZADD", "w:zpopmin", "1", "a", "2", "b"}}, []string{"ZPOPMIN", "w:zpopmin"}, []string{"ZPOPMIN", "w:zpopmin", "0"}},
	{"zrem", "w:zrem", [][]string{{"ZADD", "w:zrem", "1", "a", "2", "b"}}, []string{"ZREM", "w:zrem", "a"}, []string{"ZREM", "w:zrem", "missing"}},
	{"zremrangebylex", "w:zremrangebylex", [][]string{{"ZADD", "w:zremrangebylex", "0", "a", "0", "b"}}, []string{"ZREMRANGEBYLEX", "w:zremrangebylex", "[a", "[a"},
		[]string{"ZREMRANGEBYLEX", "w:zremrangebylex", "[x", "[z"}},
	{"zremrangebyrank", "w:zremrangebyrank", [][]string{{"ZADD", "w:zremrangebyrank", "1", "a", "2", "b"}}, []string{"ZREMRANGEBYRANK", "w:zremrangebyrank", "0", "0"},
		[]string{"ZREMRANGEBYRANK", "w:zremrangebyrank", "5", "9"}},
	{"zremrangebyscore", "w:zremrangebyscore", [][]string{{"ZADD", "w:zremrangebyscore", "1", "a", "2", "b"}}, []string{"ZREMRANGEBYSCORE", "w:zremrangebyscore", "1", "1"},
		[]string{"ZREMRANGEBYSCORE", "w:zremrangebyscore", "5", "9"}},
}

// WATCH is told of every write: for each write command, a connection
// watches a key, another client changes it with that command, and the EXEC
// that follows aborts on both servers (redis-server's abort is checked too,
// so that a case that does not change the key cannot pass). The same
// command when it leaves the key alone (SET NX on a key that exists, HDEL of
// a missing field, ...) must do to the EXEC what it does on redis-server.
// Every write command lockserver's COMMAND lists must have a case.
func TestDiffWatchEveryWrite(t *testing.T) {
	p := newPair(t)
	var writes []string
	reply, _ := parseTree(p.ls.Do("COMMAND"))
	for _, c := range reply.elems {
		if len(c.elems) > 2 && slices.ContainsFunc(c.elems[2].elems, func(f respTree) bool { return f.str == "write" }) {
			writes = append(writes, strings.ToLower(c.elems[0].str))
		}
	}
	if len(writes) == 0 {
		t.Fatalf("no write command in lockserver's COMMAND reply")
	}
	have := map[string]bool{}
	for _, c := range watchCases {
		have[c.cmd] = true
	}
	for _, w := range writes {
		if !have[w] {
			t.Errorf("write command %s has no WATCH case", w)
		}
	}

	other := p.another()
	run := func(c watchCase, cmd []string, what string) string {
		t.Helper()
		p.Run([][]string{{"FLUSHALL"}})
		p.Run(c.setup)
		p.Do("WATCH", c.key)
		other.Do(cmd...)
		p.Run([][]string{{"MULTI"}, {"PING"}})
		want, got := p.redis.Do("EXEC"), p.ls.Do("EXEC")
		if got != want {
			t.Errorf("%s: WATCH %s, then %q from another client: EXEC\n redis-server: %q\n   lockserver: %q", what, c.key, cmd, want, got)
		}
		return want
	}
	for _, c := range watchCases {
		if want := run(c, c.touch, c.cmd); want != "*-1\r\n" {
			t.Errorf("%s: redis-server ran the EXEC (%q) after %q: the case does not change %s", c.cmd, want, c.touch, c.key)
		}
		if c.noop != nil {
			run(c, c.noop, c.cmd+", changing nothing")
		}
	}
}

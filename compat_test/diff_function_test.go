package compat_test

import (
	"strings"
	"testing"
)

// Differential tests of Redis 7's functions (FUNCTION, FCALL, FCALL_RO):
// the same commands go to redis-server 7.0 and lockserver, and the raw
// replies must be equal.
//
// Known differences, not tested here: FUNCTION LIST orders libraries, and
// each library's functions, by name, where Redis follows its hash tables
// (so every listing here holds one library of one function); a library's
// code that runs too long at load is stopped by the script budget, with
// its own message after "FUNCTION LOAD timeout", where Redis gives it
// 500 ms; FUNCTION DUMP writes code uncompressed where Redis compresses it
// with LZF (each restores the other's); and every FCALL runs its library's
// code afresh (see luaexec's functions.go), so a library's local variables
// do not keep what one call left in them for the next; and two functions of
// one library whose names differ only in case are refused, where Redis 7.0
// links one of them and then crashes as it deletes the library.

// library returns the code of a library of one function, as the Redis test
// suite's get_function_code builds it.
func library(engine, lib, fn, body string) string {
	return "#!" + engine + " name=" + lib + "\nredis.register_function('" + fn + "', function(KEYS, ARGV)\n " + body + " \nend)"
}

// loadLib returns FUNCTION LOAD of a library's code, after args.
func loadLib(code string, args ...string) []string {
	return append(append([]string{"FUNCTION", "LOAD"}, args...), code)
}

func TestDiffFunctionLoadAndCall(t *testing.T) {
	p := newPair(t)
	p.Run([][]string{
		loadLib(library("LUA", "test", "test", "return 'hello'")),
		{"FCALL", "test", "0"},
		{"FCALL", "TEST", "0"}, // function names are case-insensitive
		loadLib(library("LUA", "test", "test", "return 'hello'"), "foo"),
		loadLib(library("LUA", "test", "test", "return 'hello1'")),
		loadLib(library("LUA", "TEST", "test", "return 'hello1'")),
		loadLib(library("LUA", `bad\0format`, "test", "return 'hello1'")),
		loadLib(library("bad_engine", "test", "test", "return 'hello1'")),
		loadLib(library("LUA", "test", "test", "bad script"), "REPLACE"),
		loadLib(library("LUA", "test", "test", "return 'hello1'"), "REPLACE"),
		{"FCALL", "test", "0"},
		loadLib(library("LUA", "test", "test", "error"), "replace"), // the old library stays
		{"FCALL", "test", "0"},
		{"FUNCTION", "LOAD", "REPLACE"},
		{"FUNCTION", "LOAD", "REPLACE", "REPLACE"},
		{"FCALL", "test", "bad_arg"},
		{"FCALL", "test", "10", "key1"},
		{"FCALL", "test", "-1", "key1"},
		{"FCALL", "nosuch", "0"},
		{"FCALL"},
		{"FCALL", "test"},
		{"FUNCTION", "DELETE", "test"},
		{"FCALL", "test", "0"},
		{"FUNCTION", "DELETE", "test"},
		{"FUNCTION", "KILL"},
		{"FUNCTION", "bad_subcommand"},
		{"FUNCTION"},
		{"FUNCTION", "FLUSH", "bad_arg"},
		{"FUNCTION", "FLUSH", "sync", "extra_arg"},
		{"FUNCTION", "FLUSH", "ASYNC"},
		{"FUNCTION", "HELP"},
		{"FUNCTION", "STATS"},
		loadLib(library("lua", "test", "test", "return redis.call('set', KEYS[1], ARGV[1])"), "REPLACE"),
		{"FCALL", "test", "1", "x", "foo"},
		{"GET", "x"},
		{"FCALL_RO", "test", "1", "x", "foo"},
		{"COMMAND", "GETKEYS", "fcall", "test", "1", "x", "foo"},
		{"COMMAND", "GETKEYS", "fcall_ro", "test", "1", "x", "foo"},
		{"FUNCTION", "FLUSH"},
		{"FUNCTION", "LIST"},
		{"FUNCTION", "STATS"},
		// The first line, as Redis reads it.
		{"FUNCTION", "LOAD", "return 1"},
		{"FUNCTION", "LOAD", "#!lua name=x"},
		{"FUNCTION", "LOAD", "#! name=test\nredis.register_function('foo', function() return 1 end)"},
		{"FUNCTION", "LOAD", "#!lua name=test foo=bar\nredis.register_function('foo', function() return 1 end)"},
		{"FUNCTION", "LOAD", "#!lua\nredis.register_function('foo', function() return 1 end)"},
		{"FUNCTION", "LOAD", "#!lua name=foo name=bar\nredis.register_function('foo', function() return 1 end)"},
		{"FUNCTION", "LOAD", "#!lua name=\"unbalanced\nredis.register_function('foo', function() return 1 end)"},
		{"FUNCTION", "LOAD", "#!lua NAME=\"foo\"\nredis.register_function('foo', function() return 1 end)"},
		{"FCALL", "foo", "0"},
		{"FUNCTION", "FLUSH"},
	})
}

func TestDiffFunctionRegistration(t *testing.T) {
	p := newPair(t)
	lib := func(body string) []string { return []string{"FUNCTION", "LOAD", "REPLACE", "#!lua name=lib2\n" + body} }
	p.Run([][]string{
		{"FUNCTION", "LOAD", "#!lua name=lib1\nlocal function add1(a) return a + 1 end\n" +
			"redis.register_function('f1', function(keys, args) return add1(1) end)\n" +
			"redis.register_function('f2', function(keys, args) return add1(2) end)"},
		{"FCALL", "f1", "0"},
		{"FCALL", "f2", "0"},
		// A failure anywhere in the code loads nothing of it.
		{"FUNCTION", "LOAD", "REPLACE", "#!lua name=lib1\nredis.register_function('f1', function() return 5 end)\nredis.register_function('f2', 'not a function')"},
		{"FCALL", "f1", "0"},
		lib("redis.register_function('f1', function(keys, args) return 1 end)"),
		lib("redis.register_function('f3', function() return 1 end)\nredis.register_function('f3', function() return 1 end)"),
		lib("redis.register_function()"),
		lib("redis.register_function('f3')"),
		lib("redis.register_function('f3', function() return 1 end, {}, 'description', 'extra arg')"),
		lib("redis.register_function(nil, function() return 1 end)"),
		lib("redis.register_function('test\\0test', function() return 1 end)"),
		lib("redis.register_function('', function() return 1 end)"),
		lib("redis.register_function(12, function() return 1 end)"),
		lib("redis.register_function{function_name=function() return 1 end, callback=function() return 1 end}"),
		lib("redis.register_function{function_name='f3', callback='x'}"),
		lib("redis.register_function{function_name='f3', callback=function() return 1 end, description=function() end}"),
		lib("redis.register_function{function_name='f3', callback=function() return 1 end, some_unknown='x'}"),
		lib("redis.register_function{callback=function() return 1 end}"),
		lib("redis.register_function{function_name='f3'}"),
		lib("redis.register_function{function_name='f3', callback=function() return 1 end, flags='bad flags type'}"),
		lib("redis.register_function{function_name='f3', callback=function() return 1 end, flags={function() return 1 end}}"),
		lib("redis.register_function{function_name='f3', callback=function() return 1 end, flags={'unknown'}}"),
		lib("redis.register_function{[1]='f3'}"),
		lib("return 1"),
		// What a library's code sees as it loads: redis's load API alone.
		lib("return math.random()"),
		lib("return redis.call('ping')"),
		lib("return redis.setresp(3)"),
		lib("return redis.set_repl(redis.REPL_NONE)"),
		lib("a = 1"),
		lib("mt = getmetatable(_G)"),
		lib("redis.math.random()"),
		lib("redis.redis.call('ping')"),
		lib("local x = nil + 1"),
		lib("error('boom')"),
		lib("redis.log(redis.LOG_NOTICE, 'loading')\nredis.register_function('v', function() return {redis.REDIS_VERSION, redis.REDIS_VERSION_NUM} end)"),
		{"FCALL", "v", "0"},
		{"FUNCTION", "DELETE", "lib2"},
		{"FUNCTION", "DELETE", "lib1"},
		// What a function sees as it runs: the globals of scripts, read-only,
		// with neither KEYS nor ARGV nor the load API.
		lib("redis.register_function('g', function() return KEYS end)"),
		{"FCALL", "g", "0"},
		lib("redis.register_function('g', function(keys, args) return {keys, args, #keys, #args} end)"),
		{"FCALL", "g", "2", "k1", "k2", "a1"},
		lib("redis.register_function('g', function() x = 1 end)"),
		{"FCALL", "g", "0"},
		lib("redis.register_function('g', function() mt = getmetatable(_G) end)"),
		{"FCALL", "g", "0"},
		lib("redis.register_function('g', function() redis.register_function('h', function() return 2 end) return 1 end)"),
		{"FCALL", "g", "0"},
		lib("local lib = redis\nlib.register_function('g', function() lib.redis = redis return {ok='OK'} end)\n" +
			"lib.register_function('h', function() lib.register_function('i', function() end) end)"),
		{"FCALL", "g", "0"},
		{"FCALL", "h", "0"},
		lib("redis.register_function('g', function(keys)\n  return redis.call('nosuch')\nend)"),
		{"FCALL", "g", "0"},
		lib("redis.register_function('g', function()\n\n  error('x')\nend)"),
		{"FCALL", "g", "0"},
		lib("redis.register_function('g', function() return string.format('%d', 7) .. cjson.encode({1}) end)"),
		{"FCALL", "g", "0"},
		lib("local function ping() return redis.call('ping') end\nredis.register_function('g', function(keys, args) return ping() end)"),
		{"FCALL", "g", "0"},
	})
}

func TestDiffFunctionFlags(t *testing.T) {
	p := newPair(t)
	p.Run([][]string{
		{"FUNCTION", "LOAD", "#!lua name=test\nredis.register_function{function_name='f1', callback=function() return redis.call('set', 'x', 1) end}"},
		{"FCALL_RO", "f1", "0"},
		{"FUNCTION", "LOAD", "REPLACE", "#!lua name=test\nredis.register_function{function_name='f1', callback=function() return redis.call('set', 'x', 1) end, flags={'no-writes'}}"},
		{"FCALL", "f1", "0"},
		{"FCALL_RO", "f1", "0"},
		{"FUNCTION", "LOAD", "REPLACE", "#!lua name=test\nredis.register_function{function_name='f1', callback=function() return redis.call('get', 'x') end, flags={'no-writes'}}"},
		{"SET", "x", "1"},
		{"FCALL_RO", "f1", "0"},
		{"FUNCTION", "LIST"},
		{"FUNCTION", "LOAD", "REPLACE", "#!lua name=test\nredis.register_function{function_name='f1', description='some desc', callback=function() return 1 end, flags={'ALLOW-OOM', 'no-cluster', 'allow-stale', 'allow-cross-slot-keys', 'no-writes'}}"},
		{"FUNCTION", "LIST"},
		{"FUNCTION", "LIST", "WITHCODE"},
		{"FUNCTION", "LIST", "LIBRARYNAME", "te*"},
		{"FUNCTION", "LIST", "LIBRARYNAME", "nomatch*"},
		{"FUNCTION", "LIST", "bad_argument"},
		{"FUNCTION", "LIST", "libraryname"},
		{"FUNCTION", "LIST", "withcode", "withcode"},
		{"FUNCTION", "LIST", "withcode", "libraryname", "foo", "libraryname", "foo"},
		{"FUNCTION", "STATS"},
	})
}

// FUNCTION DUMP's payload restores on the other server: redis-server's,
// LZF-compressed, here, and lockserver's on redis-server.
func TestDiffFunctionDumpRestore(t *testing.T) {
	p := newPair(t)
	// Long and repetitive, so that Redis compresses it.
	long := "#!lua name=long\n" + strings.Repeat("local x = 'abcdefghij abcdefghij'\n", 40) +
		"redis.register_function('long', function() return x end)"
	small := library("LUA", "test", "test", "return 'hello'")
	for _, code := range []string{long, small} {
		p.Run([][]string{{"FUNCTION", "FLUSH"}, {"FUNCTION", "LOAD", code}})
		fromRedis, fromLs := bulkOf(t, p.redis.Do("FUNCTION", "DUMP")), bulkOf(t, p.ls.Do("FUNCTION", "DUMP"))
		for _, payload := range []string{fromRedis, fromLs} {
			p.Run([][]string{
				{"FUNCTION", "RESTORE", payload},
				{"FUNCTION", "RESTORE", payload, "REPLACE"},
				{"FUNCTION", "LIST", "WITHCODE"},
				{"FUNCTION", "FLUSH"},
				{"FUNCTION", "RESTORE", payload, "APPEND"},
				{"FUNCTION", "LIST", "WITHCODE"},
				{"FUNCTION", "RESTORE", payload, "FLUSH"},
				{"FUNCTION", "RESTORE", payload, "bad_policy"},
				{"FUNCTION", "RESTORE", payload, "FLUSH", "extra"},
				{"FUNCTION", "RESTORE", payload[:len(payload)-1]},
				{"FUNCTION", "RESTORE", payload[:len(payload)-1] + "x"},
			})
		}
		// A library whose function another library registered is refused.
		p.Run([][]string{
			{"FUNCTION", "FLUSH"},
			{"FUNCTION", "LOAD", strings.Replace(code, "name=", "name=other", 1)},
			{"FUNCTION", "RESTORE", fromRedis},
			{"FUNCTION", "RESTORE", fromRedis, "REPLACE"},
			{"FUNCTION", "LIST", "WITHCODE"},
		})
	}
	p.Run([][]string{
		{"FUNCTION", "FLUSH"},
		{"FUNCTION", "RESTORE", "bad_payload"},
		{"FUNCTION", "DUMP"},
	})
}

// bulkOf returns the text of a raw bulk string reply.
func bulkOf(t *testing.T, raw string) string {
	t.Helper()
	head, rest, ok := strings.Cut(raw, "\r\n")
	if !ok || !strings.HasPrefix(head, "$") || !strings.HasSuffix(rest, "\r\n") {
		t.Fatalf("not a bulk string: %q", raw)
	}
	return strings.TrimSuffix(rest, "\r\n")
}

// A user's ACL rules hold for FCALL's keys and for the commands a function
// calls, as for scripts.
func TestDiffFunctionACL(t *testing.T) {
	p := newPair(t)
	p.Run([][]string{
		{"FUNCTION", "LOAD", "#!lua name=acl\nredis.register_function('setk', function(keys, args) return redis.call('SET', keys[1], args[1]) end)\n" +
			"redis.register_function('other', function() return redis.call('SET', 'other', '1') end)\n" +
			"redis.register_function('del', function() return redis.pcall('DEL', 'k1') end)"},
		{"ACL", "SETUSER", "fn", "on", "nopass", "+fcall", "+fcall_ro", "+set", "~k*"},
	})
	u := p.another()
	u.Run([][]string{
		{"AUTH", "fn", "any"},
		{"FCALL", "setk", "1", "k1", "v"},
		{"FCALL", "setk", "1", "x1", "v"},
		{"FCALL", "other", "0"},
		{"FCALL", "del", "0"},
		{"FUNCTION", "LIST"},
		{"FUNCTION", "DELETE", "acl"},
	})
	p.Run([][]string{{"GET", "k1"}, {"GET", "x1"}, {"GET", "other"}})
}

// FUNCTION and FCALL inside MULTI run in order when EXEC does, a call of a
// function loaded earlier in the same transaction included.
func TestDiffFunctionInMulti(t *testing.T) {
	p := newPair(t)
	p.Run([][]string{
		{"MULTI"},
		{"FUNCTION", "LOAD", "#!lua name=tx\nredis.register_function('bump', function(keys) return redis.call('INCR', keys[1]) end)"},
		{"FCALL", "bump", "1", "n"},
		{"FCALL", "bump", "1", "n"},
		{"FCALL_RO", "bump", "1", "n"},
		{"FCALL", "nosuch", "0"},
		{"EXEC"},
		{"GET", "n"},
		{"MULTI"},
		{"FUNCTION", "DELETE", "tx"},
		{"FCALL", "bump", "1", "n"},
		{"EXEC"},
		{"FUNCTION", "LIST"},
	})
}

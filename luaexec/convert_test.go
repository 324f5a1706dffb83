package luaexec

import (
	"testing"

	"github.com/lockserver/lockserver/keyspace"
)

// Worked examples of the Lua -> Redis conversion (what EVAL replies), as
// redis-server 7.0 replies them.
func TestLuaToRedis(t *testing.T) {
	h := newHarness(t, Options{})
	h.expect([][2]string{
		{"return 'x'", `"x"`},
		{"return 42", ":42"},
		{"return 3.99", ":3"},
		{"return -3.99", ":-3"},
		{"return 0.5", ":0"},
		{"return 1e19", ":-9223372036854775808"}, // out of range: C's cast
		{"return -1e19", ":-9223372036854775808"},
		{"return 0/0", ":-9223372036854775808"},
		{"return 9007199254740993", ":9007199254740992"}, // a double
		{"return true", ":1"},
		{"return false", "nil"},
		{"return nil", "nil"},
		{"return", "nil"},
		{"return {1, 2, 3}", "[:1, :2, :3]"},
		{"return {1, nil, 3}", "[:1]"},
		{"return {1, 'x', {2, false}, true}", `[:1, "x", [:2, nil], :1]`},
		{"return {a = 1, 2}", "[:2]"},
		{"return {}", "[]"},
		{"return {err = 'MY error'}", "-MY error"},
		{"return {err = '-x y'}", "--x y"},
		{"return {err = 'abc\\r\\n'}", "-abc"},
		{"return {err = ''}", "-"},
		{"return {err = 1}", "[]"}, // not a string: an empty array
		{"return {ok = 'fine'}", "+fine"},
		{"return {ok = ''}", "+"},
		{"return {ok = 'a', err = 'b'}", "-b"},
		{"return {double = 3.5}", ",3.5"},
		{"return {double = '3.5'}", "[]"},
		{"return {map = {a = 1}}", `%{"a", :1}`},
		{"return {set = {a = true}}", `~["a"]`},
		{"return {big_number = '123'}", `"123"`},
		{"return {{ok = 'in'}, {err = 'E in'}}", "[+in, -E in]"},
		{"return print", scriptErr("return print", "ERR user_script:1: Script attempted to access nonexistent global variable 'print'", 1)},
		{"return function() end", "nil"},
		{"return cjson.null", "nil"},
		{"return redis.error_reply('My Err')", "-My Err"},
		{"return redis.error_reply('NOCODE')", "-ERR NOCODE"},
		{"return redis.error_reply('')", "-ERR "},
		{"return redis.error_reply(1)", "-ERR wrong number or type of arguments"},
		{"return redis.status_reply('s')", "+s"},
		{"return redis.status_reply(1)", "-ERR wrong number or type of arguments"},
	})
}

// After redis.setresp(3) booleans and nulls have RESP3 forms.
func TestLuaToRedisRESP3(t *testing.T) {
	h := newHarness(t, Options{})
	h.expect([][2]string{
		{"redis.setresp(3) return true", "#true"},
		{"redis.setresp(3) return false", "#false"},
		{"redis.setresp(3) return nil", "nil"},
		{"redis.setresp(3) return {true, false}", "[#true, #false]"},
		{"redis.setresp(3) return {map = {a = true}}", `%{"a", #true}`},
		{"redis.setresp(2) return false", "nil"},
		{"return redis.setresp(4)", scriptErr("return redis.setresp(4)", "ERR RESP version must be 2 or 3.", 1)},
		{"return redis.setresp()", scriptErr("return redis.setresp()", "ERR redis.setresp() requires one argument.", 1)},
	})
}

// Worked examples of the Redis -> Lua conversion (what redis.call returns),
// under RESP2 and RESP3 rules.
func TestRedisToLua(t *testing.T) {
	h := newHarness(t, Options{})
	for _, cmd := range [][]string{
		{"SET", "str", "v"},
		{"HSET", "h", "f", "1"},
		{"SADD", "s", "m"},
		{"ZADD", "z", "1.5", "m"},
	} {
		if r := h.do(cmd...); r.IsError() {
			t.Fatalf("%q: %s", cmd, r.Str)
		}
	}
	h.expect([][2]string{
		{"return type(redis.call('get', 'missing'))", `"boolean"`},
		{"return redis.call('get', 'missing') == false", ":1"},
		{"local r = redis.call('set', 'k', 'v') return {type(r), r.ok}", `["table", "OK"]`},
		{"local r = redis.call('incr', 'n') return {type(r), r}", `["number", :1]`},
		{"return redis.call('get', 'str')", `"v"`},
		{"return redis.call('hgetall', 'h')", `["f", "1"]`},
		{"return redis.call('smembers', 's')", `["m"]`},
		{"local r = redis.call('zscore', 'z', 'm') return {type(r), r}", `["string", "1.5"]`},
		{"local r = redis.pcall('incr', 'str') return {r.err, tostring(r.ignore_error_stats_update)}", `["ERR value is not an integer or out of range", "true"]`},
		{"return redis.pcall('incr', 'str')", "-ERR value is not an integer or out of range"},
		{"redis.setresp(3) return type(redis.call('get', 'missing'))", `"nil"`},
		{"redis.setresp(3) local r = redis.call('hgetall', 'h') return {type(r.map), r.map.f}", `["table", "1"]`},
		{"redis.setresp(3) local r = redis.call('smembers', 's') return tostring(r.set.m)", `"true"`},
		{"redis.setresp(3) local r = redis.call('zscore', 'z', 'm') return {type(r.double), tostring(r.double)}", `["number", "1.5"]`},
		{"redis.setresp(3) return redis.call('zscore', 'z', 'm')", ",1.5"},
		{"redis.setresp(3) return redis.call('hgetall', 'h')", `%{"f", "1"}`},
		{"return redis.call('zscore', 'z', 'm')", `"1.5"`},
	})
}

// Nesting deeper than Redis's 8000-slot Lua stack allows ends, as in Redis,
// with an error element where the stack ran out: 7995 arrays deep for a
// table that contains itself.
func TestLuaToRedisStackLimit(t *testing.T) {
	h := newHarness(t, Options{})
	r := h.eval("local t = {} t[1] = t return t")
	depth := 0
	for r.Kind != keyspace.KindError {
		if len(r.Elems) != 1 {
			t.Fatalf("at depth %d: %s", depth, show(r))
		}
		depth++
		r = r.Elems[0]
	}
	if depth != 7995 || r.Str != "ERR reached lua stack limit" {
		t.Fatalf("stopped at depth %d with %s, want 7995 and the stack limit error", depth, show(r))
	}
}

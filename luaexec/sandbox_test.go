package luaexec

import (
	"strings"
	"testing"
)

// Every way out of the sandbox that was tried fails, with Redis 7.0's
// errors, and nothing a script does persists into the next script.
func TestSandboxRefusesWrites(t *testing.T) {
	h := newHarness(t, Options{})
	const ro = "Attempt to modify a readonly table"
	for _, c := range []struct{ script, want string }{
		{"x = 1", "user_script:1: " + ro},
		{"_G.x = 1", "user_script:1: " + ro},
		{"_G['KEYS'] = {}", "user_script:1: " + ro},
		{"KEYS = {}", "user_script:1: " + ro},
		{"redis = nil", "user_script:1: " + ro},
		{"string.upper = nil", "user_script:1: " + ro},
		{"redis.call = function() return 'hijacked' end", "user_script:1: " + ro},
		{"math.random = function() return 4 end", "user_script:1: " + ro},
		{"cjson.encode = nil", "user_script:1: " + ro},
		{"getmetatable('').__index = {}", "user_script:1: " + ro},
		{"getmetatable('').__add = function() return 5 end", "user_script:1: " + ro},
		{"getmetatable('').__index.upper = nil", "user_script:1: " + ro},
		{"getmetatable(_G).__index = nil", "user_script:1: " + ro},
		{"rawset(_G, 'x', 1)", ro},
		{"rawset(string, 'upper', 1)", ro},
		{"rawset(getmetatable(''), '__index', {})", ro},
		{"setmetatable(_G, {})", ro},
		{"setmetatable(string, {})", ro},
		{"table.insert(string, 'x')", ro},
		{"table.remove(redis, 1) table.insert(redis, 1, 'x')", ro},
		{"table.sort(math)", ""}, // math has no array part: nothing to sort, nothing changes
		{"loadstring('x = 1')()", "[string \"x = 1\"]:1: " + ro},
		{"coroutine.wrap(function() x = 1 end)()", "user_script:1: user_script:1: " + ro}, // wrap adds a position, as in Lua 5.1
		{"cjson.encode_max_depth(1)", ""},                                                 // allowed, but only for this script
	} {
		got := show(h.eval(c.script))
		if c.want == "" {
			if strings.HasPrefix(got, "-") {
				t.Errorf("%s: %s", c.script, got)
			}
			continue
		}
		if !strings.HasPrefix(got, "-ERR "+c.want+" script:") {
			t.Errorf("%s\n got: %s\nwant: -ERR %s script: ...", c.script, got, c.want)
		}
	}
	// Nothing above changed what the next script sees.
	h.expect([][2]string{
		{"return string.upper('a')", `"A"`},
		{"return type(redis.call)", `"function"`},
		{"return getmetatable('').__index == string", ":1"},
		{"return ('7') + 1", ":8"},
		{"return cjson.encode({{{1}}})", `"[[[1]]]"`},
		{"return tostring(rawget(_G, 'x'))", `"nil"`},
		{"return tostring(math.random() < 1)", `"true"`},
	})
}

func TestSandboxHidesLibraries(t *testing.T) {
	h := newHarness(t, Options{})
	for _, name := range []string{"os", "io", "debug", "require", "module", "package", "dofile", "loadfile", "print", "setfenv", "getfenv", "newproxy"} {
		script := "return " + name
		want := scriptErr(script, "ERR user_script:1: Script attempted to access nonexistent global variable '"+name+"'", 1)
		if got := show(h.eval(script)); got != want {
			t.Errorf("%s\n got: %s\nwant: %s", script, got, want)
		}
	}
	h.expect([][2]string{
		{"local n = 0 for k in pairs(string) do n = n + 1 end return n", ":15"},
		// Redis 7.0's 23, and lockserver's LOCKSERVER_EPOCH.
		{"local n = 0 for k in pairs(redis) do n = n + 1 end return n", ":24"},
		{"return redis.LOCKSERVER_EPOCH", ":0"},
		{"local n = 0 for k in pairs(cjson) do n = n + 1 end return n", ":13"},
		{"local n = 0 for k in pairs(cmsgpack) do n = n + 1 end return n", ":8"},
		{"local n = 0 for k in pairs(struct) do n = n + 1 end return n", ":3"},
		{"return rawget(_G, 'redis') == redis", ":1"},
		{"return rawget(string, 'upper') == string.upper", ":1"},
		{"return next(string) ~= nil", ":1"},
		{"return _G._G._G == _G", ":1"},
		{"return type(getmetatable(_G).__index)", `"function"`},
		{"return getmetatable(string)", "nil"},
		{"return _VERSION", `"Lua 5.1"`},
		{"return {type(coroutine), type(gcinfo), type(collectgarbage), type(loadstring), type(load), type(unpack)}", `["table", "function", "function", "function", "function", "function"]`},
	})
}

// KEYS and ARGV are new tables at every call: what one call puts in them is
// gone in the next.
func TestKeysArgvFresh(t *testing.T) {
	h := newHarness(t, Options{})
	const script = "local n = #KEYS .. #ARGV table.insert(KEYS, 'extra') ARGV[9] = 'x' return n"
	for i := 0; i < 2; i++ {
		if got := show(h.do("EVAL", script, "1", "k", "a")); got != `"11"` {
			t.Fatalf("call %d: %s", i, got)
		}
	}
}

// Script-created state does not outlive the script: tables and closures it
// made are unreachable from the next script, and per-run settings reset.
func TestNothingPersists(t *testing.T) {
	h := newHarness(t, Options{})
	h.eval("cjson.encode_max_depth(1) math.randomseed(7) redis.setresp(3)")
	h.expect([][2]string{
		{"return cjson.encode_max_depth()", ":1000"},
		{"return tostring(math.random())", `"0.39646477363839"`},
		{"return false", "nil"}, // RESP2 again: false is a null
	})
}

// Object addresses printed by tostring are numbered per script, so that every
// node prints the same text.
func TestDeterministicAddresses(t *testing.T) {
	h := newHarness(t, Options{})
	const script = "local a, b = {}, function() end return {tostring(a), tostring(b), tostring(a)}"
	first := show(h.eval(script))
	if first != `["table: 0x00001000", "function: 0x00001010", "table: 0x00001000"]` {
		t.Fatalf("%s", first)
	}
	if again := show(h.eval(script)); again != first {
		t.Fatalf("second run printed %s, first %s", again, first)
	}
}

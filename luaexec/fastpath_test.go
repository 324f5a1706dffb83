package luaexec

import (
	"sort"
	"strings"
	"testing"

	"github.com/lockserver/lockserver/luaexec/internal/lualib"
	lua "github.com/yuin/gopher-lua"
)

// keysProbe reports everything a script can see of KEYS and ARGV, then
// calls next past KEYS's last entry 2000 times: each call is charged for the
// slots it scans, so a KEYS with leftover (deleted) hash keys would cost
// more steps than a fresh one.
const keysProbe = `
local out = {}
for k, v in pairs(KEYS) do out[#out + 1] = 'K' .. tostring(k) .. '=' .. tostring(v) end
for k, v in pairs(ARGV) do out[#out + 1] = 'A' .. tostring(k) .. '=' .. tostring(v) end
out[#out + 1] = tostring(getmetatable(KEYS)) .. ' ' .. tostring(getmetatable(ARGV)) .. ' ' ..
	#KEYS .. ' ' .. #ARGV .. ' ' .. tostring(KEYS.name) .. ' ' .. tostring(KEYS[5])
local last = #KEYS > 0 and #KEYS or nil
for i = 1, 2000 do next(KEYS, last) end
return out`

// KEYS and ARGV are fresh on every call, whatever the previous script did
// to its own: each script below changes them, and the probe that runs next,
// with as many, fewer or more arguments, sees exactly what it was called
// with, and spends the steps a probe on a new engine does.
func TestKeysAndArgvFreshEveryCall(t *testing.T) {
	// 2000 probe iterations fit (two steps each, the loop's and the call's);
	// with 500 deleted keys left in KEYS, each next would cost 31 more steps
	// and the probe would stop.
	opts := Options{Budget: 10000}
	dirty := []string{
		"return 1",
		"KEYS[1] = 'changed' ARGV[1] = 'changed'",
		"KEYS[2] = nil ARGV[1] = nil",
		"KEYS[5] = 'gap' ARGV[2] = 'extra'",
		"table.insert(KEYS, 'more') table.insert(ARGV, 1, 'first')",
		"table.remove(KEYS) table.remove(ARGV)",
		"KEYS.name = 'x' ARGV.name = 'x'",
		"KEYS.name = 'x' KEYS.name = nil",
		"for i = 1, 500 do KEYS['k' .. i] = i end for i = 1, 500 do KEYS['k' .. i] = nil end",
		"setmetatable(KEYS, {__index = function() return 'meta' end}) setmetatable(ARGV, {})",
		"local k, a = KEYS, ARGV return redis.call('ping')",
	}
	calls := []struct {
		args []string
		want string
	}{
		{[]string{"2", "k1", "k2", "a1"}, `["K1=k1", "K2=k2", "A1=a1", "nil nil 2 1 nil nil"]`},
		{[]string{"1", "k1"}, `["K1=k1", "nil nil 1 0 nil nil"]`},
		{[]string{"3", "k1", "k2", "k3", "a1", "a2"}, `["K1=k1", "K2=k2", "K3=k3", "A1=a1", "A2=a2", "nil nil 3 2 nil nil"]`},
		{[]string{"0"}, `["nil nil 0 0 nil nil"]`},
		{[]string{"2", "k2", "k1", "k1"}, `["K1=k2", "K2=k1", "A1=k1", "nil nil 2 1 nil nil"]`},
	}
	for _, d := range dirty {
		h := newHarness(t, opts)
		for _, before := range calls {
			for _, c := range calls {
				if r := h.do(append([]string{"EVAL", d}, before.args...)...); r.IsError() && !strings.Contains(d, "ping") {
					t.Fatalf("%s: %s", d, r.Str)
				}
				if got := show(h.do(append([]string{"EVAL", keysProbe}, c.args...)...)); got != c.want {
					t.Errorf("after %s with %v, probe with %v:\n got: %s\nwant: %s", d, before.args, c.args, got, c.want)
				}
			}
		}
	}
}

// Arguments passed to redis.call live in buffers reused from call to call:
// each command sees its own, numbers formatted as Redis does, however the
// sizes vary between calls.
func TestCallArgumentsReused(t *testing.T) {
	h := newHarness(t, Options{})
	h.expect([][2]string{
		{`redis.call('set', 'a', string.rep('x', 100))
		  redis.call('set', 'b', 'y')
		  redis.call('rpush', 'l', 1.5, 1724000000000, 'z', string.rep('w', 70000), '')
		  redis.call('set', 'c', 0.1)
		  return {redis.call('get', 'a') == string.rep('x', 100), redis.call('get', 'b'), redis.call('get', 'c'),
		          redis.call('lrange', 'l', 0, 2), #redis.call('lindex', 'l', 3), redis.call('lindex', 'l', 4)}`,
			`[:1, "y", "0.10000000000000001", ["1.5", "1724000000000", "z"], :70000, ""]`},
		{`return redis.call('get', 'b')`, `"y"`},
	})
}

// Scripts read every global the VM defines through an alias (an upvalue):
// the list of aliases must be exactly the globals, or a script would read
// nil for a global that does not exist; and aliased fields must exist.
func TestAliasedGlobalsAreTheGlobals(t *testing.T) {
	v := newVM(New(nil, Options{}))
	var globals []string
	lualib.ForEach(v.hidden, func(k, _ lua.LValue) bool { globals = append(globals, string(k.(lua.LString))); return true })
	sort.Strings(globals)
	if got, want := strings.Join(aliasedGlobals, " "), strings.Join(globals, " "); got != want {
		t.Fatalf("aliases:\n%s\nglobals:\n%s", got, want)
	}
	for _, name := range aliasedFields {
		lib, field, _ := strings.Cut(name, ".")
		if lt, ok := v.hidden.RawGetString(lib).(*lua.LTable); !ok || v.Contents(lt).RawGetString(field) == lua.LNil {
			t.Errorf("aliased field %s is not in the VM", name)
		}
	}
}

// EVALSHA and SCRIPT EXISTS find a script by its SHA1 in hex of any case,
// and nothing else.
func TestSHACase(t *testing.T) {
	h := newHarness(t, Options{})
	const sha = "85ccc981b1f64363f237f6dddb24ff3fa4945185" // sha1("return 'found'")
	if got := h.do("SCRIPT", "LOAD", "return 'found'").Str; got != sha {
		t.Fatalf("SCRIPT LOAD: %s, want %s", got, sha)
	}
	found := []string{sha, strings.ToUpper(sha), "85CCC981B1f64363F237f6dddb24ff3fa4945185"}
	missing := []string{"85ccc981b1f64363f237f6dddb24ff3fa4945186", sha[:39], sha + "0",
		sha[:39] + "\x09", strings.Replace(sha, "a", "\x01", 1), ""}
	for _, s := range found {
		if got := show(h.do("EVALSHA", s, "0")); got != `"found"` {
			t.Errorf("EVALSHA %q: %s", s, got)
		}
	}
	for _, s := range missing {
		if got := show(h.do("EVALSHA", s, "0")); got != "-NOSCRIPT No matching script. Please use EVAL." {
			t.Errorf("EVALSHA %q: %s", s, got)
		}
	}
	if got := show(h.do(append(append([]string{"SCRIPT", "EXISTS"}, found...), missing...)...)); got != "[:1, :1, :1, :0, :0, :0, :0, :0, :0]" {
		t.Errorf("SCRIPT EXISTS: %s", got)
	}
}

// Scripts find commands by name in any case, however many distinct ones
// they call in turn: more than the VM remembers.
func TestScriptCommandNames(t *testing.T) {
	h := newHarness(t, Options{})
	h.expect([][2]string{{`
local names = {'set', 'SET', 'Set', 'get', 'GET', 'incr', 'INCR', 'exists', 'del', 'hset', 'hget',
	'hexists', 'hincrby', 'pexpire', 'pttl', 'strlen', 'append', 'type', 'ttl', 'expire'}
local out = {}
for round = 1, 3 do
	for _, name in ipairs(names) do
		local args = {name, 'k' .. name:lower()}
		if name:lower() == 'set' or name:lower() == 'append' or name:lower() == 'pexpire' or name:lower() == 'expire' then args[3] = '100' end
		if name:lower() == 'hset' or name:lower() == 'hincrby' then args[3], args[4] = 'f', '2' end
		if name:lower() == 'hget' or name:lower() == 'hexists' then args[2], args[3] = 'khset', 'f' end
		local r = redis.pcall(unpack(args))
		if round == 3 then out[#out + 1] = type(r) == 'table' and (r.ok or r.err) or r end
	end
end
out[#out + 1] = redis.pcall('nosuch').err
out[#out + 1] = redis.pcall('').err
return out`,
		`["OK", "OK", "OK", nil, nil, :5, :6, :0, :0, :0, "2", :1, :6, :0, :-2, :0, :9, "none", :-2, :0, ` +
			`"ERR Unknown Redis command called from script", "ERR Unknown Redis command called from script"]`}})
}

// Arguments reach scripts intact whether or not the VM keeps them for
// later calls: short and long, repeated, and more distinct ones than it
// keeps.
func TestArgStrings(t *testing.T) {
	h := newHarness(t, Options{})
	sha := h.do("SCRIPT", "LOAD", "return {KEYS[1], ARGV[1], ARGV[2]}").Str
	long := strings.Repeat("l", maxArgStringLen)
	for i := 0; i < maxArgStrings+100; i++ {
		key := "key:" + itoa(i%(maxArgStrings+50))
		got := show(h.do("EVALSHA", sha, "1", key, long+itoa(i%3), long[1:]))
		if want := `["` + key + `", "` + long + itoa(i%3) + `", "` + long[1:] + `"]`; got != want {
			t.Fatalf("call %d: %s, want %s", i, got, want)
		}
	}
	if n := len(h.e.vm.argStrings.m); n > maxArgStrings {
		t.Fatalf("%d strings kept, at most %d expected", n, maxArgStrings)
	}
}

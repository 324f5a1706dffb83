package luaexec

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
)

// budgetErr is the reply of a script stopped by its budget at line.
func budgetErr(script string, budget int64, line int) string {
	return scriptErr(script, "ERR user_script:"+itoa(line)+": Script exceeded its execution budget of "+itoa64(budget)+" steps (loop iterations, calls and bytes processed)", line)
}

func itoa(n int) string     { return strconv.Itoa(n) }
func itoa64(n int64) string { return strconv.FormatInt(n, 10) }

// The budget counts deterministically. The main body below weighs 3 (one
// for running it, one for the loop statement, one for the return), the
// empty loop body 1 for each of its 100 runs, and the reply one value:
// exactly 104 steps.
func TestBudgetCountsSteps(t *testing.T) {
	const script = "for i = 1, 100 do end return 'done'"
	if got := show(newHarness(t, Options{Budget: 104}).eval(script)); got != `"done"` {
		t.Fatalf("with 104 steps: %s", got)
	}
	want := "-ERR Script reply too large: building it exceeded the script's execution budget of 103 steps (one a value, one for 16 bytes)"
	if got := show(newHarness(t, Options{Budget: 103}).eval(script)); got != want {
		t.Fatalf("with 103 steps: %s", got)
	}
	if got := show(newHarness(t, Options{Budget: 102}).eval(script)); got != budgetErr(script, 102, 1) {
		t.Fatalf("with 102 steps: %s", got)
	}
}

// A runaway script stops at the same point on every node. The main body
// weighs 2 (running it, the loop); each run of the loop's body weighs 2
// (running it, the call) and redis.call charges 1 for its 9 bytes of
// arguments: 2 + 3n steps, so with 101 steps the counter reaches exactly
// 33, twice.
func TestBudgetStopsAtTheSamePoint(t *testing.T) {
	const script = "while true do redis.call('incr', 'n') end"
	for i := 0; i < 2; i++ {
		h := newHarness(t, Options{Budget: 101})
		if got := show(h.eval(script)); got != budgetErr(script, 101, 1) {
			t.Fatalf("run %d: %s", i, got)
		}
		if got := show(h.do("GET", "n")); got != `"33"` {
			t.Fatalf("run %d stopped with n = %s, want 33", i, got)
		}
	}
}

// Runaway scripts of every kind end with the budget error, and the engine
// keeps serving.
func TestRunawayScripts(t *testing.T) {
	const budget = 200_000
	h := newHarness(t, Options{Budget: budget})
	for _, c := range []struct {
		script string
		line   int
	}{
		{"while true do end", 1},
		{"repeat until false", 1},
		{"\n\nfor i = 1, 1e18 do end", 3},
		{"for k, v in function() return 1 end do end", 1},
		{"local function f() return f() end return f()", 1},
		{"local s = 'x' while true do s = s .. s end", 1},
		{"return #string.rep('x', 1e12)", 1},
		{"return #string.rep('abc', 2^31)", 1},
		{"local t = {} for i = 1, 1e9 do t[i] = i end", 1},
		{"local t = {} for i = 1, 1e9 do t[#t + 1] = 'x' end", 1},
		{"return string.find(string.rep('a', 40), string.rep('a*', 40) .. 'b')", 1},
		{"return string.gsub(string.rep('a', 1e5), 'a', string.rep('b', 1000))", 1},
		{"return table.concat({string.rep('x', 1e6)}, '', 1, 1) .. string.rep('y', 1e9)", 1},
		{"while true do pcall(function() while true do end end) end", 1},
		{"pcall(function() while true do end end) return 'survived'", 1},
		{"local ok = xpcall(function() while true do end end, function() return 'h' end) return ok", 1},
		{"local co = coroutine.wrap(function() while true do coroutine.yield() end end) while true do co() end", 1},
		{"local co = coroutine.wrap(function() while true do end end) co()", 1},
		{"local f = loadstring('while true do end') f()", 1},
		{"while true do cjson.encode({1, 2, 3}) end", 1},
		{"local t = {} for i = 1, 1e6 do t[i] = i end table.sort(t, function(a, b) return a > b end)", 1},
		{"local t = {} t[1] = t while true do cjson.decode('[[[[[[1]]]]]]') end", 1},
		{"return string.format('%s', string.rep('x', 1e9))", 1},
		// gopher-lua fills the gap to a large integer key with nils
		{"local t = {} t[60000000] = 1", 1},
		{"local k = 60000000 local t = {[k] = 1}", 1},
		{"rawset({}, 60000000, 1)", 1},
		{"table.insert({}, 60000000, 1)", 1},
		{"local t, x = {}, 0 t[60000000], x = 1, 2", 1},
		// and scans nils and deleted keys in # and next
		{"local t = {} for i = 1, 1e5 do t[i] = 1 end for i = 1, 1e5 do t[i] = nil end while true do local n = #t end", 1},
		{"local t = {} for i = 1, 5e4 do t['k' .. i] = 1 end for i = 1, 5e4 - 1 do t['k' .. i] = nil end while true do next(t, 'k1') end", 1},
	} {
		got := show(h.eval(c.script))
		want := "Script exceeded its execution budget of 200000 steps"
		if !strings.Contains(got, want) || !strings.HasSuffix(got, "script: "+sha1hex(c.script)+", on @user_script:"+itoa(c.line)+".") {
			t.Errorf("%s\n got: %s", c.script, got)
		}
		if got := show(h.eval("return 'alive'")); got != `"alive"` {
			t.Fatalf("after %s: %s", c.script, got)
		}
	}
}

// Limits that are not the budget also end scripts cleanly.
func TestOtherLimits(t *testing.T) {
	h := newHarness(t, Options{})
	for _, c := range []struct{ script, want string }{
		{"local function f(n) return 1 + f(n + 1) end return f(1)", "stack overflow"},
		{"local function f() local co = coroutine.create(f) local ok, e = coroutine.resume(co) error(e, 0) end f()", "C stack overflow"},
		{"for i = 1, 1001 do coroutine.create(function() end) end", "too many coroutines (a script may create 1000)"},
		{"return string.match('x', string.rep('(', 33) .. 'x' .. string.rep(')', 33))", "too many captures"},
		{"return string.match(string.rep('a', 3000), string.rep('a?', 3000))", "pattern too complex"},
		{"return cmsgpack.unpack(string.rep('\\145', 2000) .. '\\1')", "MessagePack input nests deeper than 1000 levels"},
		{"return cjson.decode(string.rep('[', 1001))", "Found too many nested data structures (1001) at character 1001"},
		{"local t = {} for i = 1, 8001 do t[i] = i end return unpack(t)", "too many results to unpack"},
	} {
		if got := show(h.eval(c.script)); !strings.Contains(got, c.want) {
			t.Errorf("%s\n got: %s\nwant: ... %s ...", c.script, got, c.want)
		}
	}
}

// A caught stack overflow costs the budget the traceback gopher-lua builds,
// so that looping on it cannot run long.
func TestStackOverflowInLoopIsBudgeted(t *testing.T) {
	h := newHarness(t, Options{})
	const script = "local function f() return 1 + f() end while true do pcall(f) end"
	if got := show(h.eval(script)); !strings.Contains(got, "Script exceeded its execution budget") {
		t.Fatalf("%s", got)
	}
}

// worstInputs are scripts that do as much work as they can for each step of
// the budget (where they can, in loops that would end within the test's
// budget were the work they stand for not charged): the attacks of issue 19 (a 16 MB string hashed as a table key,
// APPEND in a loop, sha1hex, tonumber, assert and error_reply of 16 MB, a
// pcall(error) loop, a reply of 1000 references to 1 MB), the others that
// charging only loop iterations and calls left cheap, and commands whose work
// is neither their arguments nor their reply (keyspace.Call.Work). They run against a
// keyspace holding big and big2 (equal, distinct copies), spaces, and mb,
// one sixteenth of their size (worstHarness), and each must be stopped: by
// the budget, or, for replies, by the reply's own charge.
// BenchmarkWorstInputs measures how long each takes with the default budget
// and 16 MB strings.
var worstInputs = []struct {
	name, script string
	reply        bool // stopped building its reply rather than running
}{
	{"TableKey", "local s = redis.call('get', 'big') local t = {} for i = 1, 4000 do t[s] = i end", false},
	{"TableRead", "local s = redis.call('get', 'big') local t = {} rawset(t, s, 1) local n = 0 for i = 1, 4000 do n = n + t[s] end", false},
	{"AppendByte", "redis.call('set', 'a', 'x') while true do redis.call('append', 'a', 'x') end", false},
	{"AppendDoubling", "redis.call('set', 'a', 'x') while true do redis.call('append', 'a', redis.call('get', 'a')) end", false},
	{"Sha1hex", "local s = redis.call('get', 'big') for i = 1, 1000 do redis.sha1hex(s) end", false},
	{"Tonumber", "local s = redis.call('get', 'spaces') for i = 1, 1000 do tonumber(s) end", false},
	{"Assert", "local s = redis.call('get', 'big') for i = 1, 200 do pcall(assert, false, s) end", false},
	{"ErrorReply", "local s = redis.call('get', 'big') for i = 1, 200 do redis.error_reply(s) end", false},
	{"PcallError", "while true do pcall(error) end", false},
	{"PcallErrorDeep", "local function d(n) if n == 0 then while true do pcall(error, 'x') end end d(n - 1) end d(1900)", false},
	{"Equal", "local s, s2 = redis.call('get', 'big'), redis.call('get', 'big2') for i = 1, 1000 do local _ = s == s2 end", false},
	{"Less", "local s, s2 = redis.call('get', 'big'), redis.call('get', 'big2') for i = 1, 1000 do local _ = s < s2 end", false},
	{"Sort", "local t = {redis.call('get', 'big'), redis.call('get', 'big2')} for i = 1, 1000 do table.sort(t) end", false},
	{"Next", "local s = redis.call('get', 'big') local t = {[s] = 1, x = 2} for i = 1, 1000 do next(t, s) end", false},
	{"Format", "local s = redis.call('get', 'big') for i = 1, 1000 do string.format('%.5s', s) end", false},
	{"Varargs", "local function f(...) for i = 1, 10000 do select('#', ...) end end local t = {} for i = 1, 7900 do t[i] = i end f(unpack(t))", false},
	{"LongBody", "local x for i = 1, 100 do " + strings.Repeat("x = type(nil) ", 5000) + "end", false},
	{"IndexChain", "local t = {} for i = 1, 15 do t = setmetatable({}, {__index = t}) end while true do local x = t.x end", false},
	{"NewindexChain", "local t = {} for i = 1, 15 do t = setmetatable({}, {__newindex = t}) end local k = 'k' while true do t[k] = 1 end", false},
	{"NewindexChainField", "local t = {} for i = 1, 15 do t = setmetatable({}, {__newindex = t}) end while true do t.k = 1 end", false},
	{"Tostring", "for i = 1, 30000 do tostring({}) end", false},
	{"Coroutines", "local co = coroutine.wrap(function() while true do coroutine.yield(1) end end) while true do co() end", false},
	{"Loadstring", "local src = string.rep('x = 1 ', 5000) for i = 1, 20 do loadstring(src) end", false},
	{"Closures", "while true do local f = function() end end", false},
	// Commands whose work is neither their arguments nor their reply.
	{"SetrangeGrow", "for i = 1, 1000 do redis.call('del', 'r') redis.call('setrange', 'r', 5e6, 'x') end", false},
	{"CopyAppend", "redis.call('set', 'a', redis.call('get', 'mb')) for i = 1, 1000 do redis.call('copy', 'a', 'b', 'replace') redis.call('append', 'b', 'x') end", false},
	{"Sinter", "for i = 1, 2000 do redis.call('sadd', 's1', i) redis.call('sadd', 's2', -i) end for i = 1, 1000 do redis.call('sinter', 's1', 's2') end", false},
	{"Keys", "for i = 1, 2000 do redis.call('set', 'k' .. i, i) end for i = 1, 1000 do redis.call('keys', 'nomatch*') end", false},
	{"Hscan", "for i = 1, 2000 do redis.call('hset', 'h', i, i) end for i = 1, 1000 do redis.call('hscan', 'h', 0, 'count', 1) end", false},
	{"Lrem", "for i = 1, 2000 do redis.call('rpush', 'l', i) end for i = 1, 1000 do redis.call('lrem', 'l', 0, 'nomatch') end", false},
	{"Reply1000Refs", "local s = redis.call('get', 'mb') local t = {} for i = 1, 1000 do t[i] = s end return t", true},
	{"ReplySelfNested", "local t = {} t[1] = t t[2] = t return t", true},
}

// worstHarness is an engine with the given budget over the keys that the
// worst inputs read, of size bytes (mb of size/16).
func worstHarness(t testing.TB, budget int64, size int) *harness {
	h := newHarness(t, Options{Budget: budget})
	h.do("SET", "big", strings.Repeat("x", size))
	h.do("SET", "big2", strings.Repeat("x", size))
	h.do("SET", "spaces", strings.Repeat(" ", size))
	h.do("SET", "mb", strings.Repeat("x", size/16))
	return h
}

// Every worst input is stopped, deterministically: the outcome is the
// budget's error, never a wall clock's. (How long each takes is
// BenchmarkWorstInputs's to measure.)
// With a budget of 200,000 steps and 1 MB strings (64k steps a use), a
// script that used each string only once or twice would end otherwise.
func TestWorstInputsAreStoppedByTheBudget(t *testing.T) {
	h := worstHarness(t, 200_000, 1<<20)
	for _, w := range worstInputs {
		got := show(h.eval(w.script))
		want := "Script exceeded its execution budget of 200000 steps"
		if w.reply {
			want = "-ERR Script reply too large: building it exceeded the script's execution budget of 200000 steps"
		}
		if !strings.Contains(got, want) {
			if len(got) > 300 {
				got = got[:300] + "..."
			}
			t.Errorf("%s: %s", w.name, got)
		}
	}
}

// A script's reply is charged as bytes built: one step a value and one for
// 16 bytes, from what the script left of its budget. Here the main body
// weighs 3 and string.rep and the reply of n bytes 1+n/16 each: with 10,000
// steps a reply of 79,840 bytes fits, and one of 80,000 does not, which the
// script learns from a clear error rather than by the server building it.
func TestScriptReplyIsBudgeted(t *testing.T) {
	h := newHarness(t, Options{Budget: 10_000})
	if got := show(h.eval("return #string.rep('x', 79840)")); got != ":79840" {
		t.Fatalf("%s", got)
	}
	if got := h.eval("return string.rep('x', 79840)"); got.Str != strings.Repeat("x", 79840) {
		t.Errorf("a reply of 79840 bytes: %.100s", show(got))
	}
	want := "-ERR Script reply too large: building it exceeded the script's execution budget of 10000 steps (one a value, one for 16 bytes)"
	if got := show(h.eval("return string.rep('x', 80000)")); got != want {
		t.Errorf("a reply of 80000 bytes: %.100s", got)
	}
	// 1000 references to one string are 1000 strings to write out.
	if got := show(h.eval("local s = string.rep('x', 1000) local t = {} for i = 1, 1000 do t[i] = s end return t")); got != want {
		t.Errorf("1000 references to 1000 bytes: %.100s", got)
	}
}

// An access goes through at most maxMetaChain tables: a value 15 __index
// tables up is found, one 16 up is an error, as one 100 up is in Lua 5.1.
func TestMetatableChainIsBounded(t *testing.T) {
	h := newHarness(t, Options{})
	chain := func(op string, n int) string {
		return fmt.Sprintf("local t = {x = 1} for i = 1, %d do t = setmetatable({}, {%s = t}) end ", n, op)
	}
	if got := show(h.eval(chain("__index", maxMetaChain-1) + "return t.x")); got != ":1" {
		t.Errorf("through %d __index tables: %s", maxMetaChain-1, got)
	}
	if got := show(h.eval(chain("__index", maxMetaChain) + "return t.x")); !strings.Contains(got, "too many recursions in gettable") {
		t.Errorf("through %d __index tables: %s", maxMetaChain, got)
	}
	if got := show(h.eval(chain("__newindex", maxMetaChain) + "t.y = 1 return 1")); !strings.Contains(got, "too many recursions in settable") {
		t.Errorf("through %d __newindex tables: %s", maxMetaChain, got)
	}
}

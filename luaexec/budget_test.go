package luaexec

import (
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

// The budget counts deterministically: the main body costs one step and each
// loop iteration one more, so a 100-iteration loop needs exactly 101 steps.
func TestBudgetCountsSteps(t *testing.T) {
	const script = "for i = 1, 100 do end return 'done'"
	if got := show(newHarness(t, Options{Budget: 101}).eval(script)); got != `"done"` {
		t.Fatalf("with 101 steps: %s", got)
	}
	if got := show(newHarness(t, Options{Budget: 100}).eval(script)); got != budgetErr(script, 100, 1) {
		t.Fatalf("with 100 steps: %s", got)
	}
}

// A runaway script stops at the same point on every node: here each
// iteration is one loop step and one redis.call step, so with 101 steps the
// counter reaches exactly 50, twice.
func TestBudgetStopsAtTheSamePoint(t *testing.T) {
	const script = "while true do redis.call('incr', 'n') end"
	for i := 0; i < 2; i++ {
		h := newHarness(t, Options{Budget: 101})
		if got := show(h.eval(script)); got != budgetErr(script, 101, 1) {
			t.Fatalf("run %d: %s", i, got)
		}
		if got := show(h.do("GET", "n")); got != `"50"` {
			t.Fatalf("run %d stopped with n = %s, want 50", i, got)
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

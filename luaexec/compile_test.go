package luaexec

import (
	"fmt"
	"strings"
	"testing"

	"github.com/lockserver/lockserver/luaexec/internal/lua51"
	lua "github.com/yuin/gopher-lua"
)

// maxProtoConsts returns the largest constant table among proto and the
// prototypes nested in it.
func maxProtoConsts(proto *lua.FunctionProto) int {
	n := len(proto.Constants)
	for _, p := range proto.FunctionPrototypes {
		n = max(n, maxProtoConsts(p))
	}
	return n
}

// A script with 30,000 distinct constants (numbers, strings, globals and
// field names, in the main chunk and in a function) compiles to functions
// of at most lua51.MaxDirectConsts+lua51.PoolDigits constants each, which
// is what keeps gopher-lua's linear search for a constant short and
// compiling linear; and it computes what Lua does.
func TestCompileManyConstants(t *testing.T) {
	var b strings.Builder
	b.WriteString("local sum, t = 0, {}\n")
	for i := 0; i < 7500; i++ {
		fmt.Fprintf(&b, "sum = sum + %d t['k%d'] = %d.5 t.f%d = 1\n", i, i, i, i)
	}
	b.WriteString("local function g() local _\n")
	for i := 0; i < 7500; i++ {
		fmt.Fprintf(&b, "_ = nosuchglobal%d\n", i)
	}
	b.WriteString("end\n")
	b.WriteString("local ok, err = pcall(function() return nosuchglobal7499 end)\n")
	b.WriteString("return {sum, t.k0, t.k7499, t.f7499, err}")
	body := b.String()
	s, msg := compileScript(sha1hex(body), body, defaultBudget)
	if s == nil {
		t.Fatal(msg)
	}
	if n := maxProtoConsts(s.proto); n > lua51.MaxDirectConsts+lua51.PoolDigits {
		t.Errorf("a function has %d constants, more than %d", n, lua51.MaxDirectConsts+lua51.PoolDigits)
	}
	if len(s.pool) < 30000-2*(lua51.MaxDirectConsts+lua51.PoolDigits) {
		t.Errorf("only %d constants pooled", len(s.pool))
	}
	// The sum of 0..7499, the stores, and the error of reading a global
	// whose name the function found in the pool.
	h := newHarness(t, Options{})
	want := `[:28121250, :0, :7499, :1, "user_script:15004: Script attempted to access nonexistent global variable 'nosuchglobal7499'"]`
	if got := show(h.eval(body)); got != want {
		t.Errorf("got %s\nwant %s", got, want)
	}
}

// Compiling is charged like running: a token a step, 16 bytes of source a
// step, lua51's functionWeight a function. EVAL refuses a body whose
// compiling would pass the budget, and loadstring spends twice what
// compiling takes, so that a script cannot compile its way past its budget.
func TestCompileWorkIsBudgeted(t *testing.T) {
	h := newHarness(t, Options{Budget: 10_000})
	const prefix = "-ERR Error compiling script (new function): "
	for _, c := range []struct{ src, want string }{
		// 3 tokens and 4 bytes a line: the first token of line 3078 makes
		// 9232 tokens and 12312 bytes, 10001 steps
		{strings.Repeat("x=1\n", 4000), prefix + "user_script:3078: script too large to compile within the execution budget of 10000 steps"},
		// 16 bytes of a long string a step
		{"return '" + strings.Repeat("x", 160_000) + "'", prefix + "user_script:1: script too large to compile within the execution budget of 10000 steps"},
		// 256 steps a function, 6 tokens and 23 bytes a line: the 38th passes
		{strings.Repeat("local function f() end\n", 40), prefix + "user_script:38: script too large to compile within the execution budget of 10000 steps"},
		{"local x\n" + strings.Repeat("x=1\n", 3000) + "return 1", ":1"},
	} {
		if got := show(h.eval(c.src)); got != c.want {
			t.Errorf("%.30q...: %s", c.src, got)
		}
	}
	// Each loadstring of 1,500 tokens and 3,000 bytes is 1,687 units of
	// compile work, charged twice (3,374 steps), and its loop about ten
	// steps more: 10,000 steps allow two, whatever the loop.
	loads := func(n int) string {
		return "local n = 0 local src = string.rep('x = 1 ', 500) while true do loadstring(src) n = n + 1 if n == " + itoa(n) + " then return n end end"
	}
	if got := show(h.eval(loads(2))); got != ":2" {
		t.Errorf("two loadstrings: %s", got)
	}
	if got := show(h.eval(loads(3))); got != budgetErr(loads(3), 10_000, 1) {
		t.Errorf("three loadstrings: %s", got)
	}
}

// Scripts just within Lua 5.1's limits compile and run (lua51's
// TestParseLimits has those past them).
func TestScriptsWithinTheParserLimitsRun(t *testing.T) {
	h := newHarness(t, Options{})
	nested := func(n int) string { return "return " + strings.Repeat("(", n) + "1" + strings.Repeat(")", n) }
	// redis-server compiles 198 nested parentheses and refuses 199.
	if got := show(h.eval(nested(198))); got != ":1" {
		t.Errorf("198 parentheses: %s", got)
	}
	// gopher-lua has 200 registers for locals and temporaries (Lua 5.1 has
	// 250), so a function with nearly 200 locals fails to compile here.
	locals := "local " + strings.Repeat("a,", 189) + "a return 1"
	if got := show(h.eval(locals)); got != ":1" {
		t.Errorf("190 locals: %s", got)
	}
	upvals := "local " + strings.Repeat("a,", 60) + "a\nlocal function f() return " + strings.Repeat("a+", 60) + "a end"
	if got := show(h.eval(upvals)); got != "nil" {
		t.Errorf("60 upvalues: %s", got)
	}
}

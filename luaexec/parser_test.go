package luaexec

import (
	"strings"
	"testing"
)

// Compile errors read as Lua 5.1's (redis-server's replies).
func TestCompileErrors(t *testing.T) {
	h := newHarness(t, Options{})
	const prefix = "-ERR Error compiling script (new function): "
	for _, c := range []struct{ src, want string }{
		{"x x", "user_script:1: '=' expected near 'x'"},
		{"return 'a", "user_script:1: unfinished string near '<eof>'"},
		{"return 'a\nb'", "user_script:1: unfinished string near ''a'"},
		{"if", "user_script:1: unexpected symbol near '<eof>'"},
		{"return 1 1", "user_script:1: '<eof>' expected near '1'"},
		{"end", "user_script:1: '<eof>' expected near 'end'"},
		{"x = = 1", "user_script:1: unexpected symbol near '='"},
		{"return [[abc", "user_script:1: unfinished long string near '<eof>'"},
		{"--[[ abc", "user_script:1: unfinished long comment near '<eof>'"},
		{"return 0x", "user_script:1: malformed number near '0x'"},
		{"return 3..2", "user_script:1: malformed number near '3..2'"},
		{"goto x", "user_script:1: '=' expected near 'x'"},
		{"::x::", "user_script:1: unexpected symbol near ':'"},
		{"return \"abc\\300\"", "user_script:1: escape sequence too large near '\"abc'"},
		{"return [=", "user_script:1: invalid long string delimiter near '[='"},
		{"f\n()", "user_script:2: ambiguous syntax (function call x new statement) near '('"},
		{"local f = print\n(f)(1)", "user_script:2: ambiguous syntax (function call x new statement) near '('"},
		{"local function f() return ... end", "user_script:1: cannot use '...' outside a vararg function near '...'"},
		{"break", "user_script:1: no loop to break near '<eof>'"},
		{"for a b in pairs({}) do end", "user_script:1: '=' or 'in' expected near 'b'"},
		{"function a:b:c() end", "user_script:1: '(' expected near ':'"},
		{"(x) = 1", "user_script:1: syntax error near '='"},
		{"x() = 1", "user_script:1: unexpected symbol near '='"},
		{"return {a = }", "user_script:1: unexpected symbol near '}'"},
		{"if x then\n\nreturn 1", "user_script:3: 'end' expected (to close 'if' at line 1) near '<eof>'"},
		{"local 1 = 2", "user_script:1: '<name>' expected near '1'"},
		{"return \x01", "user_script:1: unexpected symbol near 'char(1)'"},
	} {
		want := prefix + c.want
		if got := show(h.eval(c.src)); got != want {
			t.Errorf("%q\n got: %s\nwant: %s", c.src, got, want)
		}
	}
}

// Lua 5.1's limits decide what compiles, and they keep deep inputs from
// exhausting the Go stack of the compiler.
func TestParserLimits(t *testing.T) {
	h := newHarness(t, Options{})
	nested := func(n int) string { return "return " + strings.Repeat("(", n) + "1" + strings.Repeat(")", n) }
	// redis-server compiles 198 nested parentheses and refuses 199.
	if got := show(h.eval(nested(198))); got != ":1" {
		t.Errorf("198 parentheses: %s", got)
	}
	if got := show(h.eval(nested(199))); got != "-ERR Error compiling script (new function): user_script:1: chunk has too many syntax levels" {
		t.Errorf("199 parentheses: %s", got)
	}
	if got := show(h.eval(nested(100000))); got != "-ERR Error compiling script (new function): user_script:1: chunk has too many syntax levels" {
		t.Errorf("100000 parentheses: %s", got)
	}
	// gopher-lua has 200 registers for locals and temporaries (Lua 5.1 has
	// 250), so a function with nearly 200 locals fails to compile here.
	locals := "local " + strings.Repeat("a,", 189) + "a return 1"
	if got := show(h.eval(locals)); got != ":1" {
		t.Errorf("190 locals: %s", got)
	}
	if got := show(h.eval("local " + strings.Repeat("a,", 200) + "a")); got != "-ERR Error compiling script (new function): user_script:1: main function has more than 200 local variables" {
		t.Errorf("201 locals: %s", got)
	}
	upvals := "local " + strings.Repeat("a,", 60) + "a\nlocal function f() return " + strings.Repeat("a+", 60) + "a end"
	if got := show(h.eval(upvals)); got != "nil" {
		t.Errorf("60 upvalues: %s", got)
	}
	var b strings.Builder
	for i := 0; i < 61; i++ {
		b.WriteString("local a" + itoa(i) + " = " + itoa(i) + "\n")
	}
	b.WriteString("local function f()\nreturn a0")
	for i := 1; i < 61; i++ {
		b.WriteString(" + a" + itoa(i))
	}
	b.WriteString("\nend")
	if got := show(h.eval(b.String())); got != "-ERR Error compiling script (new function): user_script:64: function at line 62 has more than 60 upvalues" {
		t.Errorf("61 upvalues: %s", got)
	}
	if got := show(h.eval("return " + strings.Repeat("1+", 1000000) + "1")); got != "-ERR Error compiling script (new function): user_script:1: chunk has too many syntax levels" {
		t.Errorf("a million additions: %s", got)
	}
	if got := show(h.eval("return " + strings.Repeat("1 .. ", 100000) + "1")); got != "-ERR Error compiling script (new function): user_script:1: chunk has too many syntax levels" {
		t.Errorf("long concatenation: %s", got)
	}
}

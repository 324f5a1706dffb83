package lua51

import (
	"strconv"
	"strings"
	"testing"
)

// parse parses src as EVAL parses a script.
func parse(src string) (Chunk, error) {
	return Parse(src, Options{Chunk: "user_script", FirstLine: 1})
}

// Syntax errors read as Lua 5.1's (redis-server's replies, which add
// "Error compiling script (new function): ").
func TestParseErrors(t *testing.T) {
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
		if _, err := parse(c.src); err == nil || err.Error() != c.want {
			t.Errorf("%q\n got: %v\nwant: %s", c.src, err, c.want)
		}
	}
}

// Lua 5.1's limits decide what parses, and they keep deep inputs from
// exhausting the Go stack of the compiler. (The engine's
// TestScriptsWithinTheParserLimitsRun runs scripts just within them.)
func TestParseLimits(t *testing.T) {
	const tooDeep = "user_script:1: chunk has too many syntax levels"
	nested := func(n int) string { return "return " + strings.Repeat("(", n) + "1" + strings.Repeat(")", n) }
	var upvals strings.Builder
	for i := 0; i < 61; i++ {
		upvals.WriteString("local a" + strconv.Itoa(i) + " = " + strconv.Itoa(i) + "\n")
	}
	upvals.WriteString("local function f()\nreturn a0")
	for i := 1; i < 61; i++ {
		upvals.WriteString(" + a" + strconv.Itoa(i))
	}
	upvals.WriteString("\nend")
	for _, c := range []struct{ name, src, want string }{
		// redis-server compiles 198 nested parentheses and refuses 199.
		{"199 parentheses", nested(199), tooDeep},
		{"100000 parentheses", nested(100000), tooDeep},
		{"201 locals", "local " + strings.Repeat("a,", 200) + "a", "user_script:1: main function has more than 200 local variables"},
		{"61 upvalues", upvals.String(), "user_script:64: function at line 62 has more than 60 upvalues"},
		{"a million additions", "return " + strings.Repeat("1+", 1000000) + "1", tooDeep},
		{"long concatenation", "return " + strings.Repeat("1 .. ", 100000) + "1", tooDeep},
	} {
		if _, err := parse(c.src); err == nil || err.Error() != c.want {
			t.Errorf("%s: %v", c.name, err)
		}
	}
}

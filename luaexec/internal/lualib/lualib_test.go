package lualib

import (
	"strings"
	"testing"

	"github.com/lockserver/lockserver/luaexec/internal/budget"
	lua "github.com/yuin/gopher-lua"
)

// steps is a budget: it counts what it is charged, and raises once more
// than max steps are spent, as the engine's budget does.
type steps struct{ spent, max int64 }

func (s *steps) Charge(L *lua.LState, n int64) {
	s.spent += n
	if s.spent > s.max {
		L.RaiseError("out of steps")
	}
}

// proxies is a ReadOnly whose proxies are the tables in it, each standing
// for itself.
type proxies map[*lua.LTable]bool

func (p proxies) Contents(t *lua.LTable) *lua.LTable { return t }

func (p proxies) RefuseWrite(L *lua.LState, t *lua.LTable) {
	if p[t] {
		L.RaiseError("read-only")
	}
}

func (p proxies) Protect(t *lua.LTable) *lua.LTable {
	p[t] = true
	return t
}

// run runs src in a Lua state with the libraries, charging b, and returns
// its result, or its error.
func run(t *testing.T, b *steps, ro proxies, src string) string {
	t.Helper()
	L := lua.NewState(lua.Options{SkipOpenLibs: true})
	defer L.Close()
	l := New(L, b, ro)
	budget.Attach(L, b)
	for name, lib := range map[string]*lua.LTable{"string": l.StringLib(), "table": l.TableLib(), "cjson": l.CJSONLib()} {
		L.SetGlobal(name, lib)
	}
	l.Start(0)
	fn, err := L.LoadString(src)
	if err != nil {
		t.Fatal(err)
	}
	L.Push(fn)
	if err := L.PCall(0, 1, nil); err != nil {
		return "error: " + err.(*lua.ApiError).Object.String()
	}
	return L.Get(-1).String()
}

// The libraries charge the budget they are given, through the interface
// alone, for the work each call does, before doing it. (The engine's
// tests check where scripts stop; these check the charges of a few calls,
// worked out by hand.)
func TestLibrariesChargeTheirBudget(t *testing.T) {
	for _, c := range []struct {
		src   string
		want  string
		steps int64
	}{
		// 100 bytes built: a step and 100/16.
		{"return #string.rep('x', 100)", "100", 7},
		// A numeric string of 32 bytes converted for a number argument:
		// its scan, 32/16; then 2 bytes built.
		{"return string.rep('x', '" + strings.Repeat(" ", 31) + "2')", "xx", 2 + 1},
		// "a,b,c": each piece charges its bytes and the separator's.
		{"return table.concat({'a', 'b', 'c'}, ',')", "a,b,c", 3},
		// A step for each of the four values, none for the traversal of
		// three slots, and the 7 bytes of the result.
		{"return cjson.encode({1, 2, 3})", "[1,2,3]", 4 + 1},
	} {
		b := &steps{max: 1000}
		if got := run(t, b, proxies{}, c.src); got != c.want || b.spent != c.steps {
			t.Errorf("%s: %s in %d steps, want %s in %d", c.src, got, b.spent, c.want, c.steps)
		}
	}
	// Out of budget, a call stops before it builds what it was charged for.
	b := &steps{max: 1000}
	if got := run(t, b, proxies{}, "return string.rep('x', 1e9)"); !strings.HasSuffix(got, "out of steps") {
		t.Errorf("string.rep of 1e9 bytes with 1000 steps: %s", got)
	}
}

// The table library and cjson.new see the engine's read-only tables
// through the interface alone.
func TestLibrariesRespectReadOnlyTables(t *testing.T) {
	ro := proxies{}
	if got := run(t, &steps{max: 1000}, ro, "local t = cjson.new() table.insert(t, 1) return #t"); !strings.HasSuffix(got, "read-only") {
		t.Errorf("table.insert into cjson.new(): %s", got)
	}
	if len(ro) != 1 {
		t.Errorf("cjson.new() protected %d tables, want 1", len(ro))
	}
}

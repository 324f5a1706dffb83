package budget

import (
	"testing"

	lua "github.com/yuin/gopher-lua"
)

// steps is a Charger that counts what it is charged.
type steps struct{ n int64 }

func (s *steps) Charge(_ *lua.LState, n int64) { s.n += n }

// Bytes built cost a step and one for each 16; bytes scanned by an
// operation already charged cost one for each 16, and nothing below 16.
func TestCharges(t *testing.T) {
	L := lua.NewState(lua.Options{SkipOpenLibs: true})
	defer L.Close()
	for _, c := range []struct {
		name   string
		charge func(c Charger)
		want   int64
	}{
		{"Bytes(0)", func(c Charger) { Bytes(c, L, 0) }, 1},
		{"Bytes(15)", func(c Charger) { Bytes(c, L, 15) }, 1},
		{"Bytes(16)", func(c Charger) { Bytes(c, L, 16) }, 2},
		{"Bytes(100)", func(c Charger) { Bytes(c, L, 100) }, 7},
		{"Scan(15)", func(c Charger) { Scan(c, L, 15) }, 0},
		{"Scan(16)", func(c Charger) { Scan(c, L, 16) }, 1},
		{"Scan(100)", func(c Charger) { Scan(c, L, 100) }, 6},
		{"ScanString(32 bytes)", func(c Charger) { ScanString(c, L, lua.LString("0123456789abcdef0123456789abcdef")) }, 2},
		{"ScanString(a number)", func(c Charger) { ScanString(c, L, lua.LNumber(1e300)) }, 0},
	} {
		var s steps
		c.charge(&s)
		if s.n != c.want {
			t.Errorf("%s charged %d steps, want %d", c.name, s.n, c.want)
		}
	}
}

// The charger attached to a state is found from it and from its
// coroutines.
func TestAttach(t *testing.T) {
	L := lua.NewState(lua.Options{SkipOpenLibs: true})
	defer L.Close()
	if c := Of(L); c != nil {
		t.Fatalf("a new state has a charger: %v", c)
	}
	s := &steps{}
	Attach(L, s)
	co, _ := L.NewThread()
	if Of(L) != Charger(s) || Of(co) != Charger(s) {
		t.Fatalf("Of(L) = %v, Of(coroutine) = %v, want %v", Of(L), Of(co), s)
	}
}

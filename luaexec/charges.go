package luaexec

import (
	"github.com/lockserver/lockserver/luaexec/internal/budget"
	"github.com/lockserver/lockserver/luaexec/internal/lua51"
	"github.com/lockserver/lockserver/luaexec/internal/lualib"
	lua "github.com/yuin/gopher-lua"
)

// The helpers that charge what the weight of a body cannot know (see
// internal/lua51's weight.go): the length of a string known only when the
// script runs, and the slots gopher-lua's tables scan. cmp# compares two
// values neither of which is a constant, key# is a table read whose key is
// not a constant, varg# is '...' expanded into a list of values, and len#
// is the length operator.

// compare is cmp#(a, b, op): a op b as the VM computes it, charging for the
// bytes two strings have in common that it may compare. Errors read as the
// VM's do.
func (v *vm) compare(L *lua.LState) int {
	a, b := L.Get(1), L.Get(2)
	op := int(L.CheckNumber(3))
	if op == lua51.CmpGt || op == lua51.CmpGe {
		a, b, op = b, a, op-lua51.CmpGt+lua51.CmpLt // a > b is b < a
	}
	var r bool
	sa, aStr := a.(lua.LString)
	sb, bStr := b.(lua.LString)
	if aStr && bStr {
		if op > lua51.CmpNe || len(sa) == len(sb) {
			budget.Scan(v, L, min(len(sa), len(sb)))
		}
	}
	switch op {
	case lua51.CmpEq, lua51.CmpNe:
		r = L.Equal(a, b) == (op == lua51.CmpEq)
	case lua51.CmpLt:
		r = v.lessThan(L, a, b, "__lt")
	case lua51.CmpLe:
		r = v.lessThan(L, a, b, "__le")
	}
	L.Push(lua.LBool(r))
	return 1
}

// lessThan is a < b (event __lt) or a <= b (__le) as gopher-lua's VM
// computes them: numbers and strings directly (strings byte by byte), two
// tables or userdata through their shared metamethod, a <= b without __le as
// not (b < a).
func (v *vm) lessThan(L *lua.LState, a, b lua.LValue, event string) bool {
	x, aNum := a.(lua.LNumber)
	y, bNum := b.(lua.LNumber)
	switch {
	case aNum && bNum:
		if event == "__lt" {
			return x < y
		}
		return x <= y
	case aNum || a.Type() != b.Type():
		v.raiseHere(L, lualib.OrderError(a, b))
	}
	if s, ok := a.(lua.LString); ok {
		t := b.(lua.LString)
		if event == "__lt" {
			return s < t
		}
		return s <= t
	}
	if r, ok := v.rational(L, a, b, event); ok {
		return r
	}
	if event == "__le" {
		if r, ok := v.rational(L, b, a, "__lt"); ok {
			return !r
		}
		a, b = b, a
	}
	v.raiseHere(L, lualib.OrderError(a, b))
	return false
}

// rational calls the comparison metamethod a and b share, if they do.
func (v *vm) rational(L *lua.LState, a, b lua.LValue, event string) (bool, bool) {
	m := L.GetMetaField(a, event)
	if _, ok := m.(*lua.LFunction); !ok || m != L.GetMetaField(b, event) {
		return false, false
	}
	L.Push(m)
	L.Push(a)
	L.Push(b)
	L.Call(2, 1)
	r := lua.LVAsBool(L.Get(-1))
	L.Pop(1)
	return r, true
}

// key is key#(k): it charges for hashing k, a string, and returns it.
func (v *vm) key(L *lua.LState) int {
	k := L.Get(1)
	if s, ok := k.(lua.LString); ok {
		budget.Scan(v, L, len(s))
	}
	L.Push(k)
	return 1
}

// varg is varg#(...): it charges for the values '...' expands to and
// returns them.
func (v *vm) varg(L *lua.LState) int {
	n := L.GetTop()
	v.Charge(L, int64(n/budget.SlotsPerStep))
	return n
}

// lenOp is the length operator #: strings by bytes, tables by Lua 5.1's
// rule (which ignores a table's __len), anything else by its __len
// metamethod or Lua's error.
func (v *vm) lenOp(L *lua.LState) int {
	switch x := L.Get(1).(type) {
	case lua.LString:
		L.Push(lua.LNumber(len(x)))
		return 1
	case *lua.LTable:
		L.Push(lua.LNumber(lualib.Length(v, L, x)))
		return 1
	}
	x := L.Get(1)
	if mm := L.GetMetaField(x, "__len"); mm != lua.LNil {
		L.Push(mm)
		L.Push(x)
		L.Call(1, 1)
		return 1
	}
	v.raiseHere(L, v.typeOpMessage(L, "get length of", x))
	return 0
}

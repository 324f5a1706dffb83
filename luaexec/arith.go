package luaexec

import (
	"fmt"
	"math"
	"strings"

	"github.com/lockserver/lockserver/luaexec/internal/budget"
	"github.com/lockserver/lockserver/luaexec/internal/lualib"
	lua "github.com/yuin/gopher-lua"
)

// Arithmetic, concatenation and the numeric for with Lua 5.1's semantics.
//
// gopher-lua converts strings in arithmetic the Go way ("010" is octal 8,
// "1_000" is 1000) but asks a string's metatable first, so the string
// metatable's __add and friends below convert them as Lua 5.1 does. Unary
// minus, %, .. and the bounds of a numeric for are compiled to helper calls
// (internal/lua51). The metatables of nil, booleans, numbers and functions only
// raise Lua 5.1's messages ("attempt to perform arithmetic on a nil value")
// where gopher-lua would word them its own way.

var arithEvents = map[string]func(a, b float64) float64{
	"__add": func(a, b float64) float64 { return a + b },
	"__sub": func(a, b float64) float64 { return a - b },
	"__mul": func(a, b float64) float64 { return a * b },
	"__div": func(a, b float64) float64 { return a / b },
	"__mod": luaMod,
	"__pow": math.Pow,
}

// luaMod is Lua 5.1's a % b: a - floor(a/b)*b.
func luaMod(a, b float64) float64 { return a - math.Floor(a/b)*b }

// setTypeMetatables installs the metatables of strings and of the types
// that have none in Lua.
func (v *vm) setTypeMetatables() {
	L := v.L
	str := L.NewTable()
	str.RawSetString("__index", v.hidden.RawGetString("string"))
	for _, event := range lualib.SortedKeys(arithEvents) {
		str.RawSetString(event, L.NewFunction(v.arith(event)))
	}
	L.SetMetatable(lua.LString(""), str)
	v.stringMeta = v.Protect(str)

	for _, sample := range []lua.LValue{lua.LNil, lua.LFalse, lua.LNumber(0), L.NewFunction(v.budget)} {
		mt := L.NewTable()
		for _, event := range lualib.SortedKeys(arithEvents) {
			mt.RawSetString(event, L.NewFunction(v.arith(event)))
		}
		mt.RawSetString("__index", L.NewFunction(v.typeOpError("index")))
		mt.RawSetString("__newindex", L.NewFunction(v.typeOpError("index")))
		mt.RawSetString("__call", L.NewFunction(v.typeOpError("call")))
		mt.RawSetString("__len", L.NewFunction(v.typeOpError("get length of")))
		L.SetMetatable(sample, mt)
	}
}

// typeOpError raises "attempt to <op> a <type> value" for the first operand,
// or "attempt to <op> <kind> '<name>' (a <type> value)" where the code
// names it (typeOpMessage).
func (v *vm) typeOpError(op string) lua.LGFunction {
	return func(L *lua.LState) int {
		v.raiseHere(L, v.typeOpMessage(L, op, L.Get(1)))
		return 0
	}
}

// raiseHere raises msg with the position of the calling function when it is
// Lua code, as the Lua VM does; called from a library function (pcall(nil)),
// the error has no position. A helper of the instrumented code counts as
// the Lua code it stands for.
func (v *vm) raiseHere(L *lua.LState, msg string) {
	level := 1
	if dbg, ok := L.GetStack(1); ok {
		if fn, _ := L.GetInfo("f", dbg, lua.LNil); fn != lua.LNil && v.isHelper(fn) {
			level = 2
		}
	}
	L.Error(lua.LString(lualib.Where(L, level)+msg), 0)
}

func (v *vm) isHelper(fn lua.LValue) bool {
	for _, h := range v.helpers {
		if h == fn {
			return true
		}
	}
	return false
}

// arith is the metamethod for one arithmetic event: it converts numeric
// strings as Lua 5.1 does, defers to the other operand's metamethod, and
// otherwise raises Lua's error naming the operand that is not a number.
func (v *vm) arith(event string) lua.LGFunction {
	op := arithEvents[event]
	return func(L *lua.LState) int {
		a, b := L.Get(1), L.Get(2)
		budget.ScanString(v, L, a) // the scan of a numeric string
		budget.ScanString(v, L, b)
		x, okA := lualib.ToNumber(a)
		y, okB := lualib.ToNumber(b)
		if okA && okB {
			L.Push(lua.LNumber(op(x, y)))
			return 1
		}
		if mm := otherMeta(L, a, b, event); mm != lua.LNil {
			L.Push(mm)
			L.Push(a)
			L.Push(b)
			L.Call(2, 1)
			return 1
		}
		bad := b
		if !okA {
			bad = a
		}
		v.raiseHere(L, fmt.Sprintf("attempt to perform arithmetic on a %s value", bad.Type().String()))
		return 0
	}
}

// otherMeta returns the event's metamethod of a table or userdata operand,
// which Lua would have called had it been found first.
func otherMeta(L *lua.LState, a, b lua.LValue, event string) lua.LValue {
	for _, x := range []lua.LValue{a, b} {
		switch x.(type) {
		case *lua.LTable, *lua.LUserData:
			if mm := L.GetMetaField(x, event); mm != lua.LNil {
				return mm
			}
		}
	}
	return lua.LNil
}

// neg is unary minus.
func (v *vm) neg(L *lua.LState) int {
	a := L.Get(1)
	budget.ScanString(v, L, a) // the scan of a numeric string
	if x, ok := lualib.ToNumber(a); ok {
		L.Push(lua.LNumber(-x))
		return 1
	}
	if mm := otherMeta(L, a, a, "__unm"); mm != lua.LNil {
		L.Push(mm)
		L.Push(a)
		L.Push(a)
		L.Call(2, 1)
		return 1
	}
	v.raiseHere(L, fmt.Sprintf("attempt to perform arithmetic on a %s value", a.Type().String()))
	return 0
}

// mod is a % b.
func (v *vm) mod(L *lua.LState) int {
	return v.arith("__mod")(L)
}

// forCoerce returns the helper that converts one bound of a numeric for.
func (v *vm) forCoerce(what string) lua.LGFunction {
	return func(L *lua.LState) int {
		budget.ScanString(v, L, L.Get(1)) // the scan of a numeric string
		x, ok := lualib.ToNumber(L.Get(1))
		if !ok {
			L.RaiseError("'for' %s must be a number", what)
		}
		L.Push(lua.LNumber(x))
		return 1
	}
}

// concat is a .. b .. c: strings and numbers (in "%.14g") are joined;
// otherwise, from the right, pairs are handed to a __concat metamethod as
// Lua 5.1 does. The result's size is charged to the budget before it is built.
func (v *vm) concat(L *lua.LState) int {
	n := L.GetTop()
	total := 0
	plain := true
	for i := 1; i <= n; i++ {
		switch x := L.Get(i).(type) {
		case lua.LString:
			total += len(x)
		case lua.LNumber:
			total += 24
		default:
			plain = false
		}
	}
	budget.Bytes(v, L, total)
	if plain {
		var b strings.Builder
		b.Grow(total)
		for i := 1; i <= n; i++ {
			s, _ := lualib.ToString(L.Get(i))
			b.WriteString(s)
		}
		L.Push(lua.LString(b.String()))
		return 1
	}
	acc := L.Get(n)
	for i := n - 1; i >= 1; i-- {
		lhs := L.Get(i)
		ls, okL := lualib.ToString(lhs)
		rs, okR := lualib.ToString(acc)
		if okL && okR {
			acc = lua.LString(ls + rs)
			continue
		}
		mm := L.GetMetaField(lhs, "__concat")
		if mm == lua.LNil {
			mm = L.GetMetaField(acc, "__concat")
		}
		if _, ok := mm.(*lua.LFunction); !ok {
			bad := lhs
			if okL {
				bad = acc
			}
			v.raiseHere(L, fmt.Sprintf("attempt to concatenate a %s value", bad.Type().String()))
		}
		L.Push(mm)
		L.Push(lhs)
		L.Push(acc)
		L.Call(2, 1)
		acc = L.Get(-1)
		L.Pop(1)
	}
	L.Push(acc)
	return 1
}

// checkStoreKey raises Lua's errors for keys no table can hold.
func (v *vm) checkStoreKey(L *lua.LState, t, k lua.LValue) {
	if _, ok := t.(*lua.LTable); !ok {
		return
	}
	switch x := k.(type) {
	case *lua.LNilType:
		v.raiseHere(L, "table index is nil")
	case lua.LNumber:
		if math.IsNaN(float64(x)) {
			v.raiseHere(L, "table index is NaN")
		}
	}
}

// setIndex is t[k] = v for keys the parser cannot tell are small.
func (v *vm) setIndex(L *lua.LState) int {
	t, k, val := L.Get(1), L.Get(2), L.Get(3)
	if _, ok := t.(lua.LString); ok {
		v.raiseHere(L, "attempt to index a string value") // strings have an __index only
	}
	v.checkStoreKey(L, t, k)
	v.chargeGap(L, t, k)
	budget.ScanString(v, L, k)
	v.Charge(L, 1+newindexChain(t)) // a store may grow the table: memory as well as time
	L.SetTable(t, k, val)
	return 0
}

// newindexChain counts the __newindex tables a store into t may go through
// (at most maxMetaChain), each a step.
func newindexChain(t lua.LValue) int64 {
	var n int64
	for ; n < maxMetaChain; n++ {
		tbl, ok := t.(*lua.LTable)
		if !ok {
			break
		}
		mt, ok := tbl.Metatable.(*lua.LTable)
		if !ok {
			break
		}
		if t, ok = mt.RawGetString("__newindex").(*lua.LTable); !ok {
			break
		}
	}
	return n
}

// setFields stores the fields of a table constructor whose keys are not
// constants: setfields#(t, k1, v1, k2, v2, ...) returns t.
func (v *vm) setFields(L *lua.LState) int {
	t := L.Get(1)
	for i := 2; i+1 <= L.GetTop(); i += 2 {
		k, val := L.Get(i), L.Get(i+1)
		v.checkStoreKey(L, t, k)
		v.chargeGap(L, t, k)
		budget.ScanString(v, L, k)
		L.SetTable(t, k, val)
	}
	L.Push(t)
	return 1
}

package luaexec

import (
	"math"
	"reflect"

	"github.com/lockserver/lockserver/luaexec/internal/budget"
	lua "github.com/yuin/gopher-lua"
)

// Work that gopher-lua's tables do behind a single Lua operation, charged to
// the budget so that no script can make one operation cost unbounded time
// or memory:
//   - a store to an integer key past the array part fills the gap with nils
//     (up to 64M of them);
//   - the length operator scans the array part backwards past its nils;
//   - next scans forwards past nil array slots and deleted hash keys, which
//     gopher-lua never removes.
//
// The sizes involved are unexported, so they are read with reflect
// (read-only; gopher-lua is pinned at v1.1.2). Were the fields renamed, the
// sizes would read as 0 and only the charging would weaken.

var tableFields = func() (array, keys, k2i int) {
	t := reflect.TypeOf(lua.LTable{})
	index := func(name string) int {
		if f, ok := t.FieldByName(name); ok {
			return f.Index[0]
		}
		return -1
	}
	return index("array"), index("keys"), index("k2i")
}

var arrayField, keysField, k2iField = tableFields()

// tableShapeKnown reports whether tableSizes reads true sizes, which reusing
// a table safely depends on (see refill).
var tableShapeKnown = arrayField >= 0 && keysField >= 0

// tableSizes returns the length of t's array part and of its list of hash
// keys (live and deleted).
func tableSizes(t *lua.LTable) (array, keys int) {
	rv := reflect.ValueOf(t).Elem()
	if arrayField >= 0 {
		array = rv.Field(arrayField).Len()
	}
	if keysField >= 0 {
		keys = rv.Field(keysField).Len()
	}
	return array, keys
}

// position places a key in t's traversal order: array slots 1..A, then hash
// keys A+1... It reports false for a key t does not hold (nor held).
func position(t *lua.LTable, k lua.LValue, array int) (int, bool) {
	if k == lua.LNil {
		return 0, true
	}
	if n, ok := k.(lua.LNumber); ok && float64(n) == math.Floor(float64(n)) && n >= 1 && int(n) <= array {
		return int(n), true
	}
	if k2iField < 0 {
		return 0, true
	}
	m := reflect.ValueOf(t).Elem().Field(k2iField)
	if m.IsNil() {
		return 0, false
	}
	i := m.MapIndex(reflect.ValueOf(&k).Elem())
	if !i.IsValid() {
		return 0, false
	}
	return array + 1 + int(i.Int()), true
}

// next returns the entry after k, charging for the slots it skipped.
func (v *vm) tableNext(L *lua.LState, t *lua.LTable, k lua.LValue) (lua.LValue, lua.LValue) {
	budget.ScanString(v, L, k)
	array, keys := tableSizes(t)
	from, ok := position(t, k, array)
	if !ok {
		L.Error(lua.LString("invalid key to 'next'"), 0)
	}
	nk, nv := t.Next(k)
	to := array + keys + 1
	if nk != lua.LNil {
		to, _ = position(t, nk, array)
	}
	if d := to - from; d > budget.SlotsPerStep {
		v.Charge(L, int64(d/budget.SlotsPerStep))
	}
	return nk, nv
}

// forEach calls fn for each entry of t in its iteration order, which, unlike
// LTable.ForEach's, is deterministic (array part, then insertion order), and
// charges for the traversal.
func (v *vm) forEach(L *lua.LState, t *lua.LTable, fn func(k, v lua.LValue)) {
	array, keys := tableSizes(t)
	v.Charge(L, int64((array+keys)/budget.SlotsPerStep))
	forEach(t, func(k, val lua.LValue) bool { fn(k, val); return true })
}

// length is the # of a table, charging for the nils gopher-lua scans past.
func (v *vm) length(L *lua.LState, t *lua.LTable) int {
	n := t.Len()
	if array, _ := tableSizes(t); array-n > budget.SlotsPerStep {
		v.Charge(L, int64((array-n)/budget.SlotsPerStep))
	}
	return n
}

// maxFreeGap is the gap past a table's array part that a store may leave
// for free; larger gaps cost a step a slot.
const maxFreeGap = 1024

// chargeGap charges for storing t[k] when k is an integer far past t's array part.
func (v *vm) chargeGap(L *lua.LState, t lua.LValue, k lua.LValue) {
	tbl, ok := t.(*lua.LTable)
	n, isNum := k.(lua.LNumber)
	if !ok || !isNum || n < 1 || float64(n) >= float64(lua.MaxArrayIndex) {
		return
	}
	c := v.contents(tbl)
	if int64(n) <= int64(v.length(L, c))+1+maxFreeGap {
		return // the common case, appending: length is O(1) on a full array part
	}
	array, _ := tableSizes(c)
	if gap := int64(n) - int64(array) - 1; gap > maxFreeGap {
		v.Charge(L, gap)
	}
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
		L.Push(lua.LNumber(v.length(L, x)))
		return 1
	}
	x := L.Get(1)
	if mm := L.GetMetaField(x, "__len"); mm != lua.LNil {
		L.Push(mm)
		L.Push(x)
		L.Call(1, 1)
		return 1
	}
	v.raiseHere(L, "attempt to get length of a "+x.Type().String()+" value")
	return 0
}

package lualib

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

// TableShapeKnown reports whether TableSizes reads true sizes, which
// reusing a table safely depends on.
var TableShapeKnown = arrayField >= 0 && keysField >= 0

// TableSizes returns the length of t's array part and of its list of hash
// keys (live and deleted).
func TableSizes(t *lua.LTable) (array, keys int) {
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

// Next returns the entry of t after k, as next does, charging c for the
// slots it skips.
func Next(c budget.Charger, L *lua.LState, t *lua.LTable, k lua.LValue) (lua.LValue, lua.LValue) {
	budget.ScanString(c, L, k)
	array, keys := TableSizes(t)
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
		c.Charge(L, int64(d/budget.SlotsPerStep))
	}
	return nk, nv
}

// traverse calls fn for each entry of t in ForEach's order, charging c for
// the traversal.
func traverse(c budget.Charger, L *lua.LState, t *lua.LTable, fn func(k, v lua.LValue)) {
	array, keys := TableSizes(t)
	c.Charge(L, int64((array+keys)/budget.SlotsPerStep))
	ForEach(t, func(k, val lua.LValue) bool { fn(k, val); return true })
}

// Length is the # of a table, charging c for the nils gopher-lua scans
// past.
func Length(c budget.Charger, L *lua.LState, t *lua.LTable) int {
	n := t.Len()
	if array, _ := TableSizes(t); array-n > budget.SlotsPerStep {
		c.Charge(L, int64((array-n)/budget.SlotsPerStep))
	}
	return n
}

// maxFreeGap is the gap past a table's array part that a store may leave
// for free; larger gaps cost a step a slot.
const maxFreeGap = 1024

// ChargeGap charges c for storing t[k] when k is an integer far past t's
// array part. t is the table that holds the entries: not a read-only proxy
// (see ReadOnly.Contents).
func ChargeGap(c budget.Charger, L *lua.LState, t *lua.LTable, k lua.LValue) {
	n, isNum := k.(lua.LNumber)
	if !isNum || n < 1 || float64(n) >= float64(lua.MaxArrayIndex) {
		return
	}
	if int64(n) <= int64(Length(c, L, t))+1+maxFreeGap {
		return // the common case, appending: length is O(1) on a full array part
	}
	array, _ := TableSizes(t)
	if gap := int64(n) - int64(array) - 1; gap > maxFreeGap {
		c.Charge(L, gap)
	}
}

// ForEach calls fn for each entry of t in its iteration order, which, unlike
// LTable.ForEach's, is deterministic (array part, then insertion order),
// until fn returns false.
func ForEach(t *lua.LTable, fn func(k, v lua.LValue) bool) {
	for k, v := t.Next(lua.LNil); k != lua.LNil && fn(k, v); k, v = t.Next(k) {
	}
}

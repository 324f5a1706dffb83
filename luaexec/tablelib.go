package luaexec

import (
	"fmt"
	"strings"

	"github.com/lockserver/lockserver/luaexec/internal/budget"
	lua "github.com/yuin/gopher-lua"
)

// The table library of Lua 5.1 (ltablib.c), with its sort algorithm so that
// elements that compare equal end in the same order as in Redis, and with
// the budget charged for the work each call does. Protected tables refuse
// changes.

func (v *vm) tableLib() *lua.LTable {
	return newLib(v.L, map[string]lua.LGFunction{
		"concat":   v.tableConcat,
		"foreach":  v.tableForeach,
		"foreachi": v.tableForeachi,
		"getn":     func(L *lua.LState) int { L.Push(lua.LNumber(v.length(L, v.contents(checkTable(L, 1))))); return 1 },
		"insert":   v.tableInsert,
		"maxn":     v.tableMaxn,
		"remove":   v.tableRemove,
		"setn": func(L *lua.LState) int {
			checkTable(L, 1)
			raiseError(L, "'setn' is obsolete")
			return 0
		},
		"sort": v.tableSort,
	})
}

func (v *vm) tableConcat(L *lua.LState) int {
	sep := optString(L, 2, "")
	t := v.contents(checkTable(L, 1))
	i := optInt(L, 3, 1)
	last := v.length(L, t)
	if L.Get(4) != lua.LNil {
		last = checkInt(L, 4)
	}
	var b strings.Builder
	for ; i <= last; i++ {
		val := t.RawGetInt(i)
		s, ok := toStringValue(val)
		if !ok {
			raiseError(L, "invalid value (%s) at index %d in table for 'concat'", val.Type().String(), i)
		}
		budget.Bytes(v, L, len(s)+len(sep))
		b.WriteString(s)
		if i != last {
			b.WriteString(sep)
		}
	}
	L.Push(lua.LString(b.String()))
	return 1
}

func (v *vm) tableInsert(L *lua.LState) int {
	t := checkTable(L, 1)
	c := v.contents(t)
	e := v.length(L, c) + 1
	var pos int
	switch L.GetTop() {
	case 2:
		pos = e
	case 3:
		pos = checkInt(L, 2)
		v.chargeGap(L, c, lua.LNumber(pos))
		if pos > e {
			e = pos
		}
		v.refuseReadonly(L, t)
		v.Charge(L, int64(e)-int64(pos))
		for i := e; i > pos; i-- {
			c.RawSetInt(i, c.RawGetInt(i-1))
		}
	default:
		raiseError(L, "wrong number of arguments to 'insert'")
	}
	v.refuseReadonly(L, t)
	c.RawSetInt(pos, L.Get(-1))
	return 0
}

func (v *vm) tableRemove(L *lua.LState) int {
	t := checkTable(L, 1)
	c := v.contents(t)
	e := v.length(L, c)
	pos := optInt(L, 2, e)
	if pos < 1 || pos > e {
		return 0
	}
	v.refuseReadonly(L, t)
	v.Charge(L, int64(e-pos))
	L.Push(c.RawGetInt(pos))
	for ; pos < e; pos++ {
		c.RawSetInt(pos, c.RawGetInt(pos+1))
	}
	c.RawSetInt(e, lua.LNil)
	return 1
}

func (v *vm) tableMaxn(L *lua.LState) int {
	t := v.contents(checkTable(L, 1))
	max := 0.0
	v.forEach(L, t, func(k, _ lua.LValue) {
		v.Charge(L, 1)
		if n, ok := k.(lua.LNumber); ok && float64(n) > max {
			max = float64(n)
		}
	})
	L.Push(lua.LNumber(max))
	return 1
}

func (v *vm) tableForeach(L *lua.LState) int {
	t := v.contents(checkTable(L, 1))
	fn := L.CheckFunction(2)
	for k, val := v.tableNext(L, t, lua.LNil); k != lua.LNil; k, val = v.tableNext(L, t, k) {
		v.Charge(L, 1) // the call, which may be a library function
		L.Push(fn)
		L.Push(k)
		L.Push(val)
		L.Call(2, 1)
		if res := L.Get(-1); res != lua.LNil {
			return 1
		}
		L.Pop(1)
	}
	return 0
}

func (v *vm) tableForeachi(L *lua.LState) int {
	t := v.contents(checkTable(L, 1))
	fn := L.CheckFunction(2)
	n := v.length(L, t)
	for i := 1; i <= n; i++ {
		v.Charge(L, 1) // the call, which may be a library function
		L.Push(fn)
		L.Push(lua.LNumber(i))
		L.Push(t.RawGetInt(i))
		L.Call(2, 1)
		if res := L.Get(-1); res != lua.LNil {
			return 1
		}
		L.Pop(1)
	}
	return 0
}

// sorter is Lua 5.1's auxsort over a table, with its comparison.
type sorter struct {
	v    *vm
	L    *lua.LState
	t    *lua.LTable
	comp lua.LValue // nil for '<'
}

func (v *vm) tableSort(L *lua.LState) int {
	t := checkTable(L, 1)
	s := &sorter{v: v, L: L, t: v.contents(t), comp: L.Get(2)}
	if s.comp != lua.LNil {
		if _, ok := s.comp.(*lua.LFunction); !ok {
			typeError(L, 2, "function")
		}
	}
	n := v.length(L, s.t)
	if n > 1 {
		v.refuseReadonly(L, t)
	}
	s.sort(1, n)
	return 0
}

func (s *sorter) less(a, b lua.LValue) bool {
	s.v.Charge(s.L, 1)
	if x, ok := a.(lua.LString); ok {
		if y, ok := b.(lua.LString); ok {
			budget.Scan(s.v, s.L, min(len(x), len(y)))
		}
	}
	if s.comp == lua.LNil {
		return lessThan(s.L, a, b)
	}
	s.L.Push(s.comp)
	s.L.Push(a)
	s.L.Push(b)
	s.L.Call(2, 1)
	res := lua.LVAsBool(s.L.Get(-1))
	s.L.Pop(1)
	return res
}

func (s *sorter) get(i int) lua.LValue    { return s.t.RawGetInt(i) }
func (s *sorter) set(i int, x lua.LValue) { s.t.RawSetInt(i, x) }

func (s *sorter) sort(l, u int) {
	for l < u {
		// sort a[l], a[(l+u)/2] and a[u]
		if al, au := s.get(l), s.get(u); s.less(au, al) {
			s.set(l, au)
			s.set(u, al)
		}
		if u-l == 1 {
			break
		}
		i := (l + u) / 2
		if ai, al := s.get(i), s.get(l); s.less(ai, al) {
			s.set(i, al)
			s.set(l, ai)
		} else if au := s.get(u); s.less(au, ai) {
			s.set(i, au)
			s.set(u, ai)
		}
		if u-l == 2 {
			break
		}
		p := s.get(i)
		s.set(i, s.get(u-1))
		s.set(u-1, p)
		// a[l] <= P == a[u-1] <= a[u]: partition a[l+1..u-2]
		i, j := l, u-1
		for {
			var ai, aj lua.LValue
			for {
				i++
				ai = s.get(i)
				if !s.less(ai, p) {
					break
				}
				if i > u {
					raiseError(s.L, "invalid order function for sorting")
				}
			}
			for {
				j--
				aj = s.get(j)
				if !s.less(p, aj) {
					break
				}
				if j < l {
					raiseError(s.L, "invalid order function for sorting")
				}
			}
			if j < i {
				break
			}
			s.set(i, aj)
			s.set(j, ai)
		}
		a, b := s.get(u-1), s.get(i)
		s.set(u-1, b)
		s.set(i, a)
		// recurse into the smaller half, loop on the larger
		if i-l < u-i {
			j = l
			i = i - 1
			l = i + 2
		} else {
			j = i + 1
			i = u
			u = j - 2
		}
		s.sort(j, i)
	}
}

// lessThan is Lua 5.1's '<': numbers, strings byte-wise, or a __lt
// metamethod shared by both operands.
func lessThan(L *lua.LState, a, b lua.LValue) bool {
	switch x := a.(type) {
	case lua.LNumber:
		if y, ok := b.(lua.LNumber); ok {
			return x < y
		}
	case lua.LString:
		if y, ok := b.(lua.LString); ok {
			return x < y
		}
	}
	if a.Type() == b.Type() {
		mm := L.GetMetaField(a, "__lt")
		if mm != lua.LNil && mm == L.GetMetaField(b, "__lt") {
			L.Push(mm)
			L.Push(a)
			L.Push(b)
			L.Call(2, 1)
			res := lua.LVAsBool(L.Get(-1))
			L.Pop(1)
			return res
		}
		L.Error(lua.LString(fmt.Sprintf("attempt to compare two %s values", a.Type().String())), 0)
	}
	// Raised from inside a library function, the error has no position.
	L.Error(lua.LString(fmt.Sprintf("attempt to compare %s with %s", a.Type().String(), b.Type().String())), 0)
	return false
}

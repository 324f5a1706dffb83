package lualib

import (
	"strings"

	"github.com/lockserver/lockserver/luaexec/internal/budget"
	lua "github.com/yuin/gopher-lua"
)

// The table library of Lua 5.1 (ltablib.c), with its sort algorithm so that
// elements that compare equal end in the same order as in Redis, and with
// the budget charged for the work each call does. Protected tables refuse
// changes.

// TableLib returns the table library.
func (l *Libs) TableLib() *lua.LTable {
	return NewLib(l.state, map[string]lua.LGFunction{
		"concat":   l.tableConcat,
		"foreach":  l.tableForeach,
		"foreachi": l.tableForeachi,
		"getn": func(L *lua.LState) int {
			L.Push(lua.LNumber(Length(l.budget, L, l.ro.Contents(CheckTable(L, 1)))))
			return 1
		},
		"insert": l.tableInsert,
		"maxn":   l.tableMaxn,
		"remove": l.tableRemove,
		"setn": func(L *lua.LState) int {
			CheckTable(L, 1)
			RaiseError(L, "'setn' is obsolete")
			return 0
		},
		"sort": l.tableSort,
	})
}

func (l *Libs) tableConcat(L *lua.LState) int {
	sep := OptString(L, 2, "")
	t := l.ro.Contents(CheckTable(L, 1))
	i := OptInt(L, 3, 1)
	last := Length(l.budget, L, t)
	if L.Get(4) != lua.LNil {
		last = CheckInt(L, 4)
	}
	var b strings.Builder
	for ; i <= last; i++ {
		val := t.RawGetInt(i)
		s, ok := ToString(val)
		if !ok {
			RaiseError(L, "invalid value (%s) at index %d in table for 'concat'", val.Type().String(), i)
		}
		budget.Bytes(l.budget, L, len(s)+len(sep))
		b.WriteString(s)
		if i != last {
			b.WriteString(sep)
		}
	}
	L.Push(lua.LString(b.String()))
	return 1
}

func (l *Libs) tableInsert(L *lua.LState) int {
	t := CheckTable(L, 1)
	c := l.ro.Contents(t)
	e := Length(l.budget, L, c) + 1
	var pos int
	switch L.GetTop() {
	case 2:
		pos = e
	case 3:
		pos = CheckInt(L, 2)
		ChargeGap(l.budget, L, c, lua.LNumber(pos))
		if pos > e {
			e = pos
		}
		l.ro.RefuseWrite(L, t)
		l.budget.Charge(L, int64(e)-int64(pos))
		for i := e; i > pos; i-- {
			c.RawSetInt(i, c.RawGetInt(i-1))
		}
	default:
		RaiseError(L, "wrong number of arguments to 'insert'")
	}
	l.ro.RefuseWrite(L, t)
	c.RawSetInt(pos, L.Get(-1))
	return 0
}

func (l *Libs) tableRemove(L *lua.LState) int {
	t := CheckTable(L, 1)
	c := l.ro.Contents(t)
	e := Length(l.budget, L, c)
	pos := OptInt(L, 2, e)
	if pos < 1 || pos > e {
		return 0
	}
	l.ro.RefuseWrite(L, t)
	l.budget.Charge(L, int64(e-pos))
	L.Push(c.RawGetInt(pos))
	for ; pos < e; pos++ {
		c.RawSetInt(pos, c.RawGetInt(pos+1))
	}
	c.RawSetInt(e, lua.LNil)
	return 1
}

func (l *Libs) tableMaxn(L *lua.LState) int {
	t := l.ro.Contents(CheckTable(L, 1))
	max := 0.0
	traverse(l.budget, L, t, func(k, _ lua.LValue) {
		l.budget.Charge(L, 1)
		if n, ok := k.(lua.LNumber); ok && float64(n) > max {
			max = float64(n)
		}
	})
	L.Push(lua.LNumber(max))
	return 1
}

func (l *Libs) tableForeach(L *lua.LState) int {
	t := l.ro.Contents(CheckTable(L, 1))
	fn := L.CheckFunction(2)
	for k, val := Next(l.budget, L, t, lua.LNil); k != lua.LNil; k, val = Next(l.budget, L, t, k) {
		l.budget.Charge(L, 1) // the call, which may be a library function
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

func (l *Libs) tableForeachi(L *lua.LState) int {
	t := l.ro.Contents(CheckTable(L, 1))
	fn := L.CheckFunction(2)
	n := Length(l.budget, L, t)
	for i := 1; i <= n; i++ {
		l.budget.Charge(L, 1) // the call, which may be a library function
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
	l    *Libs
	L    *lua.LState
	t    *lua.LTable
	comp lua.LValue // nil for '<'
}

func (l *Libs) tableSort(L *lua.LState) int {
	t := CheckTable(L, 1)
	s := &sorter{l: l, L: L, t: l.ro.Contents(t), comp: L.Get(2)}
	if s.comp != lua.LNil {
		if _, ok := s.comp.(*lua.LFunction); !ok {
			TypeError(L, 2, "function")
		}
	}
	n := Length(l.budget, L, s.t)
	if n > 1 {
		l.ro.RefuseWrite(L, t)
	}
	s.sort(1, n)
	return 0
}

func (s *sorter) less(a, b lua.LValue) bool {
	s.l.budget.Charge(s.L, 1)
	if x, ok := a.(lua.LString); ok {
		if y, ok := b.(lua.LString); ok {
			budget.Scan(s.l.budget, s.L, min(len(x), len(y)))
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
					RaiseError(s.L, "invalid order function for sorting")
				}
			}
			for {
				j--
				aj = s.get(j)
				if !s.less(p, aj) {
					break
				}
				if j < l {
					RaiseError(s.L, "invalid order function for sorting")
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
	}
	// Raised from inside a library function, the error has no position.
	L.Error(lua.LString(OrderError(a, b)), 0)
	return false
}

// OrderError is Lua 5.1's luaG_ordererror: "two <type> values" when the
// types' names share their third letter (the same type, or a string and a
// thread), else "<type> with <type>".
func OrderError(a, b lua.LValue) string {
	t1, t2 := a.Type().String(), b.Type().String()
	if t1[2] == t2[2] {
		return "attempt to compare two " + t1 + " values"
	}
	return "attempt to compare " + t1 + " with " + t2
}

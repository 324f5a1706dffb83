package lualib

import (
	"math"
	"strings"

	"github.com/lockserver/lockserver/luaexec/internal/budget"
	lua "github.com/yuin/gopher-lua"
)

// The string library of Lua 5.1 (lstrlib.c): numeric strings are accepted
// where numbers are expected, numbers format as "%.14g", patterns use the
// budgeted matcher of pattern.go, and anything that builds or scans a large
// string charges the script's budget first.

// StringLib returns the string library.
func (l *Libs) StringLib() *lua.LTable {
	return NewLib(l.state, map[string]lua.LGFunction{
		"byte":    l.strByte,
		"char":    l.strChar,
		"dump":    strDump,
		"find":    func(L *lua.LState) int { return l.strFind(L, true) },
		"format":  l.strFormat,
		"gfind":   l.strGmatch,
		"gmatch":  l.strGmatch,
		"gsub":    l.strGsub,
		"len":     func(L *lua.LState) int { L.Push(lua.LNumber(len(CheckString(L, 1)))); return 1 },
		"lower":   func(L *lua.LState) int { return l.strMap(L, strings.ToLower) },
		"match":   func(L *lua.LState) int { return l.strFind(L, false) },
		"rep":     l.strRep,
		"reverse": func(L *lua.LState) int { return l.strMap(L, reverseString) },
		"sub":     strSub,
		"upper":   func(L *lua.LState) int { return l.strMap(L, strings.ToUpper) },
	})
}

// strMap applies an ASCII byte-wise transformation (the C locale's).
func (l *Libs) strMap(L *lua.LState, f func(string) string) int {
	s := CheckString(L, 1)
	budget.Bytes(l.budget, L, len(s))
	L.Push(lua.LString(asciiOnly(s, f)))
	return 1
}

// asciiOnly applies f (strings.ToLower or ToUpper) to the ASCII letters only,
// leaving other bytes, as C's tolower does in the C locale.
func asciiOnly(s string, f func(string) string) string {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			b := []byte(s)
			for j, c := range b {
				if c < 0x80 {
					b[j] = f(string(c))[0]
				}
			}
			return string(b)
		}
	}
	return f(s)
}

func reverseString(s string) string {
	b := make([]byte, len(s))
	for i := range b {
		b[i] = s[len(s)-1-i]
	}
	return string(b)
}

// posRelat converts a relative string position: negative counts from the end.
func posRelat(pos int64, n int) int64 {
	if pos < 0 {
		pos += int64(n) + 1
	}
	if pos < 0 {
		return 0
	}
	return pos
}

func strSub(L *lua.LState) int {
	s := CheckString(L, 1)
	start := posRelat(checkInteger(L, 2), len(s))
	end := posRelat(optInteger(L, 3, -1), len(s))
	if start < 1 {
		start = 1
	}
	if end > int64(len(s)) {
		end = int64(len(s))
	}
	if start <= end {
		L.Push(lua.LString(s[start-1 : end]))
	} else {
		L.Push(lua.LString(""))
	}
	return 1
}

func (l *Libs) strRep(L *lua.LState) int {
	s := CheckString(L, 1)
	n := checkInteger(L, 2)
	if n <= 0 || len(s) == 0 {
		L.Push(lua.LString(""))
		return 1
	}
	if n > math.MaxInt32/int64(len(s)) {
		l.budget.Charge(L, math.MaxInt64) // far beyond any budget
	}
	budget.Bytes(l.budget, L, int(n)*len(s))
	L.Push(lua.LString(strings.Repeat(s, int(n))))
	return 1
}

func (l *Libs) strByte(L *lua.LState) int {
	s := CheckString(L, 1)
	posi := posRelat(optInteger(L, 2, 1), len(s))
	pose := posRelat(optInteger(L, 3, posi), len(s))
	if posi <= 0 {
		posi = 1
	}
	if pose > int64(len(s)) {
		pose = int64(len(s))
	}
	if posi > pose {
		return 0
	}
	n := int(pose - posi + 1)
	if n+L.GetTop() > MaxCStack {
		RaiseError(L, "stack overflow (string slice too long)")
	}
	l.budget.Charge(L, int64(n))
	for i := 0; i < n; i++ {
		L.Push(lua.LNumber(s[int(posi)+i-1]))
	}
	return n
}

func (l *Libs) strChar(L *lua.LState) int {
	n := L.GetTop()
	b := make([]byte, n)
	for i := 1; i <= n; i++ {
		c := CheckInt(L, i)
		if c < 0 || c > 255 {
			ArgError(L, i, "invalid value")
		}
		b[i-1] = byte(c)
	}
	budget.Bytes(l.budget, L, n)
	L.Push(lua.LString(b))
	return 1
}

// strDump cannot produce Lua 5.1 bytecode: gopher-lua compiles to its own.
func strDump(L *lua.LState) int {
	fn, ok := L.Get(1).(*lua.LFunction)
	if !ok {
		TypeError(L, 1, "function")
	}
	if fn.IsG {
		RaiseError(L, "unable to dump given function") // as Lua says of a C function
	}
	L.Push(lua.LString(chunkHeader))
	return 1
}

// chunkHeader is the header of a Lua 5.1 binary chunk as redis-server on a
// 64-bit little-endian machine writes it (lundump.h: signature, version
// 5.1, format 0, little-endian, 4-byte int, 8-byte size_t, 4-byte
// instruction, 8-byte floating lua_Number). string.dump returns it without
// the function's code: there is no Lua 5.1 bytecode here to give, and Redis
// 7's loadstring refuses any binary chunk, so a script can do nothing more
// with a dump than it can on Redis.
const chunkHeader = "\x1bLua\x51\x00\x01\x04\x08\x04\x08\x00"

// specials are the characters that make find use patterns.
const specials = "^$*+?.([%-"

func (l *Libs) strFind(L *lua.LState, find bool) int {
	s := CheckString(L, 1)
	p := CheckString(L, 2)
	budget.Scan(l.budget, L, len(p)) // scanned for specials
	init := posRelat(optInteger(L, 3, 1), len(s)) - 1
	if init < 0 {
		init = 0
	} else if init > int64(len(s)) {
		init = int64(len(s))
	}
	cp := p
	if i := strings.IndexByte(cp, 0); i >= 0 {
		cp = cp[:i]
	}
	if find && (lua.LVAsBool(L.Get(4)) || !strings.ContainsAny(cp, specials)) {
		budget.Bytes(l.budget, L, len(s)-int(init))
		if i := strings.Index(s[init:], p); i >= 0 {
			L.Push(lua.LNumber(int(init) + i + 1))
			L.Push(lua.LNumber(int(init) + i + len(p)))
			return 2
		}
		L.Push(lua.LNil)
		return 1
	}
	ms := newMatchState(l, L, s, p)
	pstart := 0
	anchor := ms.p(0) == '^'
	if anchor {
		pstart = 1
	}
	for s1 := int(init); ; s1++ {
		ms.level = 0
		if e := ms.match(s1, pstart); e != -1 {
			if find {
				L.Push(lua.LNumber(s1 + 1))
				L.Push(lua.LNumber(e))
				return ms.pushCaptures(s1, e, false) + 2
			}
			return ms.pushCaptures(s1, e, true)
		}
		if s1 >= len(s) || anchor {
			break
		}
	}
	L.Push(lua.LNil)
	return 1
}

func (l *Libs) strGmatch(L *lua.LState) int {
	s := CheckString(L, 1)
	p := CheckString(L, 2)
	pos := 0
	L.Push(L.NewFunction(func(L *lua.LState) int {
		ms := newMatchState(l, L, s, p)
		for src := pos; src <= len(s); src++ {
			ms.level = 0
			if e := ms.match(src, 0); e != -1 {
				pos = e
				if e == src {
					pos++ // an empty match: move on at least one position
				}
				return ms.pushCaptures(src, e, true)
			}
		}
		pos = len(s) + 1
		return 0
	}))
	return 1
}

func (l *Libs) strGsub(L *lua.LState) int {
	src := CheckString(L, 1)
	p := CheckString(L, 2)
	repl := L.Get(3)
	maxN := OptInt(L, 4, len(src)+1)
	switch repl.Type() {
	case lua.LTNumber, lua.LTString, lua.LTFunction, lua.LTTable:
	default:
		ArgError(L, 3, "string/function/table expected")
	}
	ms := newMatchState(l, L, src, p)
	pstart := 0
	anchor := ms.p(0) == '^'
	if anchor {
		pstart = 1
	}
	var b strings.Builder
	n := 0
	s := 0
	for n < maxN {
		ms.level = 0
		e := ms.match(s, pstart)
		if e != -1 {
			n++
			l.addValue(ms, &b, s, e, repl)
		}
		switch {
		case e != -1 && e > s:
			s = e
		case s < len(src):
			b.WriteByte(src[s])
			s++
		default:
			goto done
		}
		if anchor {
			break
		}
	}
done:
	b.WriteString(src[s:])
	budget.Bytes(l.budget, L, b.Len())
	L.Push(lua.LString(b.String()))
	L.Push(lua.LNumber(n))
	return 2
}

// addValue appends the replacement for one match of gsub.
func (l *Libs) addValue(ms *matchState, b *strings.Builder, s, e int, repl lua.LValue) {
	L := ms.L
	var val lua.LValue
	switch r := repl.(type) {
	case lua.LString, lua.LNumber:
		news, _ := ToString(r)
		budget.Bytes(l.budget, L, len(news))
		for i := 0; i < len(news); i++ {
			c := news[i]
			if c != '%' {
				b.WriteByte(c)
				continue
			}
			i++
			var d byte // past the end, C reads the terminating NUL
			if i < len(news) {
				d = news[i]
			}
			switch {
			case d < '0' || d > '9':
				b.WriteByte(d)
			case d == '0':
				b.WriteString(ms.src[s:e])
			default:
				c := ms.captureValue(int(d-'1'), s, e)
				cs, _ := ToString(c)
				b.WriteString(cs)
			}
		}
		return
	case *lua.LFunction:
		L.Push(r)
		n := ms.pushCaptures(s, e, true)
		L.Call(n, 1)
		val = L.Get(-1)
		L.Pop(1)
	case *lua.LTable:
		val = L.GetTable(r, ms.captureValue(0, s, e))
	}
	if !lua.LVAsBool(val) {
		b.WriteString(ms.src[s:e])
		return
	}
	str, ok := ToString(val)
	if !ok {
		RaiseError(L, "invalid replacement value (a %s)", val.Type().String())
	}
	budget.Bytes(l.budget, L, len(str))
	b.WriteString(str)
}

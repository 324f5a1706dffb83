package luaexec

import (
	"math"
	"strconv"
	"strings"

	"github.com/lockserver/lockserver/luaexec/internal/budget"
	"github.com/lockserver/lockserver/luaexec/internal/clib"
	lua "github.com/yuin/gopher-lua"
)

// The string library of Lua 5.1 (lstrlib.c): numeric strings are accepted
// where numbers are expected, numbers format as "%.14g", patterns use the
// budgeted matcher of pattern.go, and anything that builds or scans a large
// string charges the script's budget first.

func (v *vm) stringLib() *lua.LTable {
	return newLib(v.L, map[string]lua.LGFunction{
		"byte":    v.strByte,
		"char":    v.strChar,
		"dump":    strDump,
		"find":    func(L *lua.LState) int { return v.strFind(L, true) },
		"format":  v.strFormat,
		"gfind":   v.strGmatch,
		"gmatch":  v.strGmatch,
		"gsub":    v.strGsub,
		"len":     func(L *lua.LState) int { L.Push(lua.LNumber(len(checkString(L, 1)))); return 1 },
		"lower":   func(L *lua.LState) int { return v.strMap(L, strings.ToLower) },
		"match":   func(L *lua.LState) int { return v.strFind(L, false) },
		"rep":     v.strRep,
		"reverse": func(L *lua.LState) int { return v.strMap(L, reverseString) },
		"sub":     strSub,
		"upper":   func(L *lua.LState) int { return v.strMap(L, strings.ToUpper) },
	})
}

// strMap applies an ASCII byte-wise transformation (the C locale's).
func (v *vm) strMap(L *lua.LState, f func(string) string) int {
	s := checkString(L, 1)
	budget.Bytes(v, L, len(s))
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
	s := checkString(L, 1)
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

func (v *vm) strRep(L *lua.LState) int {
	s := checkString(L, 1)
	n := checkInteger(L, 2)
	if n <= 0 || len(s) == 0 {
		L.Push(lua.LString(""))
		return 1
	}
	if n > math.MaxInt32/int64(len(s)) {
		v.Charge(L, math.MaxInt64) // far beyond any budget
	}
	budget.Bytes(v, L, int(n)*len(s))
	L.Push(lua.LString(strings.Repeat(s, int(n))))
	return 1
}

func (v *vm) strByte(L *lua.LState) int {
	s := checkString(L, 1)
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
	if n+L.GetTop() > luaMaxCStack {
		raiseError(L, "stack overflow (string slice too long)")
	}
	v.Charge(L, int64(n))
	for i := 0; i < n; i++ {
		L.Push(lua.LNumber(s[int(posi)+i-1]))
	}
	return n
}

func (v *vm) strChar(L *lua.LState) int {
	n := L.GetTop()
	b := make([]byte, n)
	for i := 1; i <= n; i++ {
		c := checkInt(L, i)
		if c < 0 || c > 255 {
			argError(L, i, "invalid value")
		}
		b[i-1] = byte(c)
	}
	budget.Bytes(v, L, n)
	L.Push(lua.LString(b))
	return 1
}

// strDump cannot produce Lua 5.1 bytecode: gopher-lua compiles to its own.
func strDump(L *lua.LState) int {
	if _, ok := L.Get(1).(*lua.LFunction); !ok {
		typeError(L, 1, "function")
	}
	raiseError(L, "unable to dump given function")
	return 0
}

// specials are the characters that make find use patterns.
const specials = "^$*+?.([%-"

func (v *vm) strFind(L *lua.LState, find bool) int {
	s := checkString(L, 1)
	p := checkString(L, 2)
	budget.Scan(v, L, len(p)) // scanned for specials
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
		budget.Bytes(v, L, len(s)-int(init))
		if i := strings.Index(s[init:], p); i >= 0 {
			L.Push(lua.LNumber(int(init) + i + 1))
			L.Push(lua.LNumber(int(init) + i + len(p)))
			return 2
		}
		L.Push(lua.LNil)
		return 1
	}
	ms := newMatchState(v, L, s, p)
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

func (v *vm) strGmatch(L *lua.LState) int {
	s := checkString(L, 1)
	p := checkString(L, 2)
	pos := 0
	L.Push(L.NewFunction(func(L *lua.LState) int {
		ms := newMatchState(v, L, s, p)
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

func (v *vm) strGsub(L *lua.LState) int {
	src := checkString(L, 1)
	p := checkString(L, 2)
	repl := L.Get(3)
	maxN := optInt(L, 4, len(src)+1)
	switch repl.Type() {
	case lua.LTNumber, lua.LTString, lua.LTFunction, lua.LTTable:
	default:
		argError(L, 3, "string/function/table expected")
	}
	ms := newMatchState(v, L, src, p)
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
			v.addValue(ms, &b, s, e, repl)
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
	budget.Bytes(v, L, b.Len())
	L.Push(lua.LString(b.String()))
	L.Push(lua.LNumber(n))
	return 2
}

// addValue appends the replacement for one match of gsub.
func (v *vm) addValue(ms *matchState, b *strings.Builder, s, e int, repl lua.LValue) {
	L := ms.L
	var val lua.LValue
	switch r := repl.(type) {
	case lua.LString, lua.LNumber:
		news, _ := toStringValue(r)
		budget.Bytes(v, L, len(news))
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
				cs, _ := toStringValue(c)
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
	str, ok := toStringValue(val)
	if !ok {
		raiseError(L, "invalid replacement value (a %s)", val.Type().String())
	}
	budget.Bytes(v, L, len(str))
	b.WriteString(str)
}

// ---- string.format ----

// fmtSpec is one parsed conversion of string.format.
type fmtSpec struct {
	minus, plus, space, alt, zero bool
	width, prec                   int // prec -1 when absent
}

func (v *vm) strFormat(L *lua.LState) int {
	top := L.GetTop()
	format := checkString(L, 1)
	arg := 1
	var b strings.Builder
	for i := 0; i < len(format); {
		c := format[i]
		if c != '%' {
			b.WriteByte(c)
			i++
			continue
		}
		i++
		if i < len(format) && format[i] == '%' {
			b.WriteByte('%')
			i++
			continue
		}
		arg++
		if arg > top {
			argError(L, arg, "no value")
		}
		var spec fmtSpec
		i = scanFormat(L, format, i, &spec)
		var conv byte // past the end, C reads the terminating NUL
		if i < len(format) {
			conv = format[i]
		}
		i++
		switch conv {
		case 'c':
			b.WriteString(pad(string([]byte{byte(clib.ToInt(checkNumber(L, arg)))}), spec, false))
		case 'd', 'i':
			b.WriteString(formatInt(clib.ToInteger(checkNumber(L, arg)), spec))
		case 'o', 'u', 'x', 'X':
			b.WriteString(formatUint(clib.ToUnsigned(checkNumber(L, arg)), conv, spec))
		case 'e', 'E', 'f', 'g', 'G':
			b.WriteString(formatFloat(checkNumber(L, arg), conv, spec))
		case 'q':
			s := checkString(L, arg)
			budget.Bytes(v, L, 2*len(s))
			addQuoted(&b, s)
		case 's':
			s := checkString(L, arg)
			if spec.prec < 0 && len(s) >= 100 {
				budget.Bytes(v, L, len(s))
				b.WriteString(s) // Lua keeps long strings whole, NULs included
				continue
			}
			budget.Scan(v, L, len(s))
			if j := strings.IndexByte(s, 0); j >= 0 {
				s = s[:j] // sprintf stops at NUL
			}
			if spec.prec >= 0 && spec.prec < len(s) {
				s = s[:spec.prec]
			}
			b.WriteString(pad(s, spec, false))
		default:
			raiseError(L, "invalid option '%%%c' to 'format'", conv)
		}
	}
	budget.Bytes(v, L, b.Len())
	L.Push(lua.LString(b.String()))
	return 1
}

// scanFormat reads flags, width (2 digits at most) and precision as Lua
// 5.1's scanformat does, and returns the index of the conversion character.
func scanFormat(L *lua.LState, f string, i int, spec *fmtSpec) int {
	at := func(i int) byte {
		if i < len(f) {
			return f[i]
		}
		return 0
	}
	start := i
	for strings.IndexByte("-+ #0", at(i)) >= 0 && at(i) != 0 {
		switch at(i) {
		case '-':
			spec.minus = true
		case '+':
			spec.plus = true
		case ' ':
			spec.space = true
		case '#':
			spec.alt = true
		case '0':
			spec.zero = true
		}
		i++
	}
	if i-start >= 6 {
		raiseError(L, "invalid format (repeated flags)")
	}
	digits := func() int {
		n := 0
		for k := 0; k < 2 && clib.IsDigit(at(i)); k++ {
			n = n*10 + int(at(i)-'0')
			i++
		}
		return n
	}
	spec.width = digits()
	spec.prec = -1
	if at(i) == '.' {
		i++
		spec.prec = digits()
	}
	if clib.IsDigit(at(i)) {
		raiseError(L, "invalid format (width or precision too long)")
	}
	return i
}

// pad applies the width: spaces on the left, on the right with '-', or
// zeros after the sign and prefix when zeros is set.
func pad(s string, spec fmtSpec, zeros bool) string {
	if len(s) >= spec.width {
		return s
	}
	fill := spec.width - len(s)
	switch {
	case spec.minus:
		return s + strings.Repeat(" ", fill)
	case zeros:
		cut := 0
		if cut < len(s) && (s[0] == '-' || s[0] == '+' || s[0] == ' ') {
			cut = 1
		}
		if len(s) >= cut+2 && s[cut] == '0' && (s[cut+1]|0x20) == 'x' {
			cut += 2
		}
		return s[:cut] + strings.Repeat("0", fill) + s[cut:]
	}
	return strings.Repeat(" ", fill) + s
}

func signPrefix(neg bool, spec fmtSpec) string {
	switch {
	case neg:
		return "-"
	case spec.plus:
		return "+"
	case spec.space:
		return " "
	}
	return ""
}

// withPrecision applies an integer conversion's precision (minimum digits).
func withPrecision(digits string, spec fmtSpec) string {
	if spec.prec == 0 && digits == "0" {
		return ""
	}
	if spec.prec > len(digits) {
		return strings.Repeat("0", spec.prec-len(digits)) + digits
	}
	return digits
}

func formatInt(n int64, spec fmtSpec) string {
	var mag uint64
	if n < 0 {
		mag = uint64(-n)
	} else {
		mag = uint64(n)
	}
	s := signPrefix(n < 0, spec) + withPrecision(strconv.FormatUint(mag, 10), spec)
	return pad(s, spec, spec.zero && spec.prec < 0)
}

func formatUint(u uint64, conv byte, spec fmtSpec) string {
	var digits, prefix string
	switch conv {
	case 'o':
		digits = withPrecision(strconv.FormatUint(u, 8), spec)
		if spec.alt && !strings.HasPrefix(digits, "0") {
			digits = "0" + digits
		}
	case 'u':
		digits = withPrecision(strconv.FormatUint(u, 10), spec)
	case 'x', 'X':
		digits = withPrecision(strconv.FormatUint(u, 16), spec)
		if spec.alt && u != 0 {
			prefix = "0x"
		}
		if conv == 'X' {
			digits, prefix = strings.ToUpper(digits), strings.ToUpper(prefix)
		}
	}
	return pad(prefix+digits, spec, spec.zero && spec.prec < 0)
}

func formatFloat(f float64, conv byte, spec fmtSpec) string {
	upper := conv == 'E' || conv == 'G'
	neg := math.Signbit(f)
	if math.IsInf(f, 0) || math.IsNaN(f) {
		s := "inf"
		if math.IsNaN(f) {
			s = "nan"
		}
		if upper {
			s = strings.ToUpper(s)
		}
		return pad(signPrefix(neg, spec)+s, spec, false)
	}
	abs := math.Abs(f)
	prec := spec.prec
	if prec < 0 {
		prec = 6
	}
	var s string
	switch conv {
	case 'f':
		s = strconv.FormatFloat(abs, 'f', prec, 64)
	case 'e', 'E':
		s = strconv.FormatFloat(abs, 'e', prec, 64)
	default: // g, G
		if prec == 0 {
			prec = 1
		}
		e := strconv.FormatFloat(abs, 'e', prec-1, 64)
		exp, _ := strconv.Atoi(e[strings.IndexByte(e, 'e')+1:])
		if exp < prec && exp >= -4 {
			s = strconv.FormatFloat(abs, 'f', prec-1-exp, 64)
		} else {
			s = e
		}
		if !spec.alt {
			s = trimFraction(s)
		}
	}
	if spec.alt && !strings.Contains(s, ".") {
		if i := strings.IndexByte(s, 'e'); i >= 0 {
			s = s[:i] + "." + s[i:]
		} else {
			s += "."
		}
	}
	if upper {
		s = strings.ToUpper(s)
	}
	return pad(signPrefix(neg, spec)+s, spec, spec.zero)
}

// trimFraction removes trailing zeros of the fraction, and a bare point, as %g does.
func trimFraction(s string) string {
	mant, exp := s, ""
	if i := strings.IndexByte(s, 'e'); i >= 0 {
		mant, exp = s[:i], s[i:]
	}
	if strings.Contains(mant, ".") {
		mant = strings.TrimRight(mant, "0")
		mant = strings.TrimSuffix(mant, ".")
	}
	return mant + exp
}

// addQuoted writes s as %q does: quoted, with \", \\, newlines, \r and NUL escaped.
func addQuoted(b *strings.Builder, s string) {
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '"', '\\', '\n':
			b.WriteByte('\\')
			b.WriteByte(c)
		case '\r':
			b.WriteString("\\r")
		case 0:
			b.WriteString("\\000")
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('"')
}

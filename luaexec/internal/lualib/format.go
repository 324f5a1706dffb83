package lualib

import (
	"math"
	"strconv"
	"strings"

	"github.com/lockserver/lockserver/luaexec/internal/budget"
	"github.com/lockserver/lockserver/luaexec/internal/clib"
	lua "github.com/yuin/gopher-lua"
)

// string.format as Lua 5.1's str_format does it: %q as Lua quotes, every
// other conversion as glibc's sprintf prints it, with its flags, widths and
// precisions.

// fmtSpec is one parsed conversion of string.format.
type fmtSpec struct {
	minus, plus, space, alt, zero bool
	width, prec                   int // prec -1 when absent
}

func (l *Libs) strFormat(L *lua.LState) int {
	top := L.GetTop()
	format := CheckString(L, 1)
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
			ArgError(L, arg, "no value")
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
			s := CheckString(L, arg)
			budget.Bytes(l.budget, L, 2*len(s))
			addQuoted(&b, s)
		case 's':
			s := CheckString(L, arg)
			if spec.prec < 0 && len(s) >= 100 {
				budget.Bytes(l.budget, L, len(s))
				b.WriteString(s) // Lua keeps long strings whole, NULs included
				continue
			}
			budget.Scan(l.budget, L, len(s))
			if j := strings.IndexByte(s, 0); j >= 0 {
				s = s[:j] // sprintf stops at NUL
			}
			if spec.prec >= 0 && spec.prec < len(s) {
				s = s[:spec.prec]
			}
			b.WriteString(pad(s, spec, false))
		default:
			RaiseError(L, "invalid option '%%%c' to 'format'", conv)
		}
	}
	budget.Bytes(l.budget, L, b.Len())
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
		RaiseError(L, "invalid format (repeated flags)")
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
		RaiseError(L, "invalid format (width or precision too long)")
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

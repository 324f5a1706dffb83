// Package clib reproduces the C library as Lua 5.1 uses it when Redis
// builds it (glibc on x86-64), where Go's behaves otherwise: the character
// classes of the C locale, strtod and strtoul, printf's "%.14g", and the
// casts of doubles to integers. Scripts observe all of them, in the numbers
// they read from strings, print, and pass as integers; gopher-lua does each
// the Go way.
package clib

import (
	"math"
	"strconv"
	"strings"
)

// IsSpace reports whether c is a C isspace character.
func IsSpace(c byte) bool {
	return c == ' ' || (c >= '\t' && c <= '\r')
}

// IsDigit reports whether c is a decimal digit.
func IsDigit(c byte) bool { return c >= '0' && c <= '9' }

// IsHexDigit reports whether c is a hexadecimal digit.
func IsHexDigit(c byte) bool {
	return IsDigit(c) || (c|0x20) >= 'a' && (c|0x20) <= 'f'
}

// IsAlpha reports whether c is an ASCII letter; c may be any int, as C's
// isalpha takes the characters a reader returns.
func IsAlpha(c int) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }

// IsAlnum reports whether c is an ASCII letter or digit.
func IsAlnum(c int) bool { return IsAlpha(c) || c >= '0' && c <= '9' }

// DigitValue returns the value of c as a digit in bases up to 36, or 99.
func DigitValue(c byte) int {
	switch {
	case IsDigit(c):
		return int(c - '0')
	case (c|0x20) >= 'a' && (c|0x20) <= 'z':
		return int(c|0x20-'a') + 10
	}
	return 99
}

// HasPrefixFold reports whether s starts with the lower-case ASCII word w, in any case.
func HasPrefixFold(s, w string) bool {
	return len(s) >= len(w) && strings.EqualFold(s[:len(w)], w)
}

// Strtod parses the longest prefix of s that glibc's strtod accepts and
// returns its value and length; the length is 0 when no number starts s.
func Strtod(s string) (float64, int) {
	i := 0
	for i < len(s) && IsSpace(s[i]) {
		i++
	}
	neg := false
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		neg = s[i] == '-'
		i++
	}
	sign := func(f float64) float64 {
		if neg {
			return -f
		}
		return f
	}
	rest := s[i:]
	switch {
	case HasPrefixFold(rest, "infinity"):
		return sign(math.Inf(1)), i + 8
	case HasPrefixFold(rest, "inf"):
		return sign(math.Inf(1)), i + 3
	case HasPrefixFold(rest, "nan"):
		n := 3
		if len(rest) > 3 && rest[3] == '(' {
			j := 4
			for j < len(rest) && (IsDigit(rest[j]) || (rest[j]|0x20) >= 'a' && (rest[j]|0x20) <= 'z' || rest[j] == '_') {
				j++
			}
			if j < len(rest) && rest[j] == ')' {
				n = j + 1
			}
		}
		return math.Copysign(math.NaN(), sign(1)), i + n
	}
	if len(rest) > 2 && rest[0] == '0' && (rest[1]|0x20) == 'x' && (IsHexDigit(rest[2]) || rest[2] == '.' && len(rest) > 3 && IsHexDigit(rest[3])) {
		j := 2
		for j < len(rest) && IsHexDigit(rest[j]) {
			j++
		}
		if j < len(rest) && rest[j] == '.' {
			j++
			for j < len(rest) && IsHexDigit(rest[j]) {
				j++
			}
		}
		mant := rest[:j]
		exp := "p0"
		if j < len(rest) && (rest[j]|0x20) == 'p' {
			k := j + 1
			if k < len(rest) && (rest[k] == '+' || rest[k] == '-') {
				k++
			}
			if k < len(rest) && IsDigit(rest[k]) {
				for k < len(rest) && IsDigit(rest[k]) {
					k++
				}
				exp = rest[j:k]
				j = k
			}
		}
		f, _ := strconv.ParseFloat(mant+exp, 64) // well-formed by construction; overflow gives ±Inf
		return sign(f), i + j
	}
	j := 0
	digits := 0
	for j < len(rest) && IsDigit(rest[j]) {
		j++
		digits++
	}
	if j < len(rest) && rest[j] == '.' {
		j++
		for j < len(rest) && IsDigit(rest[j]) {
			j++
			digits++
		}
	}
	if digits == 0 {
		return 0, 0
	}
	if j < len(rest) && (rest[j]|0x20) == 'e' {
		k := j + 1
		if k < len(rest) && (rest[k] == '+' || rest[k] == '-') {
			k++
		}
		if k < len(rest) && IsDigit(rest[k]) {
			for k < len(rest) && IsDigit(rest[k]) {
				k++
			}
			j = k
		}
	}
	f, _ := strconv.ParseFloat(rest[:j], 64) // well-formed by construction; overflow gives ±Inf
	return sign(f), i + j
}

// Strtoul parses s as C's strtoul does in base 2..36: leading spaces, a sign,
// an optional 0x in base 16, then digits. It returns the value (saturated at
// the maximum on overflow, negated modulo 2^64 after a minus sign) and the
// length parsed, 0 when there is no digit.
func Strtoul(s string, base int) (uint64, int) {
	i := 0
	for i < len(s) && IsSpace(s[i]) {
		i++
	}
	neg := false
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		neg = s[i] == '-'
		i++
	}
	if base == 16 && i+2 < len(s) && s[i] == '0' && (s[i+1]|0x20) == 'x' && DigitValue(s[i+2]) < 16 {
		i += 2
	}
	start := i
	var v uint64
	overflow := false
	for i < len(s) && DigitValue(s[i]) < base {
		d := uint64(DigitValue(s[i]))
		if v > (math.MaxUint64-d)/uint64(base) {
			overflow = true
		} else {
			v = v*uint64(base) + d
		}
		i++
	}
	if i == start {
		return 0, 0
	}
	if overflow {
		return math.MaxUint64, i
	}
	if neg {
		v = -v
	}
	return v, i
}

// Str2Number converts s as Lua 5.1's luaO_str2d does: the whole string (up
// to a NUL byte, as C sees it) must be a number, with optional surrounding
// spaces. It accepts what strtod accepts: decimal, hexadecimal (0x10),
// exponents, inf and nan.
func Str2Number(s string) (float64, bool) {
	if i := strings.IndexByte(s, 0); i >= 0 {
		s = s[:i]
	}
	f, n := Strtod(s)
	if n == 0 {
		return 0, false
	}
	if n < len(s) && (s[n]|0x20) == 'x' {
		u, m := Strtoul(s, 16)
		f, n = float64(u), m
	}
	for n < len(s) && IsSpace(s[n]) {
		n++
	}
	return f, n == len(s)
}

// FormatNumber formats f as Lua 5.1 does (LUA_NUMBER_FMT "%.14g"), which is
// what tostring, concatenation and string functions produce.
func FormatNumber(f float64) string {
	return string(AppendNumber(nil, f, 14))
}

// AppendNumber appends f in C's "%.<prec>g", with glibc's names for the
// special values.
func AppendNumber(b []byte, f float64, prec int) []byte {
	switch {
	case math.IsNaN(f):
		if math.Signbit(f) {
			return append(b, "-nan"...)
		}
		return append(b, "nan"...)
	case math.IsInf(f, 1):
		return append(b, "inf"...)
	case math.IsInf(f, -1):
		return append(b, "-inf"...)
	}
	if f == math.Trunc(f) && math.Abs(f) < 1e14 {
		// Fast path for the common integral case; same output as %g.
		if f == 0 && math.Signbit(f) {
			return append(b, "-0"...)
		}
		return strconv.AppendInt(b, int64(f), 10)
	}
	return strconv.AppendFloat(b, f, 'g', prec, 64)
}

// ToInteger converts f to an integer as C's (long long) cast does on x86-64:
// truncation toward zero, and the "integer indefinite" value MinInt64 for NaN
// and anything out of range. Redis converts returned Lua numbers this way.
func ToInteger(f float64) int64 {
	if f != f || f >= 1<<63 || f < -(1<<63) {
		return math.MinInt64
	}
	return int64(f)
}

// ToInt converts f to a C int as luaL_checkint does: the long long cast, then
// truncation to 32 bits.
func ToInt(f float64) int {
	return int(int32(ToInteger(f)))
}

// ToUnsigned converts a number as C's (unsigned long) cast does on x86-64.
func ToUnsigned(f float64) uint64 {
	if f < 1<<63 {
		return uint64(ToInteger(f))
	}
	return uint64(ToInteger(f-(1<<63))) ^ (1 << 63)
}

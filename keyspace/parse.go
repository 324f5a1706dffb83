package keyspace

import (
	"math"
	"math/big"
	"strconv"
	"strings"
)

// ParseInt parses b as Redis's string2ll does: an optional minus sign and digits,
// no leading zeros, no plus sign, no spaces, within int64.
func ParseInt(b []byte) (int64, bool) {
	if len(b) == 0 || len(b) > 20 {
		return 0, false
	}
	if len(b) == 1 && b[0] == '0' {
		return 0, true
	}
	neg := b[0] == '-'
	if neg {
		b = b[1:]
	}
	if len(b) == 0 || b[0] < '1' || b[0] > '9' {
		return 0, false
	}
	var v uint64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		d := uint64(c - '0')
		if v > (math.MaxUint64-d)/10 {
			return 0, false
		}
		v = v*10 + d
	}
	if neg {
		if v > 1<<63 {
			return 0, false
		}
		return -int64(v), true
	}
	if v > math.MaxInt64 {
		return 0, false
	}
	return int64(v), true
}

// parseIntString is ParseInt for a stored string value.
func parseIntString(s string) (int64, bool) {
	if len(s) > 20 {
		return 0, false
	}
	var buf [20]byte
	return ParseInt(buf[:copy(buf[:], s)])
}

// Kinds of C floating-point literal, as strtod reads them.
const (
	floatInvalid = iota
	floatDecimal
	floatHex
	floatInf
	floatNaN
)

// scanCFloat reports which kind of C floating-point literal b is, when the whole
// of b is one (strtod's grammar: sign, then decimal digits with an optional point
// and e-exponent, 0x hex digits with an optional point and p-exponent, "inf",
// "infinity" or "nan"). Leading space is refused, as Redis refuses it.
// zero reports that the mantissa has no non-zero digit, and exp is the
// literal's exponent, clamped to ±1<<20.
func scanCFloat(b []byte) (kind int, zero bool, exp int) {
	i := 0
	if i < len(b) && (b[i] == '+' || b[i] == '-') {
		i++
	}
	switch rest := b[i:]; {
	case eqFold(rest, "inf") || eqFold(rest, "infinity"):
		return floatInf, false, 0
	case eqFold(rest, "nan"):
		return floatNaN, false, 0
	}
	kind, isDigit, expChar := floatDecimal, isDecimal, byte('e')
	if len(b)-i > 2 && b[i] == '0' && b[i+1]|0x20 == 'x' {
		kind, isDigit, expChar = floatHex, isHex, 'p'
		i += 2
	}
	digits, zero := 0, true
	for ; i < len(b) && isDigit(b[i]); i++ {
		digits++
		zero = zero && b[i] == '0'
	}
	if i < len(b) && b[i] == '.' {
		for i++; i < len(b) && isDigit(b[i]); i++ {
			digits++
			zero = zero && b[i] == '0'
		}
	}
	if digits == 0 {
		return floatInvalid, false, 0
	}
	if i < len(b) && b[i]|0x20 == expChar {
		i++
		neg := false
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			neg = b[i] == '-'
			i++
		}
		if i == len(b) {
			return floatInvalid, false, 0
		}
		for ; i < len(b) && isDecimal(b[i]); i++ {
			if exp < 1<<20 {
				exp = exp*10 + int(b[i]-'0')
			}
		}
		if neg {
			exp = -exp
		}
	}
	if i != len(b) {
		return floatInvalid, false, 0
	}
	return kind, zero, exp
}

func isDecimal(c byte) bool { return '0' <= c && c <= '9' }
func isHex(c byte) bool     { return isDecimal(c) || ('a' <= c|0x20 && c|0x20 <= 'f') }

// parseFloat parses b as Redis parses a double argument (scores, increments:
// strtod and its checks): decimal, hex or "inf" literals with an optional sign,
// nothing before or after; NaN, overflow and underflow to zero are refused.
func parseFloat(b []byte) (float64, bool) {
	kind, zero, _ := scanCFloat(b)
	switch kind {
	case floatInvalid, floatNaN:
		return 0, false
	case floatInf:
		if b[0] == '-' {
			return math.Inf(-1), true
		}
		return math.Inf(1), true
	}
	s := string(b)
	if kind == floatHex && !strings.ContainsAny(s, "pP") {
		s += "p0" // Go's syntax needs the binary exponent that C's makes optional.
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || (f == 0 && !zero) {
		return 0, false
	}
	return f, true
}

// parseRangeFloat parses one bound of a score range as Redis's zslParseRange
// does with a bare strtod: leading white space is skipped, out-of-range values
// saturate, the empty string is 0, and text stops at a NUL byte.
func parseRangeFloat(b []byte) (float64, bool) {
	if i := strings.IndexByte(string(b), 0); i >= 0 {
		b = b[:i]
	}
	if len(b) == 0 {
		return 0, true
	}
	s := strings.TrimLeft(string(b), " \t\n\v\f\r")
	kind, zero, _ := scanCFloat([]byte(s))
	switch kind {
	case floatInvalid, floatNaN:
		return 0, false
	case floatInf:
		if s[0] == '-' {
			return math.Inf(-1), true
		}
		return math.Inf(1), true
	}
	if kind == floatHex && !strings.ContainsAny(s, "pP") {
		s += "p0"
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil && !zero {
		if ne, ok := err.(*strconv.NumError); !ok || ne.Err != strconv.ErrRange {
			return 0, false
		}
	}
	return f, true
}

// Long doubles: INCRBYFLOAT and HINCRBYFLOAT compute in C's long double, which
// is x87's 80-bit extended format on the platforms Redis runs on: a 64-bit
// mantissa and a 15-bit exponent. big.Float at 64 bits of precision with
// round-to-nearest-even gives the same results within that exponent range.
const (
	longDoublePrec   = 64
	longDoubleMaxExp = 16384  // 2^16384 overflows
	longDoubleMinExp = -16444 // below the smallest denormal, strtold returns 0
	// maxLongDoubleChars is Redis's MAX_LONG_DOUBLE_CHARS: longer input is refused.
	maxLongDoubleChars = 5 * 1024
)

// parseLongDouble parses b as Redis's string2ld does (strtold and its checks).
func parseLongDouble[K string | []byte](b K) (*big.Float, bool) {
	if len(b) == 0 || len(b) >= maxLongDoubleChars {
		return nil, false
	}
	kind, zero, exp := scanCFloat([]byte(b))
	x := new(big.Float).SetPrec(longDoublePrec)
	switch kind {
	case floatInvalid, floatNaN:
		return nil, false
	case floatInf:
		return x.SetInf(b[0] == '-'), true
	}
	if zero {
		return x.SetInt64(0), true // the sign of zero does not survive the formatting anyway
	}
	// A literal of at most 5K characters whose exponent is this large is out of
	// range whatever its digits; refusing it here spares big.Float the power.
	if exp > 2*maxLongDoubleChars*4 || exp < -2*maxLongDoubleChars*4 {
		return nil, false
	}
	if _, _, err := x.Parse(string(b), 0); err != nil {
		return nil, false
	}
	if e := x.MantExp(nil); e > longDoubleMaxExp || e < longDoubleMinExp {
		return nil, false
	}
	return x, true
}

// addLongDouble returns a+b in long double arithmetic, and false when the sum
// is not finite (Redis: "increment would produce NaN or Infinity").
func addLongDouble(a, b *big.Float) (*big.Float, bool) {
	if a.IsInf() || b.IsInf() {
		return nil, false // inf+x is inf, and inf-inf is NaN
	}
	sum := new(big.Float).SetPrec(longDoublePrec).SetMode(big.ToNearestEven).Add(a, b)
	if sum.MantExp(nil) > longDoubleMaxExp {
		return nil, false
	}
	return sum, true
}

// formatLongDouble formats x as Redis's ld2string in human mode: "%.17Lf" with
// the trailing zeros (and a trailing point) removed, and "-0" written "0".
func formatLongDouble(x *big.Float) string {
	s := x.Text('f', 17)
	if strings.IndexByte(s, '.') >= 0 {
		s = strings.TrimRight(s, "0")
		s = strings.TrimSuffix(s, ".")
	}
	if s == "-0" {
		s = "0"
	}
	return s
}

// formatInt formats n in decimal.
func formatInt(n int64) string { return strconv.FormatInt(n, 10) }

// eqFold reports whether b equals lower, an ASCII lower-case word, in any case.
// It is how options are matched without allocating.
func eqFold(b []byte, lower string) bool {
	if len(b) != len(lower) {
		return false
	}
	for i := 0; i < len(b); i++ {
		c := b[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != lower[i] {
			return false
		}
	}
	return true
}

package keyspace

import (
	"math"
	"strconv"
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

// ParseFloat parses b as Redis's string2ld/strtold does for scores and
// increments: decimal or exponent notation, "inf", "+inf", "-inf", no spaces, not NaN.
func ParseFloat(b []byte) (float64, bool) {
	if len(b) == 0 || b[0] == ' ' || b[len(b)-1] == ' ' {
		return 0, false
	}
	f, err := strconv.ParseFloat(string(b), 64)
	if err != nil {
		if ne, ok := err.(*strconv.NumError); !ok || ne.Err != strconv.ErrRange {
			return 0, false
		}
	}
	if math.IsNaN(f) {
		return 0, false
	}
	return f, true
}

// FormatInt formats n in decimal.
func FormatInt(n int64) string { return strconv.FormatInt(n, 10) }

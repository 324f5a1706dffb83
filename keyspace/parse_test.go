package keyspace

import (
	"math"
	"testing"
)

func TestParseInt(t *testing.T) {
	good := map[string]int64{"0": 0, "-1": -1, "9223372036854775807": math.MaxInt64, "-9223372036854775808": math.MinInt64}
	for s, want := range good {
		if v, ok := ParseInt([]byte(s)); !ok || v != want {
			t.Errorf("ParseInt(%q) = %d, %v", s, v, ok)
		}
	}
	for _, s := range []string{"", "01", "+1", " 1", "1 ", "-0", "-", "9223372036854775808", "1.0", "0x10"} {
		if _, ok := ParseInt([]byte(s)); ok {
			t.Errorf("ParseInt(%q) accepted", s)
		}
	}
}

func TestParseFloat(t *testing.T) {
	good := map[string]float64{"1": 1, "-1.5": -1.5, ".5": .5, "5.": 5, "1e3": 1000, "0x10": 16, "0x1p-1": .5,
		"inf": math.Inf(1), "-Infinity": math.Inf(-1), "+2": 2, "4.9e-324": 5e-324}
	for s, want := range good {
		if v, ok := parseFloat([]byte(s)); !ok || v != want {
			t.Errorf("parseFloat(%q) = %v, %v; want %v", s, v, ok, want)
		}
	}
	for _, s := range []string{"", " 1", "1 ", "nan", "1e", "1_0", "1e400", "1e-400", "0x", "abc", ".", "1e+"} {
		if _, ok := parseFloat([]byte(s)); ok {
			t.Errorf("parseFloat(%q) accepted", s)
		}
	}
}

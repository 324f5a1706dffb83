package clib

import (
	"math"
	"testing"
)

func TestStr2Number(t *testing.T) {
	for _, c := range []struct {
		in   string
		want float64
		ok   bool
	}{
		{"10", 10, true}, {"010", 10, true}, {" 10 ", 10, true}, {"\t5\n", 5, true},
		{"1e3", 1000, true}, {"1.5e+2", 150, true}, {".5", 0.5, true}, {"5.", 5, true}, {"-.5", -0.5, true},
		{"0x10", 16, true}, {"0X1a", 26, true}, {"0x1p4", 16, true}, {"0x.8", 0.5, true},
		{"inf", math.Inf(1), true}, {"-inf", math.Inf(-1), true}, {"INF", math.Inf(1), true}, {"infinity", math.Inf(1), true},
		{"1e400", math.Inf(1), true}, {"5\x00junk", 5, true}, {"+5", 5, true},
		{"", 0, false}, {" ", 0, false}, {"0x", 0, false}, {"1e", 0, false}, {"1e+", 0, false}, {".", 0, false},
		{"0b101", 0, false}, {"1_000", 0, false}, {"+-5", 0, false}, {"- 5", 0, false}, {"1d", 0, false}, {"1f", 0, false},
	} {
		got, ok := Str2Number(c.in)
		if ok != c.ok || (ok && got != c.want) {
			t.Errorf("Str2Number(%q) = %v, %v; want %v, %v", c.in, got, ok, c.want, c.ok)
		}
	}
	if f, ok := Str2Number("nan"); !ok || !math.IsNaN(f) {
		t.Errorf("Str2Number(nan) = %v, %v", f, ok)
	}
}

func TestFormatNumber(t *testing.T) {
	for _, c := range []struct {
		in   float64
		want string
	}{
		{0, "0"}, {math.Copysign(0, -1), "-0"}, {1, "1"}, {-42, "-42"}, {1.5, "1.5"},
		{1.0 / 3, "0.33333333333333"}, {0.1 + 0.2, "0.3"}, {1e14, "1e+14"}, {99999999999999, "99999999999999"},
		{1e15, "1e+15"}, {123456789012345, "1.2345678901234e+14"}, {2.5e-7, "2.5e-07"}, {1e100, "1e+100"},
		{math.Inf(1), "inf"}, {math.Inf(-1), "-inf"}, {math.NaN(), "nan"}, {math.Float64frombits(0xFFF8000000000000), "-nan"},
	} {
		if got := FormatNumber(c.in); got != c.want {
			t.Errorf("FormatNumber(%v) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestToInteger(t *testing.T) {
	for _, c := range []struct {
		in   float64
		want int64
	}{
		{3.99, 3}, {-3.99, -3}, {0.5, 0}, {1 << 62, 1 << 62}, {9.2e18, 9200000000000000000},
		{1e19, math.MinInt64}, {-1e19, math.MinInt64}, {math.Inf(1), math.MinInt64}, {math.NaN(), math.MinInt64},
	} {
		if got := ToInteger(c.in); got != c.want {
			t.Errorf("ToInteger(%v) = %d, want %d", c.in, got, c.want)
		}
	}
}

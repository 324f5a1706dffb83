package histogram

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// Every value falls in a bucket whose bounds hold it, and the buckets tile
// the values with no gap: the bucket after i starts at upper(i).
func TestBucketsHoldTheirValues(t *testing.T) {
	for i := 1; i < nBuckets; i++ {
		lo := upper(i - 1)
		if index(lo) != i || index(upper(i)-1) != i {
			t.Fatalf("bucket %d: [%d, %d) maps to %d and %d", i, lo, upper(i), index(lo), index(upper(i)-1))
		}
		if i >= 2*sub && float64(upper(i)-lo)/float64(lo) > 1.0/sub {
			t.Fatalf("bucket %d: [%d, %d) is wider than 1/%d of its values", i, lo, upper(i), sub)
		}
	}
}

// Percentiles of 1..1000 against the exact ranks, within a bucket's width.
func TestPercentilesOfAKnownSample(t *testing.T) {
	var h Histogram
	for v := int64(1); v <= 1000; v++ {
		h.Observe(v)
	}
	s := h.Snapshot()
	if s.Count != 1000 || s.Sum != 500500 {
		t.Fatalf("count %d sum %d, want 1000 and 500500", s.Count, s.Sum)
	}
	for _, c := range []struct {
		q    float64
		want int64 // the exact value of that rank
	}{{0.5, 500}, {0.99, 990}, {0.999, 999}, {1, 1000}, {0, 1}} {
		got := s.Percentile(c.q)
		if got < c.want || float64(got-c.want) > float64(c.want)/sub {
			t.Errorf("p%v = %d, want %d within 1/%d above", c.q*100, got, c.want, sub)
		}
	}
	// Small values are exact.
	var small Histogram
	small.Observe(3)
	if p := small.Snapshot().Percentile(0.5); p != 3 {
		t.Errorf("p50 of {3} = %d", p)
	}
	if p := new(Histogram).Snapshot().Percentile(0.5); p != 0 {
		t.Errorf("p50 of nothing = %d", p)
	}
}

// Cumulative counts at powers of two equal the counts of a sorted sample.
func TestCumulativeMatchesACount(t *testing.T) {
	var h Histogram
	var vals []int64
	for range 5000 {
		v := rand.Int64N(1 << 30)
		vals = append(vals, v)
		h.Observe(v)
	}
	slices.Sort(vals)
	bounds := PowersOfTwo(4, 31)
	got := h.Snapshot().Cumulative(bounds)
	for j, b := range bounds {
		want, _ := slices.BinarySearch(vals, b) // values below b
		if got[j] != uint64(want) {
			t.Fatalf("below %d: %d, want %d", b, got[j], want)
		}
	}
	h.Reset()
	if s := h.Snapshot(); s.Count != 0 || s.Sum != 0 {
		t.Fatalf("after Reset: count %d sum %d", s.Count, s.Sum)
	}
}

// Values past the last bucket and negative ones are clamped, not lost.
func TestClamps(t *testing.T) {
	var h Histogram
	h.Observe(-5)
	h.Observe(1 << 62)
	if s := h.Snapshot(); s.Count != 2 || s.Percentile(1) < 1<<maxBits {
		t.Fatalf("count %d, max %d", s.Count, s.Percentile(1))
	}
}

func BenchmarkObserve(b *testing.B) {
	var h Histogram
	for i := range b.N {
		h.Observe(int64(i & 0xfffff))
	}
}

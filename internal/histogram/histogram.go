// Package histogram counts observations in log-linear buckets with atomic
// adds, so that a hot path records a value in a few nanoseconds, and reads
// from the same counts both percentiles (INFO latencystats) and cumulative
// buckets (a Prometheus histogram).
//
// Values below 16 have a bucket each; above, every power of two is split
// into 16 buckets, so a percentile is within 1/16 (6.25%) of the true value,
// close to the two significant digits of the HdrHistogram that Redis keeps.
package histogram

import (
	"math/bits"
	"sync/atomic"
)

const (
	subBits = 4
	sub     = 1 << subBits
	// maxBits bounds the values told apart: larger ones count in the last
	// bucket (2^44 ns is about five hours).
	maxBits  = 44
	nBuckets = (maxBits-subBits+1)*sub + sub
)

// Histogram counts non-negative values. Its zero value is empty and ready;
// it is safe for concurrent use.
type Histogram struct {
	sum     atomic.Int64
	buckets [nBuckets]atomic.Uint64
}

// index returns the bucket of v.
func index(v int64) int {
	if v < sub {
		return int(max(v, 0))
	}
	e := bits.Len64(uint64(v)) - 1 // v's highest bit, >= subBits
	if e > maxBits {
		return nBuckets - 1
	}
	m := int(v >> (e - subBits)) // in [sub, 2*sub)
	return (e-subBits+1)*sub + m - sub
}

// upper returns the smallest value above bucket i.
func upper(i int) int64 {
	if i < sub {
		return int64(i) + 1
	}
	e := i/sub - 1 + subBits
	m := int64(sub + i%sub)
	return (m + 1) << (e - subBits)
}

// Observe counts v.
func (h *Histogram) Observe(v int64) {
	h.buckets[index(v)].Add(1)
	h.sum.Add(v)
}

// Snapshot is a histogram's counts at one moment.
type Snapshot struct {
	Count   uint64
	Sum     int64
	buckets [nBuckets]uint64
}

// Snapshot copies the counts. Observations made meanwhile may be in the
// buckets and not yet in Sum, or the other way round; Count is always the sum
// of the buckets.
func (h *Histogram) Snapshot() *Snapshot {
	s := &Snapshot{Sum: h.sum.Load()}
	for i := range h.buckets {
		n := h.buckets[i].Load()
		s.buckets[i] = n
		s.Count += n
	}
	return s
}

// Reset empties the histogram.
func (h *Histogram) Reset() {
	for i := range h.buckets {
		h.buckets[i].Store(0)
	}
	h.sum.Store(0)
}

// Percentile returns the value below which a fraction q (0 to 1) of the
// observations lie: the largest value of the bucket that holds the
// observation of that rank, as HdrHistogram reports it. It is 0 when the
// histogram is empty.
func (s *Snapshot) Percentile(q float64) int64 {
	if s.Count == 0 {
		return 0
	}
	rank := uint64(q*float64(s.Count) + 0.5)
	rank = min(max(rank, 1), s.Count)
	var seen uint64
	for i, n := range s.buckets {
		if seen += n; seen >= rank {
			return upper(i) - 1
		}
	}
	return upper(nBuckets-1) - 1
}

// Cumulative returns, for each bound (ascending), how many observations
// were below it: Prometheus's cumulative buckets. A bound that is not a
// bucket edge (a power of two is always one) counts only the buckets wholly
// below it.
func (s *Snapshot) Cumulative(bounds []int64) []uint64 {
	out := make([]uint64, len(bounds))
	var seen uint64
	i := 0
	for j, b := range bounds {
		for i < nBuckets && upper(i) <= b {
			seen += s.buckets[i]
			i++
		}
		out[j] = seen
	}
	return out
}

// PowersOfTwo returns the powers of two from 2^lo to 2^hi, for bounds.
func PowersOfTwo(lo, hi int) []int64 {
	var out []int64
	for e := lo; e <= hi; e++ {
		out = append(out, int64(1)<<e)
	}
	return out
}

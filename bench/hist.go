package main

import (
	"math"
	"math/bits"
	"time"
)

// histogram records durations in log-linear buckets, as HdrHistogram does:
// values below 2^histSubBits nanoseconds are exact, and each power of two above
// is split into 2^(histSubBits-1) equal buckets, so every recorded value is
// known to within 1/128 (0.8%) whatever its size, in a fixed 59 KB.
type histogram struct {
	counts   [histBuckets]uint64
	n        uint64
	sum      uint64
	min, max uint64
}

const (
	histSubBits = 8
	histSub     = 1 << histSubBits // exact values below this
	histHalf    = histSub / 2      // buckets per power of two above it
	histBuckets = histSub + (64-histSubBits)*histHalf
)

// histIndex is the bucket holding v.
func histIndex(v uint64) int {
	if v < histSub {
		return int(v)
	}
	shift := bits.Len64(v) - histSubBits // >= 1
	mantissa := v >> uint(shift)         // in [histHalf, histSub)
	return histSub + (shift-1)*histHalf + int(mantissa-histHalf)
}

// histBounds are the smallest and largest values bucket i holds.
func histBounds(i int) (lo, hi uint64) {
	if i < histSub {
		return uint64(i), uint64(i)
	}
	shift := (i-histSub)/histHalf + 1
	mantissa := uint64((i-histSub)%histHalf + histHalf)
	lo = mantissa << uint(shift)
	return lo, lo + (1 << uint(shift)) - 1
}

func (h *histogram) record(d time.Duration) {
	v := uint64(max(d, 0))
	h.counts[histIndex(v)]++
	if h.n == 0 || v < h.min {
		h.min = v
	}
	if v > h.max {
		h.max = v
	}
	h.n++
	h.sum += v
}

func (h *histogram) merge(o *histogram) {
	if o.n == 0 {
		return
	}
	for i, c := range o.counts {
		h.counts[i] += c
	}
	if h.n == 0 || o.min < h.min {
		h.min = o.min
	}
	h.max = max(h.max, o.max)
	h.n += o.n
	h.sum += o.sum
}

// quantile returns the value at or below which a fraction q of the recorded
// values lie. Like HdrHistogram it answers the largest value of the bucket
// that holds that rank, never more than the largest value recorded, so a
// percentile is never reported better than it was.
func (h *histogram) quantile(q float64) time.Duration {
	if h.n == 0 {
		return 0
	}
	rank := uint64(math.Ceil(q * float64(h.n)))
	rank = min(max(rank, 1), h.n)
	var seen uint64
	for i, c := range h.counts {
		seen += c
		if seen >= rank {
			_, hi := histBounds(i)
			return time.Duration(min(hi, h.max))
		}
	}
	return time.Duration(h.max)
}

func (h *histogram) mean() time.Duration {
	if h.n == 0 {
		return 0
	}
	return time.Duration(h.sum / h.n)
}

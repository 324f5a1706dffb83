package replication

import (
	"testing"
	"time"
)

// A hold after a commit of 1 ms goes in steps of 250 us while proposals keep
// arriving, never past 1 ms; after a commit of 10 ms, in steps of 500 us up
// to holdMax (2 ms).
func TestSteppedHold(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	const us = time.Microsecond

	h := newHold(t0, time.Millisecond, 3)
	if h.step != 250*us || h.end != at(time.Millisecond) {
		t.Fatalf("hold after 1 ms: step %v, end %v after start; want 250µs, 1ms", h.step, h.end.Sub(t0))
	}
	for _, s := range []struct {
		at      time.Duration
		pending int
		want    time.Duration
	}{
		{250 * us, 5, 250 * us}, // two arrived: another step
		{500 * us, 6, 250 * us}, // one more
		{900 * us, 7, 100 * us}, // cut to the end
		{1000 * us, 9, 0},       // the end
	} {
		if got := h.next(at(s.at), s.pending); got != s.want {
			t.Fatalf("at %v with %d pending: next step %v, want %v", s.at, s.pending, got, s.want)
		}
	}

	h = newHold(t0, 10*time.Millisecond, 0)
	if h.step != 500*us || h.end != at(2*time.Millisecond) {
		t.Fatalf("hold after 10 ms: step %v, end %v after start; want 500µs, 2ms", h.step, h.end.Sub(t0))
	}
	if got := h.next(at(500*us), 0); got != 0 {
		t.Fatalf("a step with no arrival: next step %v, want the hold over", got)
	}
}

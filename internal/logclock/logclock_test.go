package logclock

import (
	"testing"
	"time"
)

// fakeClocks is a monotonic clock and a wall clock that tests move apart, as
// an NTP step moves the wall clock and not the monotonic one.
type fakeClocks struct {
	mono time.Duration
	wall time.Time
}

func (f *fakeClocks) advance(d time.Duration) { f.mono += d; f.wall = f.wall.Add(d) }

func (f *fakeClocks) clock(floor int64) *Clock {
	return New(floor, func() time.Duration { return f.mono }, func() time.Time { return f.wall })
}

// A step of the wall clock by minutes moves the log clock by at most SlewRate
// of the real time that passes: a lease of 30 s ends at most 0.3 s early.
func TestClockIgnoresWallStep(t *testing.T) {
	f := &fakeClocks{wall: time.UnixMilli(1_000_000)}
	c := f.clock(0)
	start := c.Now()
	f.wall = f.wall.Add(5 * time.Minute)
	for range 300 { // 30 s in steps of 100 ms
		f.advance(100 * time.Millisecond)
		c.Now()
	}
	got := c.Now() - start
	if limit := int64(30_000 * (1 + SlewRate)); got < 30_000 || got > limit {
		t.Fatalf("30 s after a 5 min wall step the clock advanced %d ms, want 30000..%d", got, limit)
	}
}

// The clock is never behind the wall clock it started from, to the
// millisecond: started in the last tenth of a millisecond, it reads the next
// one as soon as the wall clock does, so that PTTL after SET PXAT
// <wall time + 10000> never answers more than 10000.
func TestClockKeepsTheWallClocksPhase(t *testing.T) {
	f := &fakeClocks{wall: time.UnixMilli(1_000_000).Add(900 * time.Microsecond)}
	c := f.clock(0)
	for range 2000 {
		f.advance(50 * time.Microsecond)
		if got, wall := c.Now(), f.wall.UnixMilli(); got != wall {
			t.Fatalf("at wall %v the clock reads %d, want %d", f.wall.Sub(time.UnixMilli(1_000_000)), got, wall)
		}
	}
}

// A follower's clock runs on the stamps it applies, however far ahead its own
// wall clock is: after applying stamp t it reads t plus the monotonic time
// since, so as a new leader it stamps nothing far in the future.
func TestClockFollowsAppliedStamps(t *testing.T) {
	f := &fakeClocks{wall: time.UnixMilli(1_000_000).Add(10 * time.Minute)}
	c := f.clock(0)
	c.Follow(1_000_000)
	f.advance(40 * time.Millisecond)
	if got := c.Now(); got != 1_000_040 {
		t.Fatalf("Now after Follow(1000000) and 40 ms = %d, want 1000040", got)
	}
	// The stamps a follower applies never go backwards (Apply runs an entry at
	// least at its predecessor's time), so neither does its clock.
	c.Follow(1_000_050)
	f.advance(5 * time.Millisecond)
	if got := c.Now(); got != 1_000_055 {
		t.Fatalf("Now 5 ms after Follow(1000050) = %d, want 1000055", got)
	}
}

// Observe raises the clock to an applied stamp that is ahead of it, and never
// lowers it.
func TestClockObserve(t *testing.T) {
	f := &fakeClocks{wall: time.UnixMilli(5_000)}
	c := f.clock(0)
	c.Observe(9_000)
	if got := c.Now(); got != 9_000 {
		t.Fatalf("Now after Observe(9000) = %d, want 9000", got)
	}
	c.Observe(1_000)
	f.advance(10 * time.Millisecond)
	if got := c.Now(); got != 9_010 {
		t.Fatalf("Now 10 ms after Observe(1000) = %d, want 9010", got)
	}
}

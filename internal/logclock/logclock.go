// Package logclock is the log clock: the millisecond time that a cluster's
// leader stamps its log entries with, and that every member runs them at.
//
// Its contract, which the lock package's leases rely on: it never goes
// backwards, it does not jump on a failover or a step of the wall clock, and
// it runs at most SlewRate faster or slower than real time.
package logclock

import (
	"sync"
	"time"
)

// Clock is the log clock: the millisecond time that stamps entries.
//
// It runs on the process's monotonic clock from a base, so a step of the wall
// clock does not move it. It never goes backwards: a stamp is at least every
// time it has issued or observed. When it differs from the wall clock it
// approaches it gradually, running at most SlewRate faster or slower than real
// time, so a lock's lease never shrinks by more than that fraction.
type Clock struct {
	mu sync.Mutex
	// base is the time at anchor in nanoseconds, so that the clock keeps the
	// wall clock's sub-millisecond phase: counted from a whole millisecond it
	// would run up to a millisecond behind, and PTTL would answer more than a
	// client's PXAT asked.
	base   int64
	anchor time.Duration // monotonic reading that base corresponds to
	last   int64         // greatest time issued or observed, ms
	mono   func() time.Duration
	wall   func() time.Time
}

// SlewRate is the largest fraction by which the log clock runs faster or slower
// than real time while it converges on the wall clock.
const SlewRate = 0.01

// msNanos is a millisecond in nanoseconds.
const msNanos = int64(time.Millisecond)

// processStart is the origin of the real monotonic clock.
var processStart = time.Now()

// New returns a clock starting at the wall clock's time, never below floor,
// that measures elapsed time with mono and converges on wall; nil means the
// process's own clocks. Tests give their own to step the wall clock without
// moving the monotonic one, as an NTP step does.
func New(floor int64, mono func() time.Duration, wall func() time.Time) *Clock {
	if mono == nil {
		mono = func() time.Duration { return time.Since(processStart) }
	}
	if wall == nil {
		wall = time.Now
	}
	c := &Clock{base: wall().UnixNano(), anchor: mono(), mono: mono, wall: wall}
	if c.base < floor*msNanos {
		c.base = floor * msNanos
	}
	c.last = c.base / msNanos
	return c
}

// Now returns the current time of the clock and remembers it as issued.
func (c *Clock) Now() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	monoNow := c.mono()
	elapsed := monoNow - c.anchor // monotonic: immune to wall-clock steps
	now := c.base + int64(elapsed)
	// Converge on the wall clock by re-anchoring, shifting by at most SlewRate of
	// the time elapsed since the last anchor.
	if elapsed >= 100*time.Millisecond {
		drift := c.wall().UnixNano() - now
		limit := int64(float64(elapsed) * SlewRate)
		drift = max(-limit, min(limit, drift))
		now += drift
		c.base, c.anchor = now, monoNow
	}
	t := now / msNanos
	if t < c.last {
		t = c.last
	}
	c.last = t
	return t
}

// Observe tells the clock that an entry stamped t was applied: the clock will
// not issue a time below it. A new Raft leader continues from the last stamp it
// applied this way.
func (c *Clock) Observe(t int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if t > c.last {
		c.last = t
	}
	if monoNow := c.mono(); c.base+int64(monoNow-c.anchor) < t*msNanos {
		c.base, c.anchor = t*msNanos, monoNow
	}
}

// Follow sets the clock to stamp t, applied now. A Raft follower follows the
// stamps it applies, so that its clock runs on the leader's time line whatever
// its own wall clock says: if it becomes leader it continues from the last
// stamp it applied plus its own monotonic time since, and never jumps ahead.
// Follow may set the clock back: what a follower read from it before were not
// stamps, and its own wall clock may be ahead of the leader's time line.
func (c *Clock) Follow(t int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.last = t
	c.base, c.anchor = t*msNanos, c.mono()
}

package replication

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
	mu     sync.Mutex
	base   int64     // stamp at anchor
	anchor time.Time // monotonic reading that base corresponds to
	last   int64     // greatest time issued or observed
	wall   func() time.Time
}

// SlewRate is the largest fraction by which the log clock runs faster or slower
// than real time while it converges on the wall clock.
const SlewRate = 0.01

// NewClock returns a clock starting at the wall clock's time, never below floor.
func NewClock(floor int64) *Clock {
	return newClock(floor, time.Now)
}

func newClock(floor int64, wall func() time.Time) *Clock {
	now := wall()
	c := &Clock{base: now.UnixMilli(), anchor: now, wall: wall}
	if c.base < floor {
		c.base = floor
	}
	c.last = c.base
	return c
}

// Now returns the current time of the clock and remembers it as issued.
func (c *Clock) Now() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	wallNow := c.wall()
	elapsed := wallNow.Sub(c.anchor) // monotonic: immune to wall-clock steps
	t := c.base + elapsed.Milliseconds()
	// Converge on the wall clock by re-anchoring, shifting by at most SlewRate of
	// the time elapsed since the last anchor.
	if elapsed >= 100*time.Millisecond {
		drift := wallNow.UnixMilli() - t
		limit := int64(float64(elapsed.Milliseconds()) * SlewRate)
		drift = max(-limit, min(limit, drift))
		t += drift
		c.base, c.anchor = t, wallNow
	}
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
	if now := c.base + c.wall().Sub(c.anchor).Milliseconds(); now < t {
		c.base, c.anchor = t, c.wall()
	}
}

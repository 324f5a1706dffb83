package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// stepFunc is one client's unit of work (a lock cycle, a lock acquisition).
// It reports each operation it completes to the meter, and returns an error
// when the system answered something a lock client could not accept.
type stepFunc func(ctx context.Context, m *meter) error

// meter is one client's record of its operations. Only the client writes it;
// the counts are read after the client has stopped.
type meter struct {
	hist      histogram
	ops       int64
	recording *atomic.Bool
	live      *atomic.Int64 // every client's completed operations, for the progress line
}

// observe records an operation that started at start and has just completed.
func (m *meter) observe(start time.Time) { m.record(time.Since(start)) }

// record records an operation that took d and has just completed.
func (m *meter) record(d time.Duration) {
	if m.recording.Load() {
		m.hist.record(d)
		m.ops++
	}
	m.live.Add(1)
}

// measurement is what one closed-loop run observed between the end of its
// warm-up and its end.
type measurement struct {
	hist   histogram
	ops    int64
	window time.Duration
	cpu    time.Duration
	cpuErr error
	err    error
}

// preparer sets a run up (connections, subscriptions, sessions) and returns
// one step per client and a function that releases what it took.
type preparer func(ctx context.Context) ([]stepFunc, func(), error)

// measure runs every client's step in a loop, each client waiting for its
// own operation before starting the next (a closed loop, as lock users
// behave). Operations completing during the warm-up are not counted; the
// system's CPU time is read at the start and end of the measured window. The
// first error stops the run, which then reports only that error.
func (b *bench) measure(ctx context.Context, inst *instance, prepare preparer) measurement {
	steps, release, err := prepare(ctx)
	if err != nil {
		return measurement{err: err}
	}
	defer release()

	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	var recording atomic.Bool
	live := b.progress.counter()
	meters := make([]*meter, len(steps))
	var firstErr error
	var errOnce sync.Once
	var wg sync.WaitGroup
	for i, step := range steps {
		m := &meter{recording: &recording, live: live}
		meters[i] = m
		wg.Add(1)
		go func() {
			defer wg.Done()
			for runCtx.Err() == nil {
				if err := step(runCtx, m); err != nil {
					if runCtx.Err() == nil {
						errOnce.Do(func() { firstErr = err; cancel() })
					}
					return
				}
			}
		}()
	}

	var res measurement
	if sleepCtx(runCtx, b.cfg.warmup) {
		cpu0, err0 := inst.cpu()
		start := time.Now()
		recording.Store(true)
		sleepCtx(runCtx, b.cfg.duration)
		recording.Store(false)
		res.window = time.Since(start)
		cpu1, err1 := inst.cpu()
		res.cpu, res.cpuErr = cpu1-cpu0, errors.Join(err0, err1)
	}
	cancel()
	wg.Wait()
	for _, m := range meters {
		res.hist.merge(&m.hist)
		res.ops += m.ops
	}
	switch {
	case firstErr != nil:
		res.err = firstErr
	case ctx.Err() != nil:
		res.err = fmt.Errorf("interrupted: %w", ctx.Err())
	}
	return res
}

// sleepCtx waits d and reports whether ctx was still live at the end.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

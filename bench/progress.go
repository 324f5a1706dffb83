package main

import (
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// progress keeps one status line on the terminal: the step, the time so far
// and the live rate of the point being measured. When stderr is not a
// terminal it prints one line per step instead.
type progress struct {
	w   io.Writer
	tty bool

	mu        sync.Mutex
	total     int
	done      int
	label     string
	began     time.Time
	stepBegan time.Time
	live      *atomic.Int64
	shown     bool // a status line is on the screen

	quit    chan struct{}
	stopped sync.WaitGroup
}

func newProgress(w io.Writer) *progress {
	p := &progress{w: w, live: new(atomic.Int64), quit: make(chan struct{})}
	if f, ok := w.(*os.File); ok {
		if fi, err := f.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
			p.tty = true
		}
	}
	return p
}

// start begins a run of total steps and, on a terminal, redraws the line
// five times a second.
func (p *progress) start(total int) {
	p.total, p.began, p.stepBegan = total, time.Now(), time.Now()
	if !p.tty {
		return
	}
	p.stopped.Add(1)
	go func() {
		defer p.stopped.Done()
		t := time.NewTicker(200 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-p.quit:
				return
			case <-t.C:
				p.mu.Lock()
				p.draw()
				p.mu.Unlock()
			}
		}
	}()
}

// step starts the next measured point.
func (p *progress) step(label string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.done++
	p.label, p.stepBegan = label, time.Now()
	p.live.Store(0)
	if p.tty {
		p.draw()
	} else {
		fmt.Fprintf(p.w, "%s\n", p.prefix()+label)
	}
}

// status shows what happens between points (starting, stopping a system).
func (p *progress) status(label string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.label, p.stepBegan = label, time.Now()
	p.live.Store(0)
	if p.tty {
		p.draw()
	}
}

// skip counts the steps of a system that will not run.
func (p *progress) skip(n int) {
	p.mu.Lock()
	p.done += n
	p.mu.Unlock()
}

// counter is the live operation count of the current point.
func (p *progress) counter() *atomic.Int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.live
}

// printf prints a line above the status line.
func (p *progress) printf(format string, args ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.clear()
	fmt.Fprintf(p.w, format+"\n", args...)
	if p.tty {
		p.draw()
	}
}

func (p *progress) stop() {
	close(p.quit)
	p.stopped.Wait()
	p.mu.Lock()
	p.clear()
	p.mu.Unlock()
}

func (p *progress) prefix() string {
	el := time.Since(p.began).Round(time.Second)
	return fmt.Sprintf("[%d/%d %d:%02d] ", p.done, p.total, int(el.Minutes()), int(el.Seconds())%60)
}

func (p *progress) draw() {
	line := p.prefix() + p.label
	if n := p.live.Load(); n > 0 {
		if s := time.Since(p.stepBegan).Seconds(); s > 0 {
			line += fmt.Sprintf("  %s", fmtRate(float64(n)/s, "ops/s"))
		}
	}
	fmt.Fprintf(p.w, "\r\033[K%s", line)
	p.shown = true
}

func (p *progress) clear() {
	if p.shown {
		fmt.Fprint(p.w, "\r\033[K")
		p.shown = false
	}
}

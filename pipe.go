package lockserver

import (
	"io"
	"net"
	"os"
	"sync"
	"time"

	"github.com/lockserver/lockserver/server"
)

// memPipe returns the two ends of an in-memory connection. Unlike net.Pipe, a
// write never waits for the reader: each direction is an unbounded buffer, so
// a client can send a pipeline of any length while the server, which writes
// replies before it reads more, is still answering the first commands. The
// Dialer's client end hands what it writes to the server to run at once
// instead (served); the buffer towards the server then carries only its
// closing, which a command that blocks watches for.
func memPipe() (client, server net.Conn) {
	a, b := newPipeBuf(), newPipeBuf()
	return &memConn{r: a, w: b, local: memAddr("client"), remote: memAddr("lockserver")},
		&memConn{r: b, w: a, local: memAddr("lockserver"), remote: memAddr("client")}
}

// pipeBuf is one direction of a memPipe.
type pipeBuf struct {
	mu     sync.Mutex
	data   []byte
	closed bool
	wake   chan struct{} // signalled when data arrives or the pipe closes
}

func newPipeBuf() *pipeBuf { return &pipeBuf{wake: make(chan struct{}, 1)} }

func (p *pipeBuf) signal() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

func (p *pipeBuf) close() {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.signal()
}

type memConn struct {
	// served, on the client's end, runs what the client writes in the
	// client's goroutine, before Write returns; the replies arrive in r. It
	// is nil on the server's end, and when the server refused the connection.
	served        *server.Inline
	r, w          *pipeBuf
	local, remote net.Addr
	readDeadline  deadline

	dmu           sync.Mutex
	writeDeadline time.Time
}

// deadline is a read deadline as a channel that closes when it passes, so
// that a Read waits on it beside the data without a timer of its own. go-redis
// moves the deadline a few seconds ahead before every command: one timer,
// armed for an earlier deadline, re-arms itself when it fires early, so most
// moves cost a comparison rather than a timer per wait
// (BenchmarkDialerRedissonCycle measures the difference).
type deadline struct {
	mu     sync.Mutex
	at     time.Time // the deadline; zero for none
	armed  time.Time // when the timer fires; zero when it is not armed
	timer  *time.Timer
	passed chan struct{} // closed once at has passed
}

// set moves the deadline to t; the zero time means none.
func (d *deadline) set(t time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.at = t
	if d.passed == nil || isClosed(d.passed) {
		d.passed = make(chan struct{})
	}
	if t.IsZero() {
		return // an armed timer finds nothing to do when it fires
	}
	wait := time.Until(t)
	switch {
	case wait <= 0:
		close(d.passed)
	case d.timer == nil:
		d.armed = t
		d.timer = time.AfterFunc(wait, d.fire)
	case d.armed.IsZero() || d.armed.After(t):
		d.armed = t
		d.timer.Reset(wait)
	}
}

// fire closes passed if the deadline has passed, or arms the timer again for
// a deadline that moved later meanwhile.
func (d *deadline) fire() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.armed = time.Time{}
	if d.at.IsZero() || isClosed(d.passed) {
		return
	}
	if wait := time.Until(d.at); wait > 0 {
		d.armed = d.at
		d.timer.Reset(wait)
		return
	}
	close(d.passed)
}

// wait returns the channel that closes when the deadline passes.
func (d *deadline) wait() <-chan struct{} {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.passed == nil {
		d.passed = make(chan struct{})
	}
	return d.passed
}

func isClosed(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

func (c *memConn) Read(b []byte) (int, error) {
	for {
		c.r.mu.Lock()
		if len(c.r.data) > 0 {
			n := copy(b, c.r.data)
			c.r.data = c.r.data[n:]
			if len(c.r.data) == 0 {
				c.r.data = nil
			}
			c.r.mu.Unlock()
			return n, nil
		}
		closed := c.r.closed
		c.r.mu.Unlock()
		if closed {
			return 0, io.EOF
		}
		select {
		case <-c.r.wake:
		case <-c.readDeadline.wait():
			return 0, os.ErrDeadlineExceeded
		}
	}
}

func (c *memConn) Write(b []byte) (int, error) {
	c.dmu.Lock()
	deadline := c.writeDeadline
	c.dmu.Unlock()
	if !deadline.IsZero() && !time.Now().Before(deadline) {
		return 0, os.ErrDeadlineExceeded
	}
	if c.served != nil {
		if err := c.served.Feed(b, deadline); err != nil {
			return 0, io.ErrClosedPipe
		}
		return len(b), nil
	}
	c.w.mu.Lock()
	if c.w.closed {
		c.w.mu.Unlock()
		return 0, io.ErrClosedPipe
	}
	c.w.data = append(c.w.data, b...)
	c.w.mu.Unlock()
	c.w.signal()
	return len(b), nil
}

// Close closes both directions: the peer reads what was sent, then EOF.
func (c *memConn) Close() error {
	c.r.close()
	c.w.close()
	if c.served != nil {
		c.served.Hangup()
	}
	return nil
}

func (c *memConn) LocalAddr() net.Addr  { return c.local }
func (c *memConn) RemoteAddr() net.Addr { return c.remote }

func (c *memConn) SetDeadline(t time.Time) error {
	c.SetReadDeadline(t)
	return c.SetWriteDeadline(t)
}

func (c *memConn) SetReadDeadline(t time.Time) error {
	c.readDeadline.set(t)
	return nil
}

func (c *memConn) SetWriteDeadline(t time.Time) error {
	c.dmu.Lock()
	c.writeDeadline = t
	c.dmu.Unlock()
	return nil
}

type memAddr string

func (a memAddr) Network() string { return "memory" }
func (a memAddr) String() string  { return string(a) }

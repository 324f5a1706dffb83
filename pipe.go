package lockserver

import (
	"io"
	"net"
	"os"
	"sync"
	"time"
)

// memPipe returns the two ends of an in-memory connection. Unlike net.Pipe, a
// write never waits for the reader: each direction is an unbounded buffer, so
// a client can send a pipeline of any length while the server, which writes
// replies before it reads more, is still answering the first commands.
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
	r, w          *pipeBuf
	local, remote net.Addr

	dmu           sync.Mutex
	readDeadline  time.Time
	writeDeadline time.Time
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
		c.dmu.Lock()
		deadline := c.readDeadline
		c.dmu.Unlock()
		if deadline.IsZero() {
			<-c.r.wake
			continue
		}
		wait := time.Until(deadline)
		if wait <= 0 {
			return 0, os.ErrDeadlineExceeded
		}
		t := time.NewTimer(min(wait, 50*time.Millisecond))
		select {
		case <-c.r.wake:
		case <-t.C: // re-check: the deadline may have moved
		}
		t.Stop()
	}
}

func (c *memConn) Write(b []byte) (int, error) {
	c.dmu.Lock()
	deadline := c.writeDeadline
	c.dmu.Unlock()
	if !deadline.IsZero() && !time.Now().Before(deadline) {
		return 0, os.ErrDeadlineExceeded
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
	return nil
}

func (c *memConn) LocalAddr() net.Addr  { return c.local }
func (c *memConn) RemoteAddr() net.Addr { return c.remote }

func (c *memConn) SetDeadline(t time.Time) error {
	c.SetReadDeadline(t)
	return c.SetWriteDeadline(t)
}

func (c *memConn) SetReadDeadline(t time.Time) error {
	c.dmu.Lock()
	c.readDeadline = t
	c.dmu.Unlock()
	c.r.signal()
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

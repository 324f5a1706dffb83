package server

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lockserver/lockserver/internal/acl"
	"github.com/lockserver/lockserver/keyspace"
	"github.com/lockserver/lockserver/server/internal/resp"
)

// conn is one client connection. One goroutine serves it: it reads a batch of
// commands (a pipeline), runs them, and writes their replies in order with one
// write. Fields without a comment belong to that goroutine.
type conn struct {
	srv     *Server
	nc      net.Conn
	rd      *resp.Reader
	id      int64
	addr    string
	laddr   string
	created time.Time

	proto atomic.Int32 // 2 or 3; publishers read it to render pushes
	db    int
	// user is the ACL user the connection runs as: the default user's slot
	// until AUTH or HELLO names another. authed is Redis's authenticated:
	// set by AUTH, or at connect (and RESET) when the default user needs no
	// password. A client not authenticated must authenticate while the
	// default user needs a password (Server.authRequired).
	user   atomic.Pointer[acl.Slot]
	authed bool
	// admitted is set once protected mode has let the connection's first
	// command through.
	admitted bool
	// member marks a member connection: it came through the member link
	// (Server.ServeMembers), whose handshake proved that its peer is a
	// member of this cluster, by mutual TLS or the cluster secret. Only a
	// member connection may run the commands flagged keyspace.Member (the
	// calls members make to each other), which no ACL user may; it needs
	// no AUTH, no ACL user's rules restrict it (what it forwards carries
	// the user each request came from, checked where it came from),
	// protected mode lets it through, and it counts against no
	// maxclients. It is set before the connection serves and never
	// changes.
	member bool
	quit   bool
	// noReply and skipOne implement CLIENT REPLY OFF and SKIP.
	noReply, skipOne bool
	multi            *transaction // nil outside MULTI
	watched          []watchedKey
	monitoring       bool // in MONITOR mode: it is sent every command this node runs
	// batchStart is when the batch being run was read; blockedTotal adds up
	// the waits of blocking commands (WAIT); finished are the calls of the
	// batch to count when it ends (see counted).
	batchStart   time.Time
	blockedTotal time.Duration
	finished     []call
	// cur is the command exec runs; it is counted when exec returns, unless
	// its reply is left to the engine (submit hands it to the slot).
	cur call

	// pending holds the replies of the batch that are not written yet, in
	// order; free recycles their slots, so a command allocates nothing.
	pending []*slot
	free    []*slot
	// capture, when set, collects replies instead of writing them: EXEC runs
	// the connection commands of a transaction with it.
	capture *[]keyspace.Reply

	// info is what other connections read for CLIENT LIST and INFO.
	info struct {
		sync.Mutex
		name, libName, libVer string
		db                    int
		noEvict, noTouch      bool
		multi                 int // queued commands, -1 outside MULTI
	}
	lastCmd    atomic.Pointer[keyspace.Command]
	lastActive atomic.Int64 // unix ns of the last command
	commands   atomic.Int64 // commands processed

	// Subscriptions, guarded by the hub's lock; the counts are atomics so that
	// CLIENT LIST and the RESP2 subscribed-mode check read them without it.
	channels, patterns, shards   map[string]struct{}
	nChannels, nPatterns, nShard atomic.Int32
	wake                         chan struct{} // wakes the push writer; nil until the first subscription

	// Output. out is what is queued for the client; publishers append to it
	// from the engine's goroutine, so it is guarded by omu. wmu serialises
	// writes to nc between the serving goroutine and the push writer.
	omu     sync.Mutex
	out     []byte
	spare   []byte // a drained buffer kept for reuse
	writing int    // bytes of a write in progress, counted against the output limits
	gone    bool   // the connection is closing; drop further output
	// softSince is when the output reached its soft limit and has stayed
	// since (zero otherwise); overflow says the output passed a limit and
	// closed the connection (output.go).
	softSince time.Time
	overflow  atomic.Bool
	wmu       sync.Mutex
	written   atomic.Int64
	writes    atomic.Int64 // writes to nc, for INFO's total_writes_processed

	closing atomic.Bool
	// reading is readIdle, readWaiting while connSource waits on the socket
	// for the reader, or readReleasing once watchClients has ended that
	// wait with a deadline, under releaseMu, to have the reader let its
	// buffer go (see releaseIdle).
	reading   atomic.Int32
	releaseMu sync.Mutex
	done      chan struct{} // closed when serve returns
	// ctx ends when the connection is killed, shuts down or closes, so that a
	// command that blocks it (WAIT) waits no longer.
	ctx    context.Context
	cancel context.CancelFunc
	// unblock ends the wait of a command that blocks the connection, with a
	// cause (CLIENT UNBLOCK's); nil while none blocks.
	unblock atomic.Pointer[context.CancelCauseFunc]
	// ahead holds what the client sent while a command blocked, then the
	// read error that ended it if any; the reader takes them first (see block).
	ahead    []byte
	aheadErr error

	// inline: the connection is served by feed, in its client's goroutine,
	// rather than by serve (see Inline). feedMu is held by feed, and ended
	// says, under it, that the connection has ended.
	inline bool
	feedMu sync.Mutex
	ended  bool
	// deadline, during a feed, is when its client stops waiting (its write
	// deadline): a reply not ready by then is answered with an error instead.
	deadline time.Time
}

func newConn(s *Server, nc net.Conn) *conn {
	c := &conn{
		srv:     s,
		nc:      nc,
		id:      s.nextID.Add(1),
		addr:    nc.RemoteAddr().String(),
		laddr:   nc.LocalAddr().String(),
		created: time.Now(),
		done:    make(chan struct{}),
	}
	c.setDefaultAuth()
	c.proto.Store(2)
	c.info.multi = -1
	c.lastActive.Store(c.created.UnixNano())
	c.ctx, c.cancel = context.WithCancel(s.ctx)
	c.rd = resp.NewReader(connSource{c}, s.limits, func() bool { return c.authed || !s.authRequired() })
	return c
}

// connSource is what the reader reads: what arrived while a command blocked,
// then the socket.
type connSource struct{ c *conn }

func (s connSource) Read(b []byte) (int, error) {
	c := s.c
	if len(c.ahead) > 0 {
		n := copy(b, c.ahead)
		if c.ahead = c.ahead[n:]; len(c.ahead) == 0 {
			c.ahead = nil
		}
		return n, nil
	}
	if c.aheadErr != nil {
		return 0, c.aheadErr
	}
	c.reading.Store(readWaiting)
	n, err := c.nc.Read(b)
	if c.reading.CompareAndSwap(readWaiting, readIdle) {
		return n, err
	}
	// releaseIdle set a deadline to end the wait: wait for it to be set,
	// then clear it. shutdown sets closing before its own deadline, so
	// one cleared here is seen after it, or is set again after it.
	c.releaseMu.Lock()
	c.reading.Store(readIdle)
	c.releaseMu.Unlock()
	c.nc.SetReadDeadline(time.Time{})
	if c.closing.Load() {
		return n, os.ErrDeadlineExceeded
	}
	if n == 0 && errors.Is(err, os.ErrDeadlineExceeded) {
		return 0, resp.ErrIdle
	}
	return n, err
}

// States of conn.reading.
const (
	readIdle = iota
	readWaiting
	readReleasing
)

// idleRelease is how long a client waits idle before its read buffer goes:
// Redis's clientsCron frees the query buffer of a client idle for 2 s.
const idleRelease = 2 * time.Second

// releaseIdle has a client that has sent nothing for idleRelease, and whose
// read buffer holds nothing, let its buffer go: it ends the client's wait
// for input with a deadline, and the reader, finding ErrIdle, waits again
// without a buffer (resp.ErrIdle). watchClients calls it once a second.
func (c *conn) releaseIdle(now time.Time) {
	if c.inline || now.Sub(time.Unix(0, c.lastActive.Load())) < idleRelease ||
		c.rd.QueryBuf.Load() != 0 || c.rd.QueryBufFree.Load() == 0 {
		return
	}
	c.releaseMu.Lock()
	defer c.releaseMu.Unlock()
	if c.reading.CompareAndSwap(readWaiting, readReleasing) {
		c.nc.SetReadDeadline(time.Now())
	}
}

// block runs wait, which blocks the connection as Redis blocks a client, with
// a context that also ends if the client hangs up meanwhile. To notice that,
// a goroutine reads what the client sends during the wait, into c.ahead; the
// commands in it run after the wait, as Redis runs them after unblocking.
func (c *conn) block(wait func(ctx context.Context)) {
	ctx, end := context.WithCancelCause(c.ctx)
	defer end(nil)
	if !c.deadline.IsZero() {
		var stop context.CancelFunc
		ctx, stop = context.WithDeadline(ctx, c.deadline)
		defer stop()
	}
	c.unblock.Store(&end)
	defer c.unblock.Store(nil)
	began := time.Now()
	defer func() { c.blockedTotal += time.Since(began) }()
	var stopping atomic.Bool
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		buf := make([]byte, 4096)
		for {
			n, err := c.nc.Read(buf)
			c.ahead = append(c.ahead, buf[:n]...)
			if err == nil && int64(len(c.ahead)) > c.srv.limits.MaxQuery.Load() {
				err = resp.ErrQueryTooBig
			}
			if err != nil {
				// The deadline that stops this goroutine is no error of the client's.
				if !stopping.Load() {
					c.aheadErr = err
					end(err)
				}
				return
			}
		}
	}()
	wait(ctx)
	stopping.Store(true)
	c.nc.SetReadDeadline(time.Now())
	<-stopped
	// shutdown sets closing before its deadline, and serve checks closing
	// before it reads again.
	if !c.closing.Load() {
		c.nc.SetReadDeadline(time.Time{})
	}
}

// serve reads and runs commands until the client leaves, the server closes, or
// the client sends something it must not. A panic ends this connection only.
func (c *conn) serve() {
	defer func() {
		if r := recover(); r != nil {
			c.failed(r)
		}
		c.close()
	}()
	for c.runBuffered() {
		if err := c.rd.Fill(); err != nil {
			c.readFailed(err)
			return
		}
	}
}

// failed logs a panic recovered while serving the connection, which then
// ends: a bug in one command ends its client's connection only.
func (c *conn) failed(r any) {
	c.srv.log.Error("connection failed", "client", c.addr, "panic", r, "stack", string(debug.Stack()))
}

// runBuffered runs the complete commands read so far and writes their
// replies. It reports whether the connection goes on.
func (c *conn) runBuffered() bool {
	first := true
	for !c.quit {
		args, err := c.rd.Next()
		if err != nil {
			c.finish()
			c.readFailed(err)
			return false
		}
		if args == nil {
			break
		}
		if first {
			c.batchStart, first = time.Now(), false
		}
		c.exec(args)
	}
	return c.finish() && !c.quit && !c.closing.Load()
}

// feed serves an inline connection: it runs the commands in b as serve runs
// what it reads. The reader takes b through c.ahead, as it takes what arrived
// while a command blocked. Waits end at deadline, if it is not zero.
func (c *conn) feed(b []byte, deadline time.Time) error {
	c.feedMu.Lock()
	c.deadline = deadline
	defer func() {
		c.deadline = time.Time{}
		if r := recover(); r != nil {
			c.failed(r)
			c.end()
		}
		c.ahead = nil
		c.feedMu.Unlock()
		// A hangup that found feedMu held left the ending to this feed.
		if c.closing.Load() {
			c.hangup()
		}
	}()
	if c.ended || c.closing.Load() {
		c.end()
		return net.ErrClosed
	}
	// Capped, so that what block appends cannot reach into the caller's array.
	c.ahead = b[:len(b):len(b)]
	for len(c.ahead) > 0 || c.aheadErr != nil {
		if err := c.rd.Fill(); err != nil {
			c.readFailed(err)
			c.end()
			return nil
		}
		if !c.runBuffered() {
			c.end()
			return nil
		}
	}
	return nil
}

// hangup ends an inline connection: now, or, when a feed is running, when it
// returns (closing tells it to; a command blocking it ends).
func (c *conn) hangup() {
	c.closing.Store(true)
	c.cancel()
	if c.feedMu.TryLock() {
		c.end()
		c.feedMu.Unlock()
	}
}

// end ends an inline connection once, with feedMu held.
func (c *conn) end() {
	if c.ended {
		return
	}
	c.ended = true
	c.close()
	c.srv.forget(c)
}

// readFailed answers a protocol error as Redis does (an error reply, then the
// connection closes) and ends quietly on EOF or shutdown.
func (c *conn) readFailed(err error) {
	var pe resp.ProtocolError
	switch {
	case errors.As(err, &pe):
		c.dropped("protocol_error", "err", pe.Error())
		c.srv.countError(nil, "ERR", c.addr)
		c.write(resp.AppendReply(nil, keyspace.Error("ERR "+pe.Error()), int(c.proto.Load())))
		c.flush()
	case errors.Is(err, resp.ErrQueryTooBig):
		c.dropped("query_buffer_limit")
	case errors.Is(err, io.EOF), errors.Is(err, net.ErrClosed), errors.Is(err, os.ErrDeadlineExceeded), c.closing.Load():
	default:
		c.srv.log.Debug("read failed", "client", c.addr, "err", err)
	}
}

// dropped logs the refusal or closing of a client by the server, with what
// an operator filters on: event, reason, the client's address, id and name.
func (c *conn) dropped(reason string, more ...any) {
	c.info.Lock()
	name := c.info.name
	c.info.Unlock()
	c.srv.log.Warn("dropped a client", append([]any{"event", "client_dropped", "reason", reason,
		"client", c.addr, "client_id", c.id, "client_name", name}, more...)...)
}

// close ends the connection: its subscriptions, its socket, its push writer.
func (c *conn) close() {
	c.cancel()
	c.srv.hub.unsubscribeAll(c)
	if c.monitoring {
		c.srv.hub.monitors.remove(c)
	}
	c.omu.Lock()
	c.gone = true
	c.omu.Unlock()
	c.nc.Close()
	close(c.done)
}

// kill closes the connection from another goroutine (CLIENT KILL, output
// limit): its blocked read or write fails and serve ends.
func (c *conn) kill() {
	c.closing.Store(true)
	c.cancel()
	c.omu.Lock()
	c.gone = true
	c.omu.Unlock()
	c.nc.Close()
	if c.inline {
		// Not here: the caller may hold the hub's lock, which ending takes.
		go c.hangup()
	}
}

// shutdown asks the connection to stop after the commands it has read: the
// blocked read returns at once and serve finishes the batch, with grace to
// write its replies.
func (c *conn) shutdown(grace time.Duration) {
	if c.inline {
		// It has read nothing that a feed is not running. Not here: Close
		// holds the server's lock, which ending takes.
		go c.hangup()
		return
	}
	c.closing.Store(true)
	c.cancel()
	c.nc.SetReadDeadline(time.Now())
	c.nc.SetWriteDeadline(time.Now().Add(grace))
}

// subscribed reports whether the client has any subscription (Redis's
// CLIENT_PUBSUB flag).
func (c *conn) subscribed() bool {
	return c.nChannels.Load()+c.nPatterns.Load()+c.nShard.Load() > 0
}

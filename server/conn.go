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
	"github.com/lockserver/lockserver/replication"
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
	done    chan struct{} // closed when serve returns
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

// slot is one reply of a batch: ready, or pending in the engine.
type slot struct {
	req   replication.Request
	one   [1][][]byte // req.Cmds for a single command, without an allocation
	reply keyspace.Reply
	ready bool // reply is set; req was not submitted
	// silent drops the reply (CLIENT REPLY OFF/SKIP).
	silent bool
	// call is the command whose reply this is, counted when it is rendered;
	// its cmd is nil when exec counts it instead.
	call call
	// then turns the engine's reply into the client's (WATCH, EXEC).
	then func(c *conn, s *slot, r keyspace.Reply) keyspace.Reply
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
	return c.nc.Read(b)
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

// resolve looks a command up, its subcommand included, and checks its arity,
// with Redis's error texts. It returns the command to run: the subcommand's row
// for a container command; with an arity error, the command it names.
func resolve(args [][]byte) (*keyspace.Command, *keyspace.Reply) {
	cmd := keyspace.Lookup(args[0])
	if cmd == nil {
		r := keyspace.ErrUnknownCommand(args)
		return nil, &r
	}
	if cmd = cmd.Resolve(args); cmd == nil {
		r := keyspace.ErrUnknownSubcommand(args)
		return nil, &r
	}
	if !cmd.CheckArity(len(args)) {
		r := keyspace.ErrWrongArity(cmd.Name)
		return cmd, &r
	}
	return cmd, nil
}

// noAuth reports whether a client may run cmd before authenticating.
func noAuth(cmd *keyspace.Command) bool { return cmd.Has(keyspace.NoAuth) }

// allowedSubscribed reports whether a RESP2 client in subscribed mode may run cmd.
func allowedSubscribed(cmd *keyspace.Command) bool {
	switch cmd.Name {
	case "ping", "subscribe", "ssubscribe", "psubscribe", "unsubscribe", "sunsubscribe", "punsubscribe", "quit", "reset":
		return true
	}
	return false
}

// exec runs one command of a batch, checking it in Redis's order: lookup and
// arity, authentication, transaction state, memory, subscribed mode.
func (c *conn) exec(args [][]byte) {
	c.commands.Add(1)
	c.cur = call{args: args, start: c.batchStart, blockedAt: c.blockedTotal}
	cmd, errReply := resolve(args)
	if errReply != nil {
		c.reject(cmd, *errReply)
		return
	}
	c.lastCmd.Store(cmd)
	if !c.admitted {
		// Protected mode is decided at the first command, where Redis
		// decides at accept: a client sends a command before it reads, so
		// it sees the same bytes, and CONFIG SET protected-mode applies to
		// connections already accepted too.
		if c.srv.protectedRefuses(c.nc) {
			c.srv.stats.rejected.Add(1)
			c.dropped("protected_mode")
			c.reject(cmd, keyspace.Error(errProtected))
			c.quit = true
			return
		}
		c.admitted = true
	}
	if !c.authed && !noAuth(cmd) && c.srv.authRequired() {
		c.reject(cmd, keyspace.Error("NOAUTH Authentication required."))
		return
	}
	u := c.user.Load().User()
	switch {
	case c.member:
		// Members are no users: the commands in what they forward were
		// checked against their clients' users where those sent them.
	case cmd.Has(keyspace.Member):
		// No user may run the members' own commands.
		c.denyACL(acl.Verdict{Reason: acl.DeniedCommand}, u.Name(), cmd, args)
		return
	case !u.Unrestricted() && !c.checkACL(u, cmd, args):
		return
	}
	inMulti := c.multi != nil && !c.multi.runsNow(cmd)
	if inMulti && c.srv.mem.over() {
		c.reject(cmd, replication.ErrOOM)
		return
	}
	if c.monitoring && touchesData(cmd) {
		c.reject(cmd, keyspace.Error("ERR Replica can't interact with the keyspace"))
		return
	}
	if c.proto.Load() == 2 && c.subscribed() && !allowedSubscribed(cmd) {
		c.reject(cmd, keyspace.Error("ERR Can't execute '"+cmd.Name+"': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context"))
		return
	}
	if inMulti {
		// A queued command is counted when EXEC runs it.
		c.queue(cmd, args)
		return
	}
	c.cur.cmd = cmd
	if c.srv.hub.monitors.n.Load() > 0 && feedsFirst(cmd) {
		c.srv.hub.monitors.feed(c.db, c.addr, cmd, args)
		c.cur.fed = true
	}
	if cmd.Layer == keyspace.ServerLayer {
		handlerOf(cmd)(c, args)
		if c.cur.cmd != nil {
			c.record(&c.cur, c.cur.failed)
			c.cur.cmd = nil
		}
		return
	}
	s := c.slot()
	s.one[0] = args
	s.req.DB = c.db
	s.req.Cmds = s.one[:]
	s.req.OverMemory = c.srv.mem.over()
	if !u.Unrestricted() {
		s.req.User = u.Name()
	}
	c.submit(s)
}

// reject answers a command refused before it ran (cmd is nil when it is
// unknown); inside MULTI it also makes EXEC fail, as Redis's rejectCommand
// does.
func (c *conn) reject(cmd *keyspace.Command, r keyspace.Reply) {
	if c.multi != nil {
		c.multi.failed = true
	}
	c.srv.countRejected(cmd)
	c.cur.cmd = cmd // the error counts against it
	c.reply(r)
	c.cur.cmd = nil
}

// slot returns a recycled slot.
func (c *conn) slot() *slot {
	if n := len(c.free); n > 0 {
		s := c.free[n-1]
		c.free = c.free[:n-1]
		return s
	}
	return new(slot)
}

func (c *conn) recycle(s *slot) {
	calls := s.req.Calls
	*s = slot{}
	if cap(calls) <= maxSlotCalls {
		clear(calls)
		s.req.Calls = calls[:0] // the room of a script's calls, reused by the next
	}
	c.free = append(c.free, s)
}

// maxSlotCalls is the most script calls whose room a slot keeps.
const maxSlotCalls = 16

// silence reports whether the next reply is to be dropped (CLIENT REPLY) and
// consumes a SKIP.
func (c *conn) silence() bool {
	if c.skipOne {
		c.skipOne = false
		return true
	}
	return c.noReply
}

// submit hands s.req to the engine; its reply is written in turn, and the
// command exec runs is counted then.
func (c *conn) submit(s *slot) {
	s.call = c.cur
	c.cur.cmd = nil
	s.silent = c.silence()
	c.srv.engine.Submit(&s.req)
	if len(c.pending) == 0 && s.req.Ready() {
		c.render(s)
		return
	}
	c.pending = append(c.pending, s)
}

// reply writes a ready reply in turn.
func (c *conn) reply(r keyspace.Reply) {
	if c.capture != nil {
		*c.capture = append(*c.capture, r)
		return
	}
	// Pushes (subscription confirmations) are sent whatever CLIENT REPLY
	// says, as Redis 7.0 sends them: a client waits for them.
	silent := r.Kind != keyspace.KindPush && c.silence()
	if r.Kind == keyspace.KindError {
		c.srv.countErrorReply(c.cur.cmd, r, c.addr)
		c.cur.failed = true
	}
	if len(c.pending) == 0 {
		if !silent {
			c.send(r)
		}
		return
	}
	s := c.slot()
	s.reply, s.ready, s.silent = r, true, silent
	c.pending = append(c.pending, s)
}

// render writes the reply of s and recycles it.
func (c *conn) render(s *slot) {
	r := s.reply
	if !s.ready {
		r = c.wait(&s.req)
		c.logScriptDenials(&s.req)
		c.srv.countScriptCalls(&s.req, c.addr)
		if s.then != nil {
			r = s.then(c, s, r)
		}
	}
	// A ready reply's error was counted when it was given (reply).
	if !s.ready {
		failed := r.Kind == keyspace.KindError
		if failed {
			c.srv.countErrorReply(s.call.cmd, r, c.addr)
		}
		if s.call.cmd != nil {
			c.record(&s.call, failed)
		}
	}
	if !s.silent {
		c.send(r)
	}
	c.recycle(s)
}

// wait returns the reply to a submitted request once the engine has it, or
// an error when the server closes or the client of a feed stops waiting.
func (c *conn) wait(req *replication.Request) keyspace.Reply {
	if c.deadline.IsZero() || req.Ready() {
		return req.Wait(c.srv.ctx)
	}
	ctx, cancel := context.WithDeadline(c.srv.ctx, c.deadline)
	defer cancel()
	return req.Wait(ctx)
}

// drain writes the pending replies, waiting for each in turn.
func (c *conn) drain() {
	for _, s := range c.pending {
		c.render(s)
	}
	clear(c.pending)
	c.pending = c.pending[:0]
}

// finish ends a batch: it writes every reply and flushes them. It reports
// whether the connection can go on.
func (c *conn) finish() bool {
	c.drain()
	now := time.Now()
	c.counted(now)
	c.lastActive.Store(now.UnixNano())
	return c.flush() == nil
}

// send queues one reply of a batch for the client, and writes what is
// queued once it reaches flushAt (see output.go). An inline connection's
// replies go to its client's buffer whenever they are written, so they stay
// here, where its limits see them.
func (c *conn) send(r keyspace.Reply) {
	if c.write1(r) >= flushAt && !c.inline {
		c.flush() // on failure the connection is gone: later replies are dropped
	}
}

// write1 queues one reply for the client and returns how much is queued. A
// client whose output passes its limits is closed.
func (c *conn) write1(r keyspace.Reply) int {
	c.omu.Lock()
	if c.gone {
		c.omu.Unlock()
		return 0
	}
	c.out = resp.AppendReply(c.out, r, int(c.proto.Load()))
	n := len(c.out)
	over := c.limited() && c.overLimit(c.outputUsed(), time.Now())
	c.omu.Unlock()
	if over {
		c.overflowed()
		return 0
	}
	return n
}

// write queues raw bytes for the client.
func (c *conn) write(b []byte) {
	c.omu.Lock()
	if !c.gone {
		c.out = append(c.out, b...)
	}
	c.omu.Unlock()
}

// deliver queues a published message from the engine's goroutine. It never
// blocks on the socket: the push writer sends it. A subscriber whose queued
// output passes its limits is disconnected, as Redis does.
func (c *conn) deliver(msg keyspace.Reply) {
	c.omu.Lock()
	if c.gone {
		c.omu.Unlock()
		return
	}
	c.out = resp.AppendReply(c.out, msg, int(c.proto.Load()))
	over := c.limited() && c.overLimit(c.outputUsed(), time.Now())
	c.omu.Unlock()
	if over {
		c.overflowed()
		return
	}
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// pushWriter sends what publishers queue while the serving goroutine waits
// for the client. It runs from the first subscription until the connection ends.
func (c *conn) pushWriter() {
	for {
		select {
		case <-c.done:
			return
		case <-c.wake:
			if c.flush() != nil {
				return
			}
		}
	}
}

// maxSpare is the largest output buffer kept for reuse after a write.
const maxSpare = 64 << 10

// flush writes what is queued.
func (c *conn) flush() error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.omu.Lock()
	out := c.out
	if len(out) == 0 {
		c.omu.Unlock()
		return nil
	}
	c.out, c.spare = c.spare[:0], nil
	c.writing = len(out)
	c.omu.Unlock()

	n, err := c.nc.Write(out)
	c.written.Add(int64(n))
	c.writes.Add(1)

	c.omu.Lock()
	c.writing = 0
	if cap(out) <= maxSpare {
		c.spare = out[:0]
	}
	if err != nil {
		// The client is gone: what is queued for it, and what would be,
		// is dropped.
		c.gone, c.out, c.spare = true, nil, nil
	}
	c.omu.Unlock()
	if err != nil {
		c.nc.Close()
	}
	return err
}

// subscribed reports whether the client has any subscription (Redis's
// CLIENT_PUBSUB flag).
func (c *conn) subscribed() bool {
	return c.nChannels.Load()+c.nPatterns.Load()+c.nShard.Load() > 0
}

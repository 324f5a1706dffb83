package server

import (
	"context"
	"time"

	"github.com/lockserver/lockserver/internal/acl"
	"github.com/lockserver/lockserver/keyspace"
	"github.com/lockserver/lockserver/replication"
)

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
// command exec runs is counted then. A request the engine may still order
// after later ones (Request.Unordered) is waited for before the next.
func (c *conn) submit(s *slot) {
	s.call = c.cur
	c.cur.cmd = nil
	s.silent = c.silence()
	s.req.Alone = len(c.pending) == 0
	c.srv.engine.Submit(&s.req)
	if len(c.pending) == 0 && s.req.Ready() {
		c.render(s)
		return
	}
	c.pending = append(c.pending, s)
	if s.req.Unordered() {
		c.drain()
	}
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

package server

import (
	"errors"
	"io"
	"net"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lockserver/lockserver/keyspace"
	"github.com/lockserver/lockserver/replication"
	"github.com/tidwall/redcon"
)

// conn is one client connection. Its fields are owned by the goroutine that
// serves it, except out (guarded by mu), which publishers append to.
type conn struct {
	srv     *Server
	nc      net.Conn
	id      int64
	addr    string
	rd      *redcon.Reader
	created time.Time

	proto  int // 2 or 3
	db     int
	authed bool
	name   string
	quit   bool

	// slots holds the replies of the batch being served, in order.
	slots []slot

	mu      sync.Mutex
	out     []byte
	wmu     sync.Mutex // serialises writes to nc
	closing atomic.Bool
}

// slot is the reply of one command of a batch: ready, or pending in the engine.
type slot struct {
	req   *replication.Request
	reply keyspace.Reply
}

func newConn(s *Server, nc net.Conn) *conn {
	c := &conn{
		srv:     s,
		nc:      nc,
		id:      s.nextID.Add(1),
		addr:    nc.RemoteAddr().String(),
		created: time.Now(),
		proto:   2,
		authed:  s.cfg.Password == "",
	}
	var authed func() bool
	if s.cfg.Password != "" {
		authed = func() bool { return c.authed }
	}
	c.rd = redcon.NewReader(newGuard(nc, s.cfg.Limits, authed))
	return c
}

// serve reads and runs commands until the client leaves, the server closes, or
// the client sends something it must not. A panic ends this connection only.
func (c *conn) serve() {
	defer func() {
		if r := recover(); r != nil {
			c.srv.log.Error("connection failed", "client", c.addr, "panic", r, "stack", string(debug.Stack()))
		}
		c.nc.Close()
	}()
	for !c.quit && !c.closing.Load() {
		cmds, err := c.rd.ReadCommands()
		if err != nil {
			c.readFailed(err)
			return
		}
		for _, cmd := range cmds {
			c.exec(cmd.Args)
			if c.quit {
				break
			}
		}
		c.finish()
	}
}

// readFailed answers a protocol error as Redis does (an error reply, then the
// connection closes) and ends quietly on EOF or shutdown.
func (c *conn) readFailed(err error) {
	var pe protocolError
	if errors.As(err, &pe) || isRedconProtocolError(err) {
		c.finish()
		c.write(appendReply(nil, keyspace.Error("ERR "+err.Error()), c.proto))
		c.flush()
		return
	}
	if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) && !c.closing.Load() {
		c.srv.log.Debug("read failed", "client", c.addr, "err", err)
	}
}

// isRedconProtocolError reports whether redcon rejected the input itself.
func isRedconProtocolError(err error) bool {
	const prefix = "Protocol error"
	msg := err.Error()
	return len(msg) >= len(prefix) && msg[:len(prefix)] == prefix
}

// exec runs one command of a batch: it answers connection commands at once and
// submits the rest to the engine.
func (c *conn) exec(args [][]byte) {
	c.srv.stats.commands.Add(1)
	cmd := keyspace.Lookup(args[0])
	if cmd == nil {
		c.reply(keyspace.ErrUnknownCommand(args))
		return
	}
	if !cmd.CheckArity(len(args)) {
		c.reply(keyspace.ErrWrongArity(cmd.Name))
		return
	}
	if !c.authed && cmd.Name != "auth" && cmd.Name != "hello" && cmd.Name != "quit" {
		c.reply(keyspace.Error("NOAUTH Authentication required."))
		return
	}
	if h := handlers[cmd.Name]; h != nil {
		h(c, args)
		return
	}
	c.submit(&replication.Request{DB: c.db, Cmds: [][][]byte{args}})
}

// submit hands a request to the engine; its reply is written in turn.
func (c *conn) submit(req *replication.Request) {
	c.srv.cfg.Engine.Submit(req)
	c.slots = append(c.slots, slot{req: req})
}

// reply queues a ready reply.
func (c *conn) reply(r keyspace.Reply) {
	c.slots = append(c.slots, slot{reply: r})
}

// finish writes the replies of the batch in order, waiting for pending ones,
// and flushes them.
func (c *conn) finish() {
	if len(c.slots) == 0 {
		return
	}
	c.mu.Lock()
	for i := range c.slots {
		s := &c.slots[i]
		r := s.reply
		if s.req != nil {
			c.mu.Unlock()
			r = s.req.Wait(c.srv.ctx)
			c.mu.Lock()
		}
		c.out = appendReply(c.out, r, c.proto)
		*s = slot{}
	}
	c.mu.Unlock()
	c.slots = c.slots[:0]
	c.flush()
}

// write queues raw bytes for the client.
func (c *conn) write(b []byte) {
	c.mu.Lock()
	c.out = append(c.out, b...)
	c.mu.Unlock()
}

// flush sends what is queued.
func (c *conn) flush() {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.mu.Lock()
	out := c.out
	c.out = nil
	c.mu.Unlock()
	if len(out) == 0 {
		return
	}
	if _, err := c.nc.Write(out); err != nil {
		c.nc.Close()
		return
	}
	// Keep a modest buffer for the next batch; let a huge one go.
	if cap(out) <= 64<<10 {
		c.mu.Lock()
		if c.out == nil {
			c.out = out[:0]
		}
		c.mu.Unlock()
	}
}

// shutdown asks the connection to stop after the commands it has read: the
// blocked read returns at once and serve finishes the batch.
func (c *conn) shutdown() {
	c.closing.Store(true)
	c.nc.SetReadDeadline(time.Now())
}

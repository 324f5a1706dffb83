// Package server serves lockserver over RESP. New makes a Server of an
// engine (replication.Engine), which runs the commands the server does not,
// and of a Hub, which delivers what the engine publishes to subscribers.
// Serve, ServeMembers and ServeInline serve connections, Do runs a data
// command for an in-process caller, Collector reports the server's metrics,
// and Close ends the connections.
//
// The server serves a connection as Redis serves a client. It frames the
// commands the client sends within Redis's limits (internal/resp), checks
// each in Redis's order (lookup and arity, authentication, ACL, transaction
// state, memory, subscribed mode), and has it run by the layer its row of
// the command table names: the server's own rows (connection state,
// transactions, subscriptions, introspection, ACL, CLIENT, CONFIG,
// SENTINEL, CLUSTER's view) by the handlers it registers for them, every
// other by the engine. The replies of a batch of pipelined commands are
// written in order, together.
package server

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lockserver/lockserver/internal/acl"
	"github.com/lockserver/lockserver/keyspace"
	"github.com/lockserver/lockserver/replication"
	"github.com/lockserver/lockserver/server/internal/resp"
)

// Config configures a Server. Engine and Hub are required; the zero value of
// every other field is a sensible default.
type Config struct {
	Engine replication.Engine
	// Hub is the pub/sub hub the engine publishes to.
	Hub *Hub
	// Password is what CONFIG GET requirepass reports: the default user's
	// password as configured (the users are ACL's).
	Password string
	// ACL holds the users, which the engine changes (it is the engine's
	// replicated state). Nil means a registry of the default user alone,
	// with Password.
	ACL *acl.Registry
	// ACLFile is the ACL file that ACL LOAD reads and ACL SAVE writes; empty
	// refuses both, as Redis does without aclfile.
	ACLFile string
	// MaxClients bounds the number of connections (maxclients); 0 means
	// Redis's 10000.
	MaxClients int
	// MaxMemory, when positive, refuses commands that add data (Redis's
	// DenyOOM commands) with an OOM error while the live heap is above it
	// (maxmemory with the noeviction policy).
	MaxMemory int64
	// SentinelMaster is the master name the SENTINEL commands answer to;
	// empty means Sentinel's usual "mymaster".
	SentinelMaster string
	// DisableProtectedMode turns Redis's protected mode off. On (the
	// default), a server whose default user has no password answers a client
	// from a non-loopback address with Redis's DENIED error and closes it.
	DisableProtectedMode bool
	Limits               Limits
	Logger               *slog.Logger
}

// Limits bound what one client may send, as Redis's limits do. The zero value of
// a field means its default.
type Limits struct {
	// MaxBulk is the largest bulk string a client may send (proto-max-bulk-len).
	MaxBulk int64
	// MaxMultibulk is the largest number of arguments of one command.
	MaxMultibulk int64
	// MaxInline is the longest inline command line, and the longest RESP header line.
	MaxInline int
	// MaxQuery is the most bytes one command may take (client-query-buffer-limit);
	// a client that sends more is disconnected, as Redis does.
	MaxQuery int64
}

// Server is a RESP server.
type Server struct {
	engine replication.Engine
	hub    *Hub
	log    *slog.Logger
	ctx    context.Context
	cancel context.CancelFunc

	acl     *acl.Registry
	aclLog  *acl.Log
	aclFile string

	// Settings that CONFIG SET changes while clients are connected.
	password   atomic.Pointer[string]
	maxClients atomic.Int64
	protected  atomic.Bool  // protected-mode
	limits     *resp.Limits // in force; CONFIG SET changes them
	// outputLimits are the client-output-buffer-limit of each class.
	outputLimits atomic.Pointer[outputLimits]
	mem          memory

	mu        sync.Mutex
	listeners map[net.Listener]struct{}
	conns     map[*conn]struct{}
	closed    bool
	wg        sync.WaitGroup

	nextID   atomic.Int64
	started  time.Time
	runID    string
	stats    stats
	sentinel sentinelState

	// cmdStats are the figures of each command, by its ID.
	cmdStats []commandStats
	// latencyTracking (latency-tracking) keeps each command's latency
	// histogram; latencyPercentiles (latency-tracking-info-percentiles) are
	// those INFO latencystats shows.
	latencyTracking    atomic.Bool
	latencyPercentiles atomic.Pointer[[]float64]
	// The slow log (slowlog-log-slower-than in microseconds, -1 for off;
	// slowlog-max-len) and the latency monitor (latency-monitor-threshold in
	// milliseconds, 0 for off).
	slowlog          slowlog
	slowlogSlower    atomic.Int64
	slowlogMax       atomic.Int64
	latency          latencyMonitor
	latencyThreshold atomic.Int64
	// oomLogged is when an OOM refusal was last logged (unix ns).
	oomLogged atomic.Int64
}

// stats are the counters of INFO's stats section. Per-connection counts are
// added here when the connection ends.
type stats struct {
	connections atomic.Int64 // total accepted
	rejected    atomic.Int64 // refused for maxclients
	commands    atomic.Int64 // processed by closed connections
	netIn       atomic.Int64 // bytes read by closed connections
	netOut      atomic.Int64 // bytes written by closed connections
	reads       atomic.Int64 // reads of closed connections (total_reads_processed)
	writes      atomic.Int64 // writes of closed connections (total_writes_processed)
	errors      errorStats
	// outputLimited counts the clients closed for passing their output
	// limits (output.go).
	outputLimited atomic.Int64
	// aclDenied counts the refusals of the ACL, by reason (Redis 7.2's
	// acl_access_denied_*).
	aclDenied [acl.DeniedChannel + 1]atomic.Int64
}

// defaultMaxClients is Redis's default maxclients.
const defaultMaxClients = 10000

// New returns a server that is not yet serving.
func New(cfg Config) *Server {
	if cfg.MaxClients <= 0 {
		cfg.MaxClients = defaultMaxClients
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.ACL == nil {
		cfg.ACL = acl.NewRegistry(DefaultUser(cfg.Password))
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{
		acl:       cfg.ACL,
		aclLog:    acl.NewLog(acl.DefaultLogMax),
		aclFile:   cfg.ACLFile,
		engine:    cfg.Engine,
		hub:       cfg.Hub,
		log:       cfg.Logger,
		ctx:       ctx,
		cancel:    cancel,
		limits:    resp.NewLimits(cfg.Limits.MaxBulk, cfg.Limits.MaxMultibulk, int64(cfg.Limits.MaxInline), cfg.Limits.MaxQuery),
		listeners: make(map[net.Listener]struct{}),
		conns:     make(map[*conn]struct{}),
		started:   time.Now(),
		runID:     randomHex(20),
	}
	s.cmdStats = make([]commandStats, keyspace.NumIDs())
	s.latencyTracking.Store(true)
	s.latencyPercentiles.Store(&[]float64{50, 99, 99.9})
	s.slowlogSlower.Store(10000)
	s.slowlogMax.Store(128)
	s.password.Store(&cfg.Password)
	s.maxClients.Store(int64(cfg.MaxClients))
	s.protected.Store(!cfg.DisableProtectedMode)
	limits := defaultOutputLimits
	s.outputLimits.Store(&limits)
	s.mem.limit.Store(max(cfg.MaxMemory, 0))
	s.startSentinel(cfg.SentinelMaster)
	s.acl.OnChange(s.usersChanged)
	go s.watchClients()
	return s
}

// DefaultUser returns the default user as requirepass makes it: Redis's
// initial one, with password its only password if it is not empty.
func DefaultUser(password string) *acl.User {
	u := acl.NewDefault()
	if password != "" {
		u, _ = acl.SetUser(u, acl.DefaultName, [][]byte{[]byte("resetpass"), []byte(">" + password)})
	}
	return u
}

// randomHex returns n random bytes in hex, for run ids.
func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// errServerClosed is what Serve returns after Close.
var errServerClosed = errors.New("server: closed")

// Serve accepts connections on ln until Close, and returns an error then.
// It backs off on accept errors
// (EMFILE, ...) rather than spinning. A TLS listener's connections finish
// their handshake first, in their own goroutines; a client refused there
// (no certificate, or one that does not verify) is logged.
func (s *Server) Serve(ln net.Listener) error { return s.serve(ln, false) }

// ServeMembers serves the member connections that ln accepts: a cluster
// member's links from the other members (replication.Raft.Members), which
// have proved membership before ln returns them. Only they may run the
// commands that members send each other.
func (s *Server) ServeMembers(ln net.Listener) error { return s.serve(ln, true) }

func (s *Server) serve(ln net.Listener, members bool) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		ln.Close()
		return errServerClosed
	}
	s.listeners[ln] = struct{}{}
	s.mu.Unlock()

	var backoff time.Duration
	for {
		nc, err := ln.Accept()
		if err != nil {
			s.mu.Lock()
			closed := s.closed
			s.mu.Unlock()
			if closed {
				return errServerClosed
			}
			if errors.Is(err, net.ErrClosed) {
				return err
			}
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			s.log.Warn("accept failed; backing off", "err", err, "backoff", backoff)
			time.Sleep(backoff)
			continue
		}
		backoff = 0
		s.serveConn(nc, members)
	}
}

// serveConn serves one connection in a new goroutine.
func (s *Server) serveConn(nc net.Conn, member bool) {
	c := s.admit(nc, false, member)
	if c == nil {
		return
	}
	go func() {
		if tc, ok := nc.(*tls.Conn); !ok || s.handshake(c, tc) {
			c.serve()
		} else {
			c.close()
		}
		s.forget(c)
	}()
}

// tlsHandshakeTimeout bounds a client's TLS handshake.
const tlsHandshakeTimeout = 10 * time.Second

// handshake runs a TLS client's handshake, and logs why it failed if it did:
// what a refused client needs to know is on the server's side.
func (s *Server) handshake(c *conn, tc *tls.Conn) bool {
	tc.SetDeadline(time.Now().Add(tlsHandshakeTimeout))
	err := tc.Handshake()
	if c.closing.Load() {
		return false
	}
	if err != nil {
		s.log.Warn("refused a TLS client", "event", "client_refused", "reason", "tls", "client", c.addr, "err", err)
		return false
	}
	tc.SetDeadline(time.Time{})
	return true
}

// Inline is a connection served in its client's goroutine: Feed runs what
// the client writes, and writes the replies to the connection, before it
// returns, so no goroutine of the server waits for the client in between
// (two goroutine hand-overs per command spared). The in-memory Dialer uses it.
type Inline struct{ c *conn }

// ServeInline registers nc as a connection served by Feed. It returns nil
// when the server refuses it (closed, or at maxclients), having written the
// error to nc and closed it as Serve does.
func (s *Server) ServeInline(nc net.Conn) *Inline {
	c := s.admit(nc, true, false)
	if c == nil {
		return nil
	}
	return &Inline{c}
}

// Feed runs the complete commands in b (what the client wrote; a command it
// ends only partly waits for the next Feed) and writes their replies, in
// order, to the connection. A reply the engine has not given by deadline (the
// client's, when not zero) is an error reply instead, saying that the outcome
// is unknown, as a reply the server waited too long for is. Feed returns
// net.ErrClosed, having run nothing, when the connection has ended; a QUIT or
// protocol error in b ends it after its replies are written. Feed keeps
// nothing of b.
func (in *Inline) Feed(b []byte, deadline time.Time) error { return in.c.feed(b, deadline) }

// Hangup ends the connection when its client closes it: at once, or after
// the Feed running now.
func (in *Inline) Hangup() { in.c.hangup() }

// admit registers a new connection, served inline or by serve, a member
// connection or not, or refuses it as Redis does (one error line, then close)
// and returns nil.
func (s *Server) admit(nc net.Conn, inline, member bool) *conn {
	s.stats.connections.Add(1)
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		nc.Close()
		return nil
	}
	if !member && int64(len(s.conns)) >= s.maxClients.Load() {
		s.mu.Unlock()
		s.stats.rejected.Add(1)
		s.log.Warn("refused a client", "event", "client_refused", "reason", "maxclients",
			"client", nc.RemoteAddr().String(), "maxclients", s.maxClients.Load())
		refuse(nc, "-ERR max number of clients reached\r\n")
		return nil
	}
	c := newConn(s, nc)
	c.inline = inline // before Close can see c
	c.member = member
	c.authed = c.authed || member
	c.admitted = member
	s.conns[c] = struct{}{}
	s.wg.Add(1)
	s.mu.Unlock()
	return c
}

// refuse writes line to a connection the server will not serve and closes
// it, in a goroutine of its own with a short deadline, so that a client that
// does not read holds up neither the accept loop nor the dialer.
func refuse(nc net.Conn, line string) {
	go func() {
		nc.SetWriteDeadline(time.Now().Add(time.Second))
		nc.Write([]byte(line))
		nc.Close()
	}()
}

// errProtected is Redis 7.0's reply to a client refused in protected mode, word
// for word ("Setup a an" included).
const errProtected = "DENIED Redis is running in protected mode because protected mode is enabled and no password is set for the default user. In this mode connections are only accepted from the loopback interface. If you want to connect from external computers to Redis you may adopt one of the following solutions: 1) Just disable protected mode sending the command 'CONFIG SET protected-mode no' from the loopback interface by connecting to Redis from the same host the server is running, however MAKE SURE Redis is not publicly accessible from internet if you do so. Use CONFIG REWRITE to make this change permanent. 2) Alternatively you can just disable the protected mode by editing the Redis configuration file, and setting the protected mode option to 'no', and then restarting the server. 3) If you started the server manually just for testing, restart it with the '--protected-mode no' option. 4) Setup a an authentication password for the default user. NOTE: You only need to do one of the above things in order for the server to start accepting connections from the outside."

// protectedRefuses reports whether protected mode refuses nc: it is on, the
// default user needs no password, and nc comes from a TCP address that is not
// loopback (an in-memory connection is local, as a Unix socket is to Redis).
func (s *Server) protectedRefuses(nc net.Conn) bool {
	if !s.protected.Load() || !s.acl.Default().User().NoPass() {
		return false
	}
	addr, ok := nc.RemoteAddr().(*net.TCPAddr)
	return ok && !addr.IP.IsLoopback()
}

// forget removes a connection that has ended, adding its counts to INFO's.
func (s *Server) forget(c *conn) {
	s.mu.Lock()
	delete(s.conns, c)
	s.stats.commands.Add(c.commands.Load())
	s.stats.netIn.Add(c.rd.Total.Load())
	s.stats.netOut.Add(c.written.Load())
	s.stats.reads.Add(c.rd.Reads.Load())
	s.stats.writes.Add(c.writes.Load())
	s.mu.Unlock()
	s.wg.Done()
}

// shutdownGrace is how long Close lets a connection write its last replies to
// a client that does not read them.
const shutdownGrace = 5 * time.Second

// Close stops accepting, lets every connection finish the commands it has read,
// closes them and waits for them to end.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	for ln := range s.listeners {
		ln.Close()
	}
	for c := range s.conns {
		c.shutdown(shutdownGrace)
	}
	s.mu.Unlock()
	s.wg.Wait()
	s.cancel()
	return nil
}

// Do runs one data command or script in database db for an in-process caller:
// no connection, no RESP, no AUTH. Commands that need a connection (SELECT,
// MULTI, SUBSCRIBE, ...) are refused.
func (s *Server) Do(ctx context.Context, db int, args [][]byte) keyspace.Reply {
	if len(args) == 0 {
		return keyspace.Error("ERR empty command")
	}
	cmd, errReply := resolve(args)
	if errReply != nil {
		s.countRejected(cmd)
		s.countError(cmd, errReply.Str, "embedded")
		return *errReply
	}
	if cmd.Has(keyspace.Member) { // Do is no member (see conn.member)
		return keyspace.Error(acl.Verdict{Reason: acl.DeniedCommand}.Error(cmd))
	}
	if !engineCommand(cmd) || cmd.Layer == keyspace.ServerLayer {
		return keyspace.Error("ERR '" + cmd.Name + "' needs a connection; use Dialer or Addr")
	}
	// The request and its one command in one allocation.
	call := &struct {
		req  replication.Request
		cmds [1][][]byte
	}{cmds: [1][][]byte{args}}
	call.req = replication.Request{DB: db, Cmds: call.cmds[:], OverMemory: s.mem.over(), Alone: true}
	start := time.Now()
	m := &s.hub.monitors
	if m.n.Load() > 0 && feedsFirst(cmd) {
		m.feed(db, "embedded", cmd, args)
	}
	s.engine.Submit(&call.req)
	r := call.req.Wait(ctx)
	s.countScriptCalls(&call.req, "embedded")
	failed := r.Kind == keyspace.KindError
	if failed {
		s.countErrorReply(cmd, r, "embedded")
	}
	s.stats.commands.Add(1)
	d := time.Since(start)
	s.countCall(cmd, d, failed)
	if m.n.Load() > 0 && monitored(cmd) && !feedsFirst(cmd) {
		m.feed(db, "embedded", cmd, args)
	}
	s.checkSlow(cmd, args, d, "", "")
	return r
}

// each calls f for every open connection, under the server's lock.
func (s *Server) each(f func(c *conn)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.conns {
		f(c)
	}
}

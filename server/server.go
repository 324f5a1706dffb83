// Package server serves lockserver over RESP: it owns the accept loop and the
// connections, reads commands with redcon's parser behind a guard that enforces
// Redis's limits, keeps per-connection state (protocol, database, auth,
// transactions, subscriptions) and hands data commands to a replication.Engine.
package server

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lockserver/lockserver/keyspace"
	"github.com/lockserver/lockserver/replication"
)

// Config configures a Server. Engine and Hub are required; the zero value of
// every other field is a sensible default.
type Config struct {
	Engine replication.Engine
	// Hub is the pub/sub hub the engine publishes to.
	Hub *Hub
	// Password, when set, is required by AUTH (requirepass).
	Password string
	// MaxClients bounds the number of connections (maxclients); 0 means 10000.
	MaxClients int
	Limits     Limits
	Logger     *slog.Logger
}

// Server is a RESP server.
type Server struct {
	cfg    Config
	log    *slog.Logger
	ctx    context.Context
	cancel context.CancelFunc

	mu        sync.Mutex
	listeners map[net.Listener]struct{}
	conns     map[*conn]struct{}
	closed    bool
	wg        sync.WaitGroup

	nextID atomic.Int64
	stats  stats
}

type stats struct {
	connections atomic.Int64 // total accepted
	commands    atomic.Int64 // total processed
	rejected    atomic.Int64 // refused for maxclients
}

// DefaultMaxClients is Redis's default maxclients.
const DefaultMaxClients = 10000

// New returns a server that is not yet serving.
func New(cfg Config) *Server {
	if cfg.MaxClients <= 0 {
		cfg.MaxClients = DefaultMaxClients
	}
	cfg.Limits = cfg.Limits.withDefaults()
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Server{
		cfg:       cfg,
		log:       cfg.Logger,
		ctx:       ctx,
		cancel:    cancel,
		listeners: make(map[net.Listener]struct{}),
		conns:     make(map[*conn]struct{}),
	}
}

// ErrServerClosed is returned by Serve after Close.
var ErrServerClosed = errors.New("server: closed")

// Serve accepts connections on ln until Close. It backs off on accept errors
// (EMFILE, ...) rather than spinning.
func (s *Server) Serve(ln net.Listener) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		ln.Close()
		return ErrServerClosed
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
				return ErrServerClosed
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
		s.ServeConn(nc)
	}
}

// ServeConn serves one connection in a new goroutine. It is how the in-memory
// dialer reaches the server without a socket.
func (s *Server) ServeConn(nc net.Conn) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		nc.Close()
		return
	}
	if len(s.conns) >= s.cfg.MaxClients {
		s.mu.Unlock()
		s.stats.rejected.Add(1)
		nc.Write([]byte("-ERR max number of clients reached\r\n"))
		nc.Close()
		return
	}
	c := newConn(s, nc)
	s.conns[c] = struct{}{}
	s.wg.Add(1)
	s.mu.Unlock()
	s.stats.connections.Add(1)
	go func() {
		defer s.wg.Done()
		c.serve()
		s.mu.Lock()
		delete(s.conns, c)
		s.mu.Unlock()
	}()
}

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
		c.shutdown()
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
	cmd := keyspace.Lookup(args[0])
	switch {
	case cmd == nil:
		return keyspace.ErrUnknownCommand(args)
	case !cmd.CheckArity(len(args)):
		return keyspace.ErrWrongArity(cmd.Name)
	case handlers[cmd.Name] != nil:
		return keyspace.Error("ERR '" + cmd.Name + "' needs a connection; use Dialer or Addr")
	}
	req := replication.Request{DB: db, Cmds: [][][]byte{args}}
	s.cfg.Engine.Submit(&req)
	return req.Wait(ctx)
}

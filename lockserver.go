// Package lockserver is an embeddable, Redis-compatible lock server.
//
// Open starts a server inside the calling process. Clients reach it over
// loopback TCP (Addr), over an in-memory connection with no socket (Dialer, for
// go-redis), or by a direct call that skips RESP entirely (Do). Existing Redis
// lock clients (go-redis, redsync, redislock, Redisson, redis-py) and their Lua
// scripts work unmodified.
//
// Importing the package sets go-redis's process-wide logger
// (redis.SetLogger), as go-redis has one logger per process and none per
// client: a failed dial of a cluster member to its peers goes to that
// member's Options.Logger at debug level, and every other message is
// written as go-redis's default logger writes it, so the program's own
// clients log as before. A program that sets its own go-redis logger
// replaces this one, and receives the members' failed dials too.
package lockserver

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lockserver/lockserver/internal/acl"
	"github.com/lockserver/lockserver/internal/direct"
	"github.com/lockserver/lockserver/keyspace"
	"github.com/lockserver/lockserver/luaexec"
	"github.com/lockserver/lockserver/replication"
	"github.com/lockserver/lockserver/server"
)

// Options configure a Server. The zero value starts a standalone server on a
// free loopback port with no password. Open refuses a negative count, size or
// timeout rather than taking it for the default.
type Options struct {
	// Addr is the TCP address to listen on. Empty means "127.0.0.1:0", a free
	// loopback port; "-" means no listener (Dialer, Do and TLS only).
	Addr string
	// TLS, when set, makes the server listen for TLS clients too, on TLSAddr,
	// with these settings: the certificate, and whether clients must present
	// one (ClientAuth and ClientCAs; Redis's tls-auth-clients). A TLS client
	// gets the same limits, protocol and commands as any other. To renew
	// certificates without a restart, give GetCertificate or
	// GetConfigForClient. A client refused in the handshake is logged.
	TLS *tls.Config
	// TLSAddr is the TCP address of the TLS listener; empty means
	// "127.0.0.1:0".
	TLSAddr string
	// Password, when set, is required by AUTH (Redis's requirepass): it is
	// the default ACL user's password. Ignored with ACLFile, as Redis
	// ignores requirepass with aclfile.
	Password string
	// ACLFile is an ACL file, in Redis's format ("user alice on >secret
	// ~lock:* +@all ..." per line): Open loads its users, and ACL LOAD and
	// ACL SAVE read and write it. A cluster member's users are the
	// cluster's: a new cluster's first leader seeds them with its own, and
	// they change only through ACL commands (or CONFIG SET requirepass).
	ACLFile string
	// MaxClients bounds concurrent connections; 0 means 10000.
	MaxClients int
	// MaxMemory, when positive, refuses commands that add data with Redis's
	// OOM error while the live heap is above it (maxmemory, noeviction).
	MaxMemory int64
	// Limits bound request sizes (bulk length, arguments, inline length).
	Limits Limits
	// ScriptBudget is how many steps a script may take (operations, and 16
	// bytes of strings built or scanned); 0 means 12,000,000, which stops
	// the costliest runaway scripts within Redis's lua-time-limit (5 s; see
	// bench/RESULTS.md), and a cluster whose members do not all run
	// lockserver 0.2 keeps 0.1's 2,000,000. A script
	// that runs out stops with an error at the same step on every member, so
	// every member must have the same.
	ScriptBudget int64
	// Logger receives structured logs; nil discards them, go-redis's about a
	// member's connections to its peers included (see the package doc).
	Logger *slog.Logger
	// DisableProtectedMode turns Redis's protected mode off. On (the
	// default), a server with no Password answers clients from non-loopback
	// addresses with Redis's DENIED error and closes their connections.
	DisableProtectedMode bool
	// SentinelMaster is the master name the SENTINEL commands answer to, so
	// that clients configured for Redis Sentinel find the leader; empty means
	// "mymaster", Redis Sentinel's example name.
	SentinelMaster string
	// Cluster, when its NodeID is set, makes this server a member of a Raft
	// cluster instead of a standalone server.
	Cluster ClusterOptions
}

// ClusterOptions make a server a member of a Raft cluster, so that three
// copies of a Go service, each embedding a member, form a cluster with no
// separate process. Any member serves any client: followers forward to the
// leader. Writes are acknowledged once a majority holds them.
type ClusterOptions struct {
	// NodeID names this member for all time; setting it enables the cluster.
	NodeID string
	// RaftAddr is the host:port of the Raft transport, which the other
	// members reach this one at.
	RaftAddr string
	// RaftAdvertiseAddr, when set, is the host:port the other members reach
	// the Raft transport at instead of RaftAddr: a proxy's or a NAT's.
	RaftAdvertiseAddr string
	// DataDir holds the Raft log (fsync on) and snapshots; a member restarts
	// from it. Empty keeps them in memory: a restart then starts empty.
	DataDir string
	// Bootstrap lists the voters of a new cluster, this member among them at
	// RaftAdvertiseAddr or else RaftAddr (Open refuses a list that is not), used only when DataDir holds
	// no state. Never bootstrap a member whose data was lost: start it with
	// Join.
	Bootstrap []Peer
	// Join is the Raft address of any member of an existing cluster, asked
	// to add this one when DataDir holds no state. With neither Bootstrap nor
	// Join, a member with no state starts a cluster of its own.
	Join string
	// JoinTimeout is how long Open keeps asking Join's member before it
	// fails; 0 means a minute.
	JoinTimeout time.Duration
	// HeartbeatTimeout and ElectionTimeout detect a failed leader: a member
	// that hears from no leader for HeartbeatTimeout stands for election, a
	// leader that hears from no majority for as long steps down, and an
	// election not won within ElectionTimeout starts over. 0 means 1 s
	// each. A failover by timeout takes one to two of each; longer ones ride
	// out pauses of a busy machine (a process starved of CPU for a moment)
	// that would otherwise move the leader and fail the writes in flight. A
	// leader whose process ends is noticed sooner, by its closed connections
	// (docs/cluster.md, "Failure detection").
	HeartbeatTimeout, ElectionTimeout time.Duration
	// ShutdownSnapshotTimeout bounds the snapshot a member takes as it
	// closes, when much log was written since its last one (so that its
	// restart reads a snapshot rather than replaying that log), and one
	// under way: past it the snapshot is abandoned and the restart replays
	// the log instead. 0 means 5 s, so that a stop fits an orchestrator's
	// grace period (docker stop: 10 s; Kubernetes: 30 s).
	ShutdownSnapshotTimeout time.Duration
	// AdvertiseAddr is the client address that the members give clients for
	// this one (Sentinel and CLUSTER replies); empty means Addr's, or
	// TLSAddr's without Addr, which must then be a concrete address.
	AdvertiseAddr string

	// Members reach each other at their Raft addresses, for Raft and for
	// the commands they send each other (forwarded requests, joins), and
	// each proves to the other that it is a member first: with mutual TLS,
	// with a shared secret, or both. Secret is that secret, at least 16
	// bytes, the same on every member. TLS puts the links in mutual TLS:
	// each member's certificate must be issued by the cluster's CA and
	// match TLS.Names. A member whose RaftAddr is not a loopback address
	// refuses to start with neither, unless Insecure.
	Secret   string
	TLS      *MemberTLS
	Insecure bool
	// Token goes into the cluster's identity, which members bootstrapped
	// with the same Bootstrap list and Token share, and a member refuses
	// the links of another cluster's. Give each cluster its own.
	Token string
}

// Limits bound what one request may hold, as Redis's settings of the same
// meaning do; a zero field means its default.
type Limits struct {
	// MaxBulk is the largest bulk string a client may send (Redis's
	// proto-max-bulk-len); 0 means 512 MB.
	MaxBulk int64
	// MaxMultibulk is the largest number of arguments of one command; 0
	// means 1M (Redis allows 2^31-1, but every argument costs memory before
	// the command runs).
	MaxMultibulk int64
	// MaxInline is the longest inline command line, and the longest RESP
	// header line; 0 means 64 kB.
	MaxInline int
	// MaxQuery is the most bytes one command may take (Redis's
	// client-query-buffer-limit); a client that sends more is disconnected,
	// as Redis does. 0 means 1 GB.
	MaxQuery int64
}

// Peer is one voter of a new cluster: its NodeID and the Raft address the
// other members reach it at.
type Peer struct {
	ID       string
	RaftAddr string
}

// MemberTLS secures the links between members with mutual TLS.
type MemberTLS struct {
	// Config returns the settings for a new link: this member's certificate,
	// Certificates[0], which it presents to both ends of a link (so it must
	// allow both server and client authentication), and the cluster's CA,
	// RootCAs, against which it verifies the peer's. MinVersion, MaxVersion
	// and CipherSuites are used too; nothing else. It is called for each new
	// link, so that renewed certificates take effect on the next link while
	// the others go on.
	Config func() (*tls.Config, error)
	// Names is a pattern in path.Match's syntax ("*.members.example") that
	// one of a peer certificate's DNS names, or its common name, must match:
	// a certificate that the same CA issued to a client is no member's.
	Names string
}

// Server is a running lockserver.
type Server struct {
	srv    *server.Server
	engine replication.Engine
	member *replication.Raft // nil for a standalone server
	ln     net.Listener      // nil without one
	tlsLn  net.Listener      // nil without TLS
	serves sync.WaitGroup
	fault  <-chan error // a member's (see Fault); nil for a standalone server

	closeOnce sync.Once
	closeErr  error
	closed    atomic.Bool
}

// Open starts a server: a standalone one, or a cluster member when
// opts.Cluster.NodeID is set.
func Open(opts Options) (_ *Server, err error) {
	if err := opts.check(); err != nil {
		return nil, err
	}
	s := &Server{}
	defer func() {
		if err != nil {
			s.closeListeners()
		}
	}()
	if opts.Addr != "-" {
		if s.ln, err = listen(opts.Addr); err != nil {
			return nil, err
		}
	}
	if opts.TLS != nil {
		ln, err := listen(opts.TLSAddr)
		if err != nil {
			return nil, err
		}
		s.tlsLn = tls.NewListener(ln, opts.TLS)
	}
	users, err := initialUsers(opts)
	if err != nil {
		if s.ln != nil {
			s.ln.Close()
		}
		return nil, err
	}
	hub := server.NewHub()
	lua := luaexec.Options{Monitor: hub.ScriptMonitor, Budget: opts.ScriptBudget}
	var members net.Listener
	if opts.Cluster.NodeID == "" {
		s.engine = replication.NewStandalone(replication.StandaloneOptions{Lua: lua, Users: users, Hub: hub})
	} else {
		listenAddr := s.Addr()
		if listenAddr == "" {
			listenAddr = s.TLSAddr()
		}
		engine, err := openMember(opts, listenAddr, lua, users, hub)
		if err != nil {
			return nil, err
		}
		s.engine, s.member, s.fault, members = engine, engine, engine.Fault(), engine.Members()
	}
	s.srv = server.New(server.Config{
		Engine:     s.engine,
		Hub:        hub,
		Password:   opts.Password,
		ACL:        users,
		ACLFile:    opts.ACLFile,
		MaxClients: opts.MaxClients,
		MaxMemory:  opts.MaxMemory,
		Limits:     server.Limits(opts.Limits),
		Logger:     opts.Logger,

		SentinelMaster:       opts.SentinelMaster,
		DisableProtectedMode: opts.DisableProtectedMode,
	})
	for _, ln := range []net.Listener{s.ln, s.tlsLn} {
		if ln != nil {
			s.serves.Add(1)
			go func() {
				defer s.serves.Done()
				s.srv.Serve(ln)
			}()
		}
	}
	if members != nil {
		s.serves.Add(1)
		go func() {
			defer s.serves.Done()
			s.srv.ServeMembers(members)
		}()
	}
	return s, nil
}

// check refuses a negative count or size, which would otherwise quietly
// stand for its default.
func (o *Options) check() error {
	for _, f := range []struct {
		name string
		v    int64
	}{
		{"MaxClients", int64(o.MaxClients)},
		{"MaxMemory", o.MaxMemory},
		{"ScriptBudget", o.ScriptBudget},
		{"Limits.MaxBulk", o.Limits.MaxBulk},
		{"Limits.MaxMultibulk", o.Limits.MaxMultibulk},
		{"Limits.MaxInline", int64(o.Limits.MaxInline)},
		{"Limits.MaxQuery", o.Limits.MaxQuery},
		{"Cluster.JoinTimeout", int64(o.Cluster.JoinTimeout)},
		{"Cluster.HeartbeatTimeout", int64(o.Cluster.HeartbeatTimeout)},
		{"Cluster.ElectionTimeout", int64(o.Cluster.ElectionTimeout)},
		{"Cluster.ShutdownSnapshotTimeout", int64(o.Cluster.ShutdownSnapshotTimeout)},
	} {
		if f.v < 0 {
			return fmt.Errorf("lockserver: Options.%s is %d; want 0 (the default) or more", f.name, f.v)
		}
	}
	return nil
}

// initialUsers returns the users a server starts with: those of the ACL
// file, or the default user with Password.
func initialUsers(opts Options) (*acl.Registry, error) {
	if opts.ACLFile == "" {
		return acl.NewRegistry(server.DefaultUser(opts.Password)), nil
	}
	users, err := server.ReadACLFile(opts.ACLFile)
	if err != nil {
		return nil, fmt.Errorf("lockserver: ACL file: %w", err)
	}
	return acl.NewRegistry(users...), nil
}

// listen listens on addr, "127.0.0.1:0" if empty.
func listen(addr string) (net.Listener, error) {
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("lockserver: listen: %w", err)
	}
	return ln, nil
}

// closeListeners closes the listeners of a server that failed to open.
func (s *Server) closeListeners() {
	for _, ln := range []net.Listener{s.ln, s.tlsLn} {
		if ln != nil {
			ln.Close()
		}
	}
}

// openMember opens the Raft engine of a cluster member whose server listens
// on listenAddr ("" for none).
func openMember(opts Options, listenAddr string, lua luaexec.Options, users *acl.Registry, hub *server.Hub) (*replication.Raft, error) {
	c := opts.Cluster
	advertise := c.AdvertiseAddr
	if advertise == "" {
		host, _, err := net.SplitHostPort(listenAddr)
		if ip := net.ParseIP(host); err != nil || host == "" || ip != nil && ip.IsUnspecified() {
			return nil, fmt.Errorf("lockserver: cluster member %s: set Cluster.AdvertiseAddr, the client address other members reach it at (Addr is %q)", c.NodeID, opts.Addr)
		}
		advertise = listenAddr
	}
	peers := raftPeers(c.Bootstrap)
	return replication.NewRaft(replication.RaftOptions{
		NodeID:          c.NodeID,
		RaftAddr:        c.RaftAddr,
		RaftAdvertise:   c.RaftAdvertiseAddr,
		ClientAddr:      advertise,
		DataDir:         c.DataDir,
		Bootstrap:       peers,
		Join:            c.Join,
		JoinTimeout:     c.JoinTimeout,
		ClusterSecret:   c.Secret,
		TLS:             (*replication.MemberTLS)(c.TLS),
		InsecureCluster: c.Insecure,
		ClusterToken:    c.Token,
		Lua:             lua,
		Users:           users,
		Hub:             hub,
		Logger:          opts.Logger,

		HeartbeatTimeout: c.HeartbeatTimeout,
		ElectionTimeout:  c.ElectionTimeout,

		CloseSnapshotTimeout: c.ShutdownSnapshotTimeout,
	})
}

// Addr returns the address the server listens on, or "" without a listener.
func (s *Server) Addr() string {
	if s.ln == nil {
		return ""
	}
	return s.ln.Addr().String()
}

// TLSAddr returns the address the server listens on for TLS clients, or ""
// without TLS.
func (s *Server) TLSAddr() string {
	if s.tlsLn == nil {
		return ""
	}
	return s.tlsLn.Addr().String()
}

// Dialer returns a dial function for go-redis's Options.Dialer that connects to
// this server in memory, with no socket. Network and address are ignored.
// Commands run in the goroutine that writes them, before the write returns,
// so no goroutine hand-over stands between a command and its reply. A reply
// the server has not given by the connection's write deadline (go-redis's
// WriteTimeout, 3 s by default) is an error reply instead, as with any wait
// the server gives up on: for a write, its outcome is unknown.
func (s *Server) Dialer() func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		client, srv := memPipe()
		client.(*memConn).served = s.srv.ServeInline(srv)
		return client, nil
	}
}

// ErrClosed is returned by Do once Close has begun: the server runs no more
// commands, as a stopped process would not.
var ErrClosed = direct.ErrClosed

// ErrNil is returned by Do when the reply is a null (a missing key, a failed SET NX),
// as go-redis returns redis.Nil.
var ErrNil = direct.ErrNil

// Do runs one command in database 0 with no RESP at all and returns its reply as
// go-redis would: string for bulk and status replies, int64, []any, map[any]any
// for maps, float64, bool; nil and ErrNil for a null; an error for an error reply.
// Arguments may be string, []byte, integers, floats or bools.
//
// A context already done returns its error and runs nothing, as go-redis sends
// nothing then; one that ends while a write waits for its reply leaves the
// write's outcome unknown (an error reply says so).
func (s *Server) Do(ctx context.Context, args ...any) (any, error) {
	if len(args) == 0 {
		return nil, errors.New("lockserver: Do needs a command")
	}
	if s.closed.Load() {
		return nil, ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	// The arguments are formatted on the stack, then copied to one buffer of
	// their exact size rather than taking an allocation each: they live only
	// until the command has run.
	var onStack [256]byte
	var endsOnStack [16]int
	buf, ends := onStack[:0], endsOnStack[:0]
	for _, a := range args {
		var err error
		if buf, err = appendArg(buf, a); err != nil {
			return nil, err
		}
		ends = append(ends, len(buf))
	}
	data := append([]byte(nil), buf...)
	argv := make([][]byte, len(args))
	start := 0
	for i, end := range ends {
		argv[i] = data[start:end:end]
		start = end
	}
	return fromReply(s.srv.Do(ctx, 0, argv))
}

// Fault receives the error that stopped a cluster member on its own: its
// Raft log could not be written to disk, or read back as written (the error
// then says what to do). The member then
// answers no more commands; Close it and exit, for a supervisor to restart
// the process from its data directory. A standalone server never sends.
func (s *Server) Fault() <-chan error { return s.fault }

// Close stops accepting connections, lets open connections finish the commands
// they have read, closes them, and stops the engine; Do returns ErrClosed from
// then on. A cluster member that leads hands leadership to the most
// up-to-date other member first, and waits (an election timeout at most)
// until that one leads: its clients' last commands go to the new leader, and
// the cluster's clients see no election. Later calls return what the first
// returned.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		if s.member != nil {
			s.member.HandOver()
		}
		s.closed.Store(true)
		err := s.srv.Close()
		s.serves.Wait()
		s.closeErr = errors.Join(err, s.engine.Close())
	})
	return s.closeErr
}

// appendArg appends a command argument given to Do as bytes.
func appendArg(b []byte, a any) ([]byte, error) {
	switch v := a.(type) {
	case string:
		return append(b, v...), nil
	case []byte:
		return append(b, v...), nil
	case int:
		return strconv.AppendInt(b, int64(v), 10), nil
	case int64:
		return strconv.AppendInt(b, v, 10), nil
	case int32:
		return strconv.AppendInt(b, int64(v), 10), nil
	case uint64:
		return strconv.AppendUint(b, v, 10), nil
	case uint32:
		return strconv.AppendUint(b, uint64(v), 10), nil
	case float64:
		return strconv.AppendFloat(b, v, 'f', -1, 64), nil
	case bool:
		if v {
			return append(b, '1'), nil
		}
		return append(b, '0'), nil
	}
	return nil, fmt.Errorf("lockserver: can't use %T as a command argument", a)
}

// ReplyError is an error reply from the server, such as "WRONGTYPE ...".
// It satisfies go-redis's redis.Error, so that code which tells a server's
// error replies from other errors (a lost connection, a timeout) treats a
// direct call's as go-redis's.
type ReplyError string

func (e ReplyError) Error() string { return string(e) }

// RedisError marks e as an error reply, as go-redis's redis.Error asks.
func (e ReplyError) RedisError() {}

func fromReply(r keyspace.Reply) (any, error) {
	switch r.Kind {
	case keyspace.KindNull, keyspace.KindNullArray:
		return nil, ErrNil
	case keyspace.KindError:
		return nil, ReplyError(r.Str)
	case keyspace.KindInt:
		return r.Int, nil
	case keyspace.KindBool:
		return r.Int != 0, nil
	case keyspace.KindDouble:
		return r.Float, nil
	case keyspace.KindStatus, keyspace.KindBulk, keyspace.KindVerbatim:
		return r.Str, nil
	case keyspace.KindMap:
		m := make(map[any]any, len(r.Elems)/2)
		for i := 0; i+1 < len(r.Elems); i += 2 {
			k, _ := fromReply(r.Elems[i])
			v, err := fromReply(r.Elems[i+1])
			if err != nil && err != ErrNil {
				v = err
			}
			m[k] = v
		}
		return m, nil
	default: // arrays, sets, pushes
		out := make([]any, len(r.Elems))
		for i, e := range r.Elems {
			v, err := fromReply(e)
			if err != nil && err != ErrNil {
				v = err
			}
			out[i] = v
		}
		return out, nil
	}
}

// raftPeers converts a list of voters for the replication package.
func raftPeers(list []Peer) []replication.Peer {
	var peers []replication.Peer
	for _, p := range list {
		peers = append(peers, replication.Peer(p))
	}
	return peers
}

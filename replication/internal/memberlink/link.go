// Package memberlink is the link between the members of a cluster, and the
// client that carries internal commands over it.
//
// The member link carries every connection between members: Raft's RPCs,
// and the internal LOCKSERVER commands (forwarded requests, JOIN, REGISTER,
// APPLIED, ACKED) that a member sends to another member's server. Both go
// to the Raft address, and a connection carries nothing until both ends have
// proved that they are members of the same cluster:
//
//   - with TLS (Config.TLS), in a session where each end presented a certificate
//     issued by the cluster's CA whose names match the configured pattern;
//   - with a cluster secret, by a challenge-response: each end sends a fresh
//     nonce and proves that it knows the secret by an HMAC over both ends'
//     hellos, labelled with its role, so that an answer can be neither
//     replayed on another connection nor reflected back to its sender;
//   - and in every case, by the cluster identity each end holds (ClusterID):
//     a member refuses a peer of another cluster, and says so.
//
// Either credential may be used alone or both together. With neither, only
// the cluster identity is checked: anyone who reaches the port is a member,
// which the engine allows on loopback addresses only, unless told otherwise.
//
// The handshake, all of it before the first RPC:
//
//	dialer   -> acceptor  hello: magic, version, channel, cluster, nonce, node id, extensions
//	acceptor -> dialer    hello: magic, version, cluster, nonce, node id, extensions; proof
//	dialer   -> acceptor  proof
//	acceptor -> dialer    verdict: one byte, linkOK or why it refuses
//
// Every field has a fixed size but the node id, which is at most 255 bytes,
// and the extensions, at most maxExtensions, and the whole handshake must end
// within handshakeTimeout: a peer that sends garbage, or nothing, costs one
// bounded goroutine for that long, and a few such peers at once
// (maxHandshakesPerHost) cannot hold up the others.
//
// The version negotiates the link between members of different builds, as a
// cluster is upgraded a member at a time: the dialer offers the highest it
// speaks, the acceptor answers in the highest both speak. Version 1, of
// lockserver 0.1, has no extensions, and its acceptors refuse any other
// version; from version 2 on, the extensions carry what a version adds, the
// sender's build version first, and a member skips those it does not know.
// Builds returns what each peer said it runs.
//
// Who is trusted when: nothing is read from a connection but the handshake
// until both ends have passed it, and a member that knows no cluster identity
// yet (one that is joining) accepts no link and dials only member
// connections. Once a link is established, the peer is a member: its Raft
// RPCs go to raft, and its member connections to the server, which lets
// them send the commands reserved to members. The node id a peer gives is
// for the logs only: any member may claim any id.
package memberlink

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hashicorp/raft"
)

// TLS secures the links between members with mutual TLS.
type TLS struct {
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

// Config is what a member link needs to know.
type Config struct {
	Node   string // this member's id, for the peers' logs
	Build  string // this member's build version, which the peers learn
	Secret []byte // the cluster secret; nil for none
	TLS    *TLS   // nil for no TLS
	Log    *slog.Logger
	// Gone, when set, is told the node id of a member whose Raft link to
	// this one ended from its side (end of stream, a reset, a broken pipe):
	// the peer closed it, or its process ended. It runs on the link's
	// reader or writer and must not block.
	Gone func(node string)
	// linkVersion is the highest link version this end speaks; 0 means
	// linkMax. onlyVersion makes it refuse a hello of any other version, as
	// a lockserver 0.1 member does: tests of the negotiation set both to be
	// such a member.
	linkVersion byte
	onlyVersion bool
	// timeout bounds a handshake; 0 means handshakeTimeout.
	timeout time.Duration
	// refuseEvery is how often a refusal is logged for one peer host and
	// reason; 0 means refusePeriod.
	refuseEvery time.Duration
}

func (c *Config) maxVersion() byte { return cmp.Or(c.linkVersion, linkMax) }

func (c *Config) handshakeTimeout() time.Duration {
	if c.timeout > 0 {
		return c.timeout
	}
	return handshakeTimeout
}

// Link is the member link of one member: a raft.StreamLayer for the Raft
// transport, a listener of the member connections that the server serves,
// and the dialer of both.
type Link struct {
	cfg     Config
	ln      net.Listener
	addr    net.Addr
	cluster atomic.Pointer[ClusterID] // nil until known: a joiner refuses every link until then
	raftQ   *connQueue
	memberQ *connQueue
	refused logLimiter

	mu      sync.Mutex
	perHost map[string]int
	total   int
	// builds is the build version of each peer, by the node id it gave,
	// from its last handshake.
	builds map[string]string

	closeOnce sync.Once
	wg        sync.WaitGroup
}

// Listen opens the member link on addr. The other members reach this one at
// advertise (a proxy's or a NAT's), or at addr if it is empty.
func Listen(addr, advertise string, cfg Config) (*Link, error) {
	reach, err := reachAddr(cmp.Or(advertise, addr))
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	l := &Link{
		cfg: cfg, ln: ln, addr: reach,
		raftQ: newConnQueue(reach), memberQ: newConnQueue(reach),
		perHost: map[string]int{}, builds: map[string]string{},
	}
	l.wg.Add(1)
	go l.acceptLoop()
	return l, nil
}

// reachAddr is the address the other members reach this one at, as given:
// an IP address, which must not be unspecified, or a host name, which is
// not looked up here. A name's record may appear only after the process
// starts (a Kubernetes pod's, in its StatefulSet's headless Service), and
// the name, not what it resolves to now, is what the members keep.
func reachAddr(hostPort string) (net.Addr, error) {
	host, port, err := net.SplitHostPort(hostPort)
	if err != nil {
		return nil, err
	}
	if _, err := net.LookupPort("tcp", port); err != nil || host == "" {
		return nil, fmt.Errorf("%s is no address the other members can reach this one at", hostPort)
	}
	if ip := net.ParseIP(host); ip != nil {
		if ip.IsUnspecified() {
			return nil, fmt.Errorf("%s is no address the other members can reach this one at", hostPort)
		}
		return net.ResolveTCPAddr("tcp", hostPort)
	}
	return namedAddr(hostPort), nil
}

// namedAddr is a member's address by host name.
type namedAddr string

func (namedAddr) Network() string  { return "tcp" }
func (a namedAddr) String() string { return string(a) }

// SetCluster sets the identity this member carries in its handshakes, once
// known; until then it refuses every link.
func (l *Link) SetCluster(id ClusterID) { l.cluster.Store(&id) }

// Accept returns the next link that carries Raft RPCs (raft.StreamLayer).
func (l *Link) Accept() (net.Conn, error) { return l.raftQ.Accept() }

// Addr returns the address the other members reach this one at.
func (l *Link) Addr() net.Addr { return l.addr }

// Close stops accepting links; those handed out go on until closed.
func (l *Link) Close() error {
	var err error
	l.closeOnce.Do(func() {
		err = l.ln.Close()
		l.raftQ.Close()
		l.memberQ.Close()
		l.wg.Wait()
	})
	return err
}

// Members returns the listener of the member connections: links that carry
// RESP, from members, for the server to serve as member connections.
func (l *Link) Members() net.Listener { return l.memberQ }

// Dial opens a link for Raft RPCs to the member at address
// (raft.StreamLayer).
func (l *Link) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), min(timeout, l.cfg.handshakeTimeout()))
	defer cancel()
	return l.dial(ctx, string(address), chanRaft)
}

// DialMember opens a link for RESP to the server of the member at addr.
func (l *Link) DialMember(ctx context.Context, addr string) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, l.cfg.handshakeTimeout())
	defer cancel()
	return l.dial(ctx, addr, chanMember)
}

// errLinkDial marks a link that was never established: nothing was sent on
// it. ErrRefused marks one that the peer, or this member, refused for its
// credentials or its cluster: trying again will not help.
var (
	errLinkDial = errors.New("member link not established")
	ErrRefused  = fmt.Errorf("%w: refused", errLinkDial)
)

// refusal marks err as a refusal.
func refusal(err error) error { return fmt.Errorf("%w: %w", ErrRefused, err) }

// dial links to addr, offering the highest link version this member
// speaks, and version 1 on a second connection if the peer refuses that as
// a lockserver 0.1 member does. It offers the highest every time, rather
// than remember a peer that refused it: the peer may be upgraded by the
// next link, which must learn its build.
func (l *Link) dial(ctx context.Context, addr string, channel byte) (net.Conn, error) {
	conn, err := l.dialOnce(ctx, addr, channel, l.cfg.maxVersion())
	if errors.Is(err, errOlderPeer) {
		conn, err = l.dialOnce(ctx, addr, channel, linkV1)
	}
	return conn, err
}

// learn records the build version a peer gave in its handshake; a peer of
// link version 1 gives none, and runs lockserver 0.1.
func (l *Link) learn(node, build string) {
	if build == "" {
		build = "0.1.0"
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.builds) > 4096 { // ids are claims: bound what they can fill
		clear(l.builds)
	}
	l.builds[node] = build
}

// Builds returns the build version of each member this one has had a link
// with since it started, by node id, from the last of those handshakes.
func (l *Link) Builds() map[string]string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return maps.Clone(l.builds)
}

// dialOnce dials addr and runs the dialer's handshake, offering version.
func (l *Link) dialOnce(ctx context.Context, addr string, channel, version byte) (net.Conn, error) {
	var d net.Dialer
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errLinkDial, err)
	}
	deadline, _ := ctx.Deadline()
	nc.SetDeadline(deadline)
	conn, err := l.dialHandshake(nc, addr, channel, version)
	if errors.Is(err, errOlderPeer) {
		nc.Close()
		return nil, err
	}
	if err != nil {
		nc.Close()
		// A TLS alert from the peer is its refusal of this member's
		// certificate (under TLS 1.3 it comes after this end's handshake).
		var remote *net.OpError
		switch {
		case errors.Is(err, errLinkDial):
		case errors.As(err, &remote) && remote.Op == "remote error":
			l.refuse(addr, "refused_by_peer", "a member refused this member's link in TLS", "peer", addr, "err", err)
			err = refusal(err)
		default:
			err = fmt.Errorf("%w: %w", errLinkDial, err)
		}
		return nil, fmt.Errorf("link to %s: %w", addr, err)
	}
	conn.SetDeadline(time.Time{})
	return conn, nil
}

func (l *Link) acceptLoop() {
	defer l.wg.Done()
	var backoff time.Duration
	for {
		nc, err := l.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			l.cfg.Log.Warn("member link: accept failed; backing off", "err", err, "backoff", backoff)
			time.Sleep(backoff)
			continue
		}
		backoff = 0
		host, _, _ := net.SplitHostPort(nc.RemoteAddr().String())
		if !l.admit(host) {
			l.refuse(host, "busy", "refused a member link: too many handshakes in progress", "peer", nc.RemoteAddr())
			nc.Close()
			continue
		}
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			defer l.release(host)
			l.accept(nc)
		}()
	}
}

// admit counts a handshake from host in, or reports that there are too many.
func (l *Link) admit(host string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.total >= maxHandshakes || l.perHost[host] >= maxHandshakesPerHost {
		return false
	}
	l.total++
	l.perHost[host]++
	return true
}

func (l *Link) release(host string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.total--
	if l.perHost[host]--; l.perHost[host] == 0 {
		delete(l.perHost, host)
	}
}

// accept runs the acceptor's side of the handshake on nc and hands the link
// to Raft or to the server.
func (l *Link) accept(nc net.Conn) {
	deadline := time.Now().Add(l.cfg.handshakeTimeout())
	nc.SetDeadline(deadline)
	conn, peer, err := l.acceptHandshake(nc)
	if err != nil {
		nc.Close()
		if err != errRefused {
			l.cfg.Log.Debug("member link: handshake failed", "peer", nc.RemoteAddr(), "err", err)
		}
		return
	}
	conn.SetDeadline(time.Time{})
	q := l.raftQ
	if peer.channel == chanMember {
		q = l.memberQ
	} else if l.cfg.Gone != nil {
		conn = &watchedConn{Conn: conn, gone: func() { l.cfg.Gone(peer.node) }}
	}
	if !q.deliver(conn, deadline) {
		conn.Close()
	}
}

// refuse logs a refused link, at most once per period for each peer host
// and reason: a peer that keeps calling, or an attacker, cannot flood the log.
func (l *Link) refuse(peer, reason, msg string, args ...any) {
	if host, _, err := net.SplitHostPort(peer); err == nil {
		peer = host // each call comes from another port
	}
	if n, ok := l.refused.allow(peer+" "+reason, cmp.Or(l.cfg.refuseEvery, refusePeriod)); ok {
		args = append([]any{"event", "member_link_refused", "reason", reason}, args...)
		if n > 0 {
			args = append(args, "also_refused_since_last_said", n)
		}
		l.cfg.Log.Warn(msg, args...)
	}
}

// logLimiter lets a message through once per period for each key.
type logLimiter struct {
	mu   sync.Mutex
	last map[string]time.Time
	hits map[string]int
}

const refusePeriod = 10 * time.Second

// allow reports whether to log for key now, and how many were held back.
func (g *logLimiter) allow(key string, period time.Duration) (int, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.last == nil {
		g.last, g.hits = map[string]time.Time{}, map[string]int{}
	}
	now := time.Now()
	if t, ok := g.last[key]; ok && now.Sub(t) < period {
		g.hits[key]++
		return 0, false
	}
	if len(g.last) > 4096 { // forget old keys rather than grow without bound
		clear(g.last)
	}
	n := g.hits[key]
	delete(g.hits, key)
	g.last[key] = now
	return n, true
}

// connQueue is a listener of the links that a member link hands over.
type connQueue struct {
	addr net.Addr
	ch   chan net.Conn
	done chan struct{}
	once sync.Once
}

func newConnQueue(addr net.Addr) *connQueue {
	return &connQueue{addr: addr, ch: make(chan net.Conn), done: make(chan struct{})}
}

func (q *connQueue) Accept() (net.Conn, error) {
	select {
	case c := <-q.ch:
		return c, nil
	case <-q.done:
		return nil, net.ErrClosed
	}
}

func (q *connQueue) Close() error {
	q.once.Do(func() { close(q.done) })
	return nil
}

func (q *connQueue) Addr() net.Addr { return q.addr }

// deliver hands c to Accept, or reports false if none takes it by deadline
// or the queue closes.
func (q *connQueue) deliver(c net.Conn, deadline time.Time) bool {
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	select {
	case q.ch <- c:
		return true
	case <-q.done:
	case <-t.C:
	}
	return false
}

// IsLoopback reports whether addr's host is a loopback address (or localhost).
func IsLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// watchedConn is a Raft link from a peer that tells Config.Gone when a read
// or a write fails for any reason but this end's own closing or deadline.
type watchedConn struct {
	net.Conn
	gone func()
	once sync.Once
}

func (c *watchedConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	c.check(err)
	return n, err
}

func (c *watchedConn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	c.check(err)
	return n, err
}

func (c *watchedConn) check(err error) {
	if err != nil && !errors.Is(err, net.ErrClosed) && !errors.Is(err, os.ErrDeadlineExceeded) {
		c.once.Do(c.gone)
	}
}

// Refused reports whether err, from Dial, says that nothing listens at the
// address: the host answered, and no process of it took the connection.
func Refused(err error) bool { return errors.Is(err, syscall.ECONNREFUSED) }

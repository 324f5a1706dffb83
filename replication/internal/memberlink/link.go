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
//	dialer   -> acceptor  hello: magic, version, channel, cluster, nonce, node id
//	acceptor -> dialer    hello: magic, version, cluster, nonce, node id; proof
//	dialer   -> acceptor  proof
//	acceptor -> dialer    verdict: one byte, linkOK or why it refuses
//
// Every field has a fixed size but the node id, which is at most 255 bytes,
// and the whole handshake must end within handshakeTimeout: a peer that
// sends garbage, or nothing, costs one bounded goroutine for that long, and
// a few such peers at once (maxHandshakesPerHost) cannot hold up the others.
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
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"path"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
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

// Handshake constants. The channel says what the link carries after it.
const (
	linkMagic   = "LKSM"
	linkVersion = 1

	chanRaft   = 'R' // hashicorp/raft's NetworkTransport RPCs
	chanMember = 'M' // RESP, to the server, as a member connection

	nonceSize = 32
	proofSize = sha256.Size

	// handshakeTimeout bounds the whole handshake, TLS included.
	handshakeTimeout = 10 * time.Second
	// maxHandshakes bounds the handshakes in progress, and
	// maxHandshakesPerHost those from one host: a connection beyond them is
	// closed at once.
	maxHandshakes        = 256
	maxHandshakesPerHost = 16
)

// Verdicts, the acceptor's last byte.
const (
	linkOK byte = iota
	linkBadProof
	linkOtherCluster
	linkNotJoined
)

func verdictText(v byte) string {
	switch v {
	case linkBadProof:
		return "the peer refused this member's proof (a different cluster secret)"
	case linkOtherCluster:
		return "the peer belongs to another cluster"
	case linkNotJoined:
		return "the peer refused a link for Raft from a member that has not joined"
	}
	return fmt.Sprintf("the peer refused the link (verdict %d)", v)
}

// hello is what each end says first.
type hello struct {
	channel byte // the dialer's only
	cluster ClusterID
	nonce   [nonceSize]byte
	node    string
}

// helloFixed is the size of a hello before its node id, channel excluded.
const helloFixed = len(linkMagic) + 1 + len(ClusterID{}) + nonceSize + 1

func (h *hello) encode(dialer bool) []byte {
	b := make([]byte, 0, helloFixed+1+len(h.node))
	b = append(b, linkMagic...)
	b = append(b, linkVersion)
	if dialer {
		b = append(b, h.channel)
	}
	b = append(b, h.cluster[:]...)
	b = append(b, h.nonce[:]...)
	b = append(b, byte(len(h.node)))
	return append(b, h.node...)
}

// readHello reads a hello and returns it with its encoding, for the proofs.
func readHello(r io.Reader, dialer bool) (hello, []byte, error) {
	var h hello
	n := helloFixed
	if dialer {
		n++
	}
	b := make([]byte, n, n+255)
	if _, err := io.ReadFull(r, b); err != nil {
		return h, nil, err
	}
	if string(b[:len(linkMagic)]) != linkMagic {
		return h, nil, errors.New("not a lockserver member (no handshake)")
	}
	if b[len(linkMagic)] != linkVersion {
		return h, nil, fmt.Errorf("handshake version %d, this member speaks %d", b[len(linkMagic)], linkVersion)
	}
	rest := b[len(linkMagic)+1:]
	if dialer {
		h.channel, rest = rest[0], rest[1:]
	}
	copy(h.cluster[:], rest)
	copy(h.nonce[:], rest[len(h.cluster):])
	node := make([]byte, rest[len(h.cluster)+nonceSize])
	if _, err := io.ReadFull(r, node); err != nil {
		return h, nil, err
	}
	h.node = string(node)
	return h, append(b, node...), nil
}

// proof is an end's answer to the challenge: an HMAC with the secret over
// both hellos, labelled with the end's role. Without a secret it is zeros.
func proof(secret []byte, role string, dialerHello, acceptorHello []byte) []byte {
	if len(secret) == 0 {
		return make([]byte, proofSize)
	}
	m := hmac.New(sha256.New, secret)
	m.Write([]byte("lockserver member link " + role + "\x00"))
	m.Write(dialerHello)
	m.Write(acceptorHello)
	return m.Sum(nil)
}

// Config is what a member link needs to know.
type Config struct {
	Node   string // this member's id, for the peers' logs
	Secret []byte // the cluster secret; nil for none
	TLS    *TLS   // nil for no TLS
	Log    *slog.Logger
	// timeout bounds a handshake; 0 means handshakeTimeout.
	timeout time.Duration
	// refuseEvery is how often a refusal is logged for one peer host and
	// reason; 0 means refusePeriod.
	refuseEvery time.Duration
}

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

	closeOnce sync.Once
	wg        sync.WaitGroup
}

// Listen opens the member link on addr. The other members reach this one at
// advertise (a proxy's or a NAT's), or at addr if it is empty.
func Listen(addr, advertise string, cfg Config) (*Link, error) {
	tcp, err := net.ResolveTCPAddr("tcp", cmp.Or(advertise, addr))
	if err != nil {
		return nil, err
	}
	if tcp.IP == nil || tcp.IP.IsUnspecified() {
		return nil, fmt.Errorf("%s is no address the other members can reach this one at", cmp.Or(advertise, addr))
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	l := &Link{
		cfg: cfg, ln: ln, addr: tcp,
		raftQ: newConnQueue(tcp), memberQ: newConnQueue(tcp),
		perHost: map[string]int{},
	}
	l.wg.Add(1)
	go l.acceptLoop()
	return l, nil
}

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

func (l *Link) dial(ctx context.Context, addr string, channel byte) (net.Conn, error) {
	var d net.Dialer
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errLinkDial, err)
	}
	deadline, _ := ctx.Deadline()
	nc.SetDeadline(deadline)
	conn, err := l.dialHandshake(nc, addr, channel)
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

// dialHandshake runs the dialer's side of the handshake on nc.
func (l *Link) dialHandshake(nc net.Conn, addr string, channel byte) (net.Conn, error) {
	conn := nc
	if l.cfg.TLS != nil {
		cfg, err := l.tlsConfig(false)
		if err != nil {
			return nil, err
		}
		tc := tls.Client(nc, cfg)
		if err := tc.Handshake(); err != nil {
			if errors.Is(err, ErrRefused) { // this member refused the peer's certificate
				l.refuse(addr, "tls", "refused a member link: TLS handshake failed", "peer", addr, "err", err)
			}
			return nil, fmt.Errorf("TLS: %w", err)
		}
		conn = tc
	}
	var mine ClusterID
	if id := l.cluster.Load(); id != nil {
		mine = *id
	}
	if channel == chanRaft && mine.IsZero() {
		return nil, errors.New("this member has not joined a cluster yet")
	}
	h := hello{channel: channel, cluster: mine, node: l.cfg.Node}
	rand.Read(h.nonce[:])
	dh := h.encode(true)
	if _, err := conn.Write(dh); err != nil {
		return nil, err
	}
	peer, ah, err := readHello(conn, false)
	if err != nil {
		return nil, err
	}
	theirs := make([]byte, proofSize)
	if _, err := io.ReadFull(conn, theirs); err != nil {
		return nil, err
	}
	if !hmac.Equal(theirs, proof(l.cfg.Secret, "acceptor", dh, ah)) {
		l.refuse(addr, "bad_proof", "refused a member link: the peer did not prove the cluster secret", "peer", addr, "node", peer.node)
		return nil, refusal(errors.New("the peer did not prove the cluster secret"))
	}
	// The peer has proved itself: this one proves itself too, so that the
	// peer, which judges the link, can say why it refuses it if it does.
	if _, err := conn.Write(proof(l.cfg.Secret, "dialer", dh, append(ah, theirs...))); err != nil {
		return nil, err
	}
	var verdict [1]byte
	if _, err := io.ReadFull(conn, verdict[:]); err != nil {
		return nil, err
	}
	switch {
	case verdict[0] == linkOtherCluster || verdict[0] == linkOK && !mine.IsZero() && peer.cluster != mine:
		l.refuse(addr, "other_cluster", "refused a member link: the peer belongs to another cluster",
			"peer", addr, "node", peer.node, "its_cluster", peer.cluster, "this_cluster", mine)
		return nil, refusal(fmt.Errorf("the peer (node %q) belongs to cluster %s, this member to %s", peer.node, peer.cluster, mine))
	case verdict[0] != linkOK:
		return nil, refusal(errors.New(verdictText(verdict[0])))
	}
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
	conn, channel, err := l.acceptHandshake(nc)
	if err != nil {
		nc.Close()
		if err != errRefused {
			l.cfg.Log.Debug("member link: handshake failed", "peer", nc.RemoteAddr(), "err", err)
		}
		return
	}
	conn.SetDeadline(time.Time{})
	q := l.raftQ
	if channel == chanMember {
		q = l.memberQ
	}
	if !q.deliver(conn, deadline) {
		conn.Close()
	}
}

// errRefused is the error of a handshake whose refusal was logged already.
var errRefused = errors.New("refused")

func (l *Link) acceptHandshake(nc net.Conn) (net.Conn, byte, error) {
	from := nc.RemoteAddr().String()
	id := l.cluster.Load()
	if id == nil {
		// Not joined yet: no one should call on this member.
		return nil, 0, errors.New("this member has not joined a cluster yet")
	}
	conn := nc
	if l.cfg.TLS != nil {
		cfg, err := l.tlsConfig(true)
		if err != nil {
			l.cfg.Log.Error("member link: no TLS settings", "err", err)
			return nil, 0, errRefused
		}
		tc := tls.Server(nc, cfg)
		if err := tc.Handshake(); err != nil {
			l.refuse(from, "tls", "refused a member link: TLS handshake failed", "peer", from, "err", err)
			return nil, 0, errRefused
		}
		conn = tc
	}
	peer, dh, err := readHello(conn, true)
	if err != nil {
		l.refuse(from, "bad_handshake", "refused a member link: bad handshake", "peer", from, "err", err)
		return nil, 0, errRefused
	}
	if peer.channel != chanRaft && peer.channel != chanMember {
		l.refuse(from, "bad_handshake", "refused a member link: unknown channel", "peer", from, "channel", peer.channel)
		return nil, 0, errRefused
	}
	h := hello{cluster: *id, node: l.cfg.Node}
	rand.Read(h.nonce[:])
	ah := h.encode(false)
	mine := proof(l.cfg.Secret, "acceptor", dh, ah)
	if _, err := conn.Write(append(ah, mine...)); err != nil {
		return nil, 0, err
	}
	theirs := make([]byte, proofSize)
	if _, err := io.ReadFull(conn, theirs); err != nil {
		l.refuse(from, "left", "refused a member link: the peer left before proving itself (a different cluster secret, or another cluster)",
			"peer", from, "node", peer.node, "its_cluster", peer.cluster, "err", err)
		return nil, 0, errRefused
	}
	verdict := linkOK
	switch {
	case !hmac.Equal(theirs, proof(l.cfg.Secret, "dialer", dh, append(ah, mine...))):
		verdict = linkBadProof
		l.refuse(from, "bad_proof", "refused a member link: the peer did not prove the cluster secret", "peer", from, "node", peer.node)
	case peer.cluster.IsZero() && peer.channel == chanRaft:
		verdict = linkNotJoined
		l.refuse(from, "not_joined", "refused a Raft link from a member that has not joined", "peer", from, "node", peer.node)
	case !peer.cluster.IsZero() && peer.cluster != *id:
		verdict = linkOtherCluster
		l.refuse(from, "other_cluster", "refused a member link: the peer belongs to another cluster; its RPCs and votes are ignored",
			"peer", from, "node", peer.node, "its_cluster", peer.cluster, "this_cluster", *id)
	}
	conn.Write([]byte{verdict})
	if verdict != linkOK {
		return nil, 0, errRefused
	}
	return conn, peer.channel, nil
}

// tlsConfig returns the TLS settings of a new link: as its acceptor (server)
// or as its dialer. Each end verifies the other's certificate against the
// cluster's CA and the name pattern, not against a host name: members are
// reached at addresses, and a certificate's names say who is a member.
func (l *Link) tlsConfig(server bool) (*tls.Config, error) {
	base, err := l.cfg.TLS.Config()
	if err != nil {
		return nil, err
	}
	if len(base.Certificates) == 0 || base.RootCAs == nil {
		return nil, errors.New("MemberTLS.Config gives no certificate or no RootCAs")
	}
	cert := base.Certificates[0]
	cfg := &tls.Config{
		MinVersion:   max(base.MinVersion, tls.VersionTLS12),
		MaxVersion:   base.MaxVersion,
		CipherSuites: base.CipherSuites,
	}
	usage := x509.ExtKeyUsageServerAuth
	if server {
		usage = x509.ExtKeyUsageClientAuth
		cfg.Certificates = []tls.Certificate{cert}
		cfg.ClientAuth = tls.RequireAnyClientCert
	} else {
		cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &cert, nil }
		// Verified by VerifyConnection below instead of against a host name.
		cfg.InsecureSkipVerify = true
	}
	cfg.VerifyConnection = func(cs tls.ConnectionState) error {
		if err := verifyMember(cs.PeerCertificates, base.RootCAs, usage, l.cfg.TLS.Names); err != nil {
			return refusal(err)
		}
		return nil
	}
	return cfg, nil
}

// verifyMember checks a peer's certificate chain: issued by the cluster's
// CA, valid now, for usage, and named as names says a member is.
func verifyMember(chain []*x509.Certificate, roots *x509.CertPool, usage x509.ExtKeyUsage, names string) error {
	if len(chain) == 0 {
		return errors.New("the peer presented no certificate")
	}
	inter := x509.NewCertPool()
	for _, c := range chain[1:] {
		inter.AddCert(c)
	}
	leaf := chain[0]
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{usage}}); err != nil {
		return err
	}
	for _, n := range append(slices.Clone(leaf.DNSNames), leaf.Subject.CommonName) {
		if ok, _ := path.Match(names, n); ok && n != "" {
			return nil
		}
	}
	return fmt.Errorf("certificate of %q (DNS names %q) does not match the members' name pattern %q", leaf.Subject.CommonName, leaf.DNSNames, names)
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

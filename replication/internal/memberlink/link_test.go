package memberlink

import (
	"bytes"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"log/slog"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/lockserver/lockserver/internal/freeport"
	"github.com/lockserver/lockserver/internal/testcerts"
	"github.com/lockserver/lockserver/internal/testlog"
)

// logBuf collects a node's log lines, for tests that expect one.
type logBuf struct{ testlog.Buffer }

func (l *logBuf) logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(l, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// waitLog waits until the log holds want, failing the test after 20 s.
func (l *logBuf) waitLog(t *testing.T, want string) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); !strings.Contains(l.String(), want); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the log never said %q:\n%s", want, l.String())
		}
	}
}

const testSecret = "0123456789abcdef-test-secret"

var testCluster1, testCluster2 = ClusterID{1}, ClusterID{2}

// startLink opens a member link on a free loopback port, member of cluster
// (none if zero), that serves both channels by echoing what it reads.
func startLink(t *testing.T, cfg Config, cluster ClusterID) (*Link, *logBuf) {
	t.Helper()
	logs := &logBuf{}
	if cfg.Log == nil {
		cfg.Log = logs.logger()
	}
	// Every refusal logged: the tests look for each.
	cfg.refuseEvery = time.Nanosecond
	l, err := Listen(freeport.MustAddr(t), "", cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	if !cluster.isZero() {
		l.SetCluster(cluster)
	}
	for _, ln := range []net.Listener{l, l.Members()} {
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				go func() {
					defer c.Close()
					io.Copy(c, c)
				}()
			}
		}()
	}
	return l, logs
}

// echoes checks that c is a live link: what it sends comes back.
func echoes(t *testing.T, c net.Conn) {
	t.Helper()
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Write([]byte("ping")); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 4)
	if _, err := io.ReadFull(c, got); err != nil || string(got) != "ping" {
		t.Fatalf("echo = %q, %v", got, err)
	}
}

// closedByPeer checks that the peer closes c without sending anything more.
func closedByPeer(t *testing.T, c net.Conn) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(20 * time.Second))
	n, err := io.Copy(io.Discard, c)
	// A reset is a close too: the peer left what it did not read unread.
	if err != nil && !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("the peer did not close the link: %v", err)
	}
	if n != 0 {
		t.Fatalf("the peer sent %d more bytes before closing", n)
	}
}

func TestMemberLinkCarriesRaftAndMemberConnections(t *testing.T) {
	a, _ := startLink(t, Config{Node: "a", Secret: []byte(testSecret)}, testCluster1)
	b, _ := startLink(t, Config{Node: "b", Secret: []byte(testSecret)}, testCluster1)
	c, err := b.Dial(linkAddr(a), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	echoes(t, c)
	c, err = b.DialMember(t.Context(), a.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	echoes(t, c)
}

func linkAddr(l *Link) raft.ServerAddress { return raft.ServerAddress(l.Addr().String()) }

// A member with another secret is refused in both directions, and the
// member that refuses says why.
func TestMemberLinkRefusesAnotherSecret(t *testing.T) {
	a, alog := startLink(t, Config{Node: "a", Secret: []byte(testSecret)}, testCluster1)
	b, blog := startLink(t, Config{Node: "b", Secret: []byte("another-secret-of-16-bytes")}, testCluster1)
	if _, err := b.Dial(linkAddr(a), 10*time.Second); err == nil {
		t.Fatal("a member with another secret established a Raft link")
	}
	blog.waitLog(t, "the peer did not prove the cluster secret")
	alog.waitLog(t, "refused a member link: the peer left before proving itself")
	if _, err := a.DialMember(t.Context(), b.Addr().String()); err == nil {
		t.Fatal("a member established a link to one with another secret")
	}
	alog.waitLog(t, "the peer did not prove the cluster secret")
}

// A stranger who speaks the handshake but holds no secret gets nowhere:
// neither by replaying what a member sent on another link, nor by
// reflecting the acceptor's own proof back to it.
func TestMemberLinkRefusesReplayAndReflection(t *testing.T) {
	a, alog := startLink(t, Config{Node: "a", Secret: []byte(testSecret)}, testCluster1)
	b, _ := startLink(t, Config{Node: "b", Secret: []byte(testSecret)}, testCluster1)

	// A proxy records what member b sends a on a real link.
	var recorded logBuf
	proxy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer proxy.Close()
	go func() {
		in, err := proxy.Accept()
		if err != nil {
			return
		}
		out, err := net.Dial("tcp", a.Addr().String())
		if err != nil {
			in.Close()
			return
		}
		go io.Copy(in, out)
		io.Copy(io.MultiWriter(out, &recorded), in)
	}()
	c, err := b.Dial(raft.ServerAddress(proxy.Addr().String()), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	echoes(t, c)
	sent := []byte(recorded.String())
	helloLen := helloFixed + 1 + len("b") + 2 // with the channel byte, and the size of no extensions
	if len(sent) < helloLen+proofSize {
		t.Fatalf("recorded %d bytes of b's handshake", len(sent))
	}

	// Replayed whole on a new link: a's new nonce makes b's proof stale.
	replay, err := net.Dial("tcp", a.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	replay.Write(sent[:helloLen+proofSize])
	if v := verdictAfterHello(t, replay); v != linkBadProof {
		t.Fatalf("replayed handshake: verdict %d, want %d (bad proof)", v, linkBadProof)
	}
	closedByPeer(t, replay)

	// Reflected: the acceptor's proof sent back as the dialer's.
	refl, err := net.Dial("tcp", a.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	h := hello{version: linkMax, channel: chanRaft, cluster: testCluster1, node: "mallory"}
	rand.Read(h.nonce[:])
	refl.Write(h.encode(true))
	refl.SetDeadline(time.Now().Add(10 * time.Second))
	if _, _, err := readHello(refl, false); err != nil {
		t.Fatal(err)
	}
	theirs := make([]byte, proofSize)
	if _, err := io.ReadFull(refl, theirs); err != nil {
		t.Fatal(err)
	}
	refl.Write(theirs)
	var v [1]byte
	if _, err := io.ReadFull(refl, v[:]); err != nil || v[0] != linkBadProof {
		t.Fatalf("reflected proof: verdict %v, %v; want %d (bad proof)", v, err, linkBadProof)
	}
	closedByPeer(t, refl)
	alog.waitLog(t, `node=mallory`)
}

// verdictAfterHello reads the acceptor's hello and proof on c, and then its
// verdict on what c sent.
func verdictAfterHello(t *testing.T, c net.Conn) byte {
	t.Helper()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, _, err := readHello(c, false); err != nil {
		t.Fatal(err)
	}
	rest := make([]byte, proofSize+1)
	if _, err := io.ReadFull(c, rest); err != nil {
		t.Fatal(err)
	}
	return rest[proofSize]
}

// Members of another cluster refuse each other, though they share the
// secret, and each says which clusters.
func TestMemberLinkRefusesAnotherCluster(t *testing.T) {
	a, alog := startLink(t, Config{Node: "a", Secret: []byte(testSecret)}, testCluster1)
	b, blog := startLink(t, Config{Node: "b", Secret: []byte(testSecret)}, testCluster2)
	if _, err := b.Dial(linkAddr(a), 10*time.Second); err == nil {
		t.Fatal("a member of another cluster established a Raft link")
	}
	blog.waitLog(t, "its_cluster="+testCluster1.String()+" this_cluster="+testCluster2.String())

	// One that does not check the acceptor's hello is refused by it.
	nc, err := net.Dial("tcp", a.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	h := hello{version: linkMax, channel: chanRaft, cluster: testCluster2, node: "b"}
	if v := handshakeAs(t, nc, h, []byte(testSecret)); v != linkOtherCluster {
		t.Fatalf("verdict %d, want %d (another cluster)", v, linkOtherCluster)
	}
	alog.waitLog(t, "its RPCs and votes are ignored")
	alog.waitLog(t, "its_cluster="+testCluster2.String()+" this_cluster="+testCluster1.String())
}

// handshakeAs runs the dialer's side of the handshake on nc as h says, with
// secret, checking nothing of the acceptor's, and returns its verdict.
func handshakeAs(t *testing.T, nc net.Conn, h hello, secret []byte) byte {
	t.Helper()
	nc.SetDeadline(time.Now().Add(10 * time.Second))
	rand.Read(h.nonce[:])
	dh := h.encode(true)
	nc.Write(dh)
	_, ah, err := readHello(nc, false)
	if err != nil {
		t.Fatal(err)
	}
	theirs := make([]byte, proofSize)
	if _, err := io.ReadFull(nc, theirs); err != nil {
		t.Fatal(err)
	}
	nc.Write(proof(secret, "dialer", dh, append(ah, theirs...)))
	var v [1]byte
	if _, err := io.ReadFull(nc, v[:]); err != nil {
		t.Fatal(err)
	}
	return v[0]
}

// A node that has not joined (no cluster identity yet) may call members, to
// join, but may not carry Raft RPCs; and it answers no one.
func TestMemberLinkJoiner(t *testing.T) {
	a, _ := startLink(t, Config{Node: "a", Secret: []byte(testSecret)}, testCluster1)
	j, _ := startLink(t, Config{Node: "j", Secret: []byte(testSecret)}, ClusterID{})
	c, err := j.DialMember(t.Context(), a.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	echoes(t, c)
	nc, err := net.Dial("tcp", a.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	if v := handshakeAs(t, nc, hello{version: linkMax, channel: chanRaft, node: "j"}, []byte(testSecret)); v != linkNotJoined {
		t.Fatalf("Raft link from a joiner: verdict %d, want %d", v, linkNotJoined)
	}
	if _, err := a.Dial(linkAddr(j), 10*time.Second); err == nil {
		t.Fatal("a node that has not joined accepted a link")
	}
}

// A stranger's bytes cost the member a bounded read and a bounded wait: a
// Raft RPC sent with no handshake is cut after the handshake's fixed-size
// hello, a silent connection at the handshake's deadline, and beyond
// maxHandshakesPerHost pending handshakes from one host a connection is
// closed at once.
func TestMemberLinkBoundsStrangers(t *testing.T) {
	a, alog := startLink(t, Config{Node: "a", Secret: []byte(testSecret), timeout: 300 * time.Millisecond}, testCluster1)
	rpc, err := net.Dial("tcp", a.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	// hashicorp/raft's rpcAppendEntries type byte, then msgpack announcing
	// a map of 2^32-1 entries: nothing of it is ever decoded.
	rpc.Write(append([]byte{0, 0xdf, 0xff, 0xff, 0xff, 0xff}, bytes.Repeat([]byte{0xff}, 100)...))
	closedByPeer(t, rpc)
	alog.waitLog(t, "not a lockserver member (no handshake)")

	silent, err := net.Dial("tcp", a.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	closedByPeer(t, silent)

	// On a member with the usual deadline, the pending ones stay pending.
	a, alog = startLink(t, Config{Node: "a", Secret: []byte(testSecret)}, testCluster1)
	var pending []net.Conn
	defer func() {
		for _, c := range pending {
			c.Close()
		}
	}()
	for range maxHandshakesPerHost {
		c, err := net.Dial("tcp", a.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		pending = append(pending, c)
	}
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		a.mu.Lock()
		n := a.total
		a.mu.Unlock()
		if n == maxHandshakesPerHost {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d handshakes pending, want %d", n, maxHandshakesPerHost)
		}
	}
	extra, err := net.Dial("tcp", a.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	closedByPeer(t, extra)
	alog.waitLog(t, "too many handshakes in progress")
}

// memberTLS returns member TLS settings with leaf as the certificate and
// cas as the cluster's CAs.
func memberTLS(leaf *testcerts.Leaf, names string, cas ...*testcerts.CA) *TLS {
	pool := x509.NewCertPool()
	for _, ca := range cas {
		pool.AddCert(ca.Cert)
	}
	return &TLS{Names: names, Config: func() (*tls.Config, error) {
		return &tls.Config{Certificates: []tls.Certificate{leaf.TLS}, RootCAs: pool}, nil
	}}
}

// With member TLS, a link needs a certificate from the cluster's CA, valid
// now, whose names match the members' pattern, on both ends.
func TestMemberLinkTLS(t *testing.T) {
	ca, other := testcerts.NewCA(t, "cluster CA"), testcerts.NewCA(t, "another CA")
	const names = "*.members.test"
	member := func(name string) *testcerts.Leaf {
		return ca.Issue(t, testcerts.Options{CommonName: name, DNSNames: []string{name}})
	}
	a, alog := startLink(t, Config{Node: "a", TLS: memberTLS(member("a.members.test"), names, ca)}, testCluster1)
	b, _ := startLink(t, Config{Node: "b", TLS: memberTLS(member("b.members.test"), names, ca)}, testCluster1)
	c, err := b.Dial(linkAddr(a), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	echoes(t, c)
	if c, err = a.DialMember(t.Context(), b.Addr().String()); err != nil {
		t.Fatal(err)
	}
	echoes(t, c)

	// Each of these trusts a's certificate, so that a is the one to refuse
	// theirs, and says why.
	for _, tc := range []struct {
		name string
		tls  *TLS
		log  string // what a says
	}{
		{"another CA", memberTLS(other.Issue(t, testcerts.Options{DNSNames: []string{"x.members.test"}}), names, ca, other), "certificate signed by unknown authority"},
		{"a name outside the pattern", memberTLS(member("client.test"), names, ca), `does not match the members' name pattern`},
		{"an expired certificate", memberTLS(ca.Issue(t, testcerts.Options{DNSNames: []string{"x.members.test"}, Expired: true}), names, ca), "expired"},
	} {
		x, _ := startLink(t, Config{Node: "x", TLS: tc.tls}, testCluster1)
		if _, err := x.Dial(linkAddr(a), 10*time.Second); err == nil {
			t.Errorf("%s: established a Raft link to a", tc.name)
		}
		alog.waitLog(t, tc.log)
		if _, err := a.Dial(linkAddr(x), 10*time.Second); err == nil {
			t.Errorf("%s: a established a Raft link to it", tc.name)
		}
	}

	// A member without TLS, even with the right cluster, gets no further
	// than the TLS handshake.
	plain, _ := startLink(t, Config{Node: "p"}, testCluster1)
	if _, err := plain.Dial(linkAddr(a), 10*time.Second); err == nil {
		t.Fatal("a member without TLS established a Raft link to a TLS member")
	}
	alog.waitLog(t, "TLS handshake failed")
}

// A peer that keeps failing the handshake is logged once per period and
// reason, with the count of refusals held back since.
func TestRefusalLogIsBounded(t *testing.T) {
	var g logLimiter
	if _, ok := g.allow("10.0.0.9 bad_proof", time.Hour); !ok {
		t.Fatal("the first refusal was not logged")
	}
	for range 3 {
		if _, ok := g.allow("10.0.0.9 bad_proof", time.Hour); ok {
			t.Fatal("a refusal within the period was logged again")
		}
	}
	if _, ok := g.allow("10.0.0.9 other_cluster", time.Hour); !ok {
		t.Fatal("another reason was held back")
	}
	if n, ok := g.allow("10.0.0.9 bad_proof", 0); !ok || n != 3 {
		t.Fatalf("after the period: logged %v, held back %d; want true, 3", ok, n)
	}
}

// The address the other members reach a member at is kept as given: a host
// name is not looked up when the link opens (its record may not exist
// yet), and an unspecified address is refused.
func TestListenKeepsTheAdvertisedName(t *testing.T) {
	cfg := Config{Node: "a", Secret: []byte(testSecret)}
	l, err := Listen(freeport.MustAddr(t), "member-a.not-yet-in-dns.invalid:7000", cfg)
	if err != nil {
		t.Fatalf("a host name whose record does not exist yet: %v", err)
	}
	if got := l.Addr().String(); got != "member-a.not-yet-in-dns.invalid:7000" {
		t.Errorf("Addr = %s, want the name as given", got)
	}
	l.Close()
	for _, bad := range []string{"0.0.0.0:7000", "[::]:7000", "host-without-port", ":7000", "host:nonsense"} {
		if l, err := Listen(freeport.MustAddr(t), bad, cfg); err == nil {
			l.Close()
			t.Errorf("advertised %q: opened", bad)
		}
	}
}

// A Raft link that its dialer closes tells Gone who that was; a member
// link does not, and a closed member's address refuses a dial (Refused),
// which a live member's does not.
func TestGoneNamesThePeerThatEndedItsLink(t *testing.T) {
	gone := make(chan string, 4)
	a, _ := startLink(t, Config{Node: "a", Secret: []byte(testSecret), Gone: func(node string) { gone <- node }}, testCluster1)
	b, _ := startLink(t, Config{Node: "b", Secret: []byte(testSecret)}, testCluster1)
	m, err := b.DialMember(t.Context(), a.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	echoes(t, m) // and closes it
	c, err := b.Dial(linkAddr(a), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	echoes(t, c)
	select {
	case node := <-gone:
		if node != "b" {
			t.Fatalf("Gone(%q), want b", node)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("a Raft link closed by its dialer did not call Gone")
	}
	if len(gone) != 0 {
		t.Errorf("Gone called again: %q (a member link, or one link twice)", <-gone)
	}

	if c, err := b.Dial(linkAddr(a), 10*time.Second); err != nil || Refused(err) {
		t.Fatalf("dial of a live member: %v (refused: %v)", err, Refused(err))
	} else {
		c.Close()
	}
	addr := linkAddr(b)
	b.Close()
	if _, err := a.Dial(addr, 10*time.Second); !Refused(err) {
		t.Errorf("dial of a closed member: %v, want a refusal of the connection", err)
	}
}

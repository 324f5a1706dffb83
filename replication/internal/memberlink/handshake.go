package memberlink

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"path"
	"slices"
	"syscall"
	"time"
)

// Handshake constants. The channel says what the link carries after it.
const (
	linkMagic = "LKSM"

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

// Link versions. A dialer's hello carries the highest version it speaks,
// and the acceptor answers in the highest that both speak; the dialer then
// goes on in that one. Version 1 (lockserver 0.1) acceptors refuse any other
// version: a dialer refused at once after a hello of a later one dials again
// in version 1 (see Link.dial). From version 2 on every hello has the same
// layout, what a later version adds going into its extensions, so that a
// member reads the hello of a newer one and answers in its own.
const (
	linkV1  byte = 1 // the fields below, no extensions
	linkV2  byte = 2 // and extensions, the first of which is the build version
	linkMax      = linkV2

	// extBuild is the extension that carries the sender's build version.
	extBuild byte = 1
	// maxExtensions bounds the extensions of one hello.
	maxExtensions = 1024
)

// hello is what each end says first.
type hello struct {
	version byte // of the link: the dialer's highest, the acceptor's answer
	channel byte // the dialer's only
	cluster ClusterID
	nonce   [nonceSize]byte
	node    string
	build   string // the sender's build version (extBuild); "" from version 1
}

// helloFixed is the size of a hello before its node id, channel excluded.
const helloFixed = len(linkMagic) + 1 + len(ClusterID{}) + nonceSize + 1

func (h *hello) encode(dialer bool) []byte {
	b := make([]byte, 0, helloFixed+1+len(h.node)+4+len(h.build))
	b = append(b, linkMagic...)
	b = append(b, h.version)
	if dialer {
		b = append(b, h.channel)
	}
	b = append(b, h.cluster[:]...)
	b = append(b, h.nonce[:]...)
	b = append(b, byte(len(h.node)))
	b = append(b, h.node...)
	if h.version < linkV2 {
		return b
	}
	var ext []byte
	if h.build != "" {
		ext = append(ext, extBuild, byte(len(h.build)))
		ext = append(ext, h.build...)
	}
	b = binary.BigEndian.AppendUint16(b, uint16(len(ext)))
	return append(b, ext...)
}

// readHello reads a hello and returns it with its encoding, for the proofs.
func readHello(r io.Reader, dialer bool) (hello, []byte, error) {
	var h hello
	n := helloFixed
	if dialer {
		n++
	}
	b := make([]byte, n, n+255+2)
	if _, err := io.ReadFull(r, b); err != nil {
		return h, nil, err
	}
	if string(b[:len(linkMagic)]) != linkMagic {
		return h, nil, errors.New("not a lockserver member (no handshake)")
	}
	if h.version = b[len(linkMagic)]; h.version < linkV1 {
		return h, nil, fmt.Errorf("handshake version %d", h.version)
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
	b = append(b, node...)
	if h.version < linkV2 {
		return h, b, nil
	}
	var size [2]byte
	if _, err := io.ReadFull(r, size[:]); err != nil {
		return h, nil, err
	}
	n = int(binary.BigEndian.Uint16(size[:]))
	if n > maxExtensions {
		return h, nil, fmt.Errorf("handshake extensions of %d bytes", n)
	}
	ext := make([]byte, n)
	if _, err := io.ReadFull(r, ext); err != nil {
		return h, nil, err
	}
	b = append(append(b, size[:]...), ext...)
	// Extensions this member does not know are a newer version's: skipped.
	for len(ext) > 0 {
		if len(ext) < 2 || len(ext) < 2+int(ext[1]) {
			return h, nil, errors.New("handshake extension cut short")
		}
		if ext[0] == extBuild {
			h.build = string(ext[2 : 2+ext[1]])
		}
		ext = ext[2+ext[1]:]
	}
	return h, b, nil
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

// errOlderPeer is a handshake that the acceptor ended as soon as it read a
// hello of a link version above 1: what a lockserver 0.1 member does, which
// speaks version 1 alone.
var errOlderPeer = errors.New("the peer closed the link at a hello of a later version")

// dialHandshake runs the dialer's side of the handshake on nc, offering link
// version at most.
func (l *Link) dialHandshake(nc net.Conn, addr string, channel, version byte) (net.Conn, error) {
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
	if channel == chanRaft && mine.isZero() {
		return nil, errors.New("this member has not joined a cluster yet")
	}
	h := hello{version: version, channel: channel, cluster: mine, node: l.cfg.Node, build: l.cfg.Build}
	rand.Read(h.nonce[:])
	dh := h.encode(true)
	if _, err := conn.Write(dh); err != nil {
		return nil, err
	}
	peer, ah, err := readHello(conn, false)
	if err != nil {
		if version > linkV1 && (errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET)) {
			return nil, errOlderPeer
		}
		return nil, err
	}
	if peer.version > version {
		return nil, fmt.Errorf("the peer answered a hello of link version %d in version %d", version, peer.version)
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
	case verdict[0] == linkOtherCluster || verdict[0] == linkOK && !mine.isZero() && peer.cluster != mine:
		l.refuse(addr, "other_cluster", "refused a member link: the peer belongs to another cluster",
			"peer", addr, "node", peer.node, "its_cluster", peer.cluster, "this_cluster", mine)
		return nil, refusal(fmt.Errorf("the peer (node %q) belongs to cluster %s, this member to %s", peer.node, peer.cluster, mine))
	case verdict[0] != linkOK:
		return nil, refusal(errors.New(verdictText(verdict[0])))
	}
	l.learn(peer.node, peer.build)
	return conn, nil
}

// errRefused is the error of a handshake whose refusal was logged already.
var errRefused = errors.New("refused")

func (l *Link) acceptHandshake(nc net.Conn) (net.Conn, hello, error) {
	from := nc.RemoteAddr().String()
	id := l.cluster.Load()
	if id == nil {
		// Not joined yet: no one should call on this member.
		return nil, hello{}, errors.New("this member has not joined a cluster yet")
	}
	conn := nc
	if l.cfg.TLS != nil {
		cfg, err := l.tlsConfig(true)
		if err != nil {
			l.cfg.Log.Error("member link: no TLS settings", "err", err)
			return nil, hello{}, errRefused
		}
		tc := tls.Server(nc, cfg)
		if err := tc.Handshake(); err != nil {
			l.refuse(from, "tls", "refused a member link: TLS handshake failed", "peer", from, "err", err)
			return nil, hello{}, errRefused
		}
		conn = tc
	}
	peer, dh, err := readHello(conn, true)
	if err != nil {
		l.refuse(from, "bad_handshake", "refused a member link: bad handshake", "peer", from, "err", err)
		return nil, hello{}, errRefused
	}
	if peer.channel != chanRaft && peer.channel != chanMember {
		l.refuse(from, "bad_handshake", "refused a member link: unknown channel", "peer", from, "channel", peer.channel)
		return nil, hello{}, errRefused
	}
	version := min(peer.version, l.cfg.maxVersion())
	if l.cfg.onlyVersion && peer.version != version {
		// As a lockserver 0.1 member does: see Config.onlyVersion.
		l.refuse(from, "bad_handshake", "refused a member link: bad handshake", "peer", from, "version", peer.version)
		return nil, hello{}, errRefused
	}
	h := hello{version: version, cluster: *id, node: l.cfg.Node, build: l.cfg.Build}
	rand.Read(h.nonce[:])
	ah := h.encode(false)
	mine := proof(l.cfg.Secret, "acceptor", dh, ah)
	if _, err := conn.Write(append(ah, mine...)); err != nil {
		return nil, hello{}, err
	}
	theirs := make([]byte, proofSize)
	if _, err := io.ReadFull(conn, theirs); err != nil {
		l.refuse(from, "left", "refused a member link: the peer left before proving itself (a different cluster secret, or another cluster)",
			"peer", from, "node", peer.node, "its_cluster", peer.cluster, "err", err)
		return nil, hello{}, errRefused
	}
	verdict := linkOK
	switch {
	case !hmac.Equal(theirs, proof(l.cfg.Secret, "dialer", dh, append(ah, mine...))):
		verdict = linkBadProof
		l.refuse(from, "bad_proof", "refused a member link: the peer did not prove the cluster secret", "peer", from, "node", peer.node)
	case peer.cluster.isZero() && peer.channel == chanRaft:
		verdict = linkNotJoined
		l.refuse(from, "not_joined", "refused a Raft link from a member that has not joined", "peer", from, "node", peer.node)
	case !peer.cluster.isZero() && peer.cluster != *id:
		verdict = linkOtherCluster
		l.refuse(from, "other_cluster", "refused a member link: the peer belongs to another cluster; its RPCs and votes are ignored",
			"peer", from, "node", peer.node, "its_cluster", peer.cluster, "this_cluster", *id)
	}
	conn.Write([]byte{verdict})
	if verdict != linkOK {
		return nil, hello{}, errRefused
	}
	l.learn(peer.node, peer.build)
	return conn, peer, nil
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

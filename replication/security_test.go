package replication

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/lockserver/lockserver/internal/freeport"
	"github.com/lockserver/lockserver/internal/testcerts"
	"github.com/lockserver/lockserver/internal/testenv"
	"github.com/lockserver/lockserver/internal/testlog"
	"github.com/lockserver/lockserver/keyspace"
	"github.com/lockserver/lockserver/luaexec"
	"github.com/lockserver/lockserver/replication/internal/logcodec"
	"github.com/lockserver/lockserver/replication/internal/memberlink"
)

const testSecret = "0123456789abcdef-test-secret"

// logBuf collects a member's log lines, for tests that expect one.
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

// memberTLS is the member TLS of a member whose certificate is leaf, which
// trusts the CAs cas and the members named as names says.
func memberTLS(leaf *testcerts.Leaf, names string, cas ...*testcerts.CA) *MemberTLS {
	pool := x509.NewCertPool()
	for _, ca := range cas {
		pool.AddCert(ca.Cert)
	}
	return &MemberTLS{Names: names, Config: func() (*tls.Config, error) {
		return &tls.Config{Certificates: []tls.Certificate{leaf.TLS}, RootCAs: pool}, nil
	}}
}

// tcpMember is a member on a loopback TCP member link, with its log.
type tcpMember struct {
	peer Peer
	eng  *Raft
	logs *logBuf
}

// startTCPMembers starts a member for each peer with the options opts gives
// it (NodeID, RaftAddr and a short election timeout are filled in), in
// memory, and stops them when the test ends.
func startTCPMembers(t *testing.T, peers []Peer, opts func(i int) RaftOptions) []*tcpMember {
	t.Helper()
	var ms []*tcpMember
	for i, p := range peers {
		o := opts(i)
		o.NodeID, o.RaftAddr = p.ID, p.RaftAddr
		o.HeartbeatTimeout, o.ElectionTimeout = 300*time.Millisecond, 300*time.Millisecond
		m := &tcpMember{peer: p, logs: &logBuf{}}
		o.Logger = m.logs.logger()
		eng, err := NewRaft(o)
		if err != nil {
			t.Fatalf("start %s: %v", p.ID, err)
		}
		m.eng = eng
		t.Cleanup(func() {
			eng.Close()
			if t.Failed() {
				t.Logf("%s's log:\n%s", p.ID, m.logs.String())
			}
		})
		ms = append(ms, m)
	}
	return ms
}

func tcpPeers(t *testing.T, ids ...string) []Peer {
	var peers []Peer
	for _, id := range ids {
		peers = append(peers, Peer{ID: id, RaftAddr: freeport.MustAddr(t)})
	}
	return peers
}

// leaderOf waits until one of ms leads, and returns it.
func leaderOf(t *testing.T, ms []*tcpMember) *tcpMember {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		for _, m := range ms {
			if !m.eng.closed.Load() && m.eng.raft.State() == raft.Leader && m.eng.leading() {
				return m
			}
		}
	}
	t.Fatal("no leader within 20 s")
	return nil
}

// set writes key on the leader of ms, retrying as a client would across a
// leader change (no member forwards here: there is no server).
func set(t *testing.T, ms []*tcpMember, key, value string) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); {
		req := &Request{Cmds: [][][]byte{words("SET", key, value)}}
		leaderOf(t, ms).eng.Submit(req)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		reply := req.Wait(ctx)
		cancel()
		if reply.Kind == keyspace.KindStatus {
			return
		}
		if !strings.HasPrefix(reply.Str, "TRYAGAIN") && !strings.HasPrefix(reply.Str, "UNKNOWN") && !strings.HasPrefix(reply.Str, "CLUSTERDOWN") {
			t.Fatalf("SET %s: %+v", key, reply)
		}
	}
	t.Fatalf("SET %s: no leader took it within 30 s", key)
}

// value reads key from m's own state machine.
func (m *tcpMember) value(key string) keyspace.Reply {
	m.eng.smMu.Lock()
	defer m.eng.smMu.Unlock()
	sm := m.eng.sm.Load()
	return sm.read(0, [][][]byte{words("GET", key)}, false, nil, sm.lastTime())
}

// waitValue waits until m holds key with value.
func (m *tcpMember) waitValue(t *testing.T, key, value string) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); m.value(key).Str != value; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s never held %s=%s (holds %+v)", m.peer.ID, key, value, m.value(key))
		}
	}
}

// forger sends Raft RPCs to members as a stranger would: over a plain TCP
// transport, or over a link whose handshake uses the credentials it has.
type forger struct {
	name  string
	trans raft.Transport
}

// forgerStream is a raft.StreamLayer that dials through the member link's
// handshake with the forger's credentials, checking nothing of the
// member's (a forger has no use for that), or through TLS alone.
type forgerStream struct {
	net.Listener
	secret  []byte
	cluster memberlink.ClusterID
	tls     *tls.Config
}

func (f *forgerStream) Dial(addr raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	nc, err := net.DialTimeout("tcp", string(addr), timeout)
	if err != nil {
		return nil, err
	}
	nc.SetDeadline(time.Now().Add(timeout))
	var conn net.Conn = nc
	if f.tls != nil {
		tc := tls.Client(nc, f.tls)
		if err := tc.Handshake(); err != nil {
			nc.Close()
			return nil, err
		}
		conn = tc
	}
	verdict, err := strangerHandshake(conn, f.cluster, f.secret)
	if err == nil && verdict != 0 {
		err = fmt.Errorf("verdict %d", verdict)
	}
	if err != nil {
		nc.Close()
		return nil, err
	}
	conn.SetDeadline(time.Time{})
	return conn, nil
}

// strangerHandshake runs the dialer's side of the member link's handshake
// for Raft RPCs on conn as node "forger" of cluster, proving secret (none if
// empty), and returns the acceptor's verdict (0 admits the link). It writes
// the handshake from its description in package memberlink, as a stranger
// who knows the protocol would, and checks nothing of the acceptor's.
func strangerHandshake(conn net.Conn, cluster memberlink.ClusterID, secret []byte) (byte, error) {
	const magic, version, channel, node = "LKSM", 1, 'R', "forger"
	var nonce [32]byte
	rand.Read(nonce[:])
	dh := append([]byte(magic), version, channel)
	dh = append(append(dh, cluster[:]...), nonce[:]...)
	dh = append(append(dh, byte(len(node))), node...)
	if _, err := conn.Write(dh); err != nil {
		return 0, err
	}
	// The acceptor's hello (magic, version, cluster, nonce, node id), then
	// its proof.
	ah := make([]byte, len(magic)+1+len(cluster)+len(nonce)+1)
	if _, err := io.ReadFull(conn, ah); err != nil {
		return 0, err
	}
	id := make([]byte, ah[len(ah)-1])
	if _, err := io.ReadFull(conn, id); err != nil {
		return 0, err
	}
	ah = append(ah, id...)
	theirs := make([]byte, sha256.Size)
	if _, err := io.ReadFull(conn, theirs); err != nil {
		return 0, err
	}
	// The dialer's proof: an HMAC with the secret over both hellos, the
	// acceptor's with its proof; zeros without a secret.
	proof := make([]byte, sha256.Size)
	if len(secret) > 0 {
		m := hmac.New(sha256.New, secret)
		m.Write([]byte("lockserver member link dialer\x00"))
		m.Write(dh)
		m.Write(ah)
		m.Write(theirs)
		proof = m.Sum(nil)
	}
	if _, err := conn.Write(proof); err != nil {
		return 0, err
	}
	var verdict [1]byte
	_, err := io.ReadFull(conn, verdict[:])
	return verdict[0], err
}

func newForger(t *testing.T, name string, stream *forgerStream) forger {
	t.Helper()
	if stream == nil {
		trans, err := raft.NewTCPTransport("127.0.0.1:0", nil, 1, 5*time.Second, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { trans.Close() })
		return forger{name, trans}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	stream.Listener = ln
	trans := raft.NewNetworkTransport(stream, 1, 5*time.Second, io.Discard)
	t.Cleanup(func() { trans.Close() })
	return forger{name, trans}
}

// forge sends m an AppendEntries that a new leader one term ahead would
// send, carrying SET pwned in the log entry encoding and committing it; an
// InstallSnapshot of a state holding pwned; and a TimeoutNow, which would
// start an election. It returns the errors of the three.
func (f forger) forge(t *testing.T, m *tcpMember) []error {
	t.Helper()
	term := m.eng.raft.CurrentTerm()
	last := m.eng.raft.LastIndex()
	lastTerm := term // the entries a member has most recently are of its term or an earlier one
	if st := m.eng.raft.Stats(); st["last_log_term"] != "" {
		fmt.Sscan(st["last_log_term"], &lastTerm)
	}
	id, addr := raft.ServerID(m.peer.ID), raft.ServerAddress(m.peer.RaftAddr)
	header := raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte("forger"), Addr: []byte(f.trans.LocalAddr())}
	e := &logcodec.LogEntry{Kind: logcodec.KindCommand, Entry: logcodec.Entry{Time: time.Now().UnixMilli(), Cmds: [][][]byte{words("SET", "pwned", f.name)}}}
	data := logcodec.EncodeBatch([]*logcodec.LogEntry{e}, e.Size())
	var errs []error
	var aer raft.AppendEntriesResponse
	errs = append(errs, f.trans.AppendEntries(id, addr, &raft.AppendEntriesRequest{
		RPCHeader: header, Term: term + 1, PrevLogEntry: last, PrevLogTerm: lastTerm,
		Entries:           []*raft.Log{{Index: last + 1, Term: term + 1, Type: raft.LogCommand, Data: data}},
		LeaderCommitIndex: last + 1,
	}, &aer))

	fake := &Raft{}
	fake.members.Store(&map[string]string{})
	sm := newStateMachine(luaexec.Options{}, nil, false)
	sm.apply(&e.Entry, 1, nil)
	fake.sm.Store(sm)
	var snap bytes.Buffer
	if err := fake.freeze().write(&snap); err != nil {
		t.Fatal(err)
	}
	conf := raft.EncodeConfiguration(raft.Configuration{Servers: []raft.Server{{Suffrage: raft.Voter, ID: "forger", Address: f.trans.LocalAddr()}}})
	var isr raft.InstallSnapshotResponse
	errs = append(errs, f.trans.InstallSnapshot(id, addr, &raft.InstallSnapshotRequest{
		RPCHeader: header, SnapshotVersion: raft.SnapshotVersionMax, Term: term + 2,
		LastLogIndex: last + 100, LastLogTerm: term + 2, Configuration: conf, ConfigurationIndex: last + 100, Size: int64(snap.Len()),
	}, &isr, &snap))

	var tnr raft.TimeoutNowResponse
	errs = append(errs, f.trans.TimeoutNow(id, addr, &raft.TimeoutNowRequest{RPCHeader: header}, &tnr))
	return errs
}

// Strangers on the network send the members a well-formed AppendEntries, an
// InstallSnapshot and a TimeoutNow: raw, or through the handshake with the
// wrong credentials. Every RPC fails, each member says it refused the link,
// and no member ever holds the forged key.
func TestForgedRaftRPCsChangeNothing(t *testing.T) {
	testenv.Long(t)
	peers := tcpPeers(t, "n1", "n2", "n3")
	cluster := bootstrapClusterID(peers, "")
	ca, other := testcerts.NewCA(t, "cluster CA"), testcerts.NewCA(t, "another CA")
	member := func(name string) *testcerts.Leaf {
		return ca.Issue(t, testcerts.Options{CommonName: name, DNSNames: []string{name}})
	}
	forgerTLS := func(leaf *testcerts.Leaf) *tls.Config {
		return &tls.Config{Certificates: []tls.Certificate{leaf.TLS}, InsecureSkipVerify: true}
	}
	for _, tc := range []struct {
		name    string
		opts    func(i int) RaftOptions
		forgers func() []forger
	}{
		{
			name: "secret",
			opts: func(int) RaftOptions { return RaftOptions{Bootstrap: peers, ClusterSecret: testSecret} },
			forgers: func() []forger {
				return []forger{
					newForger(t, "raw", nil),
					newForger(t, "wrong-secret", &forgerStream{secret: []byte("a-guess-at-the-secret"), cluster: cluster}),
				}
			},
		},
		{
			name: "TLS",
			opts: func(i int) RaftOptions {
				return RaftOptions{Bootstrap: peers, TLS: memberTLS(member(peers[i].ID+".members.test"), "*.members.test", ca)}
			},
			forgers: func() []forger {
				return []forger{
					newForger(t, "raw", nil),
					newForger(t, "no-certificate", &forgerStream{cluster: cluster, tls: &tls.Config{InsecureSkipVerify: true}}),
					newForger(t, "another-CA", &forgerStream{cluster: cluster, tls: forgerTLS(other.Issue(t, testcerts.Options{DNSNames: []string{"x.members.test"}}))}),
					newForger(t, "client-of-the-CA", &forgerStream{cluster: cluster, tls: forgerTLS(member("client.test"))}),
				}
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ms := startTCPMembers(t, peers, tc.opts)
			set(t, ms, "before", "1")
			for _, f := range tc.forgers() {
				for _, m := range ms {
					for i, err := range f.forge(t, m) {
						if err == nil {
							t.Errorf("forger %s: RPC %d to %s succeeded", f.name, i, m.peer.ID)
						}
					}
				}
			}
			for _, m := range ms {
				m.logs.waitLog(t, "refused a member link")
			}
			// A write after the forgeries, applied everywhere, shows that any
			// forged entry that had got in would be applied by now.
			set(t, ms, "after", "1")
			for _, m := range ms {
				m.waitValue(t, "after", "1")
				if v := m.value("pwned"); v.Kind != keyspace.KindNull {
					t.Errorf("%s holds the forged key: %+v", m.peer.ID, v)
				}
			}
		})
	}
}

// A member whose credentials the others refuse (another secret, or a
// certificate from another CA), though bootstrapped in the same list, can
// neither take nor give votes nor append nor be appended to: every link
// between it and the others is refused at both ends, the leader never
// reaches it (it has never heard from a leader) and it holds none of the
// writes. A new node with such credentials cannot join, and is told so at
// once.
func TestMemberWithWrongCredentialsIsShutOut(t *testing.T) {
	ca, other := testcerts.NewCA(t, "cluster CA"), testcerts.NewCA(t, "another CA")
	for _, tc := range []struct {
		name      string
		good, bad func(id string) RaftOptions
		// what a good member says when the bad one calls, and when it calls the bad one
		refusedIn, refusedOut string
	}{
		{
			name:       "secret",
			good:       func(string) RaftOptions { return RaftOptions{ClusterSecret: testSecret} },
			bad:        func(string) RaftOptions { return RaftOptions{ClusterSecret: "another-secret-of-16-bytes"} },
			refusedIn:  "the peer left before proving itself",
			refusedOut: "the peer did not prove the cluster secret",
		},
		{
			name: "TLS",
			good: func(id string) RaftOptions {
				return RaftOptions{TLS: memberTLS(ca.Issue(t, testcerts.Options{DNSNames: []string{id + ".members.test"}}), "*.members.test", ca)}
			},
			bad: func(id string) RaftOptions {
				return RaftOptions{TLS: memberTLS(other.Issue(t, testcerts.Options{DNSNames: []string{id + ".members.test"}}), "*.members.test", ca, other)}
			},
			refusedIn:  "certificate signed by unknown authority",
			refusedOut: "TLS: member link not established: refused: x509: certificate signed by unknown authority",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			peers := tcpPeers(t, "a", "b", "c")
			ms := startTCPMembers(t, peers, func(i int) RaftOptions {
				o := tc.good(peers[i].ID)
				if i == 2 {
					o = tc.bad(peers[i].ID)
				}
				o.Bootstrap = peers
				return o
			})
			good, bad := ms[:2], ms[2]
			set(t, good, "k", "1")
			for _, m := range good {
				m.waitValue(t, "k", "1")
			}
			// The bad member solicits votes; the leader sends it entries.
			for _, m := range good {
				m.logs.waitLog(t, tc.refusedIn)
			}
			leaderOf(t, good).logs.waitLog(t, tc.refusedOut)
			set(t, good, "k", "2")
			if st := bad.eng.raft.Stats(); st["last_contact"] != "never" || bad.eng.raft.State() == raft.Leader {
				t.Fatalf("the shut-out member heard from a leader or leads: %v", st)
			}
			if v := bad.value("k"); v.Kind != keyspace.KindNull {
				t.Fatalf("the shut-out member holds k = %+v", v)
			}

			joiner := tc.bad("d")
			joiner.NodeID, joiner.RaftAddr, joiner.Join = "d", freeport.MustAddr(t), peers[0].RaftAddr
			start := time.Now()
			if eng, err := NewRaft(joiner); err == nil {
				eng.Close()
				t.Fatal("a node with the wrong credentials joined")
			} else if !strings.Contains(err.Error(), "refused") {
				t.Fatalf("join error %q does not say that it was refused", err)
			}
			if took := time.Since(start); took >= adminTimeout {
				t.Fatalf("a refused join took %v: it should give up at once", took)
			}
		})
	}
}

// Members started with disagreeing bootstrap lists (one alone, two with it
// and each other) belong to different clusters: the two refuse to replicate
// to the one and say so, and the one keeps the writes it acknowledged.
// Without cluster identities the two's leader would overwrite its log.
func TestDisagreeingBootstrapListsStayApart(t *testing.T) {
	peers := tcpPeers(t, "a", "b", "c")
	ms := startTCPMembers(t, peers, func(i int) RaftOptions {
		if i == 0 {
			return RaftOptions{Bootstrap: peers[:1]}
		}
		return RaftOptions{Bootstrap: peers}
	})
	alone, together := ms[:1], ms[1:]
	if alone[0].eng.cluster == together[0].eng.cluster || together[0].eng.cluster != together[1].eng.cluster {
		t.Fatalf("cluster identities: a %s, b %s, c %s", alone[0].eng.cluster, together[0].eng.cluster, together[1].eng.cluster)
	}
	set(t, alone, "owner", "a")
	set(t, together, "owner", "bc")
	for _, m := range together {
		m.waitValue(t, "owner", "bc")
	}
	// The two's leader calls on a, and is refused; else a would follow it
	// (and, in the terms where their logs disagree, lose its own).
	for deadline := time.Now().Add(20 * time.Second); !strings.Contains(alone[0].logs.String(), "its RPCs and votes are ignored"); time.Sleep(time.Millisecond) {
		leader := alone[0].eng.leaderID()
		if v := alone[0].value("owner"); v.Str != "a" || leader != "" && leader != "a" || time.Now().After(deadline) {
			t.Fatalf("a has not refused the other cluster: it follows %q, and its acknowledged owner=a is now %+v", leader, v)
		}
	}
	leaderOf(t, together).logs.waitLog(t, "refused a member link: the peer belongs to another cluster")
	set(t, together, "after", "1")
	set(t, alone, "after", "a")
	if v := alone[0].value("owner"); v.Str != "a" {
		t.Fatalf("a's acknowledged write was overwritten: owner = %+v", v)
	}
	if leaderOf(t, alone) != alone[0] {
		t.Fatal("a does not lead its own cluster")
	}
}

// A cluster's identity is the bootstrap list's and the token's, whatever the
// order the list is given in: worked examples of bootstrapClusterID against
// its definition, a hash of the sorted list.
func TestBootstrapClusterID(t *testing.T) {
	abc := []Peer{{"a", "10.0.0.1:7000"}, {"b", "10.0.0.2:7000"}, {"c", "10.0.0.3:7000"}}
	sum := sha256.Sum256([]byte("lockserver cluster\x00tok\x00a=10.0.0.1:7000\nb=10.0.0.2:7000\nc=10.0.0.3:7000"))
	if got := bootstrapClusterID([]Peer{abc[2], abc[0], abc[1]}, "tok"); got != memberlink.ClusterID(sum[:16]) {
		t.Fatalf("identity of c,a,b = %s, want %x", got, sum[:16])
	}
	if bootstrapClusterID(abc, "tok") == bootstrapClusterID(abc, "other") {
		t.Fatal("the token does not change the identity")
	}
	if bootstrapClusterID(abc, "") == bootstrapClusterID(abc[:1], "") {
		t.Fatal("one alone and three together share an identity")
	}
	if id, err := memberlink.ParseClusterID(bootstrapClusterID(abc, "").String()); err != nil || id != bootstrapClusterID(abc, "") {
		t.Fatalf("parse(String()) = %s, %v", id, err)
	}
}

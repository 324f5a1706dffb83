package replication

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/lockserver/lockserver/internal/buildinfo"
	"github.com/lockserver/lockserver/internal/clustertest"
	"github.com/lockserver/lockserver/keyspace"
	"github.com/lockserver/lockserver/replication/internal/memberlink"
	"github.com/lockserver/lockserver/replication/internal/storage/storagetest"
)

// testRPCTimeout bounds a call on the in-memory transport (raft's default is
// 500 ms): past it the call fails, as a heartbeat lost on the network. The
// harness's nodes detect failures as every cluster test's do
// (clustertest.Heartbeat and Election), and its waits are as long.
const testRPCTimeout = 2 * time.Second

// testCluster runs Raft engines in one process on raft's in-memory transport.
// A node's internal commands reach another node's engine directly, as the
// server would hand them over. Partitions cut both directions, for Raft and
// for forwarding alike. What the nodes log is printed if the test fails.
type testCluster struct {
	// Cluster finds the leader and the term as in every cluster test; its
	// Nodes change under mu.
	clustertest.Cluster[*testNode]
	t     testing.TB
	logs  *nodeLog
	mu    sync.Mutex
	peers []Peer             // the voters it was bootstrapped with
	cut   map[[2]string]bool // pairs of node ids that cannot talk
	opts  RaftOptions        // what every node starts with
	// loseReplies makes every call between nodes fail after the callee ran
	// it, as a connection that breaks once the command is sent.
	loseReplies atomic.Bool
}

type testNode struct {
	c       *testCluster
	id      string
	trans   *raft.InmemTransport
	store   *raft.InmemStore        // kept across restarts, replaced by a wipe
	gate    *storagetest.GatedStore // in front of store, for tests that stall or fail its writes
	snaps   raft.SnapshotStore
	hub     *recordingHub
	wallAdd atomic.Int64 // nanoseconds added to this node's wall clock
	// build is the release the node plays when it next starts; "" for this
	// build's own. The other nodes learn it as they would from a member
	// link handshake.
	build string
	eng   *Raft
}

func (n *testNode) clientAddr() string { return "client-" + n.id }
func (n *testNode) raftAddr() string   { return "raft-" + n.id }

// newTestCluster starts size nodes bootstrapped as voters and waits for a leader.
func newTestCluster(t testing.TB, size int) *testCluster {
	return newTestClusterWith(t, size, RaftOptions{})
}

// newTestClusterWith does the same with options for every node.
func newTestClusterWith(t testing.TB, size int, opts RaftOptions) *testCluster {
	c := &testCluster{t: t, cut: map[[2]string]bool{}, opts: opts, logs: newNodeLog(t)}
	var peers []Peer
	for i := range size {
		n := c.add(fmt.Sprintf("n%d", i+1))
		peers = append(peers, Peer{ID: n.id, RaftAddr: n.raftAddr()})
	}
	opts.Bootstrap, c.peers = peers, peers
	for _, n := range c.Nodes {
		n.start(opts)
	}
	t.Cleanup(c.close)
	c.leader()
	c.Watch(t, "the cluster")
	return c
}

// add creates a node with empty stores, not yet started.
func (c *testCluster) add(id string) *testNode {
	n := &testNode{c: c, id: id, store: raft.NewInmemStore(), snaps: raft.NewInmemSnapshotStore(), hub: &recordingHub{}}
	c.mu.Lock()
	c.Nodes = append(c.Nodes, n)
	c.mu.Unlock()
	return n
}

// start opens the node's engine on a fresh transport connected to the others.
func (n *testNode) start(opts RaftOptions) {
	eng, err := n.open(opts)
	if err != nil {
		n.c.t.Fatalf("start %s: %v", n.id, err)
	}
	n.c.mu.Lock()
	n.eng = eng
	n.c.mu.Unlock()
}

// open opens an engine for the node as start does, and returns it.
func (n *testNode) open(opts RaftOptions) (*Raft, error) {
	c := n.c
	_, n.trans = raft.NewInmemTransportWithTimeout(raft.ServerAddress(n.raftAddr()), testRPCTimeout)
	c.mu.Lock()
	for _, o := range c.Nodes {
		if o != n && o.trans != nil && !c.cut[pair(n.id, o.id)] {
			n.trans.Connect(o.trans.LocalAddr(), o.trans)
			o.trans.Connect(n.trans.LocalAddr(), n.trans)
		}
	}
	c.mu.Unlock()
	opts.NodeID = n.id
	opts.ClientAddr = n.clientAddr()
	n.gate = &storagetest.GatedStore{LogStore: n.store}
	opts.transport, opts.logStore, opts.stableStore, opts.snapshotStore = n.trans, n.gate, n.store, n.snaps
	opts.peers = &testPeers{from: n}
	opts.Hub = n.hub
	opts.wall = func() time.Time { return time.Now().Add(time.Duration(n.wallAdd.Load())) }
	opts.build = n.build
	opts.peerBuilds = c.builds
	if opts.HeartbeatTimeout == 0 { // a test may give a node its own
		opts.HeartbeatTimeout, opts.ElectionTimeout = clustertest.Heartbeat, clustertest.Election
	}
	opts.forwardWait = 2 * time.Second
	if opts.Logger == nil { // a test that reads the logs gives its own
		opts.Logger = c.logs.logger
	}
	return NewRaft(opts)
}

// restart starts a stopped node again with the cluster's options.
func (n *testNode) restart() { n.start(n.c.opts) }

// wipe loses a stopped node's stores, as a new disk would.
func (n *testNode) wipe() {
	n.store, n.snaps = raft.NewInmemStore(), raft.NewInmemSnapshotStore()
}

// stop closes the node's engine; its stores survive for a restart.
func (n *testNode) stop() {
	if n.eng == nil {
		return
	}
	n.c.mu.Lock()
	eng := n.eng
	n.eng = nil
	n.c.mu.Unlock()
	if err := eng.Close(); err != nil {
		n.c.t.Errorf("close %s: %v", n.id, err)
	}
	n.trans.Close()
}

func (c *testCluster) close() {
	for _, n := range c.Nodes {
		n.stop()
	}
}

func pair(a, b string) [2]string {
	if a > b {
		a, b = b, a
	}
	return [2]string{a, b}
}

// partition cuts n off from every other node, both ways.
func (c *testCluster) partition(n *testNode) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, o := range c.Nodes {
		if o != n && o.trans != nil {
			c.cut[pair(n.id, o.id)] = true
			n.trans.Disconnect(o.trans.LocalAddr())
			o.trans.Disconnect(n.trans.LocalAddr())
		}
	}
}

// cutPair cuts the link between a and b, both ways.
func (c *testCluster) cutPair(a, b *testNode) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.cut[pair(a.id, b.id)] = true
	a.trans.Disconnect(b.trans.LocalAddr())
	b.trans.Disconnect(a.trans.LocalAddr())
}

// heal reconnects every node.
func (c *testCluster) heal() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.cut = map[[2]string]bool{}
	for _, a := range c.Nodes {
		for _, b := range c.Nodes {
			if a != b && a.trans != nil && b.trans != nil {
				a.trans.Connect(b.trans.LocalAddr(), b.trans)
			}
		}
	}
}

// ID is the node's id, for clustertest.
func (n *testNode) ID() string { return n.id }

// Status is what n's engine says of itself, as LOCKSERVER STATUS would; an
// error once it is stopped or closing (a closed engine is no leader, though
// its raft may say so until the Shutdown that Close waits for has finished).
func (n *testNode) Status(context.Context) (clustertest.Status, error) {
	n.c.mu.Lock()
	eng := n.eng
	n.c.mu.Unlock()
	if eng == nil || eng.closed.Load() {
		return clustertest.Status{}, fmt.Errorf("%s is stopped", n.id)
	}
	return clustertest.Status{
		State: strings.ToLower(eng.raft.State().String()), Leader: eng.leaderID(), Term: eng.raft.CurrentTerm(),
		Commit: eng.raft.CommitIndex(), Applied: eng.applied.Load(),
	}, nil
}

// leader waits until one of the nodes not cut off from the others leads and
// the rest of them name it, and its engine has begun its term (proposed the
// barrier that its reads wait for); it returns it.
func (c *testCluster) leader() *testNode {
	c.t.Helper()
	var l *testNode
	clustertest.Eventually(c.t, "a leader", func() error {
		if l = c.Leader(c.t, c.connected()...); !l.eng.leading() {
			return fmt.Errorf("%s no longer leads", l.id)
		}
		return nil
	})
	return l
}

// builds is what the member link would tell a node of the others' builds:
// the build of each running node, as it last started.
func (c *testCluster) builds() map[string]string {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := map[string]string{}
	for _, n := range c.Nodes {
		if n.eng != nil {
			m[n.id] = cmp.Or(n.build, buildinfo.Version)
		}
	}
	return m
}

// connected returns the nodes that are not cut off from every other node.
func (c *testCluster) connected() []*testNode {
	var ns []*testNode
	for _, n := range c.nodes() {
		if !c.isolated(n) {
			ns = append(ns, n)
		}
	}
	return ns
}

// nodes returns the cluster's nodes, which add changes under mu.
func (c *testCluster) nodes() []*testNode {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]*testNode(nil), c.Nodes...)
}

// isolated reports whether n is cut off from every other node; a node alone
// in its cluster is not.
func (c *testCluster) isolated(n *testNode) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, o := range c.Nodes {
		if o != n && !c.cut[pair(n.id, o.id)] {
			return false
		}
	}
	return len(c.Nodes) > 1
}

// registered waits until every node knows every member's client address: a
// member registers its own in the log after it starts, and until then an
// entry of its registration can be in flight on the leader.
func (c *testCluster) registered() {
	c.t.Helper()
	c.eventually("every member registered on every node", func() bool {
		for _, m := range c.Nodes {
			for _, o := range c.Nodes {
				if m.eng.memberAddr(o.id) != o.clientAddr() {
					return false
				}
			}
		}
		return true
	})
}

// followers returns the running nodes other than l.
func (c *testCluster) followers(l *testNode) []*testNode {
	var fs []*testNode
	for _, n := range c.Nodes {
		if n != l && n.eng != nil {
			fs = append(fs, n)
		}
	}
	return fs
}

// compactPast has the leader l and its running followers compact their logs
// until none keeps the entry after index, so that a member stopped at index
// needs a snapshot when it comes back, and returns them. It snapshots twice,
// as a snapshot keeps the log written since the one before, and sets "after"
// to 1 then 2.
func (c *testCluster) compactPast(t testing.TB, l *testNode, index uint64) []*testNode {
	t.Helper()
	running := append([]*testNode{l}, c.followers(l)...)
	for i := range 2 {
		for _, n := range running {
			wantReply(t, "LOCKSERVER SNAPSHOT on "+n.id, do(n, 0, "LOCKSERVER", "SNAPSHOT"), keyspace.OK)
		}
		wantReply(t, "SET after the snapshots", c.set(l, 0, "after", fmt.Sprint(i+1)), keyspace.OK)
	}
	for _, n := range running {
		if first, _ := n.store.FirstIndex(); first <= index {
			t.Fatalf("%s kept its log from %d; the lagging member stopped at %d, so it would not need a snapshot", n.id, first, index)
		}
	}
	return running
}

// eventually polls cond until it holds, failing the test after
// clustertest.Wait.
func (c *testCluster) eventually(what string, cond func() bool) {
	c.t.Helper()
	clustertest.Eventually(c.t, what, func() error {
		if !cond() {
			return errors.New("not yet")
		}
		return nil
	})
}

func (c *testCluster) byRaftAddr(addr string) *testNode {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, n := range c.Nodes {
		if n.raftAddr() == addr {
			return n
		}
	}
	return nil
}

// testPeers is a node's peerClient in the harness: a call submits the
// command to the other node's engine, as that node's server would.
type testPeers struct{ from *testNode }

func (p *testPeers) Call(ctx context.Context, addr string, args ...[]byte) (string, error) {
	c := p.from.c
	to := c.byRaftAddr(addr)
	reachable := func() *Raft {
		c.mu.Lock()
		defer c.mu.Unlock()
		if to == nil || c.cut[pair(p.from.id, to.id)] {
			return nil
		}
		return to.eng
	}
	eng := reachable()
	if eng == nil {
		return "", fmt.Errorf("%w: %s unreachable", memberlink.ErrNotSent, addr)
	}
	req := &Request{Cmds: [][][]byte{args}}
	eng.Submit(req)
	reply := req.Wait(ctx)
	if reachable() == nil || c.loseReplies.Load() {
		return "", fmt.Errorf("connection to %s lost", addr)
	}
	switch reply.Kind {
	case keyspace.KindError:
		return "", reply.Err()
	case keyspace.KindStatus, keyspace.KindBulk:
		return reply.Str, nil
	}
	return "", fmt.Errorf("unexpected reply %+v", reply)
}

func (p *testPeers) Close() error { return nil }

// recordingHub records the messages a node delivers, and counts for each
// the subscribers that subscribe gave its channel on this node.
type recordingHub struct {
	mu   sync.Mutex
	msgs []string
	subs map[hubChannel]int64
}

type hubChannel struct {
	name    string
	sharded bool
}

func (h *recordingHub) Publish(channel, message []byte, sharded bool) int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.msgs = append(h.msgs, string(channel)+":"+string(message))
	return h.subs[hubChannel{string(channel), sharded}]
}

// subscribe makes n subscribers listen on channel, a shard channel if
// sharded, on this node.
func (h *recordingHub) subscribe(channel string, sharded bool, n int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.subs == nil {
		h.subs = make(map[hubChannel]int64)
	}
	h.subs[hubChannel{channel, sharded}] = n
}

func (h *recordingHub) messages() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.msgs...)
}

// words returns a command's arguments.
func words(s ...string) [][]byte {
	out := make([][]byte, len(s))
	for i, a := range s {
		out[i] = []byte(a)
	}
	return out
}

// do submits one command to n and waits for its reply.
func do(n *testNode, db int, cmd ...string) keyspace.Reply {
	req := &Request{DB: db, Cmds: [][][]byte{words(cmd...)}}
	n.eng.Submit(req)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	return req.Wait(ctx)
}

// localGet reads key from n's own state machine, wherever it stands.
func localGet(n *testNode, key string) keyspace.Reply {
	n.eng.smMu.Lock()
	defer n.eng.smMu.Unlock()
	return n.eng.sm.Load().read(0, [][][]byte{words("GET", key)}, false, nil, n.eng.sm.Load().lastTime())
}

// lastTime returns the time of the last entry n applied.
func lastTime(n *testNode) int64 {
	n.eng.smMu.Lock()
	defer n.eng.smMu.Unlock()
	return n.eng.sm.Load().lastTime()
}

// nodeLog keeps what a test's nodes log, at Info and above (elections,
// leadership lost, failed heartbeats), and prints it if the test fails: on a
// busy machine the first question about a failure is whether, and when, the
// leader changed.
type nodeLog struct {
	logger *slog.Logger
	mu     sync.Mutex
	buf    bytes.Buffer
}

// String returns what the nodes logged so far.
func (l *nodeLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

func newNodeLog(t testing.TB) *nodeLog {
	l := &nodeLog{}
	l.logger = slog.New(slog.NewTextHandler(lockedWriter{l}, &slog.HandlerOptions{Level: slog.LevelInfo}))
	t.Cleanup(func() {
		if t.Failed() {
			l.mu.Lock()
			defer l.mu.Unlock()
			t.Logf("the nodes logged:\n%s", l.buf.String())
		}
	})
	return l
}

type lockedWriter struct{ l *nodeLog }

func (w lockedWriter) Write(p []byte) (int, error) {
	w.l.mu.Lock()
	defer w.l.mu.Unlock()
	return w.l.buf.Write(p)
}

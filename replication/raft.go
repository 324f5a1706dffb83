package replication

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
	"github.com/lockserver/lockserver/internal/acl"
	"github.com/lockserver/lockserver/internal/logclock"
	"github.com/lockserver/lockserver/keyspace"
	"github.com/lockserver/lockserver/luaexec"
	"github.com/lockserver/lockserver/replication/internal/logcodec"
	"github.com/lockserver/lockserver/replication/internal/memberlink"
	"github.com/lockserver/lockserver/replication/internal/storage"
)

// RaftOptions configure a Raft engine. NodeID is required, and RaftAddr
// unless Transport is given; the zero value of every other field is a
// sensible default.
type RaftOptions struct {
	// NodeID names this node in the cluster for all time.
	NodeID string
	// RaftAddr is the host:port the Raft transport listens on and the other
	// nodes reach it at (so a concrete address, not 0.0.0.0).
	RaftAddr string
	// RaftAdvertise, when set, is the host:port the other nodes reach the
	// transport at instead of RaftAddr: a proxy's or a NAT's in front of it.
	RaftAdvertise string
	// ClientAddr is where clients reach this node's RESP server: what the
	// members tell clients of it (Sentinel and CLUSTER replies). The members
	// themselves call each other at their Raft addresses.
	ClientAddr string
	// DataDir holds the Raft log and stable store (raft.db, fsync on) and the
	// snapshots. Empty keeps them in memory.
	DataDir string
	// Bootstrap lists the voters of a new cluster, this node among them at
	// RaftAdvertise or else RaftAddr (NewRaft refuses a list that is not: the
	// others could never reach this node). It is used, and checked, only when the node has no state yet.
	// Never bootstrap a member whose data was wiped: with no log it would vote
	// for any candidate, even a stale one. Give it Join instead.
	Bootstrap []Peer
	// Join is the Raft address of any member of an existing cluster. A node
	// with no state asks it to add this node, as a non-voter that the leader
	// promotes once it has caught up, and learns the cluster's identity from
	// it. With neither Bootstrap nor Join, a node with no state bootstraps a
	// cluster of its own that others may join.
	Join string
	// JoinTimeout is how long NewRaft keeps asking Join's member before it
	// gives up with an error (default one minute).
	JoinTimeout time.Duration

	// Members prove to each other that they are members (see memberlink)
	// with mutual TLS, a shared secret, or both. ClusterSecret, when set, is
	// the secret: at least 16 bytes, the same on every member. TLS, when
	// set, puts every link between members in mutual TLS.
	ClusterSecret string
	TLS           *MemberTLS
	// InsecureCluster lets a member whose RaftAddr is not a loopback address
	// start with neither: anyone who reaches its Raft port is then a member.
	InsecureCluster bool
	// ClusterToken goes into the identity of a cluster bootstrapped with a
	// list of voters, so that two clusters bootstrapped with the same list
	// (the same addresses reused) are not taken for one.
	ClusterToken string

	Lua luaexec.Options
	// Users are the ACL users, which the log changes; nil means the default
	// user alone. A new cluster's first leader seeds the cluster's users
	// with those it holds when it starts leading (see LoadUsersCommand).
	Users *acl.Registry
	// Hub receives the messages of the entries this node applies live.
	Hub    keyspace.Publisher
	Logger *slog.Logger

	// HeartbeatTimeout and ElectionTimeout default to 1 s, CommitTimeout to 5 ms.
	// A leader that hears from no majority for HeartbeatTimeout steps down.
	HeartbeatTimeout, ElectionTimeout, CommitTimeout time.Duration
	// A snapshot starts once the log written since the last one holds
	// SnapshotLogBytes (default 64 MB) and half as many bytes as that
	// snapshot: a large state is snapshotted rarely, and a restart replays
	// at most about half its size of log. SnapshotThreshold, when set, starts
	// one after as many entries too. After a snapshot the log keeps the
	// entries written since the one before, and at least TrailingLogs
	// (default 10240), so that a follower that fell behind by less catches up
	// from the log rather than by receiving a snapshot.
	SnapshotLogBytes                int64
	SnapshotThreshold, TrailingLogs uint64
	// SnapshotInterval is how often SnapshotThreshold is checked (default 30 s).
	SnapshotInterval time.Duration
	// CloseSnapshotTimeout bounds the snapshot Close takes when much log was
	// written since the last one, and one under way when Close is called
	// (default 5 s): past it the snapshot is abandoned and the restart
	// replays the log instead. A stop must not outlast an orchestrator's
	// grace period (docker stop: 10 s; Kubernetes: 30 s), after which the
	// process is killed anyway, and at millions of keys a snapshot takes
	// longer than that.
	CloseSnapshotTimeout time.Duration
	// ForwardWait is how long a follower waits for a reachable leader before it
	// answers CLUSTERDOWN (default 3 s).
	ForwardWait time.Duration

	// The fields below replace what DataDir, RaftAddr and the process give, so
	// that tests can run nodes in memory, cut the network and step clocks.
	// Transport and Peers replace the member link together.
	Transport     raft.Transport
	LogStore      raft.LogStore
	StableStore   raft.StableStore
	SnapshotStore raft.SnapshotStore
	// Peers carries internal commands to other members; nil means go-redis
	// over the member link.
	Peers PeerClient
	// Mono and Wall are the clocks the log clock reads (see logclock.Clock); nil means
	// the process's own.
	Mono func() time.Duration
	Wall func() time.Time
	// firstStand, when set, replaces the wait of standUnheard, so that a
	// test can tell a member that stands early from one that waits for
	// raft's own timer.
	firstStand time.Duration
}

// MemberTLS secures the links between members with mutual TLS (see
// memberlink.TLS).
type MemberTLS = memberlink.TLS

// Peer is one voter of a new cluster.
type Peer struct {
	ID       string
	RaftAddr string
}

func (o RaftOptions) withDefaults() RaftOptions {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&o.HeartbeatTimeout, time.Second)
	def(&o.ElectionTimeout, time.Second)
	def(&o.CommitTimeout, 5*time.Millisecond)
	def(&o.SnapshotInterval, 30*time.Second)
	def(&o.CloseSnapshotTimeout, 5*time.Second)
	def(&o.ForwardWait, 3*time.Second)
	def(&o.JoinTimeout, time.Minute)
	if o.SnapshotLogBytes <= 0 {
		o.SnapshotLogBytes = 64 << 20
	}
	if o.SnapshotThreshold == 0 {
		o.SnapshotThreshold = math.MaxUint64 // by bytes alone (see snapshotLoop)
	}
	if o.TrailingLogs == 0 {
		o.TrailingLogs = 10240
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}

// Error replies of the Raft engine. Clients retry CLUSTERDOWN and TRYAGAIN on
// their own (go-redis does), so those mean that nothing was written. UNKNOWN
// means that the command may or may not have taken effect, and no client
// retries it by itself: retrying a command that is not idempotent (the HINCRBY
// of a re-entrant lock) could apply it twice, so check first.
const (
	errClusterDown  = "CLUSTERDOWN no leader is reachable; nothing was written"
	errTryAgain     = "TRYAGAIN leadership changed before the command ran; nothing was written"
	errUnknownLost  = "UNKNOWN leadership was lost after the command was proposed; it may or may not have taken effect"
	errUnknownClose = "UNKNOWN the node shut down while the command was in flight; it may or may not have taken effect"
	errClosed       = "ERR the node is shutting down; nothing was written"
)

// Raft is the engine of a cluster member: every write is an entry of a Raft
// log that each node applies to its own StateMachine, in log order.
//
// The path of a command on the leader: Submit classifies it with Prepare. A
// write is stamped by the log clock, encoded and proposed; it waits in the
// list of this node's proposals until the FSM applies the entry and resolves
// the request with Apply's reply. A read runs on the state machine at its
// place among this node's proposals (after every write submitted before it,
// before any submitted after it) and is answered once a VerifyLeader round
// that began after it arrived confirms that this node still leads, in the same
// term. A new leader's first entry is a barrier: reads queue behind it, so
// nothing is read before every entry of earlier terms is applied. On a
// follower, Submit hands the request to the forwarder, which relays it to the
// leader in order with the others.
type Raft struct {
	opts  RaftOptions
	log   *slog.Logger
	raft  *raft.Raft
	node  atomic.Pointer[raft.Raft] // raft, for the log store, which raft calls before NewRaft returns
	logs  *storage.Log
	trans raft.Transport
	link  *memberlink.Link // nil when Transport was given
	// cluster is the identity of this member's cluster, set before Raft starts.
	cluster memberlink.ClusterID
	closer  []io.Closer // what NewRaft opened: the bolt store, the TCP transport
	peers   PeerClient
	clock   *logclock.Clock
	origin  uint64 // tags this process's proposals in the log
	// pub delivers the messages of the entries this node applies live: the
	// Hub, Replicated (nil without a Hub).
	pub keyspace.Publisher

	// smMu serialises the use of the state machine (Apply, Read, the
	// leader's looks for expired keys, snapshots); the FSM holds it while it
	// applies a batch. sm changes only
	// when a snapshot is restored. Prepare may run beside the rest, unlocked.
	smMu    sync.Mutex
	sm      atomic.Pointer[StateMachine]
	members atomic.Pointer[map[string]string] // node id -> client address; replaced, never modified
	applied atomic.Uint64                     // index of the last entry the FSM applied
	// logBytes counts the bytes of the log entries applied; snapMark is its
	// value at the last snapshot, whose applied index is snapIndex and size
	// in bytes snapSize (see snapshotLoop).
	logBytes, snapMark, snapIndex, snapSize atomic.Uint64
	// closeBy, once Close began, is when (Unix nanoseconds) a snapshot being
	// written is abandoned (see CloseSnapshotTimeout); 0 before.
	closeBy atomic.Int64
	// sweepTime is the time this node spent looking for expired keys and
	// applying sweeps, in nanoseconds (see expireCycle); ret returns what
	// sweeps free to the operating system.
	sweepTime   atomic.Int64
	ret         osReturn
	replayUntil uint64 // entries up to this index were in the log at start

	// proposeMu orders proposals: their order in the log is their Seq order.
	proposeMu sync.Mutex
	leadTerm  atomic.Uint64 // the term whose barrier this node proposed; 0 when not leading; written under proposeMu
	nextSeq   uint64
	barrier   uint64        // Seq of the barrier of the term this node leads or led last
	ownDone   atomic.Uint64 // 1 + Seq of this node's last entry the FSM applied; 0 before the first
	// Proposals wait in pending while maxInflight batches are being
	// committed, and then go to the log together as one batch, stamped as it
	// leaves (see flushLocked).
	pending      []*logcodec.LogEntry
	pendingSize  int // the estimated encoded size of pending
	pendingProps []*proposal
	inflight     int
	// When a batch commits, the next waits until holdFor proposals are pending
	// or the hold ends: holdTimer fires at holdUntil, the end of one of its
	// steps (see steppedHold). holdFor is 0 when nothing is held.
	holdFor   int
	hold      steppedHold
	holdUntil time.Time
	holdTimer *time.Timer
	// gathering counts the forwarded batches being submitted: their proposals
	// wait for one another, to go to the log together (see submitBatch).
	gathering int

	localMu sync.Mutex
	local   []*proposal // this node's proposals not yet applied or failed, in Seq order

	waiter   *queue[*logBatch] // batches whose futures to check, in log order
	verifier *queue[*readOp]   // reads waiting for a VerifyLeader round
	fwd      *forwarder

	peerMu      sync.Mutex
	unreachable map[string]bool // on the leader: members whose heartbeats fail

	waits replicaWaits // the WAITs under way (raft_info.go)

	metrics raftMetrics // raft_metrics.go
	// committed is when the FSM was handed the batch it applies now: the
	// commit of this node's proposals in it. Written by the FSM only.
	committed time.Time

	reloadMu sync.Mutex // see reloadConfig

	closed   atomic.Bool
	failOnce sync.Once  // logFailed
	fault    chan error // see Fault
	// ctx ends when the node closes, cutting short calls to other nodes.
	ctx    context.Context
	cancel context.CancelFunc
	stop   chan struct{}
	wg     sync.WaitGroup
}

// proposal is an entry this node proposed.
type proposal struct {
	seq   uint64
	req   *Request  // nil for the entries the engine proposes itself
	reads []*readOp // reads submitted after it and before the next proposal
	done  bool      // req resolved; guarded by localMu
	// forwarded marks a request that a forwarder relayed: its client's next
	// request comes back through the forwarder, which holds its own batches.
	forwarded bool
	at        time.Time // when it was proposed
}

// logBatch is a Raft log entry of this node's: proposals that go to the log,
// and to every disk, in one write.
type logBatch struct {
	props  []*proposal
	future raft.ApplyFuture
	sent   time.Time
}

// Bounds of proposal batching. With one batch being committed at a time, the
// proposals that arrive meanwhile form the next: a lone client waits for no
// one, and many clients share each commit (hashicorp/raft's own pipelining
// would split them into many small commits, one fsync each). Two or four
// batches in flight, a log entry per proposal, or a second batch once the
// first is on the leader's disk all measured slower here: smaller batches and
// more fsyncs on a shared disk. Two in flight still did with the leader's
// write in the background (see storage.Log): 12.0k -> 7.5k lock ops/s at 16
// clients, 24.7k -> 17.6k at 50.
//
// A client answered by a batch usually sends its next request at once, but
// that request arrives just after the next batch has left, so it waits a whole
// commit, and the clients split into cohorts that alternate between batches,
// each request waiting about two commits. So the next batch is held until the
// clients the last one answered have had their turn: until as many proposals
// are pending as were pending plus were answered. How long they take depends
// on how busy the machine is (on 2 cores shared with 50 clients the last of
// them came back 0.7 ms after their answers, most of a commit), and a client
// may not come back at all, so the hold goes in steps (see steppedHold): a
// holdDivisor'th of the last commit's time, then another each time more
// proposals arrived during the last, for at most the commit's time and
// holdMax. A request that no one follows loses one step.
const (
	maxInflight     = 1
	maxBatchEntries = 1024
	maxBatchBytes   = 1 << 20
	holdMax         = 2 * time.Millisecond
	holdDivisor     = 4
)

// logCacheEntries is how many recent log entries a node keeps in memory
// for followers' replication and its own applying. An entry is a batch of up
// to maxBatchBytes, so the cache's bound in bytes is this many megabytes;
// 512 entries held 10 MB after a load of 100k locks in pipelines (shown by a
// heap profile after MEMORY PURGE), counted by the bench as 409 bytes per
// held lock on a 3-node leader against 163 on a single node. 64 entries: 217,
// the same lock throughput at 16 to 256 clients, p99 at 50 clients 5.3 ms
// against 4.5 (a smaller heap collects more often).
const logCacheEntries = 64

// steppedHold is a hold after a batch (see holdDivisor): it goes on a step at
// a time while proposals keep arriving, up to its end.
type steppedHold struct {
	step time.Duration
	seen int // proposals pending when the last step began
	end  time.Time
}

// newHold starts a hold at now, after a batch whose commit took took, with
// seen proposals pending. Its first step is h.step.
func newHold(now time.Time, took time.Duration, seen int) steppedHold {
	limit := min(holdMax, took)
	return steppedHold{step: limit / holdDivisor, seen: seen, end: now.Add(limit)}
}

// next ends a step at now with n proposals pending: it returns how long the
// next step lasts, or 0 when none arrived during this one or the hold is over.
func (h *steppedHold) next(now time.Time, n int) time.Duration {
	if n <= h.seen || !now.Before(h.end) {
		return 0
	}
	h.seen = n
	return min(h.step, h.end.Sub(now))
}

// readOp is a read that is answered once it has run on the state machine and a
// VerifyLeader round has covered it, whichever comes last.
type readOp struct {
	req   *Request
	term  uint64       // the leader term it was accepted in
	left  atomic.Int32 // 2, then 1, then 0 when it is answered
	reply keyspace.Reply
	fail  string // set when the verification failed
}

// NewRaft opens a cluster member: its stores, its transport and its Raft node.
// A node with no state bootstraps or joins as its options say; one with state
// restores its last snapshot and catches up from the log.
func NewRaft(opts RaftOptions) (*Raft, error) {
	if opts.NodeID == "" {
		return nil, errors.New("replication: NodeID is required")
	}
	if err := opts.checkSecurity(); err != nil {
		return nil, fmt.Errorf("replication: node %s: %w", opts.NodeID, err)
	}
	opts = opts.withDefaults()
	r := &Raft{
		opts:     opts,
		log:      opts.Logger.With("node", opts.NodeID),
		clock:    logclock.New(0, opts.Mono, opts.Wall),
		origin:   randomUint64(),
		waiter:   newQueue[*logBatch](),
		verifier: newQueue[*readOp](),
		stop:     make(chan struct{}),
		fault:    make(chan error, 1),

		unreachable: map[string]bool{},
	}
	if opts.Hub != nil {
		r.pub = keyspace.Replicated(opts.Hub)
	}
	r.ctx, r.cancel = context.WithCancel(context.Background())
	r.holdTimer = time.AfterFunc(time.Hour, r.holdExpired)
	r.holdTimer.Stop()
	if opts.Users == nil {
		opts.Users = acl.NewRegistry()
		r.opts.Users = opts.Users
	}
	r.sm.Store(newStateMachine(opts.Lua, opts.Users))
	r.members.Store(&map[string]string{})
	r.fwd = newForwarder(r)
	if err := r.open(); err != nil {
		r.cancel()
		r.closeStores()
		return nil, fmt.Errorf("replication: open node %s: %w", opts.NodeID, err)
	}
	for _, loop := range []func(){r.standUnheard, r.waitLoop, r.verifyLoop, r.fwd.loop, r.leadershipLoop, r.expireLoop, r.snapshotLoop, r.registerLoop, r.promoteLoop, r.replicaLoop} {
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			loop()
		}()
	}
	return r, nil
}

func randomUint64() uint64 {
	var b [8]byte
	rand.Read(b[:])
	return binary.LittleEndian.Uint64(b[:])
}

// open sets up the stores, the transport and the Raft node.
func (r *Raft) open() error {
	o := &r.opts
	hl := newHCLogger(r.log)
	r.peers, r.trans = o.Peers, o.Transport
	if r.trans == nil {
		link, err := memberlink.Listen(o.RaftAddr, o.RaftAdvertise, memberlink.Config{Node: o.NodeID, Secret: []byte(o.ClusterSecret), TLS: o.TLS, Log: r.log})
		if err != nil {
			return fmt.Errorf("raft transport on %s: %w", o.RaftAddr, err)
		}
		r.link = link
		t := raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
			Stream: link, MaxPool: 3, Timeout: 10 * time.Second, Logger: hl,
		})
		r.trans = t
		r.closer = append(r.closer, t) // closes the link too
	}
	if r.peers == nil {
		if r.link == nil {
			return errors.New("a Transport needs Peers too")
		}
		r.peers = memberlink.NewPeers(r.link.DialMember, r.log, func(reply string) error { return ReplyError(reply) })
	}
	var logs raft.LogStore
	var stable raft.StableStore
	var snaps raft.SnapshotStore
	var dir *storage.Dir
	if o.DataDir != "" {
		// Corruption found once the node runs stops it (see logFailed).
		d, err := storage.OpenDir(o.DataDir, hl, r.logFailed)
		if err != nil {
			return err
		}
		dir = d
		r.closer = append(r.closer, dir)
		logs, stable, snaps = dir.LogStore, dir.StableStore, dir.SnapshotStore
	} else {
		mem := raft.NewInmemStore()
		logs, stable, snaps = mem, mem, raft.NewInmemSnapshotStore()
	}
	if o.LogStore != nil {
		logs = o.LogStore
	}
	if o.StableStore != nil {
		stable = o.StableStore
	}
	if o.SnapshotStore != nil {
		snaps = o.SnapshotStore
	}
	// The leader writes its log in the background (see storage.Log); raft is
	// handed a transport that tells followers only of commits this node holds.
	ls, err := storage.NewLog(logs, func() bool {
		node := r.node.Load()
		return node != nil && node.State() == raft.Leader
	}, r.logFailed, &r.metrics.logWrite)
	if err != nil {
		return err
	}
	r.logs = ls
	r.closer = append(r.closer, ls) // closed before the store it writes to
	logs, err = raft.NewLogCache(logCacheEntries, ls)
	if err != nil {
		return err
	}

	existing, err := raft.HasExistingState(logs, stable, snaps)
	if err != nil {
		return err
	}
	if r.replayUntil, err = logs.LastIndex(); err != nil {
		return err
	}
	if !existing && o.Join == "" {
		if err := r.checkBootstrap(); err != nil {
			return err
		}
	}
	if err := r.identify(existing, stable); err != nil {
		return err
	}
	conf := r.raftConfig(hl)
	// A joiner has joined by now (see identify); it starts with no log.
	if !existing && o.Join == "" {
		if err := raft.BootstrapCluster(conf, logs, stable, snaps, r.trans, r.bootstrapConfiguration()); err != nil {
			return fmt.Errorf("bootstrap: %w", err)
		}
		if r.replayUntil, err = logs.LastIndex(); err != nil {
			return err
		}
	}
	node, err := raft.NewRaft(conf, (*fsm)(r), logs, stable, snaps, ls.CommitTransport(r.trans))
	if err != nil {
		if dir != nil && dir.SnapshotFailure() != nil {
			return dir.SnapshotFailure() // raft's own error only says no snapshot restored
		}
		return err
	}
	r.raft = node
	r.node.Store(node)
	return nil
}

func (r *Raft) raftConfig(hl *hcLogger) *raft.Config {
	o := &r.opts
	c := raft.DefaultConfig()
	c.LocalID = raft.ServerID(o.NodeID)
	c.HeartbeatTimeout = o.HeartbeatTimeout
	c.ElectionTimeout = o.ElectionTimeout
	if r.standsEarly() {
		// standUnheard lowers them to what was asked (see there).
		c.HeartbeatTimeout += standSlack
		c.ElectionTimeout += standSlack
	}
	// As long as allowed: a leader starved of CPU for a moment on a busy
	// machine should not step down and fail the writes in flight.
	c.LeaderLeaseTimeout = o.HeartbeatTimeout
	c.CommitTimeout = o.CommitTimeout
	// Many concurrent proposals go to the log, and to the FSM, as one batch.
	// MaxAppendEntries also sizes the slice raft makes for every
	// AppendEntries it sends and every batch it commits: at 1024 (8 kB each)
	// those two were 45% of what a leader allocated, 5.5 kB per Redisson lock
	// operation at 16 clients, work for the garbage collector of a member
	// holding millions of locks; at 256, 16% of 3.3 kB. 256 also ran 3-10%
	// more lock cycles than 1024 on the bench's cluster, and 64 17% fewer.
	c.BatchApplyCh = true
	c.MaxAppendEntries = 256
	c.SnapshotThreshold = o.SnapshotThreshold
	c.TrailingLogs = o.TrailingLogs
	c.SnapshotInterval = o.SnapshotInterval
	c.Logger = hl
	return c
}

// checkBootstrap refuses a Bootstrap list that leaves this node out or names
// it at an address other than the one it is reached at: raft would accept
// either, and then this node would never vote for itself, or the others would
// never reach it, and without it the cluster may never elect a leader.
func (r *Raft) checkBootstrap() error {
	if len(r.opts.Bootstrap) == 0 {
		return nil
	}
	own := cmp.Or(r.opts.RaftAdvertise, r.opts.RaftAddr, string(r.trans.LocalAddr()))
	for _, p := range r.opts.Bootstrap {
		if p.ID == r.opts.NodeID {
			if p.RaftAddr != own {
				return fmt.Errorf("bootstrap: the voters name this node, %s, at %s, but its Raft address is %s (behind a proxy or NAT, give that address as its Raft advertise address)", p.ID, p.RaftAddr, own)
			}
			return nil
		}
	}
	return fmt.Errorf("bootstrap: this node, %s, is not among the voters; list it too, as %s=%s", r.opts.NodeID, r.opts.NodeID, own)
}

// bootstrapConfiguration is the configuration of a new cluster: the Bootstrap
// voters, or this node alone.
func (r *Raft) bootstrapConfiguration() raft.Configuration {
	var c raft.Configuration
	for _, p := range r.opts.Bootstrap {
		c.Servers = append(c.Servers, raft.Server{Suffrage: raft.Voter, ID: raft.ServerID(p.ID), Address: raft.ServerAddress(p.RaftAddr)})
	}
	if len(c.Servers) == 0 {
		c.Servers = []raft.Server{{Suffrage: raft.Voter, ID: raft.ServerID(r.opts.NodeID), Address: r.trans.LocalAddr()}}
	}
	return c
}

// Submit starts req: at once on the leader, through the forwarder on a
// follower. Its reply is available through req.Wait.
func (r *Raft) Submit(req *Request) {
	req.start()
	if isClusterCommand(req) {
		r.clusterCommand(req)
		return
	}
	r.submit(req, false)
}

// submit runs req on this node if it leads. Otherwise a request from a local
// client goes to the forwarder; one forwarded by another node gets TRYAGAIN,
// and the other node tries the new leader.
func (r *Raft) submit(req *Request, forwarded bool) {
	if r.closed.Load() {
		req.finish(keyspace.Error(errClosed))
		return
	}
	var prepared, write bool
	for {
		r.proposeMu.Lock()
		// While the forwarder holds requests, new ones queue behind them, so that
		// a client's requests keep their order when this node becomes leader.
		if (!forwarded && r.fwd.busy()) || !r.leadingLocked() {
			r.proposeMu.Unlock()
			if forwarded {
				req.finish(keyspace.Error(errTryAgain))
			} else {
				r.fwd.enqueue(req)
			}
			return
		}
		if prepared || req.WatchKeys != nil {
			break
		}
		// Prepare may compile a script: never hold proposeMu meanwhile.
		r.proposeMu.Unlock()
		var errReply *keyspace.Reply
		if write, errReply = r.prepare(req); errReply != nil {
			req.finish(*errReply)
			return
		}
		prepared = true
	}
	// proposeMu is held.
	if write {
		e := &logcodec.LogEntry{Kind: logcodec.KindCommand, Relay: req.relay, Entry: logcodec.Entry{
			DB: req.DB, Cmds: req.Cmds, Multi: req.Multi, Watch: req.Watch, OOM: req.OverMemory, User: req.User,
		}}
		r.proposeLocked(e, req, forwarded)
		r.proposeMu.Unlock()
		return
	}
	rd := &readOp{req: req, term: r.leadTerm.Load()}
	rd.left.Store(2)
	r.localMu.Lock()
	n := len(r.local)
	if n > 0 {
		r.local[n-1].reads = append(r.local[n-1].reads, rd)
	}
	r.localMu.Unlock()
	r.proposeMu.Unlock()
	r.verifier.push(rd)
	if n == 0 {
		// Nothing of this node's is in flight: the state machine already holds
		// every write submitted before this read.
		r.smMu.Lock()
		reply := r.read(req)
		r.smMu.Unlock()
		r.readRan(rd, reply)
	}
}

// prepare validates req and says whether it writes. A NOSCRIPT while this
// node has proposals in flight may only mean that the SCRIPT LOAD before it is
// not applied yet: such a request goes to the log, where Apply decides.
func (r *Raft) prepare(req *Request) (write bool, errReply *keyspace.Reply) {
	r.localMu.Lock()
	inflight := len(r.local) > 0
	r.localMu.Unlock()
	write, errReply = r.sm.Load().Prepare(req)
	if errReply != nil && inflight && strings.HasPrefix(errReply.Str, "NOSCRIPT") {
		return true, nil
	}
	return write, errReply
}

// leadingLocked reports whether this node leads, and on the first call in a
// new term proposes the barrier that reads of the term wait for. proposeMu is held.
func (r *Raft) leadingLocked() bool {
	if r.raft.State() != raft.Leader {
		r.leadTerm.Store(0)
		return false
	}
	if t := r.raft.CurrentTerm(); t != r.leadTerm.Load() {
		r.leadTerm.Store(t)
		r.barrier = r.nextSeq
		r.proposeLocked(&logcodec.LogEntry{Kind: logcodec.KindBarrier}, nil, false)
		// A cluster whose users were never seeded gets this node's. Should
		// the log hold a seed not yet applied here, the first one wins.
		if users := r.opts.Users; !users.Seeded() {
			seed := logcodec.Entry{Cmds: [][][]byte{LoadUsersCommand(users.Users(), true)}}
			r.proposeLocked(&logcodec.LogEntry{Kind: logcodec.KindCommand, Entry: seed}, nil, false)
		}
	}
	return true
}

// leading reports whether this node leads.
func (r *Raft) leading() bool {
	r.proposeMu.Lock()
	defer r.proposeMu.Unlock()
	return r.leadingLocked()
}

// proposeLocked proposes e with the next Seq: at once when fewer than
// maxInflight batches are being committed and no batch is held, else with the
// next batch. It does not wait for the commit. proposeMu is held.
func (r *Raft) proposeLocked(e *logcodec.LogEntry, req *Request, forwarded bool) {
	p := &proposal{seq: r.nextSeq, req: req, forwarded: forwarded, at: time.Now()}
	r.nextSeq++
	e.Origin, e.Seq = r.origin, p.seq
	r.localMu.Lock()
	r.local = append(r.local, p)
	r.localMu.Unlock()
	r.pending = append(r.pending, e)
	r.pendingSize += e.Size()
	r.pendingProps = append(r.pendingProps, p)
	r.sendReadyLocked()
}

// sendReadyLocked sends the pending proposals if they may go now: fewer than
// maxInflight batches are being committed, no forwarded batch is being
// gathered and no hold waits for more; or they fill a batch. proposeMu is held.
func (r *Raft) sendReadyLocked() {
	full := len(r.pendingProps) >= maxBatchEntries || r.pendingSize >= maxBatchBytes
	if full || (r.inflight < maxInflight && r.gathering == 0 && len(r.pendingProps) >= r.holdFor) {
		r.flushLocked()
	}
}

// flushLocked sends the pending proposals to the log as one batch.
// proposeMu is held.
//
// The batch's commands are stamped now, which is after this term's barrier
// was applied: a batch waits for the one before it, and the barrier is the
// term's first. A new leader has then applied every entry of earlier terms
// and its clock follows their time line (see applyLog), whatever its own wall
// clock says. A batch that left with the barrier (its proposals were held
// when the term began) carries no stamp: its commands run at the time of the
// entry before them.
func (r *Raft) flushLocked() {
	r.holdFor = 0
	if len(r.pendingProps) == 0 {
		return
	}
	var stamp int64
	if r.ownDone.Load() > r.barrier {
		stamp = r.clock.Now()
	}
	for _, e := range r.pending {
		e.Entry.Time = stamp
	}
	b := &logBatch{props: r.pendingProps, sent: time.Now()}
	r.metrics.batch.Observe(int64(len(r.pendingProps)))
	b.future = r.raft.Apply(logcodec.EncodeBatch(r.pending, r.pendingSize), 0)
	r.pending, r.pendingSize, r.pendingProps = nil, 0, nil
	r.inflight++
	r.waiter.push(b)
}

// holdLocked starts the next batch once the clients that batch b answered
// on this node have had their turn to join it (see steppedHold), or at once if
// it answered none. proposeMu is held.
func (r *Raft) holdLocked(b *logBatch) {
	answered := 0
	for _, p := range b.props {
		if p.req != nil && !p.forwarded {
			answered++
		}
	}
	if answered > 0 {
		now := time.Now()
		r.holdFor = len(r.pendingProps) + answered
		r.hold = newHold(now, now.Sub(b.sent), len(r.pendingProps))
		r.holdUntil = now.Add(r.hold.step)
		r.holdTimer.Reset(r.hold.step)
	}
	r.sendReadyLocked()
}

// holdExpired ends a step of the hold: it waits another step if proposals
// arrived during this one, else sends the held batch. A timer set for an
// earlier hold may fire late: holdUntil tells.
func (r *Raft) holdExpired() {
	r.proposeMu.Lock()
	defer r.proposeMu.Unlock()
	now := time.Now()
	if r.holdFor == 0 || now.Before(r.holdUntil) {
		return
	}
	if next := r.hold.next(now, len(r.pendingProps)); next > 0 {
		r.holdUntil = now.Add(next)
		r.holdTimer.Reset(next)
		return
	}
	r.holdFor = 0
	r.sendReadyLocked()
}

// read runs a read request on the state machine. smMu is held.
func (r *Raft) read(req *Request) keyspace.Reply {
	if req.WatchKeys != nil {
		return versionsReply(r.sm.Load().Versions(req.DB, req.WatchKeys))
	}
	sm := r.sm.Load()
	sm.record(true)
	reply := sm.readAs(req.DB, req.Cmds, req.Multi, req.Watch, r.clock.Now(), req.User)
	req.Denials, req.Calls = sm.takeDenials(), append(req.Calls[:0], sm.calls()...)
	return reply
}

// appliedLocal is called by the FSM, under smMu, when it has applied this
// node's proposal seq, whose scripts called calls (valid during the call):
// it answers the proposal's request, and runs the reads
// that were submitted after it, before this node's next proposal is applied.
func (r *Raft) appliedLocal(seq uint64, reply keyspace.Reply, denials []acl.Denial, calls []luaexec.ScriptCall) {
	r.ownDone.Store(seq + 1)
	var done *Request
	var reads []*readOp
	r.localMu.Lock()
	for len(r.local) > 0 && r.local[0].seq <= seq {
		p := r.local[0]
		r.local[0] = nil
		r.local = r.local[1:]
		// A proposal before seq that is still listed never made it into the
		// log; the waiter reports its error.
		if p.seq == seq && !p.done {
			p.done = true
			done = p.req
			if !r.committed.IsZero() {
				r.metrics.commit.Observe(int64(r.committed.Sub(p.at)))
				r.metrics.apply.Observe(int64(time.Since(p.at)))
			}
		}
		reads = append(reads, p.reads...)
	}
	r.localMu.Unlock()
	if done != nil {
		done.Denials, done.Calls = denials, append(done.Calls[:0], calls...)
		done.finish(reply)
	}
	for _, rd := range reads {
		r.readRan(rd, r.read(rd.req))
	}
}

// waitLoop waits for this node's batches in log order: when one is done it
// sends the next, and it answers the proposals of those that failed.
func (r *Raft) waitLoop() {
	for {
		select {
		case <-r.waiter.wake:
		case <-r.stop:
			// Batches sent now fail at once, raft being shut down; a held
			// one is sent now, for its proposals to be answered.
			r.holdTimer.Stop()
			r.proposeMu.Lock()
			r.flushLocked()
			r.proposeMu.Unlock()
			for bs := r.waiter.take(); len(bs) > 0; bs = r.waiter.take() {
				for _, b := range bs {
					r.checkBatch(b)
				}
			}
			return
		}
		for _, b := range r.waiter.take() {
			r.checkBatch(b)
		}
	}
}

func (r *Raft) checkBatch(b *logBatch) {
	err := r.outcome(b.future)
	r.proposeMu.Lock()
	r.inflight--
	if err == nil {
		r.holdLocked(b)
	} else {
		r.sendReadyLocked()
	}
	r.proposeMu.Unlock()
	if err != nil {
		for _, p := range b.props {
			r.failProposal(p, err)
		}
	}
}

// outcome waits for the outcome of a batch sent to the log. hashicorp/raft
// never answers a batch still queued for its leader loop when it shuts
// down, and Close stops the node only once raft has shut down: a batch with
// no outcome then has none to come, and fails as raft's would.
func (r *Raft) outcome(f raft.ApplyFuture) error {
	err, ok := awaitOr(f.Error, r.stop)
	if !ok {
		return raft.ErrRaftShutdown
	}
	return err
}

// failProposal answers a proposal whose batch raft refused or lost, unless
// the FSM applied it meanwhile.
func (r *Raft) failProposal(p *proposal, err error) {
	var reply keyspace.Reply
	switch {
	case errors.Is(err, raft.ErrNotLeader), errors.Is(err, raft.ErrLeadershipTransferInProgress):
		reply = keyspace.Error(errTryAgain) // refused before it was appended
	case errors.Is(err, raft.ErrRaftShutdown):
		reply = keyspace.Error(errUnknownClose)
	default: // ErrLeadershipLost, and anything else: it may be in the log
		reply = keyspace.Error(errUnknownLost)
	}
	var reads []*readOp
	r.localMu.Lock()
	for i, q := range r.local {
		if q == p {
			r.local = append(r.local[:i], r.local[i+1:]...)
			reads = p.reads
			p.reads = nil
			break
		}
	}
	resolve := !p.done && p.req != nil
	p.done = true
	r.localMu.Unlock()
	for _, rd := range reads {
		r.readRan(rd, keyspace.Error(errTryAgain))
	}
	if resolve {
		p.req.finish(reply)
	}
}

// verifyLoop confirms leadership for the reads waiting at the start of each
// round: one VerifyLeader round serves them all.
func (r *Raft) verifyLoop() {
	for {
		select {
		case <-r.verifier.wake:
		case <-r.stop:
			for _, rd := range r.verifier.take() {
				r.readVerified(rd, errClosed)
			}
			return
		}
		reads := r.verifier.take()
		if len(reads) == 0 {
			continue
		}
		err := r.raft.VerifyLeader().Error()
		// The round confirms the term it ran in; a read accepted in an earlier
		// term may have run on a state that misses what another leader wrote.
		term := r.raft.CurrentTerm()
		for _, rd := range reads {
			switch {
			case err != nil || rd.term != term:
				r.readVerified(rd, errTryAgain)
			default:
				r.readVerified(rd, "")
			}
		}
	}
}

func (r *Raft) readRan(rd *readOp, reply keyspace.Reply) {
	rd.reply = reply
	if rd.left.Add(-1) == 0 {
		r.answerRead(rd)
	}
}

func (r *Raft) readVerified(rd *readOp, fail string) {
	rd.fail = fail
	if rd.left.Add(-1) == 0 {
		r.answerRead(rd)
	}
}

func (r *Raft) answerRead(rd *readOp) {
	if rd.fail != "" {
		rd.req.finish(keyspace.Error(rd.fail))
		return
	}
	rd.req.finish(rd.reply)
}

// expireLoop runs the cycles of active expiry (see expiryTick) while this
// node leads: the followers apply the sweeps it proposes.
func (r *Raft) expireLoop() {
	var cur expiryCursor
	every(r.stop, expiryTick, func() {
		if r.raft.State() == raft.Leader {
			r.expireCycle(&cur)
		}
	})
}

// expireCycle looks at the keys step by step while the steps find many
// expired, and proposes a sweep of the shards of each step that found any,
// with up to expiryInflight sweeps being committed while it looks further.
// The time this node spends looking and applying sweeps counts against
// expiryBusy.
func (r *Raft) expireCycle(cur *expiryCursor) {
	start, busy := time.Now(), r.sweepTime.Load()
	var inflight []*Request
	defer func() {
		for _, req := range inflight {
			req.Wait(r.ctx)
		}
	}()
	for {
		looked := time.Now()
		r.smMu.Lock()
		db, from, shards, examined, expired := cur.look(r.sm.Load(), r.clock.Now())
		r.smMu.Unlock()
		r.sweepTime.Add(int64(time.Since(looked)))
		if expired > 0 {
			req := r.proposeSweep(db, from, shards)
			if req == nil {
				return
			}
			inflight = append(inflight, req)
		}
		// Before it looks at shards again, the sweeps it proposed for them
		// are applied.
		for len(inflight) == expiryInflight || len(inflight) > 0 && from+shards == keyspace.NumShards {
			reply := inflight[0].Wait(r.ctx)
			inflight = inflight[1:]
			if reply.Kind == keyspace.KindError {
				return
			}
		}
		if !again(examined, expired) || time.Duration(r.sweepTime.Load()-busy) >= expiryBusy || time.Since(start) >= expiryTick {
			return
		}
	}
}

// proposeSweep proposes a sweep of shards shards of database db from shard
// from on, and returns its request, answered with the number of keys it
// removed once applied; nil when this node does not lead.
func (r *Raft) proposeSweep(db, from, shards int) *Request {
	req := &Request{}
	req.start()
	r.proposeMu.Lock()
	defer r.proposeMu.Unlock()
	if r.closed.Load() || !r.leadingLocked() {
		return nil
	}
	r.proposeLocked(&logcodec.LogEntry{Kind: logcodec.KindSweep, Entry: logcodec.Entry{DB: db}, Sweep: logcodec.SweepRange{From: from, Shards: shards}}, req, false)
	return req
}

// leadershipLoop proposes the barrier as soon as this node wins an election,
// rather than at its first request; while it leads, it tracks which members
// fail heartbeats; and it tells the forwarder when the leader changes.
func (r *Raft) leadershipLoop() {
	obs := make(chan raft.Observation, 64)
	observer := raft.NewObserver(obs, false, func(o *raft.Observation) bool {
		switch o.Data.(type) {
		case raft.FailedHeartbeatObservation, raft.ResumedHeartbeatObservation, raft.LeaderObservation:
			return true
		}
		return false
	})
	r.raft.RegisterObserver(observer)
	defer r.raft.DeregisterObserver(observer)
	for {
		select {
		case <-r.stop:
			return
		case isLeader := <-r.raft.LeaderCh():
			r.peerMu.Lock()
			r.unreachable = map[string]bool{}
			r.peerMu.Unlock()
			if isLeader {
				r.leading()
			}
		case o := <-obs:
			if lo, ok := o.Data.(raft.LeaderObservation); ok {
				r.metrics.leaderChanges.Add(1)
				r.log.Info("leader changed", "event", "leader_change", "leader", string(lo.LeaderID),
					"leader_addr", r.memberAddr(string(lo.LeaderID)), "term", r.raft.CurrentTerm(), "state", lowerState(r.raft.State()))
				r.fwd.leaderChanged()
				continue
			}
			r.peerMu.Lock()
			switch d := o.Data.(type) {
			case raft.FailedHeartbeatObservation:
				r.unreachable[string(d.PeerID)] = true
			case raft.ResumedHeartbeatObservation:
				delete(r.unreachable, string(d.PeerID))
			}
			r.peerMu.Unlock()
		}
	}
}

// Now returns the log clock's time: on a follower, the leader's time line.
func (r *Raft) Now() int64 { return r.clock.Now() }

// Fault receives the error that stopped the node on its own: its raft log
// could not be written, or failed a check when read (see logFailed). The node
// is then closing; the process that runs it should exit, to be restarted.
func (r *Raft) Fault() <-chan error { return r.fault }

// Close stops the node. Requests in flight are answered (UNKNOWN for writes
// whose outcome is not known); the stores and transport are closed.
func (r *Raft) Close() error {
	if r.closed.Swap(true) {
		return nil
	}
	// Shutdown waits for a snapshot under way, which is bounded too.
	r.closeBy.Store(time.Now().Add(r.opts.CloseSnapshotTimeout).UnixNano())
	r.snapshotBeforeClose()
	err := r.raft.Shutdown().Error()
	r.cancel()
	close(r.stop)
	r.wg.Wait()
	r.fwd.close()
	r.ret.stop()
	return errors.Join(err, r.peers.Close(), r.closeStores())
}

func (r *Raft) closeStores() error {
	var errs []error
	for i := len(r.closer) - 1; i >= 0; i-- {
		errs = append(errs, r.closer[i].Close())
	}
	r.closer = nil
	return errors.Join(errs...)
}

// isClusterCommand reports whether req is a LOCKSERVER command, which the node
// that receives it serves itself.
func isClusterCommand(req *Request) bool {
	return len(req.Cmds) == 1 && !req.Multi && req.WatchKeys == nil &&
		bytes.EqualFold(req.Cmds[0][0], []byte("lockserver"))
}

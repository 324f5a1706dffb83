package replication

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
	"github.com/lockserver/lockserver/internal/acl"
	"github.com/lockserver/lockserver/internal/buildinfo"
	"github.com/lockserver/lockserver/internal/logclock"
	"github.com/lockserver/lockserver/keyspace"
	"github.com/lockserver/lockserver/replication/internal/logcodec"
	"github.com/lockserver/lockserver/replication/internal/memberlink"
	"github.com/lockserver/lockserver/replication/internal/storage"
)

// Raft is the engine of a cluster member: every write is an entry of a Raft
// log that each node applies to its own state machine, in log order.
//
// The path of a command on the leader: Submit classifies it with prepare. A
// write is stamped by the log clock, encoded and proposed; it waits in the
// list of this node's proposals until the FSM applies the entry and resolves
// the request with apply's reply. A read runs on the state machine at its
// place among this node's proposals (after every write submitted before it,
// before any submitted after it) and is answered once a VerifyLeader round
// that began after it arrived confirms that this node still leads, in the same
// term. A new leader's first entry is a barrier: reads queue behind it, so
// nothing is read before every entry of earlier terms is applied. On a
// follower, Submit hands the request to the forwarder, which relays it to the
// leader in order with the others.
//
// By file: writes are propose.go, reads read.go, a follower's requests
// forward.go and relay.go, applying the log fsm.go, snapshots
// fsm_snapshot.go, membership changes membership.go, what a member knows of
// the leader leader.go, WAIT wait.go and a member's status status.go; the
// LOCKSERVER command, which reaches several of them, is
// lockserver_command.go.
type Raft struct {
	opts  RaftOptions
	log   *slog.Logger
	raft  *raft.Raft
	node  atomic.Pointer[raft.Raft] // raft, for the log store, which raft calls before NewRaft returns
	logs  *storage.Log
	trans raft.Transport
	link  *memberlink.Link // nil when a transport was given (tests)
	// cluster is the identity of this member's cluster, set before Raft starts.
	cluster memberlink.ClusterID
	closer  []io.Closer // what NewRaft opened: the transport, the data directory, the log
	peers   peerClient
	clock   *logclock.Clock
	origin  uint64 // tags this process's proposals in the log
	// pub delivers the messages of the entries this node applies live: the
	// Hub, Replicated (nil without a Hub).
	pub keyspace.Publisher

	// Lock order. Where two of the engine's mutexes are held together, the
	// first below is taken first:
	//
	//	proposeMu -> localMu      proposeLocked; submit, placing a read
	//	proposeMu -> fwd.mu       submit, asking whether the forwarder is busy
	//	smMu      -> localMu      the FSM answering this node's proposals (appliedLocal)
	//	smMu      -> fwd.relayMu  the FSM answering relayed requests (appliedHere, passed)
	//
	// proposeMu and smMu are never held together: the FSM proposes nothing,
	// and submit lets go of proposeMu before prepare and before it reads.
	// localMu, peerMu, reloadMu, waits.mu, fwd.mu and fwd.relayMu are
	// innermost, as are the locks of the queues, the log clock, ret and the
	// ACL registry, which either outer one may be held for. logFailed, which
	// the storage may call under its own locks, takes localMu alone. Under
	// smMu the state machine calls the Hub and the registry's OnChange,
	// which must not call back into the engine.

	// smMu serialises the use of the state machine (apply, read, the
	// leader's looks for expired keys, snapshots); the FSM holds it while it
	// applies a batch. sm changes only when a snapshot is restored. prepare
	// may run beside the rest, unlocked.
	smMu    sync.Mutex
	sm      atomic.Pointer[stateMachine]
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
	dryOdds  dryOdds           // whether dry runs at submission are worth their cost
	fwd      *forwarder

	peerMu      sync.Mutex
	unreachable map[string]bool // on the leader: members whose heartbeats fail

	waits  replicaWaits // the WAITs under way (wait.go)
	backup backups      // the backups under way (backup.go)

	metrics raftMetrics // metrics.go
	// committed is when the FSM was handed the batch it applies now: the
	// commit of this node's proposals in it. Written by the FSM only.
	committed time.Time

	reloadMu sync.Mutex  // see reloadConfig
	standing atomic.Bool // a follower is looking into its leader's end (peerGone)

	// build is the release this member runs (RaftOptions.build); halted,
	// once set, says why it applies no more entries (see halt).
	build  buildinfo.Release
	halted atomic.Pointer[error]
	// recovering is set on the engine Recover runs offline (recover.go).
	recovering bool

	closed   atomic.Bool
	failOnce sync.Once  // logFailed
	fault    chan error // see Fault
	// ctx ends when the node closes, cutting short calls to other nodes.
	ctx    context.Context
	cancel context.CancelFunc
	stop   chan struct{}
	wg     sync.WaitGroup
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
	r, err := newEngine(opts)
	if err != nil {
		return nil, err
	}
	if err := r.open(); err != nil {
		r.cancel()
		r.closeStores()
		return nil, fmt.Errorf("replication: open node %s: %w", r.opts.NodeID, err)
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

// newEngine returns the engine's state, with no stores, transport or Raft
// node yet: NewRaft opens those, and the offline tools (backup.go,
// recover.go) use the state machine alone.
func newEngine(opts RaftOptions) (*Raft, error) {
	opts = opts.withDefaults()
	build, err := buildinfo.Parse(opts.build)
	if err != nil {
		return nil, fmt.Errorf("replication: node %s: %w", opts.NodeID, err)
	}
	r := &Raft{
		build:    build,
		opts:     opts,
		log:      opts.Logger.With("node", opts.NodeID),
		clock:    logclock.New(0, opts.mono, opts.wall),
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
	r.sm.Store(newStateMachine(opts.Lua, opts.Users, true))
	r.members.Store(&map[string]string{})
	r.fwd = newForwarder(r)
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
	r.peers, r.trans = o.peers, o.transport
	if r.trans == nil {
		link, err := memberlink.Listen(o.RaftAddr, o.RaftAdvertise, memberlink.Config{Node: o.NodeID, Build: o.build, Secret: []byte(o.ClusterSecret), TLS: o.TLS, Log: r.log, Gone: r.peerGone})
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
		r.peers = memberlink.NewPeers(r.link.DialMember, r.log, replyErr)
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
	if o.logStore != nil {
		logs = o.logStore
	}
	if o.stableStore != nil {
		stable = o.stableStore
	}
	if o.snapshotStore != nil {
		snaps = o.snapshotStore
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
	c.CommitTimeout = o.commitTimeout
	// Many concurrent proposals go to the log, and to the FSM, as one batch.
	// MaxAppendEntries also sizes the slice raft makes for every
	// AppendEntries it sends and every batch it commits: at 1024 those two
	// were most of what a leader allocated, work for the garbage collector
	// of a member holding millions of locks. 256 also ran more lock cycles
	// than 1024 on the bench's cluster, and 64 fewer.
	c.BatchApplyCh = true
	c.MaxAppendEntries = 256
	c.SnapshotThreshold = o.snapshotThreshold
	c.TrailingLogs = o.trailingLogs
	c.SnapshotInterval = o.snapshotInterval
	c.Logger = hl
	return c
}

// logCacheEntries is how many recent log entries a node keeps in memory
// for followers' replication and its own applying. An entry is a batch of up
// to maxBatchBytes, so the cache's bound in bytes is this many megabytes: a
// larger cache held many times the memory per held lock on a leader, for
// the same lock throughput.
const logCacheEntries = 64

// reloadConfig applies change to raft's reloadable configuration, one
// change at a time: each reads the configuration whole and writes it back.
// What failed to change is logged by what.
func (r *Raft) reloadConfig(what string, change func(*raft.ReloadableConfig)) {
	r.reloadMu.Lock()
	defer r.reloadMu.Unlock()
	rc := r.raft.ReloadableConfig()
	change(&rc)
	if err := r.raft.ReloadConfig(rc); err != nil {
		r.log.Warn("setting "+what+" failed", "err", err)
	}
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

// Members returns the listener of member connections: the links on which
// other members send this one internal commands, in RESP, having proved
// that they are members (see memberlink). The server serves them as
// member connections. Nil when the engine was given a transport (tests).
func (r *Raft) Members() net.Listener {
	if r.link == nil {
		return nil
	}
	return r.link.Members()
}

// Now returns the log clock's time: on a follower, the leader's time line.
func (r *Raft) Now() int64 { return r.clock.Now() }

// Fault receives the error that stopped the node on its own: its raft log
// could not be written, or failed a check when read (see logFailed). The node
// is then closing; the process that runs it should exit, to be restarted.
func (r *Raft) Fault() <-chan error { return r.fault }

// logFailed stops a node whose log could not be written, or failed a check
// when read (storage.CorruptionError): raft goes on as if the entries were
// applied, but the state machine must never apply an entry that is not on
// disk, nor one that is not what was written, so the node can only stop. Its
// proposals in flight may still be committed by the others: their outcome
// is unknown.
func (r *Raft) logFailed(err error) {
	if r.node.Load() == nil {
		return // not running yet: NewRaft fails with the error itself
	}
	r.failOnce.Do(func() {
		r.log.Error("stopping the node: its raft log failed", "err", err)
		r.fault <- err
		go r.Close()
	})
	r.localMu.Lock()
	local := append([]*proposal(nil), r.local...)
	r.localMu.Unlock()
	for _, p := range local {
		r.failProposal(p, raft.ErrRaftShutdown)
	}
}

// HandOver hands leadership to the most up-to-date other voter if this node
// leads, and returns once that one leads or raft gives up (after an
// election timeout). A leader that stopped without it would cost the
// clients a failure detection and an election of refused writes; handed
// over, a stop costs them the commits in flight. This node goes on as a
// follower, forwarding what its clients send to the new leader. Close calls
// it; a process that stops its clients' connections before Close calls it
// first, so that their last requests go to the new leader.
func (r *Raft) HandOver() {
	if r.closed.Load() || r.cannotApply() != nil || r.raft.State() != raft.Leader {
		return
	}
	start := time.Now()
	to, ok := r.handOverTarget()
	if !ok {
		return // no other voter answers: there is no one to hand over to
	}
	if err := r.raft.LeadershipTransferToServer(raft.ServerID(to.id), raft.ServerAddress(to.addr)).Error(); err != nil {
		r.log.Warn("handing leadership over before stopping failed", "event", "hand_over", "to", to.id, "err", err, "took", time.Since(start))
		return
	}
	r.log.Info("handed leadership over before stopping", "event", "hand_over", "to", to.id, "took", time.Since(start))
}

// handOverTarget returns the voter other than this node that has applied
// the most of the log, of those that answer at once; false if none does.
// raft's own choice (the most up-to-date by what it last heard) would wait
// an election timeout for a voter that has stopped, as every voter but the
// last has when a whole cluster stops.
func (r *Raft) handOverTarget() (replicaMember, bool) {
	cf := r.raft.GetConfiguration()
	if cf.Error() != nil {
		return replicaMember{}, false
	}
	var best replicaMember
	var most uint64
	found := false
	for _, s := range cf.Configuration().Servers {
		if s.Suffrage != raft.Voter || string(s.ID) == r.opts.NodeID {
			continue
		}
		m := replicaMember{id: string(s.ID), addr: string(s.Address)}
		if applied, err := r.memberApplied(m); err == nil && (!found || applied > most) {
			best, most, found = m, applied, true
		}
	}
	return best, found
}

// Close stops the node, handing leadership over first if it leads (see
// HandOver). Requests in flight are answered (UNKNOWN for writes whose
// outcome is not known); the stores and transport are closed.
func (r *Raft) Close() error {
	r.HandOver()
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
	r.backup.endAll(errors.New(errClosed))
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

package replication

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
	"github.com/lockserver/lockserver/internal/buildinfo"
	"github.com/lockserver/lockserver/internal/wire"
	"github.com/lockserver/lockserver/replication/internal/storage"
)

// snapshotCheck is how often snapshotLoop looks at the log.
const snapshotCheck = time.Second

// snapshotLoop takes a snapshot once the log written since the last one
// holds snapshotLogBytes and half as many bytes as that snapshot (see
// RaftOptions): a snapshot costs about its size to write, and a restart
// replays the log written since, so the two stay in proportion however
// large the state grows.
func (r *Raft) snapshotLoop() {
	every(r.stop, snapshotCheck, func() {
		if r.logBytes.Load()-r.snapMark.Load() >= max(uint64(r.opts.snapshotLogBytes), r.snapSize.Load()/2) {
			r.snapshot()
		}
	})
}

// snapshot takes a snapshot (see takeSnapshot), logging a failure.
func (r *Raft) snapshot() {
	err := r.takeSnapshot()
	if err != nil && !errors.Is(err, raft.ErrNothingNewToSnapshot) && !r.closed.Load() {
		r.log.Warn("snapshot failed", "err", err)
	}
}

// takeSnapshot takes a snapshot, after which the log keeps the entries
// written since the last one, that one's last entry included (and at least
// trailingLogs; see keepLogSinceSnapshot): a follower that fell behind by
// less than that catches up from the log (the leader sends entries with the
// one before them, which the follower checks against its own). LOCKSERVER
// SNAPSHOT takes one so too.
func (r *Raft) takeSnapshot() error { return r.raft.Snapshot().Error() }

// snapshotBeforeClose takes a snapshot as the node closes, as redis-server
// saves at shutdown, when replaying the log written since the last one
// would cost a restart more than reading a snapshot: when it holds an
// eighth of snapshotLogBytes and of the last snapshot's size (a byte of log
// costs several times what a byte of snapshot does to apply). A planned
// restart of a member, or of the whole cluster, then reads its snapshot and
// next to no log. A node whose log failed takes none.
func (r *Raft) snapshotBeforeClose() {
	if r.cannotApply() != nil {
		return
	}
	if r.logBytes.Load()-r.snapMark.Load() >= max(uint64(r.opts.snapshotLogBytes), r.snapSize.Load())/8 {
		r.snapshot()
	}
}

// Snapshot freezes the state under the lock, in constant time (see
// keyspace.Frozen); raft writes it in the background while apply goes on.
// A node whose log could not be written has skipped entries raft counts as
// applied (see logFailed), and so has one that halted (see halt): it takes
// no snapshot, which would name them.
func (f *fsm) Snapshot() (raft.FSMSnapshot, error) {
	r := (*Raft)(f)
	if err := r.cannotApply(); err != nil {
		return nil, err
	}
	began := time.Now()
	r.smMu.Lock()
	defer r.smMu.Unlock()
	if r.recovering {
		r.recoverSnapshot()
	}
	s := r.freeze()
	s.began = began
	return s, nil
}

// snapshotMagic starts the engine's header in every snapshot; the byte after
// it is the header's version: 2, of lockserver 0.1, or 3, which adds the
// cluster version and the epoch, written only once the cluster version
// allows it.
const (
	snapshotMagic    = "LKSNAP\x00"
	snapshotHeaderV2 = 2
	snapshotHeaderV3 = 3
)

// releaseV3 is the release that added snapshotHeaderV3.
var releaseV3 = buildinfo.Release{Major: 0, Minor: 2}

// raftSnapshot is the engine's state as freeze found it.
type raftSnapshot struct {
	r        *Raft
	logBytes uint64 // Raft.logBytes then
	applied  uint64
	last     int64
	members  map[string]string // replaced, never modified (Raft.members)
	cluster  clusterVersion
	epoch    uint64
	sm       smSnapshot
	// began, for a snapshot raft takes, is when; Persist counts it in r's
	// metrics.
	began time.Time
}

// freeze takes the engine's state for a snapshot. smMu is held.
func (r *Raft) freeze() *raftSnapshot {
	sm := r.sm.Load()
	return &raftSnapshot{r: r, logBytes: r.logBytes.Load(), applied: r.applied.Load(), last: sm.lastTime(), members: *r.members.Load(),
		cluster: sm.cluster, epoch: sm.epoch, sm: sm.freeze()}
}

// header encodes the applied index, the log clock's last stamp, the member
// map and, once the cluster version allows it, the cluster version, which the
// snapshot carries beside the state machine's own.
func (s *raftSnapshot) header() []byte {
	v3 := s.cluster.allows(releaseV3)
	b := []byte(snapshotMagic)
	if v3 {
		b = append(b, snapshotHeaderV3)
	} else {
		b = append(b, snapshotHeaderV2)
	}
	b = binary.AppendUvarint(b, s.applied)
	b = binary.AppendVarint(b, s.last)
	ids := slices.Sorted(maps.Keys(s.members))
	b = binary.AppendUvarint(b, uint64(len(ids)))
	for _, id := range ids {
		b = wire.AppendString(b, id)
		b = wire.AppendString(b, s.members[id])
	}
	if v3 {
		b = wire.AppendString(b, s.cluster.version.String())
		b = append(b, boolByte(s.cluster.pinned))
		b = binary.AppendUvarint(b, s.epoch)
	}
	return b
}

func boolByte(v bool) byte {
	if v {
		return 1
	}
	return 0
}

// write writes the snapshot: the state machine's, with the header.
func (s *raftSnapshot) write(w io.Writer) error { return s.sm.write(w, s.header()) }

// Persist writes the snapshot to raft's sink, beside apply. It pauses
// after each frame of the snapshot (64 kB, under a millisecond of work)
// twice as long as the frame took (see storage.Pacer). A goroutine that never blocks keeps
// the processor for Go's whole time slice (10 ms), and every step of a
// request (its connection, raft, the log writer, the state machine) would
// wait that long behind it. A node on one processor (the default on a small
// machine) so keeps at least two thirds of its time for its clients while
// it writes a snapshot.
func (s *raftSnapshot) Persist(sink raft.SnapshotSink) error {
	written := &counter{w: sink, pace: new(storage.Pacer).Pause, by: &s.r.closeBy}
	if err := s.write(written); err != nil {
		sink.Cancel()
		if errors.Is(err, errSnapshotAbandoned) {
			s.r.log.Info("snapshot abandoned as the node closes: its restart replays the log instead", "event", "snapshot",
				"index", s.applied, "bytes", written.n, "close_snapshot_timeout", s.r.opts.CloseSnapshotTimeout)
		}
		return fmt.Errorf("persist snapshot: %w", err)
	}
	if err := sink.Close(); err != nil {
		return err
	}
	r := s.r
	r.keepLogSinceSnapshot() // raft compacts next
	r.snapshotted(s.logBytes, s.applied, written.n)
	if !s.began.IsZero() {
		took := time.Since(s.began)
		r.metrics.snapshots.Add(1)
		r.metrics.snapshotTime.Observe(int64(took))
		r.metrics.snapshotBytes.Store(int64(written.n))
		r.log.Info("snapshot taken", "event", "snapshot", "id", sink.ID(), "index", s.applied, "bytes", written.n, "duration", took)
	}
	return nil
}

// compactSlack is how many entries keepLogSinceSnapshot keeps beyond those it
// counts, for the ones a leader appends before raft compacts.
const compactSlack = 16

// keepLogSinceSnapshot has raft's next compaction keep the entries since the
// last snapshot, that one's last included. Raft counts the entries it keeps
// back from the last in the log when it compacts, which is after the snapshot
// has been written: counted before, a leader that went on writing meanwhile
// had its log compacted past the last snapshot's index, up to the new one
// (TestSnapshotWhileWritingKeepsTheLogSinceTheLast; TestSnapshotsByLogBytes
// failed so under load), and a follower behind by a few entries needed the
// whole snapshot. Persist calls it once the snapshot is written, just
// before raft compacts; the entries appended between the two fit in
// compactSlack.
func (r *Raft) keepLogSinceSnapshot() {
	if r.raft == nil {
		return // offline (see Recover): raft compacts nothing
	}
	r.reloadConfig("the log entries kept after a snapshot", func(rc *raft.ReloadableConfig) {
		last, since := r.raft.LastIndex(), r.snapIndex.Load()
		rc.TrailingLogs = r.opts.trailingLogs
		if last >= since {
			rc.TrailingLogs = max(rc.TrailingLogs, last-since+1+compactSlack)
		}
	})
}

// snapshotted records a snapshot taken, or restored, when logBytes of the
// log had been applied, holding the entries up to index in size bytes.
func (r *Raft) snapshotted(logBytes, index, size uint64) {
	r.snapMark.Store(logBytes)
	r.snapIndex.Store(index)
	r.snapSize.Store(size)
}

// counter counts the bytes read from r or written to w; with pace, it
// pauses after each write, and with by, it fails the writes that begin past
// the time by holds (Unix nanoseconds; 0: none) with errSnapshotAbandoned.
// Once by is set it no longer pauses: the node closes, its own clients are
// gone (the server closes them first), and a snapshot written at full speed,
// twice as fast, more often ends within the time Close gives it.
type counter struct {
	r    io.Reader
	w    io.Writer
	n    uint64
	pace func() // pauses after a write (storage.Pacer.Pause)
	by   *atomic.Int64
}

// errSnapshotAbandoned fails a snapshot still being written when the time
// Close gives it is up (see RaftOptions.CloseSnapshotTimeout).
var errSnapshotAbandoned = errors.New("abandoned: the node closes")

func (c *counter) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += uint64(n)
	return n, err
}

func (c *counter) Write(p []byte) (int, error) {
	var by int64
	if c.by != nil {
		by = c.by.Load()
	}
	if by != 0 && time.Now().UnixNano() > by {
		return 0, errSnapshotAbandoned
	}
	n, err := c.w.Write(p)
	c.n += uint64(n)
	if c.pace != nil && by == 0 {
		c.pace()
	}
	return n, err
}

// Release lets the state machine change in place what the snapshot held;
// raft calls it once Persist has returned.
func (s *raftSnapshot) Release() {
	s.r.smMu.Lock()
	s.sm.release()
	s.r.smMu.Unlock()
}

// Restore replaces the state with a snapshot's: at start, and when the leader
// installs one on a lagging follower. Nothing is delivered to subscribers.
// The new state is read beside apply, which goes on with the old one until
// the new one is complete and checked, to the stream's end.
func (f *fsm) Restore(rc io.ReadCloser) error {
	r := (*Raft)(f)
	defer rc.Close()
	began := time.Now()
	read := &counter{r: rc}
	sm, members, applied, err := readSnapshot(read, r)
	// Read to the end, where the snapshot store's check of the whole state
	// comes (see storage.Dir): its verdict, when the state is not what was
	// written, comes before what the decoder made of it.
	if _, rest := io.Copy(io.Discard, read); rest != nil {
		err = rest
	}
	if err != nil {
		return fmt.Errorf("restore snapshot: %w", err)
	}
	r.restored(applied, read.n, time.Since(began))
	r.smMu.Lock()
	r.sm.Store(sm)
	sm.useRestoredUsers()
	r.members.Store(&members)
	r.applied.Store(applied)
	r.snapshotted(r.logBytes.Load(), applied, read.n)
	// The relayed requests whose entries the snapshot holds are never
	// applied here.
	r.fwd.passed(applied)
	r.smMu.Unlock()
	// A snapshot is another node's time line, or this node's before a restart.
	r.clock.Follow(sm.lastTime())
	return nil
}

// readSnapshot reads what raftSnapshot.Persist wrote into a new state machine.
func readSnapshot(rd io.Reader, r *Raft) (*stateMachine, map[string]string, uint64, error) {
	sm := newStateMachine(r.opts.Lua, r.opts.Users, true)
	header, err := sm.readSnapshot(rd)
	if err != nil {
		return nil, nil, 0, err
	}
	if !bytes.HasPrefix(header, []byte(snapshotMagic)) || len(header) == len(snapshotMagic) {
		return nil, nil, 0, errors.New("not a lockserver snapshot")
	}
	version := header[len(snapshotMagic)]
	if version != snapshotHeaderV2 && version != snapshotHeaderV3 {
		return nil, nil, 0, fmt.Errorf("snapshot header of version %d: a later release wrote it; this build (lockserver %s) reads 2 and 3", version, r.opts.build)
	}
	d := wire.NewDecoder(header[len(snapshotMagic)+1:])
	applied := d.Uvarint()
	last := d.Varint()
	members := make(map[string]string)
	for n := d.Count(2); n > 0; n-- {
		id := string(d.Bytes())
		members[id] = string(d.Bytes())
	}
	if version == snapshotHeaderV3 {
		v, err := buildinfo.Parse(string(d.Bytes()))
		pinned := d.Byte()
		if d.Err() == nil && (err != nil || pinned > 1) {
			d.Fail(fmt.Errorf("cluster version %v, pinned %d", err, pinned))
		}
		sm.setCluster(clusterVersion{version: v, pinned: pinned == 1})
		sm.setEpoch(d.Uvarint())
	}
	if err := d.Finish(); err != nil {
		return nil, nil, 0, fmt.Errorf("snapshot header: %w", err)
	}
	if r.build.Less(sm.cluster.get()) {
		return nil, nil, 0, fmt.Errorf("the snapshot is of a cluster that runs lockserver %s and this member %s: it is too old to be a member; run %s or later",
			sm.cluster.get(), r.opts.build, sm.cluster.get())
	}
	sm.last = last
	return sm, members, applied, nil
}

// restored counts and logs a snapshot restored: raft restores this node's
// own before NewRaft returns, and later only snapshots a leader installs.
func (r *Raft) restored(index, bytes uint64, took time.Duration) {
	source, counter := "start", &r.metrics.restoresAtStart
	if r.node.Load() != nil {
		source, counter = "leader", &r.metrics.installs
	}
	counter.Add(1)
	r.metrics.restoreTime.Observe(int64(took))
	r.log.Info("snapshot restored", "event", "snapshot", "source", source, "index", index, "bytes", bytes, "duration", took)
}

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
	"github.com/lockserver/lockserver/internal/acl"
	"github.com/lockserver/lockserver/internal/wire"
	"github.com/lockserver/lockserver/keyspace"
	"github.com/lockserver/lockserver/luaexec"
	"github.com/lockserver/lockserver/replication/internal/logcodec"
	"github.com/lockserver/lockserver/replication/internal/storage"
)

// fsm is the Raft engine as hashicorp/raft sees it: its state machine.
// hashicorp/raft calls these methods from one goroutine.
type fsm Raft

// Apply applies one entry; ApplyBatch is the path raft takes.
func (f *fsm) Apply(l *raft.Log) any { return f.ApplyBatch([]*raft.Log{l})[0] }

// ApplyBatch applies committed entries in log order under the state machine's
// lock. Replies go to the requests of this node's proposals directly (see
// appliedLocal), not through raft's futures.
func (f *fsm) ApplyBatch(logs []*raft.Log) []any {
	r := (*Raft)(f)
	// Nothing is applied before this node has it on disk (see storage.Log).
	if err := r.logs.WaitDurable(logs[len(logs)-1].Index); err != nil {
		r.logFailed(err)
		return make([]any, len(logs))
	}
	r.committed = time.Now()
	r.smMu.Lock()
	defer r.smMu.Unlock()
	for _, l := range logs {
		if l.Type == raft.LogCommand {
			r.applyLog(l)
		}
		r.logBytes.Add(uint64(len(l.Data)))
	}
	r.applied.Store(logs[len(logs)-1].Index)
	r.fwd.passed(logs[len(logs)-1].Index)
	return make([]any, len(logs))
}

// applyLog applies the entries of one Raft log entry, a batch that one node
// proposed, and moves the log clock along their stamps. Another node's
// stamps (another process's, this node's before a restart among them) set
// the clock (logclock.Clock.Follow), so that every node, a new leader too, continues
// the log's time line rather than its own wall clock's; this node's own only
// raise it (logclock.Clock.Observe): it may have stamped later batches since.
func (r *Raft) applyLog(l *raft.Log) {
	entries, err := logcodec.DecodeBatch(l.Data)
	if err != nil {
		// Every node skips the same bytes, so the replicas stay alike.
		r.log.Error("skipping an undecodable log entry", "index", l.Index, "err", err)
		return
	}
	stamped := false
	for i, e := range entries {
		stamped = r.applyEntry(l.Index, i, e) || stamped
	}
	if !stamped {
		return
	}
	if last := r.sm.Load().LastTime(); entries[0].Origin == r.origin {
		r.clock.Observe(last)
	} else {
		r.clock.Follow(last)
	}
}

// applyEntry applies entry number i of the log entry at index and reports whether
// it carried a stamp (a command or a sweep). Entries that were in the log when the node started are
// a replay: their messages were delivered, if ever, before the restart.
//
// A command's reply counts the subscribers of this node that received what it
// published, so it answers the entry's request on the node that serves the
// client: this node's own proposals, and the requests this node forwarded and
// relays (a replay's entries carry another process's origin, so neither).
func (r *Raft) applyEntry(index uint64, i int, e *logcodec.LogEntry) bool {
	reply := keyspace.OK
	var denials []acl.Denial
	var calls []luaexec.ScriptCall
	switch e.Kind {
	case logcodec.KindCommand:
		var pub keyspace.Publisher
		if index > r.replayUntil {
			pub = r.pub
		}
		// A batch holds at most maxBatchEntries, so the seed is unique.
		sm := r.sm.Load()
		// The calls of scripts are counted by the node that answers the
		// client, and only it times them.
		relayed := e.Relay.Origin == r.origin
		sm.record(e.Origin == r.origin || relayed)
		reply = sm.Apply(&e.Entry, index<<16|uint64(i), pub)
		denials, calls = sm.takeDenials(), sm.calls()
		if relayed {
			r.fwd.appliedHere(e.Relay.Seq, reply, calls)
		}
	case logcodec.KindMemberSet:
		r.setMember(e.Member, e.Addr)
	case logcodec.KindMemberDel:
		r.setMember(e.Member, "")
	case logcodec.KindSweep:
		sm := r.sm.Load()
		start := time.Now()
		removed := sm.Sweep(e.Entry.Time, e.Entry.DB, e.Sweep.From, e.Sweep.Shards)
		r.sweepTime.Add(int64(time.Since(start)))
		if removed > 0 {
			r.ret.swept(removed, sm.keyCount())
		}
		reply = keyspace.Int(int64(removed))
	}
	if e.Origin == r.origin {
		r.appliedLocal(e.Seq, reply, denials, calls)
	}
	return e.Kind == logcodec.KindCommand || e.Kind == logcodec.KindSweep
}

// setMember records a node's client address; "" forgets the node.
func (r *Raft) setMember(id, addr string) {
	m := maps.Clone(*r.members.Load())
	if addr == "" {
		delete(m, id)
	} else {
		m[id] = addr
	}
	r.members.Store(&m)
}

// memberAddr returns the client address of node id, or "".
func (r *Raft) memberAddr(id string) string { return (*r.members.Load())[id] }

// Snapshot freezes the state under the lock, in constant time (see
// keyspace.Frozen); raft writes it in the background while Apply goes on.
// A node whose log could not be written has skipped entries raft counts as
// applied (see logFailed): it takes no snapshot, which would name them.
func (f *fsm) Snapshot() (raft.FSMSnapshot, error) {
	r := (*Raft)(f)
	if err := r.logs.Failure(); err != nil {
		return nil, err
	}
	began := time.Now()
	r.smMu.Lock()
	defer r.smMu.Unlock()
	s := r.freeze()
	s.began = began
	return s, nil
}

// Restore replaces the state with a snapshot's: at start, and when the leader
// installs one on a lagging follower. Nothing is delivered to subscribers.
// The new state is read beside Apply, which goes on with the old one until
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
	r.clock.Follow(sm.LastTime())
	return nil
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

// snapshotMagic starts the engine's header in every snapshot; its last byte
// is the header's version.
const snapshotMagic = "LKSNAP\x00\x02"

// raftSnapshot is the engine's state as freeze found it.
type raftSnapshot struct {
	r        *Raft
	logBytes uint64 // Raft.logBytes then
	applied  uint64
	last     int64
	members  map[string]string // replaced, never modified (Raft.members)
	sm       smSnapshot
	// began, for a snapshot raft takes, is when; Persist counts it in r's
	// metrics.
	began time.Time
}

// freeze takes the engine's state for a snapshot. smMu is held.
func (r *Raft) freeze() *raftSnapshot {
	sm := r.sm.Load()
	return &raftSnapshot{r: r, logBytes: r.logBytes.Load(), applied: r.applied.Load(), last: sm.LastTime(), members: *r.members.Load(), sm: sm.freeze()}
}

// header encodes the applied index, the log clock's last stamp and the
// member map, which the snapshot carries beside the state machine's own.
func (s *raftSnapshot) header() []byte {
	b := []byte(snapshotMagic)
	b = binary.AppendUvarint(b, s.applied)
	b = binary.AppendVarint(b, s.last)
	ids := slices.Sorted(maps.Keys(s.members))
	b = binary.AppendUvarint(b, uint64(len(ids)))
	for _, id := range ids {
		b = wire.AppendString(b, id)
		b = wire.AppendString(b, s.members[id])
	}
	return b
}

// write writes the snapshot: the state machine's, with the header.
func (s *raftSnapshot) write(w io.Writer) error { return s.sm.write(w, s.header()) }

// Persist writes the snapshot to raft's sink, beside Apply. It pauses
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

// readSnapshot reads what raftSnapshot.Persist wrote into a new state machine.
func readSnapshot(rd io.Reader, r *Raft) (*StateMachine, map[string]string, uint64, error) {
	sm := newStateMachine(r.opts.Lua, r.opts.Users)
	header, err := sm.readSnapshot(rd)
	if err != nil {
		return nil, nil, 0, err
	}
	if !bytes.HasPrefix(header, []byte(snapshotMagic)) {
		return nil, nil, 0, errors.New("not a lockserver snapshot of this version")
	}
	d := wire.NewDecoder(header[len(snapshotMagic):])
	applied := d.Uvarint()
	last := d.Varint()
	members := make(map[string]string)
	for n := d.Count(2); n > 0; n-- {
		id := string(d.Bytes())
		members[id] = string(d.Bytes())
	}
	if err := d.Finish(); err != nil {
		return nil, nil, 0, fmt.Errorf("snapshot header: %w", err)
	}
	sm.last = last
	return sm, members, applied, nil
}

package replication

import (
	"errors"
	"time"

	"github.com/hashicorp/raft"
)

// snapshotCheck is how often snapshotLoop looks at the log.
const snapshotCheck = time.Second

// snapshotLoop takes a snapshot once the log written since the last one
// holds SnapshotLogBytes and half as many bytes as that snapshot (see
// RaftOptions): a snapshot costs about its size to write, and a restart
// replays the log written since, so the two stay in proportion however
// large the state grows.
func (r *Raft) snapshotLoop() {
	every(r.stop, snapshotCheck, func() {
		if r.logBytes.Load()-r.snapMark.Load() >= max(uint64(r.opts.SnapshotLogBytes), r.snapSize.Load()/2) {
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
// TrailingLogs; see keepLogSinceSnapshot): a follower that fell behind by
// less than that catches up from the log (the leader sends entries with the
// one before them, which the follower checks against its own). LOCKSERVER
// SNAPSHOT takes one so too.
func (r *Raft) takeSnapshot() error { return r.raft.Snapshot().Error() }

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
	r.reloadConfig("the log entries kept after a snapshot", func(rc *raft.ReloadableConfig) {
		last, since := r.raft.LastIndex(), r.snapIndex.Load()
		rc.TrailingLogs = r.opts.TrailingLogs
		if last >= since {
			rc.TrailingLogs = max(rc.TrailingLogs, last-since+1+compactSlack)
		}
	})
}

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

// snapshotted records a snapshot taken, or restored, when logBytes of the
// log had been applied, holding the entries up to index in size bytes.
func (r *Raft) snapshotted(logBytes, index, size uint64) {
	r.snapMark.Store(logBytes)
	r.snapIndex.Store(index)
	r.snapSize.Store(size)
}

// snapshotBeforeClose takes a snapshot as the node closes, as redis-server
// saves at shutdown, when replaying the log written since the last one
// would cost a restart more than reading a snapshot: when it holds an
// eighth of SnapshotLogBytes and of the last snapshot's size (a byte of log
// costs several times what a byte of snapshot does to apply). A planned
// restart of a member, or of the whole cluster, then reads its snapshot and
// next to no log. A node whose log failed takes none.
func (r *Raft) snapshotBeforeClose() {
	if r.logs.failure() != nil {
		return
	}
	if r.logBytes.Load()-r.snapMark.Load() >= max(uint64(r.opts.SnapshotLogBytes), r.snapSize.Load())/8 {
		r.snapshot()
	}
}

// pacer paces background work (a snapshot's frames, raft.db's batches):
// after each piece, pause sleeps twice as long as the piece took since the
// last pause, and at least backgroundPause, so that the work has at most a
// third of the node's time, and less while the rest of the node keeps it
// waiting for the processor (a piece's time counts that wait). At 5M held
// locks a leader that paused 100 µs after each 64 kB frame served 0.18x of
// its usual rate while it wrote its snapshot (on one processor, as a node
// runs on a small machine); one that paused as long as the frame took,
// 0.39x in one run; twice as long, 0.42x to 0.78x in three (the runs move
// with the machine's load), its snapshot taking 13-20 s instead of 9.5 s
// (bench/RESULTS.md, held-growth). The sleep also lets the scheduler poll the network
// and run what it readied: a goroutine that only yields goes back to the
// run queue ahead of the network, which a node on one processor then polls
// every 10 ms only (a loopback round trip measured p50 22 ms beside such a
// goroutine, 12 µs beside one that sleeps).
type pacer struct {
	resumed time.Time // when the piece under way began; zero before the first
}

// pause sleeps after a piece of work (see pacer).
func (p *pacer) pause() {
	took := time.Duration(0)
	if !p.resumed.IsZero() {
		took = time.Since(p.resumed)
	}
	time.Sleep(max(backgroundPause, 2*took))
	p.resumed = time.Now()
}

// backgroundPause is the shortest of pacer's pauses.
const backgroundPause = 100 * time.Microsecond

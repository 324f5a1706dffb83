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
	if r.logs.Failure() != nil {
		return
	}
	if r.logBytes.Load()-r.snapMark.Load() >= max(uint64(r.opts.SnapshotLogBytes), r.snapSize.Load())/8 {
		r.snapshot()
	}
}

// Package storage keeps a cluster member's Raft log, raft's stable values and
// the snapshots on disk, and refuses to hand back anything but what was
// written. It never touches the engine: the engine gives it a fault
// function, and hashicorp/raft sees its stores through raft's interfaces.
//
// What is durable when a call returns:
//   - Dir.LogStore.StoreLogs: the entries, written and synced in the journal
//     (raft.journal) with one write and one fdatasync, or in bolt (raft.db);
//     a crash after it returns loses none of them.
//   - Dir.LogStore.DeleteRange: the deletion, in that no entry it deleted
//     comes back after a crash; a deletion of the log's tail lowers the
//     high-water mark (raft.mark) durably first.
//   - Dir.StableStore.Set and SetUint64: the value, in a bolt commit.
//   - A snapshot sink's Close: the whole snapshot, which was flushed as it
//     was written; an older snapshot is removed only after it.
//   - Log.StoreLogs: the same as the store under it, except for a leader's
//     command entries, which it queues and writes in the background. Those
//     are durable once WaitDurable returns for them, and before then nothing
//     of them may leave the node (see Log).
//
// What a restart refuses, with a CorruptionError: an entry or stable value
// whose checksum fails; an entry missing between the first and the last; a
// journal record that fails its checksum with a valid record of the same
// pass after it; a log shorter than its high-water mark, which names the
// last entry this member made durable (the journal truncated or deleted, or
// the mark itself missing or unreadable); a newest snapshot whose metadata
// does not read, whose state fails its CRC as it is read, or which the log
// does not go on from. Such a member may have acknowledged entries it no
// longer holds, so it must not vote or lead. A raft.db written before the
// checksums is refused too. A journal record torn by a crash is not
// corruption: it was the last write, and raft was never told it was stored.
//
// What the caller must do: not start a member whose OpenDir, or whose raft's
// restore of its newest snapshot, failed with a CorruptionError (its error
// says how to recover: wipe the data directory and join again); stop the
// member when the fault function is called, with corruption found while it
// runs or a write of the log that failed, and apply no entry past the
// durable index after that; close a Log before the store it writes to, once
// raft has shut down, and the Dir after it.
package storage

import (
	"errors"
	"os"
	"path/filepath"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	"go.etcd.io/bbolt"
)

// The files of a data directory that hold the log.
const (
	JournalFile = "raft.journal" // the journal, in front of the bolt store
	BoltFile    = "raft.db"      // the bolt store: the log and raft's stable values
	markFile    = "raft.mark"    // the log's high-water mark (see logMark)
)

// Dir is a member's data directory, open: its log, stable and snapshot
// stores for raft.
type Dir struct {
	LogStore      raft.LogStore
	StableStore   raft.StableStore
	SnapshotStore raft.SnapshotStore

	journal   *journal
	db        *compactingStore
	snapshots *checkedSnapshots
}

// OpenDir opens the stores in the data directory dir, creating it if need
// be, and checks everything they hold (see the package doc). fault is told
// of corruption found while the member runs; it may be called before OpenDir
// returns, and should then do nothing, since OpenDir fails with the error
// itself. logger receives the snapshot store's messages.
func OpenDir(dir string, logger hclog.Logger, fault func(error)) (*Dir, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	bolt, err := openCheckedStore(filepath.Join(dir, BoltFile), &bbolt.Options{
		// Fail rather than wait forever when another process has the directory.
		Timeout: time.Second,
		// The freelist is rebuilt at open instead of written at every
		// commit: each commit then writes and syncs less.
		NoFreelistSync: true,
		FreelistType:   bbolt.FreelistMapType,
	})
	if err != nil {
		return nil, err
	}
	bolt.fault = fault
	// Rewritten smaller once the log is compacted to a fraction of it.
	db := newCompactingStore(bolt)
	j, err := openJournal(filepath.Join(dir, JournalFile), db, defaultJournalSize, defaultFlushAt)
	if err != nil {
		db.Close()
		return nil, err
	}
	d := &Dir{LogStore: j, StableStore: db, journal: j, db: db}
	snaps, err := openCheckedSnapshots(dir, logger)
	if err == nil {
		err = snaps.checkLog(j)
	}
	if err != nil {
		d.Close()
		return nil, err
	}
	snaps.fault = fault
	d.SnapshotStore, d.snapshots = snaps, snaps
	return d, nil
}

// SnapshotFailure returns the first corruption found in a snapshot, which
// raft's own error, when its restore failed, does not name.
func (d *Dir) SnapshotFailure() error {
	if d.snapshots == nil {
		return nil
	}
	return d.snapshots.failure()
}

// Close writes what the journal holds to the bolt store and closes both.
func (d *Dir) Close() error { return errors.Join(d.journal.Close(), d.db.Close()) }

package storage

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"hash/crc64"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// checkedSnapshots is the file snapshot store, which keeps a CRC-64 of each
// snapshot's state, checked here as the state is read (see Open), made to
// refuse what fails instead of passing over it. Raft sees only the newest
// snapshot: when that one failed, raft restored an older one without a word
// (or, with none left, started empty), though the log may no longer reach
// back to it. A snapshot that fails its check, or whose metadata cannot be
// read, is a CorruptionError: at start the member fails with it (see
// Dir.SnapshotFailure), and found while the node runs (reading the snapshot
// to send it) it stops the node as the log's do.
type checkedSnapshots struct {
	raft.SnapshotStore
	dir string // where the store keeps its snapshots, one directory each
	// fault is told of corruption found once the node runs (see OpenDir).
	fault func(error)

	mu     sync.Mutex
	failed error // the first corruption found; raft's own error hides it

	// cut truncates the file of a snapshot being removed to size, and syncs
	// it (see reap); tests see the sizes through it.
	cut func(f *os.File, size int64) error
}

// snapshotsKept is how many snapshots a node keeps: the newest, and the one
// before should the newest turn out unreadable.
const snapshotsKept = 2

// openCheckedSnapshots opens the file snapshot store in dataDir and checks
// that the metadata of every snapshot in it reads.
func openCheckedSnapshots(dataDir string, logger hclog.Logger) (*checkedSnapshots, error) {
	// The file store removes the snapshots beyond those it retains as a sink
	// closes, at once; it retains one more than are kept, which reap removes
	// first.
	store, err := raft.NewFileSnapshotStoreWithLogger(dataDir, snapshotsKept+1, logger)
	if err != nil {
		return nil, err
	}
	s := &checkedSnapshots{SnapshotStore: store, dir: filepath.Join(dataDir, "snapshots"), cut: cutFile}
	entries, err := os.ReadDir(s.dir)
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		if !e.IsDir() || strings.HasSuffix(e.Name(), ".tmp") { // the store's, unfinished
			continue
		}
		path := filepath.Join(s.dir, e.Name(), "meta.json")
		var meta raft.SnapshotMeta
		b, err := os.ReadFile(path)
		if err == nil {
			err = json.Unmarshal(b, &meta)
		}
		if err != nil {
			return nil, &CorruptionError{Path: path, Problem: "the snapshot's metadata cannot be read: " + err.Error()}
		}
	}
	return s, nil
}

// snapshotFlushBytes is how much of a snapshot being written may wait for
// the disk (twice it at most: see flushRange), as Redis's
// rdb-save-incremental-fsync flushes its RDB every 4 MB.
const snapshotFlushBytes = 4 << 20

// Create creates a snapshot whose state is written to disk as it is
// written, a piece at a time. The file store's sink syncs the whole file only
// as it closes: hundreds of megabytes at a large state, which the kernel had
// kept in memory (its dirty limits are a share of RAM), went to the disk in
// one go, and the log's syncs of every write, on the same disk, waited behind
// them.
func (s *checkedSnapshots) Create(version raft.SnapshotVersion, index, term uint64, configuration raft.Configuration, configurationIndex uint64, trans raft.Transport) (raft.SnapshotSink, error) {
	sink, err := s.SnapshotStore.Create(version, index, term, configuration, configurationIndex, trans)
	if err != nil {
		return nil, err
	}
	// The file store writes the state to <id>.tmp/state.bin until Close
	// renames the directory; the same file, opened again, is flushed here.
	f, err := os.OpenFile(filepath.Join(s.dir, sink.ID()+".tmp", "state.bin"), os.O_WRONLY, 0)
	if err != nil {
		sink.Cancel()
		return nil, err
	}
	return &flushingSink{SnapshotSink: sink, store: s, f: f, flush: flushRange}, nil
}

// reapPiece is how much of a removed snapshot's file reap frees at a time.
const reapPiece = 16 << 20

// reap removes the snapshots beyond the newest snapshotsKept, after cutting
// each one's file down to nothing reapPiece at a time, each cut synced.
// Removed at once, a large snapshot's file freed all its blocks in one
// commit of the file system's journal, which the log's sync of every write
// waits for; on ext4 mounted with discard, as cloud disks often are, that
// commit discards them all too, and in bench/'s held-growth every client
// waited for it at once. Cut and synced a piece at a time, a commit frees
// one piece.
func (s *checkedSnapshots) reap() error {
	metas, err := s.SnapshotStore.List() // newest first, as the file store reaps
	if err != nil {
		return err
	}
	for _, m := range metas[min(len(metas), snapshotsKept):] {
		dir := filepath.Join(s.dir, m.ID)
		if err := s.cutDown(filepath.Join(dir, "state.bin")); err != nil {
			return err
		}
		if err := os.RemoveAll(dir); err != nil {
			return err
		}
	}
	return nil
}

// cutDown cuts the file at path down to nothing, reapPiece at a time.
func (s *checkedSnapshots) cutDown(path string) error {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return err
	}
	for size := info.Size(); size > 0; {
		size = max(0, size-reapPiece)
		if err := s.cut(f, size); err != nil {
			return err
		}
	}
	return nil
}

// cutFile truncates f to size and syncs it.
func cutFile(f *os.File, size int64) error {
	if err := f.Truncate(size); err != nil {
		return err
	}
	return fdatasync(f)
}

// flushingSink is a snapshot sink whose file goes to disk every
// snapshotFlushBytes (see checkedSnapshots.Create).
type flushingSink struct {
	raft.SnapshotSink
	store          *checkedSnapshots
	f              *os.File
	written, ahead int64 // bytes written, and of them, not yet flushed
	// flush is flushRange; tests see the ranges through it.
	flush func(f *os.File, off, n int64) error
}

func (s *flushingSink) Write(p []byte) (int, error) {
	n, err := s.SnapshotSink.Write(p)
	s.written += int64(n)
	s.ahead += int64(n)
	// The sink buffers what it is given: what is flushed is what reached
	// the file, a buffer behind at most.
	if err == nil && s.ahead >= 2*snapshotFlushBytes {
		err = s.flush(s.f, s.written-s.ahead, snapshotFlushBytes)
		s.ahead -= snapshotFlushBytes
	}
	return n, err
}

// Close finishes the snapshot, and then removes the oldest (see reap).
func (s *flushingSink) Close() error {
	if err := errors.Join(s.SnapshotSink.Close(), s.closeFile()); err != nil {
		return err
	}
	return s.store.reap()
}

// Cancel cancels the snapshot; raft cancels one that failed again after
// Persist did, which the sink ignores, and so does this.
func (s *flushingSink) Cancel() error { return errors.Join(s.SnapshotSink.Cancel(), s.closeFile()) }

func (s *flushingSink) closeFile() error {
	if s.f == nil {
		return nil
	}
	err := s.f.Close()
	s.f = nil
	return err
}

// List returns the newest snapshot alone, if there is one.
func (s *checkedSnapshots) List() ([]*raft.SnapshotMeta, error) {
	metas, err := s.SnapshotStore.List()
	if len(metas) > 1 {
		metas = metas[:1]
	}
	return metas, err
}

// Open opens a snapshot to be read once: its state is checked against its
// CRC while it is read, and the read that reaches its end fails with a
// CorruptionError if they differ. The file store's own Open read the whole
// state to check it before raft read it again to restore or send it; a
// restore reads to the end before it keeps the new state, and
// raft's transport sends to the end before the follower keeps what it got.
func (s *checkedSnapshots) Open(id string) (*raft.SnapshotMeta, io.ReadCloser, error) {
	path := filepath.Join(s.dir, id, "state.bin")
	var meta struct {
		raft.SnapshotMeta
		CRC []byte // as the file store writes it, beside the metadata
	}
	b, err := os.ReadFile(filepath.Join(s.dir, id, "meta.json"))
	if err == nil {
		err = json.Unmarshal(b, &meta)
	}
	var f *os.File
	if err == nil {
		f, err = os.Open(path)
	}
	if err != nil {
		var index uint64
		if metas, _ := s.SnapshotStore.List(); len(metas) > 0 && metas[0].ID == id {
			index = metas[0].Index
		}
		return nil, nil, s.corrupt(path, index, err)
	}
	return &meta.SnapshotMeta, &checkedState{
		s: s, f: f, r: bufio.NewReaderSize(f, 1<<16), path: path, index: meta.Index,
		want: meta.CRC, sum: crc64.New(crc64.MakeTable(crc64.ECMA)),
	}, nil
}

// corrupt records and reports a snapshot that cannot be read back as
// written, and returns it.
func (s *checkedSnapshots) corrupt(path string, index uint64, err error) error {
	ce := &CorruptionError{Path: path, Index: index, Problem: "the snapshot cannot be read back as written: " + err.Error()}
	s.mu.Lock()
	if s.failed == nil {
		s.failed = ce
	}
	s.mu.Unlock()
	if s.fault != nil {
		s.fault(ce)
	}
	return ce
}

// checkedState is a snapshot's state as checkedSnapshots.Open opened it.
type checkedState struct {
	s     *checkedSnapshots
	f     *os.File
	r     *bufio.Reader
	path  string
	index uint64
	want  []byte
	sum   hash.Hash64
	err   error // the read error, once there is one
}

// Read reads the state, and at its end returns io.EOF if the state matches
// its CRC, a CorruptionError if not.
func (c *checkedState) Read(p []byte) (int, error) {
	if c.err != nil {
		return 0, c.err
	}
	n, err := c.r.Read(p)
	c.sum.Write(p[:n])
	switch {
	case err == io.EOF && !bytes.Equal(c.sum.Sum(nil), c.want):
		err = c.s.corrupt(c.path, c.index, errors.New("CRC mismatch"))
	case err != nil && err != io.EOF:
		err = c.s.corrupt(c.path, c.index, err)
	}
	c.err = err
	return n, err
}

func (c *checkedState) Close() error { return c.f.Close() }

// failure returns the first corruption Open found.
func (s *checkedSnapshots) failure() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.failed
}

// checkLog checks that the log goes on from the newest snapshot: it holds
// the snapshot's last entry, of the snapshot's term, or starts right after
// it. Raft keeps entries before a snapshot (TrailingLogs) and deletes the
// whole log when it installs one from the leader, so a log that starts later
// lost entries, and a term that differs is a snapshot, or a log, that is not
// what was written.
func (s *checkedSnapshots) checkLog(logs raft.LogStore) error {
	metas, err := s.List()
	if err != nil || len(metas) == 0 {
		return err
	}
	meta := metas[0]
	metaPath := filepath.Join(s.dir, meta.ID, "meta.json")
	first, err := logs.FirstIndex()
	if err != nil {
		return err
	}
	last, err := logs.LastIndex()
	if err != nil || last == 0 {
		return err
	}
	switch {
	case first > meta.Index+1:
		return &CorruptionError{Path: metaPath, Index: meta.Index + 1,
			Problem: fmt.Sprintf("the snapshot ends at entry %d, and the log starts at entry %d: the entries between are missing", meta.Index, first)}
	case first <= meta.Index && meta.Index <= last:
		var l raft.Log
		if err := logs.GetLog(meta.Index, &l); err != nil {
			return err
		}
		if l.Term != meta.Term {
			return &CorruptionError{Path: metaPath, Index: meta.Index,
				Problem: fmt.Sprintf("the snapshot ends at entry %d of term %d, but the log holds that entry in term %d", meta.Index, meta.Term, l.Term)}
		}
	}
	return nil
}

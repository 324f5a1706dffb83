package replication

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	"github.com/lockserver/lockserver/internal/freeport"
	"go.etcd.io/bbolt"
)

// openTestStore opens a checked raft.db in dir.
func openTestStore(t *testing.T, dir string) *checkedStore {
	t.Helper()
	s, err := openCheckedStore(filepath.Join(dir, "raft.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// ownerEntries are entries 1..n whose data names an owner, entry i "owner-<i>".
func ownerEntries(n int) []*raft.Log {
	var logs []*raft.Log
	for i := 1; i <= n; i++ {
		logs = append(logs, &raft.Log{Index: uint64(i), Term: 2, Type: raft.LogCommand,
			Data: []byte("SET lock owner-" + string(rune('A'+i-1))), AppendedAt: time.Unix(1700000000, int64(i))})
	}
	return logs
}

// flip replaces the one occurrence of from in the file at path with to,
// both of one length, as a bit flip on the disk would.
func flip(t *testing.T, path, from, to string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if n := bytes.Count(b, []byte(from)); n != 1 {
		t.Fatalf("%s holds %q %d times, want once", path, from, n)
	}
	i := bytes.Index(b, []byte(from))
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt([]byte(to), int64(i)); err != nil {
		t.Fatal(err)
	}
}

// wantCorruption checks that err is a CorruptionError of file at index, whose
// message tells the remedy.
func wantCorruption(t *testing.T, err error, file string, index uint64) {
	t.Helper()
	var ce *CorruptionError
	if !errors.As(err, &ce) {
		t.Fatalf("got %v, want a CorruptionError of %s", err, file)
	}
	if filepath.Base(ce.Path) != file || ce.Index != index {
		t.Fatalf("corruption of %s at index %d, want %s at %d: %v", ce.Path, ce.Index, file, index, err)
	}
	if msg := err.Error(); !strings.Contains(msg, "wipe its data directory "+filepath.Dir(ce.Path)) || !strings.Contains(msg, "--join") || strings.Contains(msg, "\n") {
		t.Fatalf("the message does not tell the remedy on one line: %q", msg)
	}
}

// Entries and stable values read back as stored, and a store reopened with
// them passes its check.
func TestCheckedStoreReadsBackWhatItStored(t *testing.T) {
	dir := t.TempDir()
	s := openTestStore(t, dir)
	logs := ownerEntries(5)
	logs[2].Extensions = []byte("ext")
	if err := s.StoreLogs(logs); err != nil {
		t.Fatal(err)
	}
	if err := s.SetUint64([]byte("CurrentTerm"), 7); err != nil {
		t.Fatal(err)
	}
	if err := s.Set([]byte("LastVoteCand"), []byte("n2")); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s = openTestStore(t, dir)
	defer s.Close()
	for _, want := range logs {
		var got raft.Log
		if err := s.GetLog(want.Index, &got); err != nil {
			t.Fatal(err)
		}
		if got.Index != want.Index || got.Term != want.Term || got.Type != want.Type || !bytes.Equal(got.Data, want.Data) ||
			!bytes.Equal(got.Extensions, want.Extensions) || (got.Extensions == nil) != (want.Extensions == nil) || !got.AppendedAt.Equal(want.AppendedAt) {
			t.Fatalf("entry %d read back as %+v, want %+v", want.Index, got, *want)
		}
	}
	if logs[2].Extensions == nil || string(logs[2].Extensions) != "ext" || cap(logs[2].Extensions) != 3 {
		t.Fatalf("the stored entry's extensions were changed: %q", logs[2].Extensions)
	}
	if term, err := s.GetUint64([]byte("CurrentTerm")); term != 7 || err != nil {
		t.Fatalf("CurrentTerm = %d, %v", term, err)
	}
	if cand, err := s.Get([]byte("LastVoteCand")); string(cand) != "n2" || err != nil {
		t.Fatalf("LastVoteCand = %q, %v", cand, err)
	}
	if _, err := s.Get([]byte("LastVoteTerm")); !errors.Is(err, raftboltdb.ErrKeyNotFound) {
		t.Fatalf("a missing stable value: %v, want raft-boltdb's not found (raft checks its text)", err)
	}
}

// A byte flipped in an entry's data on disk (one lock owner for another) is
// refused when the store opens, naming raft.db and the entry.
func TestCheckedStoreRefusesAFlippedEntry(t *testing.T) {
	dir := t.TempDir()
	s := openTestStore(t, dir)
	if err := s.StoreLogs(ownerEntries(5)); err != nil {
		t.Fatal(err)
	}
	s.Close()
	flip(t, filepath.Join(dir, "raft.db"), "owner-C", "owner-X")
	_, err := openCheckedStore(filepath.Join(dir, "raft.db"), nil)
	wantCorruption(t, err, "raft.db", 3)
}

// A flip found while the node runs (bolt reads the file through a mapping,
// so a write to the file shows at once) fails the read and reports the fault.
func TestCheckedStoreReportsCorruptionFoundWhileRunning(t *testing.T) {
	dir := t.TempDir()
	s := openTestStore(t, dir)
	defer s.Close()
	var faults []error
	s.fault = func(err error) { faults = append(faults, err) }
	if err := s.StoreLogs(ownerEntries(5)); err != nil {
		t.Fatal(err)
	}
	flip(t, filepath.Join(dir, "raft.db"), "owner-D", "owner-X")
	var l raft.Log
	err := s.GetLog(4, &l)
	wantCorruption(t, err, "raft.db", 4)
	if len(faults) != 1 || faults[0] != err {
		t.Fatalf("faults reported: %v, want the read's error", faults)
	}
	if err := s.GetLog(5, &l); err != nil || string(l.Data) != "SET lock owner-E" {
		t.Fatalf("entry 5, which is intact: %q, %v", l.Data, err)
	}
}

// A flipped stable value (raft's current term, on which its votes rest) is
// refused when the store opens.
func TestCheckedStoreRefusesAFlippedStableValue(t *testing.T) {
	dir := t.TempDir()
	s := openTestStore(t, dir)
	if err := s.SetUint64([]byte("CurrentTerm"), 0x0102030405060708); err != nil {
		t.Fatal(err)
	}
	s.Close()
	flip(t, filepath.Join(dir, "raft.db"), "CurrentTerm\x01\x02", "CurrentTerm\x00\x02")
	_, err := openCheckedStore(filepath.Join(dir, "raft.db"), nil)
	wantCorruption(t, err, "raft.db", 0)
}

// An entry missing between the first and the last is refused.
func TestCheckedStoreRefusesAGap(t *testing.T) {
	dir := t.TempDir()
	s := openTestStore(t, dir)
	if err := s.StoreLogs(ownerEntries(5)); err != nil {
		t.Fatal(err)
	}
	if err := s.BoltStore.DeleteRange(3, 3); err != nil {
		t.Fatal(err)
	}
	s.Close()
	_, err := openCheckedStore(filepath.Join(dir, "raft.db"), nil)
	wantCorruption(t, err, "raft.db", 3)
}

// A raft.db with entries but no checksums, as lockservers before them wrote
// it, is refused rather than read unchecked.
func TestCheckedStoreRefusesAStoreWithoutChecksums(t *testing.T) {
	dir := t.TempDir()
	old, err := raftboltdb.New(raftboltdb.Options{Path: filepath.Join(dir, "raft.db")})
	if err != nil {
		t.Fatal(err)
	}
	if err := old.StoreLogs(ownerEntries(2)); err != nil {
		t.Fatal(err)
	}
	old.Close()
	_, err = openCheckedStore(filepath.Join(dir, "raft.db"), nil)
	if err == nil || !strings.Contains(err.Error(), "without checksums") || !strings.Contains(err.Error(), "--join") {
		t.Fatalf("opening a raft.db without checksums: %v", err)
	}
}

// An intact entry under another entry's key (a broken page pointing at the
// wrong value) is refused: its own checksum holds, its index does not.
func TestCheckedStoreRefusesAnEntryUnderAnotherIndex(t *testing.T) {
	dir := t.TempDir()
	s := openTestStore(t, dir)
	if err := s.StoreLogs(ownerEntries(5)); err != nil {
		t.Fatal(err)
	}
	s.Close()
	db, err := bbolt.Open(filepath.Join(dir, "raft.db"), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bbolt.Tx) error {
		b := tx.Bucket([]byte("logs")) // raft-boltdb's
		return b.Put(binary.BigEndian.AppendUint64(nil, 4), bytes.Clone(b.Get(binary.BigEndian.AppendUint64(nil, 5))))
	})
	db.Close()
	if err != nil {
		t.Fatal(err)
	}
	_, err = openCheckedStore(filepath.Join(dir, "raft.db"), nil)
	wantCorruption(t, err, "raft.db", 4)
}

// diskNode is a single-node cluster with its data in a directory, as the
// binary runs one.
type diskNode struct {
	t    *testing.T
	opts RaftOptions
	eng  *Raft
}

func newDiskNode(t *testing.T) *diskNode {
	d := &diskNode{t: t, opts: RaftOptions{NodeID: "n1", RaftAddr: freeport.MustAddr(t), DataDir: t.TempDir(),
		HeartbeatTimeout: 300 * time.Millisecond, ElectionTimeout: 300 * time.Millisecond}}
	if err := d.start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.stop)
	return d
}

func (d *diskNode) start() error {
	eng, err := NewRaft(d.opts)
	d.eng = eng
	return err
}

func (d *diskNode) stop() {
	if d.eng != nil {
		d.eng.Close()
		d.eng = nil
	}
}

// set writes key=val once the node leads.
func (d *diskNode) set(key, val string) {
	d.t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		req := &Request{Cmds: [][][]byte{words("SET", key, val)}}
		d.eng.Submit(req)
		reply := req.Wait(context.Background())
		if !reply.IsError() {
			return
		}
		if time.Now().After(deadline) {
			d.t.Fatalf("SET %s: %+v", key, reply)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// snapshotted writes, snapshots, writes and snapshots again (the store keeps
// two), and stops the node. It returns the newest snapshot's directory.
func (d *diskNode) snapshotted() (string, *raft.SnapshotMeta) {
	d.t.Helper()
	for round := range 2 {
		for i := range 20 {
			d.set(fmt.Sprint("k", round, i), "owner-"+fmt.Sprint(round, i))
		}
		if err := d.eng.raft.Snapshot().Error(); err != nil {
			d.t.Fatal(err)
		}
	}
	for i := range 5 {
		d.set(fmt.Sprint("after", i), "1")
	}
	d.stop()
	store, err := raft.NewFileSnapshotStore(d.opts.DataDir, 2, io.Discard)
	if err != nil {
		d.t.Fatal(err)
	}
	metas, err := store.List()
	if err != nil || len(metas) != 2 {
		d.t.Fatalf("snapshots: %d, %v; want 2", len(metas), err)
	}
	return filepath.Join(d.opts.DataDir, "snapshots", metas[0].ID), metas[0]
}

// A node whose newest snapshot fails its checksum refuses to start, where
// raft restored the older one and went on without a word.
func TestSnapshotThatFailsItsChecksumIsRefused(t *testing.T) {
	d := newDiskNode(t)
	dir, meta := d.snapshotted()
	path := filepath.Join(dir, "state.bin")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	i := bytes.Index(b, []byte("owner-1"))
	if i < 0 {
		t.Fatalf("the snapshot does not hold the second round's owners")
	}
	b[i+6] = '7'
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	wantCorruption(t, d.start(), "state.bin", meta.Index)
}

// A newest snapshot whose metadata no longer reads, or names a term that the
// log holds its last entry in another, is refused.
func TestSnapshotWithBadMetadataIsRefused(t *testing.T) {
	for _, c := range []struct {
		name   string
		change func(meta []byte, m *raft.SnapshotMeta) []byte
	}{
		{"unreadable", func(b []byte, _ *raft.SnapshotMeta) []byte { return b[:len(b)/2] }},
		{"another term", func(b []byte, m *raft.SnapshotMeta) []byte {
			return bytes.Replace(b, []byte(fmt.Sprintf(`"Term":%d`, m.Term)), []byte(fmt.Sprintf(`"Term":%d`, m.Term+1)), 1)
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := newDiskNode(t)
			dir, meta := d.snapshotted()
			path := filepath.Join(dir, "meta.json")
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			changed := c.change(b, meta)
			if bytes.Equal(changed, b) {
				t.Fatalf("meta.json unchanged: %s", b)
			}
			if err := os.WriteFile(path, changed, 0o600); err != nil {
				t.Fatal(err)
			}
			var ce *CorruptionError
			err = d.start()
			if !errors.As(err, &ce) || filepath.Base(ce.Path) != "meta.json" {
				t.Fatalf("start with %s metadata: %v, want a CorruptionError of meta.json", c.name, err)
			}
		})
	}
}

// A log that starts past the entry after the newest snapshot lost entries:
// refused.
func TestSnapshotFollowedByAGapIsRefused(t *testing.T) {
	d := newDiskNode(t)
	_, meta := d.snapshotted()
	s := openTestStore(t, d.opts.DataDir)
	j, err := openJournal(filepath.Join(d.opts.DataDir, "raft.journal"), s, defaultJournalSize, defaultFlushAt)
	if err != nil {
		t.Fatal(err)
	}
	first, _ := j.FirstIndex()
	err = j.DeleteRange(first, meta.Index+1)
	j.Close()
	s.Close()
	if err != nil {
		t.Fatal(err)
	}
	wantCorruption(t, d.start(), "meta.json", meta.Index+1)
}

// A snapshot is read once: its state reads back as written, and one found
// corrupt while the node runs (read to send to a lagging follower) fails the
// read that reaches its end and reports the fault, which stops the node.
func TestCheckedSnapshotsReportCorruptionFoundWhileRunning(t *testing.T) {
	s, dir := tempSnapshots(t)
	var faults []error
	s.fault = func(err error) { faults = append(faults, err) }
	const state = "a snapshot of owner-A"
	sink, err := s.Create(raft.SnapshotVersionMax, 7, 2, raft.Configuration{}, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sink.Write([]byte(state)); err != nil {
		t.Fatal(err)
	}
	if err := sink.Close(); err != nil {
		t.Fatal(err)
	}
	read := func() ([]byte, error) {
		t.Helper()
		meta, rc, err := s.Open(sink.ID())
		if err != nil {
			t.Fatal(err)
		}
		defer rc.Close()
		if meta.Index != 7 || meta.Term != 2 {
			t.Fatalf("opened snapshot %d of term %d, want 7 of term 2", meta.Index, meta.Term)
		}
		return io.ReadAll(rc)
	}
	if got, err := read(); err != nil || string(got) != state || len(faults) != 0 {
		t.Fatalf("read %q, %v (faults %v), want %q", got, err, faults, state)
	}
	flip(t, filepath.Join(dir, "snapshots", sink.ID(), "state.bin"), "owner-A", "owner-B")
	got, err := read()
	wantCorruption(t, err, "state.bin", 7)
	if string(got) != "a snapshot of owner-B" {
		t.Fatalf("read %q before the error, want the whole state", got)
	}
	if len(faults) != 1 || faults[0] != err {
		t.Fatalf("faults reported: %v, want the read's error", faults)
	}
}

// A snapshot is checked as a whole, not only as far as its encoding goes:
// bytes after its end, which the decoder never reads, fail the check, and
// the node refuses to start.
func TestSnapshotWithBytesAfterItsEndIsRefused(t *testing.T) {
	d := newDiskNode(t)
	dir, meta := d.snapshotted()
	f, err := os.OpenFile(filepath.Join(dir, "state.bin"), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.Write([]byte{0})
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	wantCorruption(t, d.start(), "state.bin", meta.Index)
}

// A snapshot goes to disk as it is written, a piece at a time, each piece
// once it is in the file, so that its close has little left to sync: the
// ranges flushed follow each other from the start, every one of them
// written, and leave at most two pieces for the close.
func TestSnapshotFlushedAsItIsWritten(t *testing.T) {
	s, dir := tempSnapshots(t)
	sink, err := s.Create(raft.SnapshotVersionMax, 7, 2, raft.Configuration{}, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	fs := sink.(*flushingSink)
	path := filepath.Join(dir, "snapshots", sink.ID()+".tmp", "state.bin")
	var next int64
	fs.flush = func(f *os.File, off, n int64) error {
		info, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if off != next || off+n > info.Size() {
			t.Fatalf("flushed [%d, %d) with %d bytes in the file, want the range from %d, written", off, off+n, info.Size(), next)
		}
		next = off + n
		return flushRange(f, off, n)
	}
	state := make([]byte, 5*snapshotFlushBytes+12345)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range state {
		state[i] = byte(rng.Uint32())
	}
	for rest := state; len(rest) > 0; {
		n := min(len(rest), 100_000)
		if _, err := sink.Write(rest[:n]); err != nil {
			t.Fatal(err)
		}
		rest = rest[n:]
	}
	if left := int64(len(state)) - next; left > 2*snapshotFlushBytes {
		t.Fatalf("%d bytes of %d were flushed as they were written, %d left for the close, want at most %d", next, len(state), left, 2*snapshotFlushBytes)
	}
	if err := sink.Close(); err != nil {
		t.Fatal(err)
	}
	_, rc, err := s.Open(sink.ID())
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	if got, err := io.ReadAll(rc); err != nil || !bytes.Equal(got, state) {
		t.Fatalf("read back %d bytes, %v; want the %d written", len(got), err, len(state))
	}
}

// A node keeps its two newest snapshots, and removes an older one only
// after cutting its file down a piece at a time, each piece synced, so that
// no one commit of the file system frees the whole file (see reap).
func TestOldSnapshotsCutDownBeforeRemoval(t *testing.T) {
	s, dir := tempSnapshots(t)
	var cuts []int64
	s.cut = func(f *os.File, size int64) error {
		info, err := f.Stat()
		if err != nil {
			t.Fatal(err)
		}
		if info.Size()-size > reapPiece {
			t.Errorf("cut %s from %d bytes to %d at once, want %d at most", f.Name(), info.Size(), size, reapPiece)
		}
		cuts = append(cuts, size)
		return cutFile(f, size)
	}
	size := reapPiece + 1000
	states := map[string][]byte{}
	var ids []string // oldest first
	for i := range 4 {
		sink, err := s.Create(raft.SnapshotVersionMax, uint64(10*(i+1)), 2, raft.Configuration{}, 1, nil)
		if err != nil {
			t.Fatal(err)
		}
		state := bytes.Repeat([]byte{byte('a' + i)}, size)
		if _, err := sink.Write(state); err != nil {
			t.Fatal(err)
		}
		cuts = nil
		if err := sink.Close(); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, sink.ID())
		states[sink.ID()] = state
		if i >= snapshotsKept && !slices.Equal(cuts, []int64{1000, 0}) {
			t.Errorf("snapshot %d: the oldest's file was cut to %v, want [1000 0]", i+1, cuts)
		}
		entries, err := os.ReadDir(filepath.Join(dir, "snapshots"))
		if err != nil {
			t.Fatal(err)
		}
		var kept []string
		for _, e := range entries {
			kept = append(kept, e.Name())
		}
		want := ids[max(0, len(ids)-snapshotsKept):]
		slices.Sort(kept)
		if want = slices.Sorted(slices.Values(want)); !slices.Equal(kept, want) {
			t.Fatalf("after snapshot %d the store holds %v, want %v", i+1, kept, want)
		}
	}
	for _, id := range ids[len(ids)-snapshotsKept:] {
		_, rc, err := s.Open(id)
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(rc)
		rc.Close()
		if err != nil || !bytes.Equal(got, states[id]) {
			t.Errorf("snapshot %s read back %d bytes, %v; want the %d written", id, len(got), err, len(states[id]))
		}
	}
}

// tempSnapshots opens a checked snapshot store in a new temporary directory,
// which it returns too.
func tempSnapshots(t *testing.T) (*checkedSnapshots, string) {
	t.Helper()
	dir := t.TempDir()
	s, err := openCheckedSnapshots(dir, newHCLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	return s, dir
}

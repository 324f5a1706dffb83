package storage

import (
	"bytes"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

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
	s, err := openCheckedSnapshots(dir, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	return s, dir
}

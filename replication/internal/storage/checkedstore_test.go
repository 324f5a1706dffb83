package storage

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
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

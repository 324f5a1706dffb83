package storage

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"go.etcd.io/bbolt"
)

// testEntry is entry i as the compaction tests store it: its data says
// which entry it is, so that a copy can be checked against it.
func testEntry(i uint64) *raft.Log {
	return &raft.Log{Index: i, Term: 1 + i/1000, Type: raft.LogCommand, Data: bytes.Repeat([]byte(fmt.Sprintf("entry %d;", i)), 1000)}
}

func storeEntries(t *testing.T, c *compactingStore, first, last uint64) {
	t.Helper()
	for i := first; i <= last; i += 100 {
		var logs []*raft.Log
		for j := i; j <= min(i+99, last); j++ {
			logs = append(logs, testEntry(j))
		}
		if err := c.StoreLogs(logs); err != nil {
			t.Fatal(err)
		}
	}
}

// checkEntries checks that s holds exactly the entries first to last, each
// as testEntry made it, and raft's term.
func checkEntries(t *testing.T, s interface {
	raft.LogStore
	raft.StableStore
}, first, last, term uint64) {
	t.Helper()
	if got, _ := s.FirstIndex(); got != first {
		t.Fatalf("first index %d, want %d", got, first)
	}
	if got, _ := s.LastIndex(); got != last {
		t.Fatalf("last index %d, want %d", got, last)
	}
	for i := first; i <= last; i++ {
		var l raft.Log
		if err := s.GetLog(i, &l); err != nil {
			t.Fatalf("entry %d: %v", i, err)
		}
		if want := testEntry(i); l.Term != want.Term || !bytes.Equal(l.Data, want.Data) {
			t.Fatalf("entry %d is not the one stored", i)
		}
	}
	if got, err := s.GetUint64([]byte("CurrentTerm")); err != nil || got != term {
		t.Fatalf("CurrentTerm %d, %v; want %d", got, err, term)
	}
}

func openTestDB(t *testing.T, path string) *checkedStore {
	t.Helper()
	s, err := openCheckedStore(path, &bbolt.Options{Timeout: time.Second, NoFreelistSync: true, FreelistType: bbolt.FreelistMapType})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return st.Size()
}

// Once the log's head is deleted and raft.db is mostly free, it is
// rewritten smaller, with every entry and stable value it held, and what was
// written and deleted while it was copied; the rewritten file opens and
// passes every check.
func TestCompactingStoreShrinks(t *testing.T) {
	path := filepath.Join(t.TempDir(), "raft.db")
	c := newCompactingStore(openTestDB(t, path))
	c.min = 1 << 20
	if err := c.SetUint64([]byte("CurrentTerm"), 7); err != nil {
		t.Fatal(err)
	}
	storeEntries(t, c, 1, 3000) // about 30 MB
	before := fileSize(t, path)
	c.copyDone = func() {
		// Beside the copy: new entries, a term, and more of the head deleted.
		storeEntries(t, c, 3001, 3100)
		if err := c.SetUint64([]byte("CurrentTerm"), 8); err != nil {
			t.Error(err)
		}
		if err := c.DeleteRange(2801, 2850); err != nil {
			t.Error(err)
		}
	}
	if err := c.DeleteRange(1, 2800); err != nil {
		t.Fatal(err)
	}
	c.wg.Wait()
	if c.compactions != 1 {
		t.Fatalf("no rewrite: %v", c.failed)
	}
	if after := fileSize(t, path); after > before/2 {
		t.Fatalf("raft.db is %d bytes after the rewrite, %d before", after, before)
	}
	if _, err := os.Stat(path + ".compact"); !os.IsNotExist(err) {
		t.Fatalf("the copy is left beside raft.db: %v", err)
	}
	checkEntries(t, c, 2851, 3100, 8)
	storeEntries(t, c, 3101, 3110) // the store goes on with the new file
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	s := openTestDB(t, path)
	defer s.Close()
	checkEntries(t, s, 2851, 3110, 8)
}

// A deletion of the log's tail while raft.db is copied (a follower's
// conflicting entries, which may be written again differently) abandons the
// rewrite: the store goes on with raft.db as it is.
func TestCompactingStoreTailCutAbandons(t *testing.T) {
	path := filepath.Join(t.TempDir(), "raft.db")
	c := newCompactingStore(openTestDB(t, path))
	c.min = 1 << 20
	if err := c.SetUint64([]byte("CurrentTerm"), 7); err != nil {
		t.Fatal(err)
	}
	storeEntries(t, c, 1, 3000)
	c.copyDone = func() {
		if err := c.DeleteRange(2991, 3000); err != nil {
			t.Error(err)
		}
		storeEntries(t, c, 2991, 2995)
	}
	if err := c.DeleteRange(1, 2800); err != nil {
		t.Fatal(err)
	}
	c.wg.Wait()
	if c.compactions != 0 || c.failed == nil {
		t.Fatalf("the rewrite went on through a deleted tail: %d rewrites, %v", c.compactions, c.failed)
	}
	if _, err := os.Stat(path + ".compact"); !os.IsNotExist(err) {
		t.Fatalf("the abandoned copy is left beside raft.db: %v", err)
	}
	checkEntries(t, c, 2801, 2995, 7)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
}

// A small raft.db, or one mostly in use, is left as it is.
func TestCompactingStoreLeavesWhatIsInUse(t *testing.T) {
	path := filepath.Join(t.TempDir(), "raft.db")
	c := newCompactingStore(openTestDB(t, path))
	c.min = 1 << 20
	c.SetUint64([]byte("CurrentTerm"), 7)
	storeEntries(t, c, 1, 3000)
	if err := c.DeleteRange(1, 1000); err != nil { // a third freed
		t.Fatal(err)
	}
	c.wg.Wait()
	if c.compactions != 0 || c.failed != nil {
		t.Fatalf("raft.db two thirds in use was rewritten: %d, %v", c.compactions, c.failed)
	}
	c.min = 1 << 30
	if err := c.DeleteRange(1001, 2900); err != nil {
		t.Fatal(err)
	}
	c.wg.Wait()
	if c.compactions != 0 {
		t.Fatal("raft.db under the minimum size was rewritten")
	}
	checkEntries(t, c, 2901, 3000, 7)
	c.Close()
}

// batchRecorder records the batches a rewrite stores.
type batchRecorder struct{ batches [][]*raft.Log }

func (r *batchRecorder) StoreLogs(logs []*raft.Log) error {
	r.batches = append(r.batches, append([]*raft.Log(nil), logs...))
	return nil
}

// A rewrite copies a bulk load's large entries a few at a time: no bolt
// transaction holds more than compactBatch entries, nor more than
// compactBatchBytes of them unless it holds one entry alone, and every entry
// is copied once, in order, as stored.
func TestCompactionCopiesInBoundedTransactions(t *testing.T) {
	src := openTestDB(t, filepath.Join(t.TempDir(), "raft.db"))
	defer src.Close()
	// Small entries (10 kB, testEntry's), then a load's (300 kB), then one
	// larger than a transaction's bytes, then small ones again.
	size := func(i uint64) int {
		switch {
		case i <= 300 || i > 321:
			return 0
		case i == 321:
			return 3 * compactBatchBytes / 2
		}
		return 300 << 10
	}
	entry := func(i uint64) *raft.Log {
		l := testEntry(i)
		if n := size(i); n > 0 {
			l.Data = bytes.Repeat([]byte{byte(i)}, n)
		}
		return l
	}
	for i := uint64(1); i <= 700; i++ {
		if err := src.StoreLogs([]*raft.Log{entry(i)}); err != nil {
			t.Fatal(err)
		}
	}
	var rec batchRecorder
	if err := copyEntries(src, &rec, 1, 700, true); err != nil {
		t.Fatal(err)
	}
	next := uint64(1)
	for _, b := range rec.batches {
		n := 0
		for _, l := range b {
			if want := entry(next); l.Index != next || !bytes.Equal(l.Data, want.Data) {
				t.Fatalf("copied entry %d (%d bytes), want entry %d as stored", l.Index, len(l.Data), next)
			}
			next++
			n += len(l.Data)
		}
		if len(b) > compactBatch || (len(b) > 1 && n > compactBatchBytes) {
			t.Fatalf("one transaction copied entries %d-%d, %d bytes; want at most %d entries and %d bytes, or one entry", b[0].Index, b[len(b)-1].Index, n, compactBatch, compactBatchBytes)
		}
	}
	if next != 701 {
		t.Fatalf("copied entries up to %d, want 700", next-1)
	}
}

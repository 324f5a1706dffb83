package storage

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// journalDir is a data directory: a bolt store and the journal in front of it.
type journalDir struct {
	t        *testing.T
	dir      string
	size     int64
	flushAt  int
	bolt     *checkedStore
	j        *journal
	appended time.Time
	// lossy, set, makes the journal's file a lossyFile, so that a crash
	// loses what was written to it and not synced.
	lossy bool
}

func newJournalDir(t *testing.T, size int64, flushAt int) *journalDir {
	d := &journalDir{t: t, dir: t.TempDir(), size: size, flushAt: flushAt, appended: time.Unix(1700000000, 123)}
	d.open()
	t.Cleanup(func() {
		if d.j != nil {
			d.crash()
		}
	})
	return d
}

func (d *journalDir) open() {
	d.t.Helper()
	bolt, err := openCheckedStore(filepath.Join(d.dir, "raft.db"), nil)
	if err != nil {
		d.t.Fatal(err)
	}
	path := filepath.Join(d.dir, "raft.journal")
	var j *journal
	if d.lossy {
		var f *lossyFile
		if f, err = openLossyFile(path); err == nil {
			j, err = openJournalFile(f, bolt, d.size, d.flushAt)
		}
	} else {
		j, err = openJournal(path, bolt, d.size, d.flushAt)
	}
	if err != nil {
		bolt.Close()
		d.t.Fatal(err)
	}
	d.bolt, d.j = bolt, j
}

// crash stops the journal as a crash would: what is pending is not flushed,
// and the file keeps what was written to it (what was synced, if lossy).
func (d *journalDir) crash() {
	d.j.stopFlusher()
	if f, ok := d.j.f.(*lossyFile); ok {
		if err := f.crash(); err != nil {
			d.t.Fatal(err)
		}
	}
	d.j.f.Close()
	d.j.mark.close()
	d.bolt.Close()
	d.j, d.bolt = nil, nil
}

func (d *journalDir) restart() {
	d.crash()
	d.open()
}

// entry is the entry at index in term, with data that names both.
func (d *journalDir) entry(index, term uint64, size int) *raft.Log {
	unit := fmt.Sprintf("%d/%d;", index, term)
	data := bytes.Repeat([]byte(unit), 1+size/len(unit))[:size]
	return &raft.Log{Index: index, Term: term, Type: raft.LogCommand, Data: data, Extensions: []byte{byte(index)}, AppendedAt: d.appended}
}

// store stores entries from..to of term, count at a time.
func (d *journalDir) store(from, to, term uint64, count, size int) {
	d.t.Helper()
	for i := from; i <= to; {
		var batch []*raft.Log
		for ; i <= to && len(batch) < count; i++ {
			batch = append(batch, d.entry(i, term, size))
		}
		if err := d.j.StoreLogs(batch); err != nil {
			d.t.Fatalf("StoreLogs %d..%d: %v", batch[0].Index, batch[len(batch)-1].Index, err)
		}
	}
}

// want checks that the log holds exactly entries first..last of term, with
// size bytes of data each: through the journal, then in bolt after a crash.
func (d *journalDir) want(first, last, term uint64, size int) {
	d.t.Helper()
	d.check("through the journal", d.j, first, last, term, size)
	d.restart() // reading the journal back writes it to bolt
	d.check("in bolt after a crash", d.bolt, first, last, term, size)
}

func (d *journalDir) check(where string, s raft.LogStore, first, last, term uint64, size int) {
	d.t.Helper()
	gotFirst, err1 := s.FirstIndex()
	gotLast, err2 := s.LastIndex()
	if gotFirst != first || gotLast != last || err1 != nil || err2 != nil {
		d.t.Fatalf("%s: entries %d..%d (%v, %v), want %d..%d", where, gotFirst, gotLast, err1, err2, first, last)
	}
	for i := first; i <= last; i++ {
		var got raft.Log
		if err := s.GetLog(i, &got); err != nil {
			d.t.Fatalf("%s: entry %d: %v", where, i, err)
		}
		want := d.entry(i, term, size)
		if got.Index != i || got.Term != term || got.Type != want.Type || !bytes.Equal(got.Data, want.Data) ||
			!bytes.Equal(got.Extensions, want.Extensions) || !got.AppendedAt.Equal(d.appended) {
			d.t.Fatalf("%s: entry %d is %+v, want %+v", where, i, got, *want)
		}
	}
	var got raft.Log
	if err := s.GetLog(last+1, &got); !errors.Is(err, raft.ErrLogNotFound) {
		d.t.Fatalf("%s: entry %d, past the last: %+v, %v", where, last+1, got, err)
	}
}

// A journal far smaller than the log starts over many times; each time it
// first flushes to bolt, so nothing is lost, and the records of earlier
// passes left beyond the current one are not read as part of it.
func TestJournalStartsOverWhenFull(t *testing.T) {
	d := newJournalDir(t, 8<<10, 1<<20) // a few records per pass
	d.store(1, 500, 4, 9, 150)
	st, err := os.Stat(filepath.Join(d.dir, "raft.journal"))
	if err != nil || st.Size() != 8<<10 {
		t.Fatalf("the journal is %v bytes (%v), want %d", st.Size(), err, 8<<10)
	}
	d.want(1, 500, 4, 150)
}

// Deleted entries stay deleted after a crash, though the journal had them:
// raft deletes a suffix that conflicts with a new leader's log, and a prefix
// once a snapshot covers it.
func TestJournalDeletedEntriesDoNotComeBack(t *testing.T) {
	d := newJournalDir(t, 1<<20, 1<<20)
	d.store(1, 20, 1, 4, 64)
	if err := d.j.DeleteRange(11, 20); err != nil {
		t.Fatal(err)
	}
	d.want(1, 10, 1, 64)
	// The new leader's entries take the deleted indexes, in its term.
	if err := d.j.DeleteRange(1, 10); err != nil {
		t.Fatal(err)
	}
	d.store(11, 25, 2, 5, 64)
	d.want(11, 25, 2, 64)
}

// A head that ends before the journal's current pass, as raft deletes after
// a snapshot, is deleted without a flush or a new pass, which writes would
// wait for; one that the pass holds entries of is flushed first. Either
// way, the deleted entries do not come back after a crash.
func TestJournalHeadBeforeThePassIsDeletedWithoutAFlush(t *testing.T) {
	d := newJournalDir(t, 1<<20, 1<<20) // the flusher never starts on its own
	d.store(1, 30, 1, 5, 64)
	if err := d.j.DeleteRange(1, 10); err != nil {
		t.Fatal(err)
	}
	if n := len(d.j.pending); n != 0 {
		t.Fatalf("deleting a head the pass holds left %d entries pending, want them flushed", n)
	}
	d.store(31, 40, 1, 5, 64)
	gen := d.j.gen
	if err := d.j.DeleteRange(11, 20); err != nil {
		t.Fatal(err)
	}
	if n := len(d.j.pending); n != 10 || d.j.gen != gen {
		t.Fatalf("deleting a head before the pass flushed (%d entries left pending of 10) or began a pass (%v)", n, d.j.gen != gen)
	}
	d.want(21, 40, 1, 64)
}

// slowDeletes is a log store whose deletions wait for release, each range
// recorded.
type slowDeletes struct {
	raft.LogStore
	mu      sync.Mutex
	ranges  [][2]uint64
	release chan struct{}
}

func (s *slowDeletes) DeleteRange(min, max uint64) error {
	s.mu.Lock()
	s.ranges = append(s.ranges, [2]uint64{min, max})
	s.mu.Unlock()
	<-s.release
	return s.LogStore.DeleteRange(min, max)
}

func (s *slowDeletes) deletes() [][2]uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.ranges)
}

// Deleting the head of the log that a snapshot covers (half a million
// entries at 5M held locks, half a second of bolt) holds no write up, and
// goes in pieces of headPiece entries; a cut of the tail is one deletion.
func TestJournalWritesGoOnWhileAHeadIsDeleted(t *testing.T) {
	dir := t.TempDir()
	bolt, err := openCheckedStore(filepath.Join(dir, "raft.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	store := &slowDeletes{LogStore: bolt, release: make(chan struct{})}
	j, err := openJournal(filepath.Join(dir, "raft.journal"), store, 4<<20, 16)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { j.Close(); bolt.Close() })
	entries := func(from, to uint64) []*raft.Log {
		var logs []*raft.Log
		for i := from; i <= to; i++ {
			logs = append(logs, &raft.Log{Index: i, Term: 1, Type: raft.LogCommand, Data: []byte(fmt.Sprint("entry ", i))})
		}
		return logs
	}
	for i := uint64(1); i <= 20000; i += 500 {
		if err := j.StoreLogs(entries(i, i+499)); err != nil {
			t.Fatal(err)
		}
	}
	released := false
	release := func() {
		if !released {
			released = true
			close(store.release)
		}
	}
	defer release()
	deleted := make(chan error, 1)
	go func() { deleted <- j.DeleteRange(1, 2600) }()
	for len(store.deletes()) == 0 {
		time.Sleep(time.Millisecond)
	}
	stored := make(chan error, 1)
	go func() { stored <- j.StoreLogs(entries(20001, 20010)) }()
	select {
	case err := <-stored:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("a write waited for the deletion of the log's head")
	}
	release()
	if err := <-deleted; err != nil {
		t.Fatal(err)
	}
	if got, want := store.deletes(), [][2]uint64{{1, 1024}, {1025, 2048}, {2049, 2600}}; !slices.Equal(got, want) {
		t.Fatalf("the head was deleted as %v, want %v", got, want)
	}
	if err := j.DeleteRange(20006, 20010); err != nil {
		t.Fatal(err)
	}
	if got := store.deletes()[3:]; !slices.Equal(got, [][2]uint64{{20006, 20010}}) {
		t.Fatalf("the tail was deleted as %v, want one range", got)
	}
	first, _ := j.FirstIndex()
	last, _ := j.LastIndex()
	if first != 2601 || last != 20005 {
		t.Fatalf("the log holds %d to %d, want 2601 to 20005", first, last)
	}
	var l raft.Log
	for i := first; i <= last; i++ {
		if err := j.GetLog(i, &l); err != nil || string(l.Data) != fmt.Sprint("entry ", i) {
			t.Fatalf("entry %d: %q, %v", i, l.Data, err)
		}
	}
}

// The flusher writes entries to bolt in the background, and reads see every
// entry wherever it is meanwhile.
func TestJournalFlushesToBolt(t *testing.T) {
	d := newJournalDir(t, 1<<20, 16)
	d.store(1, 200, 5, 3, 80)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		if last, _ := d.bolt.LastIndex(); last >= 200-16 {
			break
		}
		if time.Now().After(deadline) {
			last, _ := d.bolt.LastIndex()
			t.Fatalf("bolt holds entries up to %d, want at least %d", last, 200-16)
		}
	}
	d.want(1, 200, 5, 80)
}

// Entries that could never fit in the journal, and entries that do not follow
// the last one (after a snapshot, on an emptied log), go to bolt directly.
func TestJournalWritesTheUnjournalableToBolt(t *testing.T) {
	d := newJournalDir(t, 8<<10, 1<<20)
	d.store(1, 5, 1, 5, 100)
	d.store(6, 6, 1, 1, 16<<10) // bigger than the journal
	if last, _ := d.bolt.LastIndex(); last != 6 {
		t.Fatalf("bolt holds entries up to %d after a too-big entry, want 6", last)
	}
	if m := d.markIndex(); m != 6 {
		t.Fatalf("the high-water mark is %d after a too-big entry, want 6", m)
	}
	d.store(7, 9, 1, 3, 100)
	var got raft.Log
	if err := d.j.GetLog(6, &got); err != nil || len(got.Data) != 16<<10 {
		t.Fatalf("the big entry: %d bytes, %v", len(got.Data), err)
	}

	e := newJournalDir(t, 8<<10, 1<<20)
	e.store(50, 52, 7, 3, 100) // an empty log, continued at 50
	if last, _ := e.bolt.LastIndex(); last != 52 {
		t.Fatalf("bolt holds entries up to %d after entries that start a log at 50, want 52", last)
	}
	e.store(53, 60, 7, 4, 100)
	e.want(50, 60, 7, 100)
}

// While entries are stored, flushed and compacted (raft deletes a prefix
// after each snapshot), every index from FirstIndex to LastIndex reads back
// as stored, and neither bound moves backwards.
func TestJournalReadsWhileStoringFlushingAndCompacting(t *testing.T) {
	d := newJournalDir(t, 64<<10, 8) // starts over every few dozen batches
	const last, keep = 3000, 200
	stored := make(chan uint64) // the writer waits for each check
	go func() {
		defer close(stored)
		for i := uint64(1); i <= last; i += 5 {
			if err := d.j.StoreLogs([]*raft.Log{d.entry(i, 1, 40), d.entry(i+1, 1, 40), d.entry(i+2, 1, 40), d.entry(i+3, 1, 40), d.entry(i+4, 1, 40)}); err != nil {
				t.Error(err)
				return
			}
			stored <- i + 4
			if i%500 == 1 && i > keep {
				if err := d.j.DeleteRange(1, i-keep); err != nil {
					t.Error(err)
					return
				}
			}
		}
	}()
	var prevFirst, prevLast uint64
	var failed error // reported once the writer has stopped
	for top := range stored {
		if failed == nil {
			prevFirst, prevLast, failed = d.checkWhileStoring(top, keep, prevFirst, prevLast)
		}
	}
	if failed != nil {
		t.Fatal(failed)
	}
	d.want(prevFirst, last, 1, 40)
}

// checkWhileStoring is one check of TestJournalReadsWhileStoringFlushingAndCompacting,
// once entries up to top are stored: the writer is then at most one batch
// and one deletion ahead, so entries from top-keep/2 on are still there; the
// first may be gone.
func (d *journalDir) checkWhileStoring(top, keep, prevFirst, prevLast uint64) (first, last uint64, err error) {
	first, err1 := d.j.FirstIndex()
	last, err2 := d.j.LastIndex()
	if err1 != nil || err2 != nil || first < prevFirst || last < prevLast || last < top {
		return 0, 0, fmt.Errorf("after storing up to %d: entries %d..%d (%v, %v), before %d..%d", top, first, last, err1, err2, prevFirst, prevLast)
	}
	for _, i := range []uint64{first, max(first, top-min(top, keep/2)), top} {
		var got raft.Log
		err := d.j.GetLog(i, &got)
		if i == first && errors.Is(err, raft.ErrLogNotFound) {
			continue
		}
		if want := d.entry(i, 1, 40); err != nil || got.Index != i || !bytes.Equal(got.Data, want.Data) {
			return 0, 0, fmt.Errorf("entry %d of %d..%d read back as %+v, %v", i, first, top, got, err)
		}
	}
	return first, last, nil
}

package storage

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

// Entries the journal took survive a crash before the flusher wrote them to
// bolt, and are read back into bolt at open.
func TestJournalKeepsWhatItTookThroughACrash(t *testing.T) {
	d := newJournalDir(t, 1<<20, 1<<20) // never flushes on its own
	d.store(1, 100, 3, 7, 200)
	if last, _ := d.bolt.LastIndex(); last != 0 {
		t.Fatalf("bolt holds entries up to %d before any flush", last)
	}
	d.want(1, 100, 3, 200)
	// The journal started over after reading: a second crash loses nothing
	// and brings nothing back twice.
	d.store(101, 110, 3, 5, 200)
	d.want(1, 110, 3, 200)
}

// A record torn by a crash (a sector of it not written) ends the reading:
// the entries before it are kept, its own are not. The crash came before its
// sync returned, so the high-water mark had not moved past the entries before.
func TestJournalStopsAtATornRecord(t *testing.T) {
	d := newJournalDir(t, 1<<20, 1<<20)
	d.store(1, 30, 2, 10, 100)
	torn := d.offset()
	mark := d.read("raft.mark")
	d.store(31, 40, 2, 10, 100)
	d.crash()
	d.write("raft.mark", mark)
	d.flipAt(torn + 200)
	d.open()
	d.want(1, 30, 2, 100)
}

// offset returns where the journal's next record goes.
func (d *journalDir) offset() int64 {
	d.j.wmu.Lock()
	defer d.j.wmu.Unlock()
	return d.j.off
}

func (d *journalDir) read(file string) []byte {
	d.t.Helper()
	b, err := os.ReadFile(filepath.Join(d.dir, file))
	if err != nil {
		d.t.Fatal(err)
	}
	return b
}

func (d *journalDir) write(file string, b []byte) {
	d.t.Helper()
	if err := os.WriteFile(filepath.Join(d.dir, file), b, 0o600); err != nil {
		d.t.Fatal(err)
	}
}

// markIndex reads the high-water mark from its file.
func (d *journalDir) markIndex() uint64 {
	d.t.Helper()
	m, err := openMark(filepath.Join(d.dir, "raft.mark"), 1)
	if err != nil {
		d.t.Fatal(err)
	}
	m.close()
	return m.index
}

// flipAt flips a byte of the stopped journal.
func (d *journalDir) flipAt(off int64) {
	d.t.Helper()
	b := d.read("raft.journal")
	b[off] ^= 0x01
	d.write("raft.journal", b)
}

// reopen opens the stopped journal again and returns the error it fails with.
func (d *journalDir) reopen() error {
	d.t.Helper()
	bolt, err := openCheckedStore(filepath.Join(d.dir, "raft.db"), nil)
	if err != nil {
		d.t.Fatal(err)
	}
	j, err := openJournal(filepath.Join(d.dir, "raft.journal"), bolt, d.size, d.flushAt)
	if err == nil {
		d.bolt, d.j = bolt, j
		d.t.Fatal("the journal opened")
	}
	bolt.Close()
	return err
}

// A record that fails its checksum with a valid record of the same pass after
// it was not torn by a crash, which tears only the last: the journal refuses
// to open, naming the first entry the record held. It does so even when the
// high-water mark is behind (a power loss lost its later writes).
func TestJournalRefusesAFailedRecordBeforeValidOnes(t *testing.T) {
	for _, zero := range []bool{false, true} { // a flipped byte; a header zeroed
		d := newJournalDir(t, 1<<20, 1<<20)
		d.store(1, 30, 2, 10, 100)
		bad := d.offset()
		mark := d.read("raft.mark")
		d.store(31, 60, 2, 10, 100)
		d.crash()
		d.write("raft.mark", mark)
		if zero {
			b := d.read("raft.journal")
			clear(b[bad : bad+journalRecordHeader])
			d.write("raft.journal", b)
		} else {
			d.flipAt(bad + 300)
		}
		wantCorruption(t, d.reopen(), "raft.journal", 31)
	}
}

// The last record failing its checksum once its write had returned (the
// high-water mark names its entries) is corruption, not a torn tail.
func TestJournalRefusesALastRecordThatFailsOnceDurable(t *testing.T) {
	d := newJournalDir(t, 1<<20, 1<<20)
	d.store(1, 30, 2, 10, 100)
	last := d.offset()
	d.store(31, 40, 2, 10, 100)
	d.crash()
	d.flipAt(last + 200)
	wantCorruption(t, d.reopen(), "raft.journal", 31)
}

// A journal cut short, or lost altogether, holds fewer entries than the
// member had made durable: refused, naming the first one missing.
func TestJournalRefusesATruncatedOrMissingJournal(t *testing.T) {
	d := newJournalDir(t, 1<<20, 1<<20)
	d.store(1, 30, 2, 10, 100)
	cut := d.offset()
	d.store(31, 60, 2, 10, 100)
	d.crash()
	if err := os.Truncate(filepath.Join(d.dir, "raft.journal"), cut+50); err != nil {
		t.Fatal(err)
	}
	wantCorruption(t, d.reopen(), "raft.journal", 31)

	e := newJournalDir(t, 1<<20, 1<<20)
	e.store(1, 30, 2, 10, 100)
	e.crash()
	if err := os.Remove(filepath.Join(e.dir, "raft.journal")); err != nil {
		t.Fatal(err)
	}
	wantCorruption(t, e.reopen(), "raft.journal", 1)
}

// The mark's file lost, with entries in the log, leaves nothing to check the
// log against: refused. A new data directory has none and gets one.
func TestJournalRefusesAMissingMark(t *testing.T) {
	d := newJournalDir(t, 1<<20, 1<<20)
	d.store(1, 10, 2, 10, 100)
	d.crash()
	if err := os.Remove(filepath.Join(d.dir, "raft.mark")); err != nil {
		t.Fatal(err)
	}
	wantCorruption(t, d.reopen(), "raft.mark", 0)
}

// A write of the mark torn by a power loss spoils one of its two slots: the
// other holds the mark before it, and the log, which holds that much, opens.
// With both spoilt the mark is unreadable, which is corruption.
func TestJournalMarkSurvivesATornSlot(t *testing.T) {
	d := newJournalDir(t, 1<<20, 1<<20)
	d.store(1, 10, 2, 10, 100)
	d.store(11, 20, 2, 10, 100)
	d.crash()
	m := d.read("raft.mark")
	d.j = nil
	newest := 0
	if binary.LittleEndian.Uint64(m[markSlotGap:]) > binary.LittleEndian.Uint64(m) {
		newest = markSlotGap
	}
	m[newest+9] ^= 0xff
	d.write("raft.mark", m)
	d.open()
	d.want(1, 20, 2, 100)
	d.crash()
	m = d.read("raft.mark")
	m[10] ^= 0xff // a byte the first flip left alone
	m[markSlotGap+10] ^= 0xff
	d.write("raft.mark", m)
	wantCorruption(t, d.reopen(), "raft.mark", 0)
}

// lossyFile is a journal file that a crash leaves as it was at its last
// sync: as a power cut leaves a file whose writes are still in the page
// cache. It keeps the synced contents in memory.
type lossyFile struct {
	*os.File
	mu     sync.Mutex
	synced []byte
}

func openLossyFile(path string) (*lossyFile, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	b, err := os.ReadFile(path)
	if err != nil {
		f.Close()
		return nil, err
	}
	return &lossyFile{File: f, synced: b}, nil
}

func (f *lossyFile) Sync() error     { return f.keep(f.File.Sync) }
func (f *lossyFile) Datasync() error { return f.keep(func() error { return fdatasync(f.File) }) }

// keep runs sync and, once it has succeeded, takes the file's contents as
// what a crash leaves.
func (f *lossyFile) keep(sync func() error) error {
	if err := sync(); err != nil {
		return err
	}
	b, err := os.ReadFile(f.Name())
	if err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.synced = b
	return nil
}

// crash puts the file back as it was at the last sync.
func (f *lossyFile) crash() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.File.Truncate(int64(len(f.synced))); err != nil {
		return err
	}
	_, err := f.File.WriteAt(f.synced, 0)
	return err
}

// An entry the journal took (StoreLogs returned: raft counts it as stored,
// and a follower acknowledges it to the leader) is on stable storage: a
// crash that loses every write not yet synced loses none of them. Fails
// without the journal's fdatasync after each record.
func TestJournalTakesOnlyWhatIsSynced(t *testing.T) {
	d := newJournalDir(t, 1<<20, 1<<20) // never flushes to bolt on its own
	d.lossy = true
	d.restart()
	d.store(1, 60, 4, 6, 300)
	d.restart() // a crash: what was not synced is gone
	d.check("after a crash that lost what was not synced", d.j, 1, 60, 4, 300)
	// Read back, they are in bolt, and the journal starts over.
	d.store(61, 70, 4, 5, 300)
	d.want(1, 70, 4, 300)
}

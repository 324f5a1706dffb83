package storage

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"sync"

	"github.com/hashicorp/raft"
)

// journal makes raft log entries durable with one write and one fdatasync,
// in front of the bolt store, which then takes them in batches off the path
// of a commit.
//
// A bolt commit syncs twice, its pages and then its meta page, so that a
// crash between the two leaves the previous commit intact: written straight
// to bolt, every entry a follower acknowledged, and every batch the leader
// counted itself for, waited for both. The journal is a file of fixed size,
// filled with zeros when it is created, whose records are written in place
// one after another: a sync then carries the record and no file metadata
// (size, block allocation), and costs less than half of bolt's two. The
// entries stay in memory until a
// flusher has written them to bolt, every flushAt entries: one bolt commit
// for several of raft's batches.
//
// When the next record would not fit, or raft deletes entries, everything is
// flushed and the journal starts over at its beginning with a new
// generation, before bolt deletes anything: a crash in between leaves the
// log as it was before the delete, which raft had not yet acted on.
//
// A record is its length and CRC-32C, then its generation and entries.
// Reading at open goes from the beginning for as long as records check out
// and share the first one's generation (random, so that no stale record of an
// earlier pass can continue the current one). A record torn by a crash ends
// the reading: it can only be the last one written, which raft was never told
// was stored. Anything else that ends the reading early is corruption, which
// the member refuses to start with (CorruptionError): a record that fails
// with a valid record of the pass after it, or a log that ends before the
// high-water mark (logMark), which moves only once a write is durable. What
// is read is written to bolt before raft starts.
type journal struct {
	raft.LogStore // bolt: the entries flushed

	flushAt int // pending entries that start a flush

	wmu  sync.Mutex // the file and the mark: held by whoever writes them
	f    journalFile
	mark *logMark
	cap  int64  // the file's size
	off  int64  // where the next record goes; under wmu
	gen  uint64 // the current pass's generation; under wmu
	// passFirst is the first entry the current pass holds, 0 before it
	// holds any; under wmu.
	passFirst uint64
	buf       []byte // the record being written; under wmu

	mu       sync.Mutex
	changed  *sync.Cond  // pending, flushing, err or closed changed
	pending  []*raft.Log // journaled, not yet flushed, in order
	flushing int         // how many of pending (the first) are being flushed
	err      error       // a flush that failed: nothing more is stored
	closed   bool
	done     chan struct{} // closed when the flusher has ended
}

const (
	journalRecordHeader = 4 + 4 // length, CRC-32C of the body
	journalBodyHeader   = 8 + 4 // generation, number of entries
	journalEntryHeader  = 8 + 8 + 1 + 8 + 4 + 4
	// defaultJournalSize holds about 450 batches of 45 Redisson commands.
	defaultJournalSize = 4 << 20
	// defaultFlushAt keeps each flush short. A node runs on one P on a small
	// machine, and a flush's bolt transaction is work that does not yield:
	// at 50 lock clients, flushing every 64 entries measured p999 6-8.5 ms,
	// every 256 10-11 ms, every 1024 25 ms and every 2048 26-42 ms, at the
	// same throughput (bolt alone: 5-9 ms).
	defaultFlushAt = 64
)

var crc32c = crc32.MakeTable(crc32.Castagnoli)

// journalFile is the file a journal writes: an *os.File (osJournalFile).
// It is an interface so that a test can stand in a file that keeps only
// what was synced, and show what a crash leaves (see lossyFile).
type journalFile interface {
	io.ReaderAt
	io.WriterAt
	Stat() (os.FileInfo, error)
	Name() string
	// Sync syncs the data and metadata; Datasync the data, and the
	// metadata only as far as reading the data back needs (fdatasync).
	Sync() error
	Datasync() error
	Close() error
}

type osJournalFile struct{ *os.File }

func (f osJournalFile) Datasync() error { return fdatasync(f.File) }

// StoreLog stores one entry; see StoreLogs.
func (j *journal) StoreLog(l *raft.Log) error { return j.StoreLogs([]*raft.Log{l}) }

// StoreLogs makes logs durable in the journal, or in the store when they do
// not follow the last entry or could never fit in the journal.
func (j *journal) StoreLogs(logs []*raft.Log) error {
	if len(logs) == 0 {
		return nil
	}
	j.wmu.Lock()
	defer j.wmu.Unlock()
	j.mu.Lock()
	err := j.err
	j.mu.Unlock()
	if err != nil {
		return err
	}
	last, err := j.LastIndex()
	if err != nil {
		return err
	}
	size := int64(journalRecordHeader + journalBodyHeader)
	for _, l := range logs {
		size += int64(journalEntryHeader + len(l.Data) + len(l.Extensions))
	}
	// A new pass starts with a record of no entries.
	direct := logs[0].Index != last+1 || size > j.cap-journalRecordHeader-journalBodyHeader
	if direct || j.off+size > j.cap {
		if err := j.flushAll(); err != nil {
			return err
		}
		if err := j.restart(); err != nil {
			return err
		}
		if direct {
			if err := j.LogStore.StoreLogs(logs); err != nil {
				return err
			}
			return j.mark.write(logs[len(logs)-1].Index)
		}
	}
	if err := j.write(j.encode(logs)); err != nil {
		return err
	}
	if j.passFirst == 0 {
		j.passFirst = logs[0].Index
	}
	if err := j.mark.write(logs[len(logs)-1].Index); err != nil {
		return err
	}
	j.mu.Lock()
	j.pending = append(j.pending, logs...)
	if len(j.pending)-j.flushing >= j.flushAt {
		j.changed.Broadcast()
	}
	j.mu.Unlock()
	return nil
}

// write writes rec at the end of the current pass and syncs it. wmu is held.
func (j *journal) write(rec []byte) error {
	if _, err := j.f.WriteAt(rec, j.off); err != nil {
		return err
	}
	if err := j.f.Datasync(); err != nil {
		return err
	}
	j.off += int64(len(rec))
	return nil
}

// restart begins a new pass at the start of the file with a record of no
// entries, once every entry is in the store. wmu is held.
func (j *journal) restart() error {
	j.gen = newGeneration()
	j.off, j.passFirst = 0, 0
	return j.write(j.encode(nil))
}

// newGeneration draws the generation of a new pass: at random, so that no
// stale record of an earlier pass can continue it.
func newGeneration() uint64 {
	var b [8]byte
	rand.Read(b[:])
	return binary.LittleEndian.Uint64(b[:])
}

// encode returns the record of logs in the current generation, in j.buf.
// wmu is held.
func (j *journal) encode(logs []*raft.Log) []byte {
	b := append(j.buf[:0], 0, 0, 0, 0, 0, 0, 0, 0) // length and CRC, below
	b = binary.LittleEndian.AppendUint64(b, j.gen)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(logs)))
	for _, l := range logs {
		b = binary.LittleEndian.AppendUint64(b, l.Index)
		b = binary.LittleEndian.AppendUint64(b, l.Term)
		b = append(b, byte(l.Type))
		b = binary.LittleEndian.AppendUint64(b, uint64(l.AppendedAt.UnixNano()))
		b = binary.LittleEndian.AppendUint32(b, uint32(len(l.Data)))
		b = binary.LittleEndian.AppendUint32(b, uint32(len(l.Extensions)))
		b = append(b, l.Data...)
		b = append(b, l.Extensions...)
	}
	body := b[journalRecordHeader:]
	binary.LittleEndian.PutUint32(b, uint32(len(body)))
	binary.LittleEndian.PutUint32(b[4:], crc32.Checksum(body, crc32c))
	j.buf = b
	return b
}

// flusher writes pending entries to the store, flushAt or more at a time.
func (j *journal) flusher() {
	defer close(j.done)
	j.mu.Lock()
	defer j.mu.Unlock()
	for {
		for !j.closed && (j.flushing > 0 || len(j.pending) < j.flushAt) {
			j.changed.Wait()
		}
		if j.closed {
			return
		}
		if j.flushLocked() != nil {
			return
		}
	}
}

// flushLocked writes every pending entry to the store; mu is held, and let
// go meanwhile. Another flush must not be under way.
func (j *journal) flushLocked() error {
	if j.err != nil || len(j.pending) == 0 {
		return j.err
	}
	batch := j.pending
	j.flushing = len(batch)
	j.mu.Unlock()
	err := j.LogStore.StoreLogs(batch)
	j.mu.Lock()
	if err != nil {
		j.err = fmt.Errorf("replication: flush the raft journal: %w", err)
	} else {
		j.pending = append([]*raft.Log(nil), j.pending[len(batch):]...)
	}
	j.flushing = 0
	j.changed.Broadcast()
	return j.err
}

// flushAll waits for the flusher and writes the rest of the pending entries
// to the store. wmu is held, so that nothing is added meanwhile.
func (j *journal) flushAll() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	for j.flushing > 0 {
		j.changed.Wait()
	}
	return j.flushLocked()
}

// GetLog reads an entry, pending or flushed.
func (j *journal) GetLog(index uint64, l *raft.Log) error {
	j.mu.Lock()
	if e := entryAt(j.pending, index); e != nil {
		*l = *e
		j.mu.Unlock()
		return nil
	}
	j.mu.Unlock()
	return j.LogStore.GetLog(index, l)
}

// FirstIndex returns the first entry's index, 0 with none.
func (j *journal) FirstIndex() (uint64, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	first, err := j.LogStore.FirstIndex()
	if err == nil && first == 0 && len(j.pending) > 0 {
		first = j.pending[0].Index
	}
	return first, err
}

// LastIndex returns the last entry's index, 0 with none.
func (j *journal) LastIndex() (uint64, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if n := len(j.pending); n > 0 {
		return j.pending[n-1].Index, nil
	}
	return j.LogStore.LastIndex()
}

// DeleteRange deletes entries min to max, inclusive. Everything goes to the
// store first and the journal starts over, so that reading it after a crash
// cannot bring deleted entries back, unless the range is a head that ends
// before the current pass's first entry. A range that reaches the mark
// (raft's tail, cut where it conflicts with a new leader's log) moves it down
// first and is deleted before any write goes on. A head that a snapshot
// covers is deleted after wmu is let go, in pieces (see deleteHead): writes
// go on meanwhile.
func (j *journal) DeleteRange(min, max uint64) error {
	j.wmu.Lock()
	if max < j.mark.index && (j.passFirst == 0 || max < j.passFirst) {
		// A head of which the current pass holds nothing, as after a
		// snapshot, which keeps the log since the one before: a crash
		// cannot write any of it back, so writes need not wait for a
		// flush and a new pass (an fdatasync and bolt's two).
		j.wmu.Unlock()
		return deleteHead(j.LogStore, min, max)
	}
	if err := j.flushAll(); err != nil {
		j.wmu.Unlock()
		return err
	}
	if err := j.restart(); err != nil {
		j.wmu.Unlock()
		return err
	}
	if max < j.mark.index {
		j.wmu.Unlock()
		return deleteHead(j.LogStore, min, max)
	}
	defer j.wmu.Unlock()
	if min <= j.mark.index {
		below := uint64(0)
		if min > 0 {
			below = min - 1
		}
		if err := j.mark.lower(below); err != nil {
			return err
		}
	}
	return j.LogStore.DeleteRange(min, max)
}

// headPiece is how many entries one of deleteHead's transactions deletes.
// Deleting the large entries a bulk load writes costs bolt several times an
// ordinary entry's (each frees its pages), and the leader's requests wait
// behind each transaction at the end of a snapshot: pieces of this many keep
// one under Go's 10 ms time slice.
const headPiece = 1024

// deleteHead deletes entries first to last, the oldest of the log, from s: one
// bolt transaction per headPiece entries, paced (see Pacer). Deleted whole,
// the half million entries a snapshot at 5M held locks compacts took one
// transaction of half a second, and every write to bolt (the journal's
// flushes, and so the leader's log once the journal is full) waited behind
// it. A crash between two pieces leaves the log whole from a later first
// entry, still covered by the snapshot, which raft deletes again.
func deleteHead(s raft.LogStore, first, last uint64) error {
	var pace Pacer
	for from := first; from <= last; pace.Pause() {
		to := min(last, from+headPiece-1)
		if err := s.DeleteRange(from, to); err != nil || to == last {
			return err
		}
		from = to + 1
	}
	return nil
}

// Close stops the flusher, writes the pending entries to the store and
// closes the files; the store stays open.
func (j *journal) Close() error {
	j.wmu.Lock()
	defer j.wmu.Unlock()
	j.stopFlusher()
	return errors.Join(j.flushAll(), j.f.Close(), j.mark.close())
}

// stopFlusher ends the flusher, after the flush it may be making.
func (j *journal) stopFlusher() {
	j.mu.Lock()
	j.closed = true
	j.changed.Broadcast()
	j.mu.Unlock()
	<-j.done
}

// syncDir makes a file created in dir durable in it.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

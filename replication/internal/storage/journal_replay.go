package storage

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// Reading the journal back, as it opens: what a restart keeps of it, and
// what it refuses (see journal).

// openJournal opens (or creates, size bytes long) the journal at path in
// front of store, writes to store what the journal holds that store does
// not, checks the log against its high-water mark (raft.mark, beside path),
// and starts the flusher.
func openJournal(path string, store raft.LogStore, size int64, flushAt int) (*journal, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	return openJournalFile(osJournalFile{f}, store, size, flushAt)
}

// openJournalFile is openJournal on the file f, which it closes if it fails.
func openJournalFile(f journalFile, store raft.LogStore, size int64, flushAt int) (*journal, error) {
	path := f.Name()
	j := &journal{LogStore: store, flushAt: flushAt, f: f, done: make(chan struct{})}
	j.changed = sync.NewCond(&j.mu)
	if err := j.open(size); err != nil {
		f.Close()
		if j.mark != nil {
			j.mark.close()
		}
		var ce *CorruptionError
		if errors.As(err, &ce) {
			return nil, err // it names the file
		}
		return nil, fmt.Errorf("raft journal %s: %w", path, err)
	}
	go j.flusher()
	return j, nil
}

// open fills the file to size, replays it into the store, checks the log
// against its mark and starts a pass.
func (j *journal) open(size int64) error {
	st, err := j.f.Stat()
	if err != nil {
		return err
	}
	j.cap = st.Size()
	found := j.cap
	if j.cap < size {
		zeros := make([]byte, 1<<20)
		for j.cap < size {
			n := min(int64(len(zeros)), size-j.cap)
			if _, err := j.f.WriteAt(zeros[:n], j.cap); err != nil {
				return err
			}
			j.cap += n
		}
		if err := j.f.Sync(); err != nil {
			return err
		}
		if err := syncDir(filepath.Dir(j.f.Name())); err != nil {
			return err
		}
	}
	data := make([]byte, j.cap)
	if _, err := io.ReadFull(io.NewSectionReader(j.f, 0, j.cap), data); err != nil {
		return err
	}
	logs, failed, err := j.replay(data)
	if err != nil {
		return err
	}
	if len(logs) > 0 {
		if err := j.LogStore.StoreLogs(logs); err != nil {
			return err
		}
	}
	last, err := j.LogStore.LastIndex()
	if err != nil {
		return err
	}
	markPath := filepath.Join(filepath.Dir(j.f.Name()), markFile)
	if j.mark, err = openMark(markPath, last); err != nil {
		return err
	}
	if j.mark.index > last {
		problem := fmt.Sprintf("the log ends at entry %d, but this member had made entries up to %d durable (%s says so)", last, j.mark.index, markPath)
		if failed >= 0 {
			problem = fmt.Sprintf("the record at byte %d fails its checksum, and this member had made entries up to %d durable (%s says so)", failed, j.mark.index, markPath)
		}
		if found < size {
			problem += fmt.Sprintf("; the file was %d bytes long, not %d", found, size)
		}
		return &CorruptionError{Path: j.f.Name(), Index: last + 1, Problem: problem}
	}
	return j.restart()
}

// replay returns the entries of the journal's current pass that the store
// does not hold, in order, and the offset of the record that ended the
// reading by failing its checks (-1 if it ended at zeros, a stale record or
// the end of the file). A failed record is a torn one only if no record of
// the pass follows it.
func (j *journal) replay(data []byte) (logs []*raft.Log, failed int, err error) {
	last, err := j.LogStore.LastIndex()
	if err != nil {
		return nil, -1, err
	}
	base := last + 1 // the index of logs[0]
	var gen uint64
	corrupt := func(off int, problem string) error {
		return &CorruptionError{Path: j.f.Name(), Index: base + uint64(len(logs)), Problem: fmt.Sprintf("the record at byte %d %s", off, problem)}
	}
	for off := 0; off+journalRecordHeader <= len(data); {
		n := int(binary.LittleEndian.Uint32(data[off:]))
		ok := n >= journalBodyHeader && n <= len(data)-off-journalRecordHeader
		if ok {
			body := data[off+journalRecordHeader : off+journalRecordHeader+n]
			ok = crc32.Checksum(body, crc32c) == binary.LittleEndian.Uint32(data[off+4:])
		}
		if !ok {
			if off == 0 && len(data) >= journalRecordHeader+8 {
				gen = binary.LittleEndian.Uint64(data[journalRecordHeader:]) // the first record's, if intact
			}
			if next := nextRecord(data, off+1, gen); next >= 0 {
				return nil, -1, corrupt(off, fmt.Sprintf("fails its checksum, and a valid record of the same pass follows it at byte %d", next))
			}
			if allZero(data[off : off+journalRecordHeader]) {
				return logs, -1, nil // the end of what was written
			}
			return logs, off, nil
		}
		body := data[off+journalRecordHeader : off+journalRecordHeader+n]
		if g := binary.LittleEndian.Uint64(body); off == 0 {
			gen = g
		} else if g != gen {
			break
		}
		entries, err := decodeJournalEntries(body[8:])
		if err != nil {
			return nil, -1, corrupt(off, err.Error())
		}
		for _, l := range entries {
			if l.Index < base {
				continue // flushed before the crash
			}
			if i := l.Index - base; i < uint64(len(logs)) {
				logs = logs[:i] // written again: the later record holds
			}
			if l.Index != base+uint64(len(logs)) {
				return nil, -1, corrupt(off, fmt.Sprintf("holds entry %d after entry %d", l.Index, base+uint64(len(logs))-1))
			}
			logs = append(logs, l)
		}
		off += journalRecordHeader + n
	}
	return logs, -1, nil
}

// nextRecord returns the offset of the first valid record of generation gen
// that starts at or after from, or -1. A record torn by a crash was the last
// one written, so none follows it.
func nextRecord(data []byte, from int, gen uint64) int {
	pattern := binary.LittleEndian.AppendUint64(nil, gen)
	for at := from + journalRecordHeader; at <= len(data)-journalBodyHeader; {
		i := bytes.Index(data[at:], pattern)
		if i < 0 {
			return -1
		}
		start := at + i - journalRecordHeader
		n := int(binary.LittleEndian.Uint32(data[start:]))
		if n >= journalBodyHeader && n <= len(data)-start-journalRecordHeader &&
			crc32.Checksum(data[start+journalRecordHeader:start+journalRecordHeader+n], crc32c) == binary.LittleEndian.Uint32(data[start+4:]) {
			return start
		}
		at += i + 1
	}
	return -1
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

var errJournalShort = errors.New("entries run past the record")

// decodeJournalEntries reads the entries of a record's body after its
// generation.
func decodeJournalEntries(b []byte) ([]*raft.Log, error) {
	if len(b) < 4 {
		return nil, errJournalShort
	}
	n := binary.LittleEndian.Uint32(b)
	b = b[4:]
	if uint64(n) > uint64(len(b)/journalEntryHeader) {
		return nil, errJournalShort
	}
	logs := make([]*raft.Log, n)
	for i := range logs {
		if len(b) < journalEntryHeader {
			return nil, errJournalShort
		}
		l := &raft.Log{
			Index:      binary.LittleEndian.Uint64(b),
			Term:       binary.LittleEndian.Uint64(b[8:]),
			Type:       raft.LogType(b[16]),
			AppendedAt: time.Unix(0, int64(binary.LittleEndian.Uint64(b[17:]))),
		}
		data, ext := uint64(binary.LittleEndian.Uint32(b[25:])), uint64(binary.LittleEndian.Uint32(b[29:]))
		b = b[journalEntryHeader:]
		if data+ext > uint64(len(b)) {
			return nil, errJournalShort
		}
		if data > 0 {
			l.Data = b[:data:data]
		}
		if ext > 0 {
			l.Extensions = b[data : data+ext : data+ext]
		}
		b = b[data+ext:]
		logs[i] = l
	}
	return logs, nil
}

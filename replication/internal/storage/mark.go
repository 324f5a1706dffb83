package storage

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// logMark is the log's high-water mark: the index of the last entry this
// member made durable, kept in its own small file (raft.mark) beside the
// journal and bolt. A log that reads back shorter than its mark has lost
// entries the member may have acknowledged (a journal truncated, emptied or
// deleted, records lost, bolt's tail lost); a record torn by a crash never
// makes it shorter, since the mark moves only once the journal has synced.
//
// Moving the mark up costs no sync of its own, which would double the cost of
// a commit: it is written after each write to the log and its sync, and
// reaches the disk when the kernel writes it back. A process that dies
// (SIGKILL, a panic) leaves it exact, in the page cache; a machine that loses
// power may lose its latest moves, leaving it behind the log, which checks
// less but never refuses a sound log. Moving it down, when raft deletes the
// log's tail, is synced before the deletion, so that no mark left on disk
// names an entry the log dropped on purpose.
//
// The file holds two slots, a sector apart, written in turn, each with a
// count of writes and a CRC-32C: a write torn by a power loss spoils one, and
// the other holds the mark before it.
type logMark struct {
	f     *os.File
	count uint64 // writes so far; the next goes to slot count%2
	index uint64
	buf   [markSlotLen]byte
}

const (
	markSlotLen = 8 + 8 + 4 // count, index, CRC-32C of both
	markSlotGap = 512
)

// openMark opens the mark at path. A missing one is created at 0 when the
// log has no entries; with entries it was lost, which is corruption.
func openMark(path string, last uint64) (*logMark, error) {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if errors.Is(err, fs.ErrNotExist) {
		if last > 0 {
			return nil, &CorruptionError{Path: path, Problem: fmt.Sprintf("the file is missing while the log holds entries up to %d, so they cannot be checked against what this member made durable", last)}
		}
		return createMark(path)
	}
	if err != nil {
		return nil, err
	}
	m := &logMark{f: f}
	var slots [markSlotGap + markSlotLen]byte
	n, err := f.ReadAt(slots[:], 0)
	if err != nil && !errors.Is(err, io.EOF) {
		f.Close()
		return nil, err
	}
	found := false
	for _, off := range []int{0, markSlotGap} {
		if off+markSlotLen > n {
			continue
		}
		s := slots[off : off+markSlotLen]
		if crc32.Checksum(s[:16], crc32c) != binary.LittleEndian.Uint32(s[16:]) {
			continue
		}
		if count := binary.LittleEndian.Uint64(s); !found || count > m.count {
			m.count, m.index, found = count, binary.LittleEndian.Uint64(s[8:]), true
		}
	}
	if !found {
		f.Close()
		return nil, &CorruptionError{Path: path, Problem: "neither copy of the log's high-water mark passes its checksum"}
	}
	m.count++
	return m, nil
}

// createMark creates the mark at 0, durably.
func createMark(path string) (*logMark, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, err
	}
	m := &logMark{f: f}
	err = errors.Join(m.write(0), m.write(0), f.Sync(), syncDir(filepath.Dir(path)))
	if err != nil {
		f.Close()
		return nil, err
	}
	return m, nil
}

// write records index in the next slot, without a sync.
func (m *logMark) write(index uint64) error {
	b := binary.LittleEndian.AppendUint64(m.buf[:0], m.count)
	b = binary.LittleEndian.AppendUint64(b, index)
	b = binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, crc32c))
	if _, err := m.f.WriteAt(b, int64(m.count%2)*markSlotGap); err != nil {
		return fmt.Errorf("write the log's high-water mark: %w", err)
	}
	m.count++
	m.index = index
	return nil
}

// lower moves the mark down to index, durably, before entries above it are
// deleted.
func (m *logMark) lower(index uint64) error {
	if err := m.write(index); err != nil {
		return err
	}
	return fdatasync(m.f)
}

func (m *logMark) close() error { return m.f.Close() }

package storage

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"path/filepath"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	"go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"
)

// CorruptionError is a data directory that fails a check of what this member
// wrote to it: an entry or value whose checksum does not match, a journal
// record that fails with valid records after it, or a log shorter than what
// the member had already made durable. Such a member may have acknowledged
// entries it no longer holds, so it must not vote or lead: it refuses to
// start, and the remedy is to wipe its data and join again, which copies the
// log from the others.
type CorruptionError struct {
	Path    string // the file that failed the check
	Index   uint64 // the first log index concerned; 0 if none is
	Problem string
}

func (e *CorruptionError) Error() string {
	at := ""
	if e.Index > 0 {
		at = fmt.Sprintf(" at log index %d", e.Index)
	}
	return fmt.Sprintf("corrupt data in %s%s: %s; this member may have lost entries it acknowledged, so it must not vote or lead: "+
		"wipe its data directory %s and restart it with --join <Raft address of another member>",
		e.Path, at, e.Problem, filepath.Dir(e.Path))
}

// checkedStore is the bolt store (raft.db) with a CRC-32C on every log entry
// and stable value, verified on every read. Bolt checks only its meta pages:
// a flipped bit in an entry would otherwise be applied, replicated to other
// members and served as the truth.
//
// An entry's checksum covers its index, term, type, append time, data and
// extensions, and is stored after its extensions, which raft leaves to the
// application and this engine does not use otherwise; it is taken off again
// when the entry is read. A stable value (raft's term and vote) carries its
// checksum after it, over its key and itself.
type checkedStore struct {
	*raftboltdb.BoltStore
	path string
	opts *bbolt.Options // what it was opened with
	// fault is told of corruption found once the node runs, which stops it
	// (see OpenDir); nil until then.
	fault func(error)
}

// checksumsKey is a stable key set in every raft.db whose entries carry
// checksums: one without it and with state was written by a lockserver from
// before them, and is refused rather than read unchecked.
var checksumsKey = []byte("lockserver.checksums")

// openCheckedStore opens the bolt store at path, and verifies every entry
// and raft's stable values.
func openCheckedStore(path string, opts *bbolt.Options) (*checkedStore, error) {
	bolt, err := raftboltdb.New(raftboltdb.Options{Path: path, BoltOptions: opts})
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	s := &checkedStore{BoltStore: bolt, path: path, opts: opts}
	if err := s.verify(); err != nil {
		bolt.Close()
		return nil, err
	}
	return s, nil
}

// verify reads every entry and stable value once, and marks a new store as
// one with checksums.
func (s *checkedStore) verify() (err error) {
	defer func() {
		if p := recover(); p != nil { // bolt panics on some broken pages
			err = s.corrupt(0, fmt.Sprintf("bolt could not read it: %v", p))
		}
	}()
	first, err := s.FirstIndex()
	if err != nil {
		return err
	}
	last, err := s.LastIndex()
	if err != nil {
		return err
	}
	if _, err := s.Get(checksumsKey); errors.Is(err, raftboltdb.ErrKeyNotFound) {
		_, termErr := s.Get([]byte("CurrentTerm"))
		if last > 0 || !errors.Is(termErr, raftboltdb.ErrKeyNotFound) {
			return fmt.Errorf("%s was written by an earlier lockserver, without checksums: wipe %s and restart this member with --join <Raft address of another member>",
				s.path, filepath.Dir(s.path))
		}
		return s.Set(checksumsKey, []byte{1})
	} else if err != nil {
		return err
	}
	for _, key := range []string{"CurrentTerm", "LastVoteTerm", "LastVoteCand"} { // raft's
		if _, err := s.Get([]byte(key)); err != nil && !errors.Is(err, raftboltdb.ErrKeyNotFound) {
			return err
		}
	}
	var l raft.Log
	for i := first; i <= last && last > 0; i++ {
		if err := s.GetLog(i, &l); errors.Is(err, raft.ErrLogNotFound) {
			return s.corrupt(i, fmt.Sprintf("the entry is missing from the log's entries %d to %d", first, last))
		} else if err != nil {
			return err
		}
	}
	return nil
}

// corrupt returns the corruption of index (0: of the store as a whole).
func (s *checkedStore) corrupt(index uint64, problem string) error {
	return &CorruptionError{Path: s.path, Index: index, Problem: problem}
}

// failed reports corruption found while the node runs, and returns it.
func (s *checkedStore) failed(err error) error {
	if s.fault != nil {
		s.fault(err)
	}
	return err
}

// entrySum is the checksum of l, with its extensions as raft gave them.
func entrySum(l *raft.Log) uint32 {
	var h [8 + 8 + 1 + 8]byte
	binary.LittleEndian.PutUint64(h[:], l.Index)
	binary.LittleEndian.PutUint64(h[8:], l.Term)
	h[16] = byte(l.Type)
	binary.LittleEndian.PutUint64(h[17:], uint64(l.AppendedAt.UnixNano()))
	sum := crc32.Update(0, crc32c, h[:])
	sum = crc32.Update(sum, crc32c, l.Data)
	return crc32.Update(sum, crc32c, l.Extensions)
}

// StoreLog stores one entry; see StoreLogs.
func (s *checkedStore) StoreLog(l *raft.Log) error { return s.StoreLogs([]*raft.Log{l}) }

// StoreLogs stores copies of logs that carry their checksums; raft's own
// entries are left as they are.
func (s *checkedStore) StoreLogs(logs []*raft.Log) error {
	sealed := make([]raft.Log, len(logs))
	ptrs := make([]*raft.Log, len(logs))
	for i, l := range logs {
		sealed[i] = *l
		ext := make([]byte, len(l.Extensions), len(l.Extensions)+4)
		copy(ext, l.Extensions)
		sealed[i].Extensions = binary.LittleEndian.AppendUint32(ext, entrySum(l))
		ptrs[i] = &sealed[i]
	}
	return s.BoltStore.StoreLogs(ptrs)
}

// GetLog reads the entry at index and verifies it.
func (s *checkedStore) GetLog(index uint64, l *raft.Log) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = s.failed(s.corrupt(index, fmt.Sprintf("bolt could not read it: %v", p)))
		}
	}()
	err = s.BoltStore.GetLog(index, l)
	switch {
	case errors.Is(err, raft.ErrLogNotFound), errors.Is(err, bolterrors.ErrDatabaseNotOpen):
		return err
	case err != nil:
		return s.failed(s.corrupt(index, "the entry cannot be decoded: "+err.Error()))
	}
	n := len(l.Extensions) - 4
	if n < 0 {
		return s.failed(s.corrupt(index, "the entry has no checksum"))
	}
	sum := binary.LittleEndian.Uint32(l.Extensions[n:])
	l.Extensions = l.Extensions[:n:n]
	if n == 0 {
		l.Extensions = nil
	}
	if l.Index != index {
		return s.failed(s.corrupt(index, fmt.Sprintf("the entry stored there says it is entry %d", l.Index)))
	}
	if entrySum(l) != sum {
		return s.failed(s.corrupt(index, "the entry fails its checksum"))
	}
	return nil
}

// Set stores a stable value with its checksum.
func (s *checkedStore) Set(key, val []byte) error {
	b := make([]byte, len(val), len(val)+4)
	copy(b, val)
	return s.BoltStore.Set(key, binary.LittleEndian.AppendUint32(b, stableSum(key, val)))
}

// Get reads a stable value and verifies it.
func (s *checkedStore) Get(key []byte) ([]byte, error) {
	b, err := s.BoltStore.Get(key)
	if err != nil {
		return nil, err
	}
	n := len(b) - 4
	if n < 0 || stableSum(key, b[:n]) != binary.LittleEndian.Uint32(b[n:]) {
		return nil, s.failed(s.corrupt(0, fmt.Sprintf("raft's stable value %q fails its checksum", key)))
	}
	return b[:n:n], nil
}

// SetUint64 stores a stable number, as raft-boltdb does, with its checksum.
func (s *checkedStore) SetUint64(key []byte, val uint64) error {
	return s.Set(key, binary.BigEndian.AppendUint64(nil, val))
}

// GetUint64 reads a stable number and verifies it.
func (s *checkedStore) GetUint64(key []byte) (uint64, error) {
	b, err := s.Get(key)
	if err != nil {
		return 0, err
	}
	if len(b) != 8 {
		return 0, s.failed(s.corrupt(0, fmt.Sprintf("raft's stable value %q is %d bytes, not 8", key, len(b))))
	}
	return binary.BigEndian.Uint64(b), nil
}

func stableSum(key, val []byte) uint32 {
	return crc32.Update(crc32.Checksum(key, crc32c), crc32c, val)
}

package storage

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"github.com/hashicorp/raft"
)

// compactingStore is raft.db as the journal and raft use it: the checked
// bolt store, which it rewrites into a smaller file once the log has been
// compacted to a fraction of it.
//
// Bolt reuses the pages that deleting entries frees, but never gives them
// back: raft.db kept the size of its largest log for good (after a bulk
// load, through every later snapshot). Once a deletion leaves the file
// at least dbCompactMin and no more than a quarter in use, a goroutine copies the
// entries and raft's stable values into raft.db.compact, beside the writes,
// which go on; then, with the store's lock held, it copies what changed
// meanwhile (new entries, a head deleted by a snapshot), renames the copy
// over raft.db and carries on with it. The lock is held for the changes
// alone, which the raft journal in front absorbs: a commit writes the journal,
// not bolt. A deletion of the log's tail (a follower's conflicting entries)
// during the copy, which may be written again differently, abandons it.
//
// A crash before the rename leaves raft.db as it was (and a stray copy,
// removed at the next open); after it, the copy, complete and synced.
type compactingStore struct {
	mu sync.RWMutex // held to write while the store is replaced
	s  *checkedStore
	// min is the size from which raft.db is rewritten (dbCompactMin).
	min int64
	// copyDone, in tests, runs after the copy and before the changes are
	// brought over.
	copyDone func()

	state      sync.Mutex
	compacting bool
	tailCut    bool // a deletion reached the tail during the copy
	wg         sync.WaitGroup
	closed     bool
	// compactions counts the rewrites made; failed the last error.
	compactions int
	failed      error
}

// dbCompactMin is the smallest raft.db that is rewritten once mostly free;
// boltAllocSlack is bbolt's allocation step (DefaultAllocSize), how far the
// file may run past its pages.
const (
	dbCompactMin   = 64 << 20
	boltAllocSlack = 16 << 20
)

// compactBatch and compactBatchBytes bound what one bolt transaction of a
// rewrite copies: entries, and their bytes (an entry past the bound goes
// alone). A bulk load's entries are large, and 256 of them made one
// transaction of tens of megabytes: its commit kept the disk, and the log's
// syncs on it, for up to 140 ms at a time, the leader's requests waiting in
// waves for a second after the snapshot that set off the rewrite.
const (
	compactBatch      = 256
	compactBatchBytes = 1 << 20
)

func newCompactingStore(s *checkedStore) *compactingStore {
	os.Remove(s.path + ".compact") // a copy a crash cut short
	return &compactingStore{s: s, min: dbCompactMin}
}

func (c *compactingStore) store() *checkedStore {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.s
}

func (c *compactingStore) FirstIndex() (uint64, error) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.s.FirstIndex()
}

func (c *compactingStore) LastIndex() (uint64, error) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.s.LastIndex()
}

func (c *compactingStore) GetLog(index uint64, l *raft.Log) error {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.s.GetLog(index, l)
}

func (c *compactingStore) StoreLog(l *raft.Log) error { return c.StoreLogs([]*raft.Log{l}) }

func (c *compactingStore) StoreLogs(logs []*raft.Log) error {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.s.StoreLogs(logs)
}

func (c *compactingStore) Set(key, val []byte) error {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.s.Set(key, val)
}

func (c *compactingStore) Get(key []byte) ([]byte, error) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.s.Get(key)
}

func (c *compactingStore) SetUint64(key []byte, val uint64) error {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.s.SetUint64(key, val)
}

func (c *compactingStore) GetUint64(key []byte) (uint64, error) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.s.GetUint64(key)
}

// DeleteRange deletes entries, then starts a rewrite if the file is now
// mostly free.
func (c *compactingStore) DeleteRange(min, max uint64) error {
	c.mu.RLock()
	last, err := c.s.LastIndex()
	if err == nil {
		err = c.s.DeleteRange(min, max)
	}
	size, free := c.space()
	c.mu.RUnlock()
	if err != nil {
		return err
	}
	c.state.Lock()
	defer c.state.Unlock()
	if max >= last {
		c.tailCut = true
	}
	// The file runs up to bbolt's allocation step past its last page, which
	// no freelist counts: what remains is at most the rest.
	if !c.compacting && !c.closed && size >= c.min && 4*(size-free-boltAllocSlack) <= size {
		c.compacting, c.tailCut = true, false
		c.wg.Add(1)
		go c.compact()
	}
	return nil
}

// space returns raft.db's size and the bytes its free pages hold. mu is held.
func (c *compactingStore) space() (size, free int64) {
	st, err := os.Stat(c.s.path)
	if err != nil {
		return 0, 0
	}
	return st.Size(), int64(c.s.Stats().FreeAlloc)
}

// compact rewrites raft.db (see compactingStore).
func (c *compactingStore) compact() {
	defer c.wg.Done()
	err := c.rewrite()
	c.state.Lock()
	c.compacting = false
	if err == nil {
		c.compactions++
	}
	c.failed = err
	c.state.Unlock()
}

func (c *compactingStore) rewrite() error {
	src := c.store() // only this goroutine replaces it
	path := src.path + ".compact"
	dst, err := openCheckedStore(path, src.opts)
	if err != nil {
		return err
	}
	done := false
	defer func() {
		if !done {
			dst.Close()
			os.Remove(path)
		}
	}()
	first, err := src.FirstIndex()
	if err != nil {
		return err
	}
	last, err := src.LastIndex()
	if err != nil {
		return err
	}
	// Entries the log's head loses meanwhile are passed over.
	if err := copyEntries(src, dst.BoltStore, first, last, true); err != nil {
		return err
	}
	if c.copyDone != nil {
		c.copyDone()
	}

	c.mu.Lock()
	defer c.mu.Unlock()
	c.state.Lock()
	cut, closed := c.tailCut, c.closed
	c.state.Unlock()
	switch {
	case closed:
		return errLogClosed
	case cut:
		return errors.New("the log's tail was deleted while raft.db was copied")
	}
	first2, err := src.FirstIndex()
	if err != nil {
		return err
	}
	last2, err := src.LastIndex()
	if err != nil {
		return err
	}
	if last2 > last {
		if err := copyEntries(src, dst.BoltStore, max(last+1, first2), last2, false); err != nil {
			return err
		}
	}
	if dstFirst, err := dst.FirstIndex(); err != nil {
		return err
	} else if dstFirst != 0 && first2 > dstFirst {
		if err := dst.DeleteRange(dstFirst, first2-1); err != nil {
			return err
		}
	}
	// Raft's stable values (term and vote), as stored, checksums and all.
	for _, key := range [][]byte{[]byte("CurrentTerm"), []byte("LastVoteTerm"), []byte("LastVoteCand"), checksumsKey} {
		v, err := src.BoltStore.Get(key)
		if err != nil {
			continue
		}
		if err := dst.BoltStore.Set(key, v); err != nil {
			return err
		}
	}
	if err := src.Close(); err != nil {
		return err
	}
	// From here the copy is raft.db, whatever happens next.
	if err := os.Rename(path, src.path); err != nil {
		return c.broken(src, dst, fmt.Errorf("rename %s: %w", path, err))
	}
	if err := syncDir(filepath.Dir(src.path)); err != nil {
		return c.broken(src, dst, err)
	}
	dst.path, dst.fault = src.path, src.fault
	c.s, done = dst, true
	return nil
}

// broken stops a node whose raft.db could not be replaced after the old one
// was closed: it has no log to write to.
func (c *compactingStore) broken(src, dst *checkedStore, err error) error {
	err = fmt.Errorf("replication: rewrite raft.db: %w", err)
	c.s = dst // still open, so that calls fail no worse than they would
	if src.fault != nil {
		go src.fault(err)
	}
	return err
}

// copyEntries copies the entries first to last of src to dst as stored
// (dst is the copy's bolt store: checksums and all), a batch per bolt
// transaction (see compactBatch), paced (see Pacer). With head, entries
// missing at the start (the head was deleted meanwhile) are passed over.
func copyEntries(src *checkedStore, dst interface{ StoreLogs([]*raft.Log) error }, first, last uint64, head bool) error {
	batch := make([]*raft.Log, 0, compactBatch)
	bytes := 0
	var pace Pacer
	flush := func() error {
		err := dst.StoreLogs(batch)
		batch, bytes = batch[:0], 0
		pace.Pause()
		return err
	}
	for i := first; i <= last && last > 0; i++ {
		l := new(raft.Log)
		if err := src.BoltStore.GetLog(i, l); err != nil {
			if head && len(batch) == 0 && errors.Is(err, raft.ErrLogNotFound) {
				continue
			}
			return fmt.Errorf("copy entry %d: %w", i, err)
		}
		head = false
		size := len(l.Data) + len(l.Extensions)
		if len(batch) > 0 && bytes+size > compactBatchBytes {
			if err := flush(); err != nil {
				return err
			}
		}
		batch, bytes = append(batch, l), bytes+size
		if len(batch) == compactBatch || i == last {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	return nil
}

// Close waits for a rewrite under way and closes raft.db.
func (c *compactingStore) Close() error {
	c.state.Lock()
	c.closed = true
	c.state.Unlock()
	c.wg.Wait()
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.s.Close()
}

package storage

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
	"github.com/lockserver/lockserver/internal/histogram"
)

// Log is the log store as hashicorp/raft uses it, in front of a durable
// store: it lets the leader write its own log in parallel with replicating it,
// the optimisation of the Raft thesis (section 10.2.1), on top of
// hashicorp/raft, which writes first and replicates after.
//
// hashicorp/raft's leader stores a batch, counts itself as holding it, and
// only then sends it to the followers: a commit costs the leader's disk write
// and then a follower's, one after the other. Here the leader's StoreLogs
// queues the entries and returns at once; a writer goroutine makes them
// durable while they travel to the followers and onto their disks.
//
// hashicorp/raft then counts the leader before its copy is on disk, so its
// commit index may name an entry that only a minority holds durably (a
// single follower of three). Two rules keep that from mattering, since
// nothing outside this node sees an entry before one of them lets it through:
//   - the state machine applies an entry only once this node has it on disk
//     (WaitDurable, which the FSM calls): with raft's commit, a majority then
//     holds it durably, so no client is answered, no reader sees and no
//     subscriber hears of an entry a crash could still take back;
//   - the commit index that the leader sends its followers is cut to what it
//     holds on disk itself (CommitTransport): a follower applies only entries
//     that are durable on the leader and, by raft's commit, on a majority.
//
// If the leader crashes with entries still queued, they are lost from its log
// as if never written. At most a minority holds them, none applied them and
// no client was answered: raft may then overwrite them, as it does any
// uncommitted entry, and their clients learn an unknown outcome.
//
// Only a leader's command entries are written in the background. A
// follower's writes are durable before it answers the leader, as Raft
// requires of a vote it counts; configuration entries (membership changes),
// which raft acts on as soon as it deems them committed, and the no-op of a
// new term are written before StoreLogs returns, as the standard algorithm
// does. Writes of either kind wait for the queue: the log is written in order.
type Log struct {
	raft.LogStore // the durable store (bolt, or memory in tests)
	// leading reports whether hashicorp/raft runs its leader loop, which is
	// the goroutine that calls StoreLogs as a leader.
	leading func() bool
	// failed is told of the write that failed, on a leader or a follower
	// alike: raft only logs a follower's and goes on, lagging for good.
	failed func(error)

	mu      sync.Mutex
	changed *sync.Cond  // queue, durable, err or closed changed
	queue   []*raft.Log // stored by raft, not yet handed to the writer
	writing []*raft.Log // being written now
	durable atomic.Uint64
	// err is the write that failed: the store takes nothing more, and no
	// entry past durable is ever applied here.
	err    error
	closed bool
	done   chan struct{} // closed when the writer has ended
	// timed, when set, times each write.
	timed *histogram.Histogram
}

var errLogClosed = errors.New("replication: the log store is closed")

// NewLog wraps store and starts the writer. leading reports whether raft
// runs its leader loop, the goroutine that calls StoreLogs as a leader;
// failed is told of a write that failed, after which the log takes nothing
// more; timed, when set, times each write.
func NewLog(store raft.LogStore, leading func() bool, failed func(error), timed *histogram.Histogram) (*Log, error) {
	last, err := store.LastIndex()
	if err != nil {
		return nil, err
	}
	s := &Log{LogStore: store, leading: leading, failed: failed, timed: timed, done: make(chan struct{})}
	s.changed = sync.NewCond(&s.mu)
	s.durable.Store(last)
	go s.write()
	return s, nil
}

// StoreLog stores one entry; see StoreLogs.
func (s *Log) StoreLog(l *raft.Log) error { return s.StoreLogs([]*raft.Log{l}) }

// StoreLogs queues a leader's command entries and returns; anything else it
// writes before it returns, after what is queued.
func (s *Log) StoreLogs(logs []*raft.Log) error {
	if len(logs) == 0 {
		return nil
	}
	background := s.leading()
	for _, l := range logs {
		if l.Type != raft.LogCommand {
			background = false
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.usable(); err != nil {
		return err
	}
	s.queue = append(s.queue, logs...)
	s.changed.Broadcast()
	if background {
		return nil
	}
	return s.waitLocked(logs[len(logs)-1].Index, true)
}

// usable returns why the store takes nothing more, if it does not. mu is held.
func (s *Log) usable() error {
	switch {
	case s.err != nil:
		return s.err
	case s.closed:
		return errLogClosed
	}
	return nil
}

// Failure returns the write that failed, if one did.
func (s *Log) Failure() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// waitLocked waits until the entries up to index are durable and, with
// drain, nothing is queued or being written. mu is held.
func (s *Log) waitLocked(index uint64, drain bool) error {
	for s.durable.Load() < index || drain && len(s.queue)+len(s.writing) > 0 {
		if err := s.usable(); err != nil {
			return err
		}
		s.changed.Wait()
	}
	return nil
}

// WaitDurable waits until every entry up to index is on disk. It fails if a
// write failed or the store closed first: the entries past the durable index
// must then never be applied.
func (s *Log) WaitDurable(index uint64) error {
	if s.durable.Load() >= index {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.waitLocked(index, false)
}

// write is the writer: it writes what is queued, in order, as one batch.
func (s *Log) write() {
	defer close(s.done)
	s.mu.Lock()
	defer s.mu.Unlock()
	for {
		for len(s.queue) == 0 && !s.closed {
			s.changed.Wait()
		}
		if len(s.queue) == 0 || s.err != nil {
			return // closed, with nothing left to write
		}
		s.writing, s.queue = s.queue, nil
		s.mu.Unlock()
		began := time.Now()
		err := s.LogStore.StoreLogs(s.writing)
		if s.timed != nil {
			s.timed.Observe(int64(time.Since(began)))
		}
		s.mu.Lock()
		if err != nil {
			s.err = fmt.Errorf("replication: write the raft log: %w", err)
		} else {
			s.durable.Store(s.writing[len(s.writing)-1].Index)
		}
		s.writing = nil
		s.changed.Broadcast()
		if err != nil {
			s.mu.Unlock()
			s.failed(s.err)
			s.mu.Lock()
		}
	}
}

// unwritten returns the indexes of the first and last entries not yet
// written (being written, then queued: they follow one another), if any. mu
// is held.
func (s *Log) unwritten() (first, last uint64, ok bool) {
	if len(s.writing)+len(s.queue) == 0 {
		return 0, 0, false
	}
	if len(s.writing) > 0 {
		first = s.writing[0].Index
	} else {
		first = s.queue[0].Index
	}
	if n := len(s.queue); n > 0 {
		last = s.queue[n-1].Index
	} else {
		last = s.writing[len(s.writing)-1].Index
	}
	return first, last, true
}

// GetLog reads an entry, queued or durable.
func (s *Log) GetLog(index uint64, l *raft.Log) error {
	s.mu.Lock()
	for _, q := range [2][]*raft.Log{s.queue, s.writing} {
		if e := entryAt(q, index); e != nil {
			*l = *e
			s.mu.Unlock()
			return nil
		}
	}
	s.mu.Unlock()
	return s.LogStore.GetLog(index, l)
}

// entryAt returns the entry at index in run, entries of consecutive indexes,
// or nil when run does not reach it.
func entryAt(run []*raft.Log, index uint64) *raft.Log {
	if n := len(run); n > 0 && run[0].Index <= index && index <= run[n-1].Index {
		return run[index-run[0].Index]
	}
	return nil
}

// FirstIndex returns the first index in the log, queued entries included.
func (s *Log) FirstIndex() (uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	first, err := s.LogStore.FirstIndex()
	if err != nil || first != 0 {
		return first, err
	}
	first, _, _ = s.unwritten()
	return first, nil
}

// LastIndex returns the last index in the log, queued entries included.
func (s *Log) LastIndex() (uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, last, ok := s.unwritten(); ok {
		return last, nil
	}
	return s.LogStore.LastIndex()
}

// DeleteRange deletes entries: the head after a snapshot, from raft's
// snapshot goroutine beside the writer; or, on a follower, the tail that
// conflicts with its leader's log, which waits for the queue, as any range
// that reaches a queued entry does.
func (s *Log) DeleteRange(min, max uint64) error {
	s.mu.Lock()
	if first, _, ok := s.unwritten(); ok && first <= max {
		if err := s.waitLocked(0, true); err != nil {
			s.mu.Unlock()
			return err
		}
	}
	s.mu.Unlock()
	if err := s.LogStore.DeleteRange(min, max); err != nil {
		return err
	}
	// The entries from min on are no longer durable; a head that reaches the
	// durable index only makes it lag until the next write, which is safe.
	s.mu.Lock()
	if d := s.durable.Load(); min <= d && d <= max {
		s.durable.Store(min - 1)
	}
	s.mu.Unlock()
	return nil
}

// IsMonotonic tells raft that the log admits no gap: after installing a
// snapshot it deletes the whole log rather than leave old entries before the
// new ones, which a restart would read as entries lost between them (see
// checkedStore.verify).
func (s *Log) IsMonotonic() bool { return true }

// Close writes what is queued and stops the writer. Raft must have shut down.
func (s *Log) Close() error {
	s.mu.Lock()
	s.closed = true
	s.changed.Broadcast()
	s.mu.Unlock()
	<-s.done
	return nil
}

// CommitTransport returns t as hashicorp/raft must see it: the commit index
// in the entries a leader sends is cut to what the leader holds on disk.
func (s *Log) CommitTransport(t raft.Transport) raft.Transport {
	return newCommitTransport(t, &s.durable)
}

// commitTransport is a transport whose AppendEntries carry a commit index
// cut to a durable index (see Log).
type commitTransport struct {
	raft.Transport
	durable *atomic.Uint64
}

// preVoteTransport is a commitTransport over a transport that supports
// pre-vote, which raft uses only when the transport it is given does.
type preVoteTransport struct{ *commitTransport }

func newCommitTransport(t raft.Transport, durable *atomic.Uint64) raft.Transport {
	ct := &commitTransport{Transport: t, durable: durable}
	if _, ok := t.(raft.WithPreVote); ok {
		return preVoteTransport{ct}
	}
	return ct
}

func (t *commitTransport) clamp(args *raft.AppendEntriesRequest) *raft.AppendEntriesRequest {
	if d := t.durable.Load(); args.LeaderCommitIndex > d {
		cut := *args
		cut.LeaderCommitIndex = d
		return &cut
	}
	return args
}

func (t *commitTransport) AppendEntries(id raft.ServerID, target raft.ServerAddress, args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) error {
	return t.Transport.AppendEntries(id, target, t.clamp(args), resp)
}

func (t *commitTransport) AppendEntriesPipeline(id raft.ServerID, target raft.ServerAddress) (raft.AppendPipeline, error) {
	p, err := t.Transport.AppendEntriesPipeline(id, target)
	if err != nil {
		return nil, err
	}
	return commitPipeline{p, t}, nil
}

// Close closes the transport when raft shuts down, if it can be closed.
func (t *commitTransport) Close() error {
	if c, ok := t.Transport.(raft.WithClose); ok {
		return c.Close()
	}
	return nil
}

func (t preVoteTransport) RequestPreVote(id raft.ServerID, target raft.ServerAddress, args *raft.RequestPreVoteRequest, resp *raft.RequestPreVoteResponse) error {
	return t.Transport.(raft.WithPreVote).RequestPreVote(id, target, args, resp)
}

type commitPipeline struct {
	raft.AppendPipeline
	t *commitTransport
}

func (p commitPipeline) AppendEntries(args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) (raft.AppendFuture, error) {
	return p.AppendPipeline.AppendEntries(p.t.clamp(args), resp)
}

package storage

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/lockserver/lockserver/replication/internal/storage/storagetest"
)

// testLog is a Log over memory whose leading flag and writes the test
// controls.
func testLog(t *testing.T) (*Log, *storagetest.GatedStore, *atomic.Bool) {
	t.Helper()
	g := &storagetest.GatedStore{LogStore: raft.NewInmemStore()}
	var leading atomic.Bool
	s, err := NewLog(g, leading.Load, func(error) {}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Release(false); s.Close() })
	return s, g, &leading
}

func entries(from, to uint64, typ raft.LogType) []*raft.Log {
	var logs []*raft.Log
	for i := from; i <= to; i++ {
		logs = append(logs, &raft.Log{Index: i, Term: 1, Type: typ, Data: []byte{byte(i)}})
	}
	return logs
}

// returns reports whether f returns within a moment.
func returns(f func()) bool {
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	select {
	case <-done:
		return true
	case <-time.After(100 * time.Millisecond):
		return false
	}
}

// A leader's commands are queued and readable at once, and durable once
// written; anything else is written before StoreLogs returns, in order.
func TestLogStoreLeaderWritesInBackground(t *testing.T) {
	s, g, leading := testLog(t)
	leading.Store(true)
	g.Hold()
	if !returns(func() { s.StoreLogs(entries(1, 3, raft.LogCommand)) }) {
		t.Fatal("a leader's StoreLogs of commands waited for the disk")
	}
	var l raft.Log
	if err := s.GetLog(2, &l); err != nil || l.Data[0] != 2 {
		t.Fatalf("GetLog(2) of a queued entry = %+v, %v", l, err)
	}
	first, _ := s.FirstIndex()
	last, _ := s.LastIndex()
	if first != 1 || last != 3 {
		t.Fatalf("first, last = %d, %d; want 1, 3", first, last)
	}
	if got := s.durable.Load(); got != 0 {
		t.Fatalf("durable = %d before any write", got)
	}
	if returns(func() { s.WaitDurable(3) }) {
		t.Fatal("waitDurable returned before the write")
	}
	// A configuration entry waits for the queue and for its own write.
	stored := make(chan error, 1)
	go func() { stored <- s.StoreLogs(entries(4, 4, raft.LogConfiguration)) }()
	select {
	case err := <-stored:
		t.Fatalf("StoreLogs of a configuration entry returned %v before the disk had it", err)
	case <-time.After(100 * time.Millisecond):
	}
	g.Release(false)
	if err := <-stored; err != nil {
		t.Fatal(err)
	}
	if err := s.WaitDurable(4); err != nil {
		t.Fatal(err)
	}
	for i := uint64(1); i <= 4; i++ {
		if err := g.LogStore.GetLog(i, &l); err != nil || l.Index != i {
			t.Fatalf("entry %d on disk: %+v, %v", i, l, err)
		}
	}
}

// A follower's writes are on disk when StoreLogs returns: it answers its
// leader after that.
func TestLogStoreFollowerWritesAtOnce(t *testing.T) {
	s, g, _ := testLog(t)
	g.Hold()
	if returns(func() { s.StoreLogs(entries(1, 2, raft.LogCommand)) }) {
		t.Fatal("a follower's StoreLogs returned before the disk had the entries")
	}
	g.Release(false)
	if err := s.WaitDurable(2); err != nil {
		t.Fatal(err)
	}
}

// Deleting the tail waits for queued entries and takes the durable index
// back; deleting the head goes beside the writer.
func TestLogStoreDeleteRange(t *testing.T) {
	s, g, leading := testLog(t)
	leading.Store(true)
	s.StoreLogs(entries(1, 10, raft.LogCommand))
	if err := s.WaitDurable(10); err != nil {
		t.Fatal(err)
	}
	g.Hold()
	s.StoreLogs(entries(11, 12, raft.LogCommand))
	if !returns(func() { s.DeleteRange(1, 5) }) {
		t.Fatal("deleting the head waited for the queue")
	}
	if first, _ := s.FirstIndex(); first != 6 {
		t.Fatalf("first index after deleting the head = %d, want 6", first)
	}
	leading.Store(false)
	deleted := make(chan error, 1)
	go func() { deleted <- s.DeleteRange(9, 12) }()
	select {
	case err := <-deleted:
		t.Fatalf("deleting queued entries returned %v before they were written", err)
	case <-time.After(100 * time.Millisecond):
	}
	g.Release(false)
	if err := <-deleted; err != nil {
		t.Fatal(err)
	}
	if last, _ := s.LastIndex(); last != 8 {
		t.Fatalf("last index = %d, want 8", last)
	}
	if got := s.durable.Load(); got != 8 {
		t.Fatalf("durable = %d after deleting 9-12, want 8", got)
	}
}

// After a failed write the store takes nothing more, and what was not
// written is never reported durable.
func TestLogStoreWriteFailure(t *testing.T) {
	s, g, leading := testLog(t)
	leading.Store(true)
	g.Hold()
	s.StoreLogs(entries(1, 2, raft.LogCommand))
	g.Release(true)
	if err := s.WaitDurable(2); err == nil {
		t.Fatal("waitDurable succeeded for entries whose write failed")
	}
	if err := s.StoreLogs(entries(3, 3, raft.LogCommand)); err == nil {
		t.Fatal("StoreLogs succeeded after a failed write")
	}
	if got := s.durable.Load(); got != 0 {
		t.Fatalf("durable = %d after a failed write", got)
	}
}

// Close writes what is queued.
func TestLogStoreCloseWritesTheQueue(t *testing.T) {
	s, g, leading := testLog(t)
	leading.Store(true)
	g.Hold()
	s.StoreLogs(entries(1, 3, raft.LogCommand))
	closed := make(chan error, 1)
	go func() { closed <- s.Close() }()
	g.Release(false)
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	if last, _ := g.LogStore.LastIndex(); last != 3 {
		t.Fatalf("last index on disk after Close = %d, want 3", last)
	}
	if err := s.StoreLogs(entries(4, 4, raft.LogCommand)); !errors.Is(err, errLogClosed) {
		t.Fatalf("StoreLogs after Close = %v, want %v", err, errLogClosed)
	}
}

// recordingTransport records the AppendEntries requests it is asked to send.
type recordingTransport struct {
	raft.Transport
	sent []*raft.AppendEntriesRequest
}

func (t *recordingTransport) AppendEntries(_ raft.ServerID, _ raft.ServerAddress, args *raft.AppendEntriesRequest, _ *raft.AppendEntriesResponse) error {
	t.sent = append(t.sent, args)
	return nil
}

// The commit index a node sends is cut to what it holds on disk.
func TestCommitTransportCutsTheCommitIndex(t *testing.T) {
	_, inmem := raft.NewInmemTransport("")
	rec := &recordingTransport{Transport: inmem}
	var durable atomic.Uint64
	tr := newCommitTransport(rec, &durable)
	if _, ok := tr.(raft.WithPreVote); ok {
		t.Fatal("pre-vote claimed over a transport without it")
	}
	if _, ok := newCommitTransport(inmem, &durable).(raft.WithPreVote); !ok {
		t.Fatal("pre-vote lost over a transport with it")
	}
	durable.Store(7)
	for _, commit := range []uint64{5, 7, 9} {
		args := &raft.AppendEntriesRequest{LeaderCommitIndex: commit, PrevLogEntry: 4}
		tr.AppendEntries("n2", "n2", args, &raft.AppendEntriesResponse{})
		got := rec.sent[len(rec.sent)-1]
		if want := min(commit, 7); got.LeaderCommitIndex != want || got.PrevLogEntry != 4 {
			t.Fatalf("commit %d with 7 on disk: sent %+v, want commit index %d", commit, got, want)
		}
		if args.LeaderCommitIndex != commit {
			t.Fatalf("the caller's request was changed: %+v", args)
		}
	}
}

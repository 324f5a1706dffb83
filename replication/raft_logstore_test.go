package replication

import (
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/lockserver/lockserver/internal/attempt"
	"github.com/lockserver/lockserver/keyspace"
)

// The leader's write of an entry runs beside its replication, and raft
// counts the leader at once; yet no one sees the entry before a majority
// holds it on disk. Here the leader's disk stalls while one follower stores
// the entry and raft commits it: the client is not answered and no state
// machine applies it. The leader then crashes before the write, so only that
// follower holds the entry; the other two elect a leader without it and
// overwrite it. Every node must end with the same state, in which the entry
// never happened. Had the follower applied it on the stalled leader's word,
// its counter would now be one ahead of the others'.
func TestClusterLeaderDiskStallLosesNothingAcknowledged(t *testing.T) {
	attempt.Run(t, func(t testing.TB) {
		c := newTestCluster(t, 3)
		l := c.leader()
		fs := c.followers(l)
		a, b := fs[0], fs[1]
		wantReply(t, "INCR", do(l, 0, "INCR", "n"), keyspace.Int(1))
		for _, f := range fs {
			c.eventually(f.id+" applies the first INCR", func() bool { return same(localGet(f, "n"), keyspace.Bulk("1")) })
		}

		c.cutPair(l, b)
		l.gate.hold()
		t.Cleanup(func() { l.gate.release(true) }) // before the cluster closes, should the test fail
		req := &Request{Cmds: [][][]byte{words("INCR", "n")}}
		l.eng.Submit(req)
		c.eventually("the leader's write to stall", func() bool { return l.gate.waiting.Load() > 0 })
		index := l.eng.raft.LastIndex()
		c.eventually("raft to commit the entry with one follower", func() bool {
			last, _ := a.store.LastIndex()
			return last >= index && l.eng.raft.CommitIndex() >= index
		})
		// Long enough for raft to tell the follower of the commit many times over
		// (CommitTimeout is 5 ms) if nothing held it back.
		time.Sleep(200 * time.Millisecond)
		if req.Ready() {
			t.Fatalf("the client was answered %+v before the leader had the entry on disk", req.Wait(t.Context()))
		}
		for _, n := range []*testNode{l, a} {
			wantReply(t, n.id+"'s n while the entry is on one disk of three", localGet(n, "n"), keyspace.Bulk("1"))
			if got := n.eng.applied.Load(); got >= index {
				t.Fatalf("%s applied index %d, which only one disk holds", n.id, got)
			}
		}

		// The crash: the stalled write is lost, and the node stops.
		attempt.Own(t)
		stopped := make(chan struct{})
		go func() {
			defer close(stopped)
			l.stop()
		}()
		l.gate.release(true)
		<-stopped
		wantErrPrefix(t, "the client of the lost entry", req.Wait(t.Context()), "UNKNOWN", "ERR the node is shutting down")
		if got, _ := l.store.LastIndex(); got >= index {
			t.Fatalf("the crashed leader's log reaches %d, want below %d", got, index)
		}

		// The two nodes without the entry elect a leader and write over it.
		c.partition(a)
		l.restart()
		c.heal()
		c.partition(a)
		l2 := c.leader()
		if l2 == a {
			t.Fatal("the isolated follower leads")
		}
		wantReply(t, "INCR on the new leader", c.incr(l2, "n", 2), keyspace.Int(2))
		c.heal()
		for _, n := range c.nodes {
			c.eventually(n.id+" converges", func() bool { return same(localGet(n, "n"), keyspace.Bulk("2")) })
		}
		wantReply(t, "INCR after healing", c.incr(c.leader(), "n", 3), keyspace.Int(3))
		for _, n := range c.nodes {
			c.eventually(n.id+" applies the last INCR", func() bool { return same(localGet(n, "n"), keyspace.Bulk("3")) })
		}
	})
}

// A node whose log cannot be written stops: it applies nothing more and
// answers no more commands, rather than serve a state that its disk lacks.
func TestClusterLogWriteFailureStopsTheNode(t *testing.T) {
	attempt.Run(t, func(t testing.TB) {
		c := newTestCluster(t, 3)
		l := c.leader()
		wantReply(t, "SET", do(l, 0, "SET", "k", "v1"), keyspace.OK)
		l.gate.hold()
		t.Cleanup(func() { l.gate.release(true) })
		req := &Request{Cmds: [][][]byte{words("SET", "k", "v2")}}
		l.eng.Submit(req)
		c.eventually("the leader's write to stall", func() bool { return l.gate.waiting.Load() > 0 })
		l.gate.release(true)
		wantErrPrefix(t, "the SET whose write failed", req.Wait(t.Context()), "UNKNOWN", "ERR the node is shutting down")
		attempt.Own(t) // the node stops: the others elect a leader
		c.eventually("the node to stop", func() bool { return l.eng.closed.Load() })
		select {
		case err := <-l.eng.Fault():
			if err == nil {
				t.Error("Fault received nil")
			}
		default:
			t.Error("the failed node reported no fault")
		}
		wantReply(t, "k on the failed node", localGet(l, "k"), keyspace.Bulk("v1"))
		if _, err := (*fsm)(l.eng).Snapshot(); err == nil {
			t.Error("the failed node took a snapshot of a state that skipped entries")
		}
		wantErrPrefix(t, "a command on the failed node", do(l, 0, "GET", "k"), "ERR the node is shutting down")
		// The others go on without it.
		l2 := c.leader()
		if l2 == l {
			t.Fatal("the failed node still leads")
		}
		wantReply(t, "SET on the new leader", c.set(l2, 0, "k", "v3"), keyspace.OK)
	})
}

// A follower whose log cannot be written stops too, as the leader does:
// hashicorp/raft only logs a follower's failed write and goes on, and the
// follower stayed up, lagging for good and answering clients.
func TestClusterFollowerLogWriteFailureStopsTheNode(t *testing.T) {
	c := newTestCluster(t, 3)
	l := c.leader()
	f := c.followers(l)[0]
	wantReply(t, "SET", do(l, 0, "SET", "k", "v1"), keyspace.OK)
	c.eventually(f.id+" applies the first SET", func() bool { return same(localGet(f, "k"), keyspace.Bulk("v1")) })
	f.gate.hold()
	f.gate.release(true) // every write fails from now on, as on a full disk
	wantReply(t, "SET while the follower's disk is full", do(l, 0, "SET", "k", "v2"), keyspace.OK)
	c.eventually("the follower to stop", func() bool { return f.eng.closed.Load() })
	select {
	case err := <-f.eng.Fault():
		if err == nil || !strings.Contains(err.Error(), "the write was lost") {
			t.Errorf("Fault received %v, want the failed write", err)
		}
	default:
		t.Error("the failed follower reported no fault")
	}
	wantReply(t, "k on the failed follower", localGet(f, "k"), keyspace.Bulk("v1"))
	wantReply(t, "SET with the other follower", do(c.leader(), 0, "SET", "k", "v3"), keyspace.OK)
}

// testLog is a logStore over memory whose leading flag and writes the test
// controls.
func testLog(t *testing.T) (*logStore, *gatedStore, *atomic.Bool) {
	t.Helper()
	g := &gatedStore{LogStore: raft.NewInmemStore()}
	var leading atomic.Bool
	s, err := newLogStore(g, leading.Load, func(error) {}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.release(false); s.Close() })
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
	g.hold()
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
	if returns(func() { s.waitDurable(3) }) {
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
	g.release(false)
	if err := <-stored; err != nil {
		t.Fatal(err)
	}
	if err := s.waitDurable(4); err != nil {
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
	g.hold()
	if returns(func() { s.StoreLogs(entries(1, 2, raft.LogCommand)) }) {
		t.Fatal("a follower's StoreLogs returned before the disk had the entries")
	}
	g.release(false)
	if err := s.waitDurable(2); err != nil {
		t.Fatal(err)
	}
}

// Deleting the tail waits for queued entries and takes the durable index
// back; deleting the head goes beside the writer.
func TestLogStoreDeleteRange(t *testing.T) {
	s, g, leading := testLog(t)
	leading.Store(true)
	s.StoreLogs(entries(1, 10, raft.LogCommand))
	if err := s.waitDurable(10); err != nil {
		t.Fatal(err)
	}
	g.hold()
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
	g.release(false)
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
	g.hold()
	s.StoreLogs(entries(1, 2, raft.LogCommand))
	g.release(true)
	if err := s.waitDurable(2); err == nil {
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
	g.hold()
	s.StoreLogs(entries(1, 3, raft.LogCommand))
	closed := make(chan error, 1)
	go func() { closed <- s.Close() }()
	g.release(false)
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

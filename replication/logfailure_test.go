package replication

import (
	"strings"
	"testing"
	"time"

	"github.com/lockserver/lockserver/internal/attempt"
	"github.com/lockserver/lockserver/internal/testenv"
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
		l.gate.Hold()
		t.Cleanup(func() { l.gate.Release(true) }) // before the cluster closes, should the test fail
		req := &Request{Cmds: [][][]byte{words("INCR", "n")}}
		l.eng.Submit(req)
		c.eventually("the leader's write to stall", func() bool { return l.gate.Waiting() > 0 })
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
		l.gate.Release(true)
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
		for _, n := range c.Nodes {
			c.eventually(n.id+" converges", func() bool { return same(localGet(n, "n"), keyspace.Bulk("2")) })
		}
		wantReply(t, "INCR after healing", c.incr(c.leader(), "n", 3), keyspace.Int(3))
		for _, n := range c.Nodes {
			c.eventually(n.id+" applies the last INCR", func() bool { return same(localGet(n, "n"), keyspace.Bulk("3")) })
		}
	})
}

// A node whose log cannot be written stops: it applies nothing more and
// answers no more commands, rather than serve a state that its disk lacks.
func TestClusterLogWriteFailureStopsTheNode(t *testing.T) {
	testenv.Long(t)
	attempt.Run(t, func(t testing.TB) {
		c := newTestCluster(t, 3)
		l := c.leader()
		wantReply(t, "SET", do(l, 0, "SET", "k", "v1"), keyspace.OK)
		l.gate.Hold()
		t.Cleanup(func() { l.gate.Release(true) })
		req := &Request{Cmds: [][][]byte{words("SET", "k", "v2")}}
		l.eng.Submit(req)
		c.eventually("the leader's write to stall", func() bool { return l.gate.Waiting() > 0 })
		l.gate.Release(true)
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
	testenv.Long(t)
	c := newTestCluster(t, 3)
	l := c.leader()
	f := c.followers(l)[0]
	wantReply(t, "SET", do(l, 0, "SET", "k", "v1"), keyspace.OK)
	c.eventually(f.id+" applies the first SET", func() bool { return same(localGet(f, "k"), keyspace.Bulk("v1")) })
	f.gate.Hold()
	f.gate.Release(true) // every write fails from now on, as on a full disk
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

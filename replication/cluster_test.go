package replication

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/lockserver/lockserver/keyspace"
)

func same(a, b keyspace.Reply) bool { return fmt.Sprint(a) == fmt.Sprint(b) }

func wantReply(t *testing.T, what string, got, want keyspace.Reply) {
	t.Helper()
	if !same(got, want) {
		t.Fatalf("%s = %+v, want %+v", what, got, want)
	}
}

func wantErrPrefix(t *testing.T, what string, got keyspace.Reply, prefixes ...string) {
	t.Helper()
	for _, p := range prefixes {
		if got.Kind == keyspace.KindError && strings.HasPrefix(got.Str, p) {
			return
		}
	}
	t.Fatalf("%s = %+v, want an error starting with one of %q", what, got, prefixes)
}

// A write acknowledged by the leader is on every node, survives the loss of
// the leader, and a restarted node catches up from its own log.
func TestClusterWritesSurviveLeaderLoss(t *testing.T) {
	c := newTestCluster(t, 3)
	l := c.leader()
	wantReply(t, "SET on the leader", do(l, 0, "SET", "k", "v1"), keyspace.OK)
	for _, f := range c.followers(l) {
		c.eventually(f.id+" applies k", func() bool { return same(localGet(f, "k"), keyspace.Bulk("v1")) })
	}

	l.stop()
	l2 := c.leader()
	if l2 == l {
		t.Fatal("the stopped node still leads")
	}
	wantReply(t, "GET on the new leader", do(l2, 0, "GET", "k"), keyspace.Bulk("v1"))
	wantReply(t, "SET on the new leader", do(l2, 0, "SET", "k2", "v2"), keyspace.OK)

	l.start(RaftOptions{})
	c.eventually("the restarted node applies k2", func() bool { return same(localGet(l, "k2"), keyspace.Bulk("v2")) })
	wantReply(t, "GET k on the restarted node", localGet(l, "k"), keyspace.Bulk("v1"))
}

// A pipeline keeps its order on the leader and through a follower: each GET
// sees exactly the INCRs submitted before it, none after, and a transaction
// runs as one entry.
func TestClusterPipelineOrder(t *testing.T) {
	c := newTestCluster(t, 3)
	l := c.leader()
	for _, n := range []*testNode{l, c.followers(l)[0]} {
		key := "counter-" + n.id
		var reqs []*Request
		for range 50 {
			for _, cmd := range [][]string{{"INCR", key}, {"GET", key}} {
				req := &Request{Cmds: [][][]byte{words(cmd...)}}
				n.eng.Submit(req)
				reqs = append(reqs, req)
			}
		}
		multi := &Request{Multi: true, Cmds: [][][]byte{words("INCR", key), words("GET", key)}}
		n.eng.Submit(multi)
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		for i, req := range reqs {
			want := keyspace.Int(int64(i/2 + 1))
			if i%2 == 1 {
				want = keyspace.Bulk(fmt.Sprint(i/2 + 1))
			}
			wantReply(t, fmt.Sprintf("%s: reply %d", n.id, i), req.Wait(ctx), want)
		}
		wantReply(t, n.id+": EXEC", multi.Wait(ctx), keyspace.Array(keyspace.Int(51), keyspace.Bulk("51")))
		cancel()
	}
}

// WATCH through a follower reads the versions on the leader, and an EXEC whose
// watched key changed in between runs nothing.
func TestClusterWatch(t *testing.T) {
	c := newTestCluster(t, 3)
	l := c.leader()
	f := c.followers(l)[0]
	watch := func() []Watch {
		req := &Request{WatchKeys: []string{"w"}}
		f.eng.Submit(req)
		r := waitReply(req)
		if r.Kind != keyspace.KindArray || len(r.Elems) != 1 {
			t.Fatalf("WATCH versions = %+v", r)
		}
		return []Watch{{DB: 0, Key: "w", Version: uint64(r.Elems[0].Int)}}
	}
	exec := func(ws []Watch) keyspace.Reply {
		req := &Request{Multi: true, Watch: ws, Cmds: [][][]byte{words("SET", "w", "mine")}}
		f.eng.Submit(req)
		return waitReply(req)
	}
	ws := watch()
	wantReply(t, "SET w by another client", do(l, 0, "SET", "w", "theirs"), keyspace.OK)
	wantReply(t, "EXEC after the watched key changed", exec(ws), keyspace.NullArray)
	wantReply(t, "EXEC with a fresh WATCH", exec(watch()), keyspace.Array(keyspace.OK))
	wantReply(t, "GET w", do(f, 0, "GET", "w"), keyspace.Bulk("mine"))
}

func waitReply(req *Request) keyspace.Reply {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	return req.Wait(ctx)
}

// A leader cut off from the others answers no read from its old state: the
// reads fail (nothing was written, so with a code clients retry), and after
// the majority elected a leader and wrote, the cut-off node never returns the
// old value.
func TestClusterNoStaleReadFromDeposedLeader(t *testing.T) {
	c := newTestCluster(t, 3)
	old := c.leader()
	wantReply(t, "SET k old", do(old, 0, "SET", "k", "old"), keyspace.OK)

	c.partition(old)
	// At once, before it notices: the read runs, but no VerifyLeader round confirms it.
	wantErrPrefix(t, "GET on the partitioned leader", do(old, 0, "GET", "k"), "TRYAGAIN", "CLUSTERDOWN")

	l := c.leader()
	wantReply(t, "SET k new on the majority", do(l, 0, "SET", "k", "new"), keyspace.OK)
	wantErrPrefix(t, "GET on the cut-off node", do(old, 0, "GET", "k"), "TRYAGAIN", "CLUSTERDOWN")

	c.heal()
	c.eventually("the healed node serves the new value", func() bool {
		return same(do(old, 0, "GET", "k"), keyspace.Bulk("new"))
	})
}

// A write proposed by a leader that loses its majority before the commit has
// an unknown outcome, and says so with a code that clients do not retry.
func TestClusterUnknownOutcome(t *testing.T) {
	c := newTestCluster(t, 3)
	l := c.leader()
	c.partition(l)
	r := do(l, 0, "SET", "k", "maybe")
	wantErrPrefix(t, "SET on a leader that lost its majority", r, "UNKNOWN")
	if !strings.Contains(r.Str, "may or may not") {
		t.Fatalf("the unknown-outcome error does not say so: %q", r.Str)
	}
}

// Messages published by an entry are delivered once on every node, the
// followers' included, and a restarted node delivers nothing as it replays.
func TestClusterPubSub(t *testing.T) {
	c := newTestCluster(t, 3)
	l := c.leader()
	f := c.followers(l)[0]
	do(f, 0, "PUBLISH", "ch", "m1")
	do(l, 0, "PUBLISH", "ch", "m2")
	want := "[ch:m1 ch:m2]"
	for _, n := range c.nodes {
		c.eventually(n.id+" delivers both messages", func() bool { return fmt.Sprint(n.hub.messages()) == want })
	}

	f.stop()
	f.hub = &recordingHub{}
	f.start(RaftOptions{})
	do(l, 0, "PUBLISH", "ch", "m3")
	c.eventually("the restarted node delivers the new message", func() bool { return len(f.hub.messages()) > 0 })
	if got := fmt.Sprint(f.hub.messages()); got != "[ch:m3]" {
		t.Fatalf("the restarted node delivered %s, want only [ch:m3]: replayed entries must not deliver", got)
	}
}

package replication

import (
	"context"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/lockserver/lockserver/internal/testenv"
	"github.com/lockserver/lockserver/keyspace"
)

// A leader cut off from the others answers no read from its old state: the
// reads fail (nothing was written, so with a code clients retry), and after
// the majority elected a leader and wrote, the cut-off node never returns the
// old value.
func TestClusterNoStaleReadFromDeposedLeader(t *testing.T) {
	testenv.Long(t)
	c := newTestCluster(t, 3)
	old := c.leader()
	wantReply(t, "SET k old", c.set(old, 0, "k", "old"), keyspace.OK)

	c.partition(old)
	// At once, before it notices, the read may still be confirmed: a
	// heartbeat answered just before the cut can come back after the read
	// arrived, and hashicorp/raft's VerifyLeader counts it. That value is not
	// stale (no other leader can exist yet: the follower that answered heard
	// from this one just before the cut, and stands for election only after
	// an election timeout without hearing from it), so "old" or a retry code
	// are both right.
	if r := do(old, 0, "GET", "k"); !same(r, keyspace.Bulk("old")) {
		wantErrPrefix(t, "GET on the partitioned leader", r, "TRYAGAIN", "CLUSTERDOWN")
	}

	l := c.leader()
	wantReply(t, "SET k new on the majority", c.set(l, 0, "k", "new"), keyspace.OK)
	wantErrPrefix(t, "GET on the cut-off node", do(old, 0, "GET", "k"), "TRYAGAIN", "CLUSTERDOWN")

	c.heal()
	c.eventually("the healed node serves the new value", func() bool {
		return same(do(old, 0, "GET", "k"), keyspace.Bulk("new"))
	})
}

// A leader that has not noticed yet that it was deposed (a paused process:
// it has not run its lease check since) must not answer a read from its own
// state once another leader has taken a write that changes the value. Its
// leadership check before each answer (VerifyLeader) is all that tells it.
// The node stands in for a paused process with a lease far longer than the
// others' failure detection: it goes on believing that it leads for seconds
// after the others have elected another leader and written.
func TestClusterNoStaleReadFromLeaderThatHasNotNoticed(t *testing.T) {
	testenv.Long(t)
	const lease = 12 * time.Second
	c := newTestCluster(t, 3)
	paused := c.followers(c.leader())[0]
	paused.stop()
	paused.start(RaftOptions{HeartbeatTimeout: lease, ElectionTimeout: lease})
	for try := 1; ; try++ {
		c.heal()
		wantReply(t, "SET k old", c.set(c.leader(), 0, "k", "old"), keyspace.OK)
		// It takes over, and has applied k.
		c.eventually(paused.id+" to lead", func() bool {
			if l := c.leading(); l != nil && l != paused {
				l.eng.raft.LeadershipTransferToServer(raft.ServerID(paused.id), raft.ServerAddress(paused.raftAddr())).Error()
			}
			return c.leading() == paused && paused.eng.leading()
		})
		wantReply(t, "GET k on "+paused.id+" while it leads", c.do(paused, 0, "GET", "k"), keyspace.Bulk("old"))
		// Nothing of its own may be in flight at the read: a read waits
		// behind the node's proposals, and fails with them when they cannot
		// commit, whatever VerifyLeader says. The members' registrations of
		// their addresses are such proposals.
		c.registered()
		c.eventually(paused.id+" to have nothing in flight", func() bool {
			paused.eng.localMu.Lock()
			defer paused.eng.localMu.Unlock()
			return len(paused.eng.local) == 0
		})

		c.partition(paused)
		l := c.leader()
		wantReply(t, "SET k new on the new leader "+l.id, c.set(l, 0, "k", "new"), keyspace.OK)
		// Only a node that still believes it leads tests the check: one that
		// stepped down (the machine was slower than its lease) forwards the
		// read, and finds no leader.
		believes := paused.eng.raft.State() == raft.Leader
		req := &Request{Cmds: [][][]byte{words("GET", "k")}}
		paused.eng.Submit(req)
		ctx, cancel := context.WithTimeout(context.Background(), 3*lease)
		r := req.Wait(ctx)
		cancel()
		if same(r, keyspace.Bulk("old")) {
			t.Fatalf("%s, deposed, answered GET k from its own state (old) after %s had written new", paused.id, l.id)
		}
		wantErrPrefix(t, "GET k on the deposed leader", r, "TRYAGAIN", "CLUSTERDOWN")
		if believes {
			return
		}
		if try == 3 {
			t.Fatalf("%s noticed it was cut off before the new leader wrote, %d times: the premise never held", paused.id, try)
		}
		t.Logf("attempt %d: %s had stepped down before the read", try, paused.id)
	}
}

package replication

import (
	"strings"
	"testing"

	"github.com/hashicorp/raft"
	"github.com/lockserver/lockserver/internal/attempt"
	"github.com/lockserver/lockserver/keyspace"
)

// A write proposed by a leader that loses its majority before the commit has
// an unknown outcome, and says so with a code that clients do not retry.
func TestClusterUnknownOutcome(t *testing.T) {
	c := newTestCluster(t, 3)
	for try := 1; ; try++ {
		l := c.leader()
		// Nothing of the leader's may be in flight when the partition starts:
		// a proposal queued behind a batch that never commits is refused
		// unsent (TRYAGAIN), rightly.
		c.eventually("every member registered", func() bool {
			for _, n := range c.Nodes {
				if l.eng.memberAddr(n.id) == "" {
					return false
				}
			}
			return true
		})
		wantReply(t, "SET before the partition", c.set(l, 0, "k", "sure"), keyspace.OK)
		c.partition(l)
		// Only a node that leads when the SET arrives proposes it; one that
		// lost the lead before the cut (a busy machine) forwards it, and
		// finds no leader: that is another test's case.
		leading := l.eng.raft.State() == raft.Leader
		r := do(l, 0, "SET", "k", "maybe")
		if !leading && try < attempt.Max {
			t.Logf("attempt %d: %s had lost the lead before the cut (%s)", try, l.id, r.Str)
			c.heal()
			continue
		}
		wantErrPrefix(t, "SET on a leader that lost its majority", r, "UNKNOWN")
		if !strings.Contains(r.Str, "may or may not") {
			t.Fatalf("the unknown-outcome error does not say so: %q", r.Str)
		}
		return
	}
}

// A forwarded write whose reply is lost has an unknown outcome, and says so;
// it did take effect here. A lost read is simply retried by the client.
func TestClusterUnknownOutcomeForwarded(t *testing.T) {
	attempt.Run(t, func(t testing.TB) {
		c := newTestCluster(t, 3)
		l := c.leader()
		f := c.followers(l)[0]
		c.loseReplies.Store(true)
		// CLUSTERDOWN (no leader known yet) says that nothing was sent.
		r := c.do(f, 0, "SET", "k", "v")
		wantErrPrefix(t, "a forwarded SET whose reply was lost", r, "UNKNOWN")
		wantErrPrefix(t, "a forwarded GET whose reply was lost", do(f, 0, "GET", "k"), "TRYAGAIN")
		c.loseReplies.Store(false)
		wantReply(t, "GET on the leader", c.do(l, 0, "GET", "k"), keyspace.Bulk("v"))
	})
}

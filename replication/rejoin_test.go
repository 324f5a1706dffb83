package replication

import (
	"testing"
	"time"

	"github.com/lockserver/lockserver/internal/clustertest"
	"github.com/lockserver/lockserver/internal/testenv"
	"github.com/lockserver/lockserver/keyspace"
)

// A member that lost its data and starts again with the bootstrap list it
// was created with (as a StatefulSet's pod does, its arguments fixed) asks
// the other voters first, and joins their cluster rather than bootstrap it
// again: bootstrapped, it would be a voter with an empty log, whose vote
// can elect a member that lacks committed writes. Here n3 is cut off while
// k is written, then n2 loses its data and n1 stops: n2's vote alone would
// make n3 the leader, without k.
//
// A member that never ran (it starts late, and its data is new) bootstraps
// with the others however late: it acknowledged nothing, and its vote
// cannot elect a stale candidate.
func TestWipedMemberGivenBootstrapJoins(t *testing.T) {
	testenv.Long(t)
	c := newTestCluster(t, 3)
	n1, n2, n3 := c.Nodes[0], c.Nodes[1], c.Nodes[2]
	// Every member has run, and every node knows it.
	c.registered()
	c.partition(n3)
	wantReply(t, "SET k", c.set(c.leader(), 0, "k", "committed"), keyspace.OK)
	n2.stop()
	n2.wipe()
	n1.stop()
	c.heal()

	opts := c.opts
	opts.Bootstrap = c.peers
	opts.JoinTimeout = 5 * time.Minute
	started := make(chan *Raft, 1)
	go func() {
		eng, err := n2.open(opts)
		if err != nil {
			t.Errorf("start n2: %v", err)
		}
		started <- eng
	}()
	// Long enough for n3 to win several elections, were n2 voting.
	for end := time.Now().Add(5 * clustertest.Election); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		if l := c.leading(); l == n3 {
			t.Fatalf("n3, which lacks k, leads: n2 voted for it with an empty log (k on n3: %v)", localGet(n3, "k"))
		}
	}
	n1.restart()
	eng := <-started
	if eng == nil {
		t.FailNow()
	}
	c.mu.Lock()
	n2.eng = eng
	c.mu.Unlock()
	for _, n := range c.Nodes {
		c.eventually(n.id+" to hold k", func() bool { return same(localGet(n, "k"), keyspace.Bulk("committed")) })
	}
}

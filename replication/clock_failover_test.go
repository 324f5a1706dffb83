package replication

import (
	"fmt"
	"testing"
	"time"

	"github.com/lockserver/lockserver/internal/logclock"
	"github.com/lockserver/lockserver/internal/testenv"
	"github.com/lockserver/lockserver/keyspace"
)

// Log clock across failovers between nodes whose wall clocks disagree by
// minutes. TestClusterClockWallJumps covers a leader whose wall clock jumps
// ahead and a successor that starts with a clock ahead; these cover a
// successor whose clock is behind, failing back and forth, and a whole
// cluster restarting.

// pttlOn returns key's PTTL on n, as clients see it.
func pttlOn(t testing.TB, c *testCluster, n *testNode, key string) int64 {
	t.Helper()
	r := c.do(n, 0, "PTTL", key)
	if r.Kind != keyspace.KindInt {
		t.Fatalf("PTTL %s on %s = %+v", key, n.id, r)
	}
	return r.Int
}

// leaseBounds checks that a lock taken with lease ms at real time since has
// as much left as it may: at least the lease less the real time since, the
// 1% by which the log clock may run fast (logclock.SlewRate) and a tolerance for
// scheduling; at most the lease.
func leaseBounds(t testing.TB, what string, pttl, lease int64, since time.Time) {
	t.Helper()
	elapsed := time.Since(since).Milliseconds()
	floor := lease - elapsed - int64(float64(elapsed)*logclock.SlewRate) - 250
	if pttl < floor || pttl > lease {
		t.Fatalf("%s: PTTL %d ms, %d ms after a lock with a %d ms lease was taken: want %d..%d",
			what, pttl, elapsed, lease, floor, lease)
	}
}

// tick writes through n every 20 ms for d, so that its clock stamps entries
// and the others follow them.
func tick(t testing.TB, c *testCluster, n *testNode, d time.Duration) {
	t.Helper()
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		wantReply(t, "tick on "+n.id, c.set(n, 0, "tick", n.id), keyspace.OK)
	}
}

// A leader's wall clock jumps 10 minutes ahead while it leads; the others'
// are 10 minutes behind. Failing over to a slow node and back to the fast one
// expires no lock early, never moves time backwards, and leaves a short lease
// to expire on time rather than never.
func TestClusterClockFailoverToSlowerNode(t *testing.T) {
	testenv.Long(t)
	c := newTestCluster(t, 3)
	l := c.leader()
	for _, f := range c.followers(l) {
		f.wallAdd.Store(int64(-10 * time.Minute))
	}
	const lease = 60000
	taken := time.Now()
	wantReply(t, "SET lock PX", c.set(l, 0, "lock", "owner", "PX", fmt.Sprint(lease)), keyspace.OK)
	l.wallAdd.Store(int64(10 * time.Minute))
	tick(t, c, l, 500*time.Millisecond)
	leaseBounds(t, "on the leader after its wall clock jumped 10 min ahead", pttlOn(t, c, l, "lock"), lease, taken)
	c.eventually("the followers apply the ticks", func() bool {
		for _, f := range c.followers(l) {
			if lastTime(f) < lastTime(l) {
				return false
			}
		}
		return true
	})

	before := lastTime(l)
	l.stop()
	slow := c.leader()
	wantReply(t, "GET lock on the slow new leader", c.do(slow, 0, "GET", "lock"), keyspace.Bulk("owner"))
	leaseBounds(t, "on a new leader 10 min behind", pttlOn(t, c, slow, "lock"), lease, taken)
	if got := lastTime(slow); got < before {
		t.Fatalf("time went backwards across the failover to the slow node: %d after %d", got, before)
	}
	// Time still runs on the slow node: a short lease taken there ends.
	wantReply(t, "SET short PX 1000", c.set(slow, 0, "short", "x", "PX", "1000"), keyspace.OK)
	tick(t, c, slow, 1500*time.Millisecond)
	wantReply(t, "GET short 1.5 s after a 1 s lease", c.do(slow, 0, "GET", "short"), keyspace.Null)
	leaseBounds(t, "on the slow leader 1.5 s later", pttlOn(t, c, slow, "lock"), lease, taken)

	// Back to the fast node: it restarts, catches up, and takes over.
	l.restart()
	c.eventually(l.id+" catches up", func() bool { return lastTime(l) >= lastTime(slow) })
	before = lastTime(slow)
	slow.stop()
	next := c.leader()
	tick(t, c, next, 300*time.Millisecond)
	wantReply(t, "GET lock after failing back", c.do(next, 0, "GET", "lock"), keyspace.Bulk("owner"))
	leaseBounds(t, "after failing back to "+next.id, pttlOn(t, c, next, "lock"), lease, taken)
	if got := lastTime(next); got < before {
		t.Fatalf("time went backwards failing back to %s: %d after %d", next.id, got, before)
	}
}

// The whole cluster restarts, and the first leader is a node whose wall clock
// is 10 minutes ahead of the others'. Its clock must not start from its own
// wall clock: it follows the stamps of the entries it replays (they come from
// another process, its own before the restart among them), and it issues no
// stamp before its term's barrier has applied them. No lock expires early.
func TestClusterClockRestartWithFastNode(t *testing.T) {
	c := newTestCluster(t, 3)
	l := c.leader()
	const lease = 60000
	taken := time.Now()
	wantReply(t, "SET lock PX", c.set(l, 0, "lock", "owner", "PX", fmt.Sprint(lease)), keyspace.OK)
	c.eventually("every node applies the lock", func() bool {
		for _, n := range c.Nodes {
			if !same(localGet(n, "lock"), keyspace.Bulk("owner")) {
				return false
			}
		}
		return true
	})
	fast := c.Nodes[0]
	fast.wallAdd.Store(int64(10 * time.Minute))
	// Which node wins the first election after a restart is up to chance:
	// restart until it is the fast one.
	for attempt := 1; ; attempt++ {
		for _, n := range c.Nodes {
			n.stop()
		}
		for _, n := range c.Nodes {
			n.restart()
		}
		if c.leader() == fast {
			break
		}
		if attempt == 20 {
			t.Skip("the fast node never won the first election after a restart")
		}
	}
	wantReply(t, "SET on the fast leader", c.set(fast, 0, "after", "1"), keyspace.OK)
	wantReply(t, "GET lock on the fast leader", c.do(fast, 0, "GET", "lock"), keyspace.Bulk("owner"))
	leaseBounds(t, "after a restart led by a node 10 min ahead", pttlOn(t, c, fast, "lock"), lease, taken)
}

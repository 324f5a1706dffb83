package replication

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/lockserver/lockserver/internal/attempt"
	"github.com/lockserver/lockserver/internal/testenv"
	"github.com/lockserver/lockserver/keyspace"
)

// waitReplicas runs WAIT n on node n with a timeout, failing the test if it
// has not returned after 15 s.
func waitReplicas(t testing.TB, node *testNode, n int, timeout time.Duration) (int, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	count, err := node.eng.WaitReplicas(ctx, n, timeout)
	if errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WAIT %d %v on %s had not returned after 15 s", n, timeout, node.id)
	}
	return count, err
}

func wantCount(t testing.TB, what string, count int, err error, want int) {
	t.Helper()
	if err != nil || count != want {
		t.Fatalf("%s = %d, %v; want %d", what, count, err, want)
	}
}

// replicasRegistered waits until the leader counts every other member as a
// replica: they have registered their client addresses.
func replicasRegistered(c *testCluster, l *testNode, n int) {
	c.t.Helper()
	c.eventually("the leader counts every other member", func() bool { return l.eng.Info().Replicas == n })
}

// On a healthy cluster WAIT 2 returns 2 once both followers have applied the
// writes before it, on the leader and on a follower alike; so each follower
// holds the write as soon as WAIT has returned.
func TestClusterWaitHealthy(t *testing.T) {
	attempt.Run(t, func(t testing.TB) {
		c := newTestCluster(t, 3)
		l := c.leader()
		replicasRegistered(c, l, 2)
		fs := c.followers(l)

		wantReply(t, "SET on the leader", do(l, 0, "SET", "k", "via-leader"), keyspace.OK)
		count, err := waitReplicas(t, l, 2, 0)
		wantCount(t, "WAIT 2 0 on the leader", count, err, 2)
		for _, f := range fs {
			wantReply(t, "GET k on "+f.id+" after WAIT", localGet(f, "k"), keyspace.Bulk("via-leader"))
		}

		wantReply(t, "SET through a follower", do(fs[0], 0, "SET", "k", "via-follower"), keyspace.OK)
		count, err = waitReplicas(t, fs[0], 2, 5*time.Second)
		wantCount(t, "WAIT 2 5000 on a follower", count, err, 2)
		for _, f := range fs {
			wantReply(t, "GET k on "+f.id+" after WAIT on a follower", localGet(f, "k"), keyspace.Bulk("via-follower"))
		}

		// Two other members at most: WAIT 3 times out with the two.
		count, err = waitReplicas(t, l, 3, 100*time.Millisecond)
		wantCount(t, "WAIT 3 100 on the leader", count, err, 2)
		count, err = waitReplicas(t, fs[1], 3, 100*time.Millisecond)
		wantCount(t, "WAIT 3 100 on a follower", count, err, 2)
		// WAIT 0 and below return at once, with what is known.
		for _, n := range []int{0, -1} {
			count, err = waitReplicas(t, fs[1], n, 0)
			if err != nil || count < 0 || count > 2 {
				t.Fatalf("WAIT %d 0 on a follower = %d, %v", n, count, err)
			}
		}
	})
}

// With a follower cut off, a write reaches one replica: WAIT 2 times out
// with 1, WAIT 1 returns 1 without a timeout, on the leader and on the other
// follower; the cut-off follower finds no leader to ask.
func TestClusterWaitPartition(t *testing.T) {
	testenv.Long(t)
	attempt.Run(t, func(t testing.TB) {
		c := newTestCluster(t, 3)
		l := c.leader()
		replicasRegistered(c, l, 2)
		fs := c.followers(l)
		c.partition(fs[1])
		c.eventually("the leader counts one replica", func() bool { return l.eng.Info().Replicas == 1 })

		wantReply(t, "SET on the leader", do(l, 0, "SET", "k", "v"), keyspace.OK)
		for _, n := range []*testNode{l, fs[0]} {
			count, err := waitReplicas(t, n, 2, 500*time.Millisecond)
			wantCount(t, "WAIT 2 500 on "+n.id, count, err, 1)
			count, err = waitReplicas(t, n, 1, 0)
			wantCount(t, "WAIT 1 0 on "+n.id, count, err, 1)
		}
		wantReply(t, "GET k on the follower that is not cut off", localGet(fs[0], "k"), keyspace.Bulk("v"))
		wantReply(t, "GET k on the cut-off follower", localGet(fs[1], "k"), keyspace.Null)

		_, err := waitReplicas(t, fs[1], 1, 300*time.Millisecond)
		if rerr, ok := keyspace.ReplyOf(err); !ok || !strings.HasPrefix(rerr.Str, "CLUSTERDOWN") {
			t.Fatalf("WAIT 1 300 on the cut-off follower: %v, want CLUSTERDOWN", err)
		}

		// Ended by its context before it has an index to wait for, it counts none.
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		count, err := fs[1].eng.WaitReplicas(ctx, 1, 0)
		cancel()
		if count != 0 || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("WAIT 1 0 on the cut-off follower, ended by its context: %d, %v", count, err)
		}

		c.heal()
		c.eventually("the leader counts both replicas again", func() bool { return c.leader().eng.Info().Replicas == 2 })
		count, err = waitReplicas(t, c.leader(), 2, 0)
		wantCount(t, "WAIT 2 0 after healing", count, err, 2)
		for _, f := range c.followers(c.leader()) {
			wantReply(t, "GET k on "+f.id+" after healing", localGet(f, "k"), keyspace.Bulk("v"))
		}
	})
}

// A WAIT that cannot be satisfied and has no timeout ends when its context
// does, and when the engine closes, on the leader and on a follower.
func TestClusterWaitEnds(t *testing.T) {
	c := newTestCluster(t, 3)
	l := c.leader()
	replicasRegistered(c, l, 2)
	f := c.followers(l)[0]

	ctx, cancel := context.WithCancel(context.Background())
	ended := make(chan error, 1)
	go func() {
		_, err := f.eng.WaitReplicas(ctx, 3, 0)
		ended <- err
	}()
	cancel()
	if err := waitEnded(t, ended); !errors.Is(err, context.Canceled) {
		t.Fatalf("WAIT 3 0 whose context ended: %v", err)
	}

	for _, n := range []*testNode{f, l} {
		eng := n.eng
		go func() {
			_, err := eng.WaitReplicas(context.Background(), 3, 0)
			ended <- err
		}()
		// The wait is under way once it polls; it cannot end before Close.
		time.Sleep(50 * time.Millisecond)
		n.stop()
		if err := waitEnded(t, ended); err == nil || !strings.Contains(err.Error(), "shutting down") {
			t.Fatalf("WAIT 3 0 on %s when it closed: %v", n.id, err)
		}
	}
}

func waitEnded(t testing.TB, ended chan error) error {
	t.Helper()
	select {
	case err := <-ended:
		return err
	case <-time.After(15 * time.Second):
		t.Fatal("WAIT had not ended after 15 s")
		return nil
	}
}

// A member that joins counts once it has registered its address: WAIT 3 on
// four members returns 3 with the write on all of them.
func TestClusterWaitJoined(t *testing.T) {
	attempt.Run(t, func(t testing.TB) {
		c := newTestCluster(t, 3)
		l := c.leader()
		n4 := c.add("n4")
		n4.start(RaftOptions{Join: l.raftAddr()})
		replicasRegistered(c, l, 3)
		wantReply(t, "SET on the leader", do(l, 0, "SET", "k", "v"), keyspace.OK)
		count, err := waitReplicas(t, l, 3, 0)
		wantCount(t, "WAIT 3 0 with four members", count, err, 3)
		wantReply(t, "GET k on the new member after WAIT", localGet(n4, "k"), keyspace.Bulk("v"))
	})
}

// A node whose raft has shut down counts no replicas for WAIT. Raft clears
// its leader then, and the node, seeing no leader, used to count itself as
// one: a WAIT 3 on a closing leader of three could end satisfied, not
// closed.
func TestReplicaSetOfAShutDownNode(t *testing.T) {
	attempt.Run(t, func(t testing.TB) {
		c := newTestCluster(t, 3)
		l := c.leader()
		replicasRegistered(c, l, 2)
		if err := l.eng.raft.Shutdown().Error(); err != nil {
			t.Fatal(err)
		}
		c.eventually("raft to clear its leader", func() bool { return l.eng.leaderID() == "" })
		if set := l.eng.replicaSet(); len(set) != 0 {
			t.Fatalf("replica set of a shut-down node: %+v", set)
		}
	})
}

package replication

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/lockserver/lockserver/internal/attempt"
	"github.com/lockserver/lockserver/keyspace"
)

// What INFO reports: the leader is the master with both other members as
// connected replicas once they have registered their client addresses (WAIT
// can count them then), one fewer while one is cut off; a follower is a
// replica.
func TestClusterInfo(t *testing.T) {
	attempt.Run(t, func(t testing.TB) {
		c := newTestCluster(t, 3)
		l := c.leader()
		fs := c.followers(l)
		wantReply(t, "SET", do(l, 0, "SET", "k", "v", "PX", "60000"), keyspace.OK)
		c.eventually("the leader counts both replicas", func() bool { return l.eng.Info().Replicas == 2 })
		info := l.eng.Info()
		if info.Role != "master" || info.Replicas != 2 || info.Keys[0] != 1 || info.Expires[0] != 1 {
			t.Fatalf("leader's info = %+v, want a master with 2 replicas, 1 key with a deadline", info)
		}
		if info := fs[0].eng.Info(); info.Role != "slave" || info.Replicas != 0 {
			t.Fatalf("follower's info = %+v, want a replica", info)
		}
		c.partition(fs[0])
		c.eventually("the leader counts one replica while the other is cut off", func() bool { return l.eng.Info().Replicas == 1 })
		c.heal()
		c.eventually("both replicas back", func() bool { return l.eng.Info().Replicas == 2 })
	})
}

// ready asks n whether it is ready, waiting at most a moment.
func ready(n *testNode) error {
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	return n.eng.Ready(ctx)
}

// A member cut off from the others is not ready; once reconnected, it is
// ready again only after it has applied what the leader committed meanwhile.
func TestClusterReadyFollowsPartition(t *testing.T) {
	attempt.Run(t, func(t testing.TB) {
		c := newTestCluster(t, 3)
		defer c.close()
		l := c.leader()
		f := c.followers(l)[0]
		c.eventually("every member ready", func() bool {
			for _, n := range c.Nodes {
				if ready(n) != nil {
					return false
				}
			}
			return true
		})

		c.partition(f)
		c.eventually("the cut-off member unready", func() bool { return ready(f) != nil })
		l = c.leader()
		for i := range 50 {
			if r := c.set(l, 0, "k", strconv.Itoa(i)); r.IsError() {
				t.Fatalf("SET on the leader: %v", r.Str)
			}
		}
		committed := l.eng.raft.CommitIndex()
		if err := ready(f); err == nil {
			t.Fatalf("the cut-off member says it is ready")
		}

		c.heal()
		c.eventually("the member ready again", func() bool { return ready(f) == nil })
		if applied := f.eng.applied.Load(); applied < committed {
			t.Errorf("ready at applied index %d, before the %d the leader committed while it was cut off", applied, committed)
		}
		if r := localGet(f, "k"); r.Str != "49" {
			t.Errorf("the member, ready, reads k = %q, want 49", r.Str)
		}
	})
}

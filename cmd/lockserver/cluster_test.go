package main

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/lockserver/lockserver"
	"github.com/lockserver/lockserver/internal/clustertest"
	"github.com/lockserver/lockserver/internal/testenv"
	"github.com/redis/go-redis/v9"
)

func TestParseClusterFlags(t *testing.T) {
	env := map[string]string{"LOCKSERVER_NODE_ID": "b", "LOCKSERVER_DATA_DIR": "/var/lib/lockserver", "LOCKSERVER_HEARTBEAT_TIMEOUT": "1500ms"}
	cfg, err := parse([]string{"--raft-addr", "10.0.0.2:7000", "--raft-advertise-addr", "192.0.2.2:17000", "--bootstrap", "a=10.0.0.1:7000, b=192.0.2.2:17000", "--election-timeout", "2s"},
		func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	c := cfg.opts.Cluster
	want := []lockserver.Peer{{ID: "a", RaftAddr: "10.0.0.1:7000"}, {ID: "b", RaftAddr: "192.0.2.2:17000"}}
	if c.NodeID != "b" || c.DataDir != "/var/lib/lockserver" || c.RaftAddr != "10.0.0.2:7000" || c.RaftAdvertiseAddr != "192.0.2.2:17000" || !reflect.DeepEqual(c.Bootstrap, want) ||
		c.HeartbeatTimeout != 1500*time.Millisecond || c.ElectionTimeout != 2*time.Second {
		t.Fatalf("cluster options = %+v", c)
	}
	none := func(string) string { return "" }
	for _, args := range [][]string{
		{"--join", "10.0.0.1:6379"}, // no --node-id
		{"--node-id", "a"},          // no --raft-addr
		{"--node-id", "a", "--raft-addr", "h:1", "--bootstrap", "a"},        // not id=addr
		{"--node-id", "a", "--raft-addr", "h:1", "--bootstrap", "a=nohost"}, // not host:port
		{"--node-id", "a", "--raft-addr", "h:1", "--bootstrap", "a=h:1", "--join", "h:2"},
		{"--node-id", "a", "--raft-addr", "h:1", "--join", "nonsense"}, // no port
		{"--node-id", "a", "--raft-addr", "h:1", "--join", ":6379"},    // no host
		{"--node-id", "a", "--raft-addr", "h:1", "--bootstrap", "a=:1"},
		{"--node-id", "a", "--raft-addr", "h:1", "--raft-advertise-addr", "nonsense"},
		{"--raft-advertise-addr", "h:2"}, // no --node-id
	} {
		if _, err := parse(args, none); err == nil {
			t.Errorf("%q: expected an error", args)
		}
	}
}

// password is the clients' password of the binary in the cluster tests.
const password = "secret"

// startCluster starts three members of a new cluster (package clustertest).
func startCluster(t *testing.T, bin string) *clustertest.Cluster[*clustertest.Proc] {
	return clustertest.StartProcs(t, bin, clustertest.ProcClusterOptions{Proc: clustertest.ProcOptions{Password: password}})
}

// Three lockserver processes form a cluster from flags. A lock taken through
// any node survives SIGKILL of the leader; the killed node restarts from its
// data directory; a node whose data directory is wiped rejoins with --join.
func TestBinaryCluster(t *testing.T) {
	c := startCluster(t, clustertest.Binary(t))
	ctx := context.Background()

	l := c.Leader(t)
	f := c.Followers(l)[0]
	clustertest.Eventually(t, "SET NX PX through a follower", func() error {
		return f.Client().SetArgs(ctx, "lock", "owner", redis.SetArgs{Mode: "NX", TTL: time.Minute}).Err()
	})

	l.Kill()
	l2 := c.Leader(t)
	clustertest.Eventually(t, "GET lock after SIGKILL of the leader", func() error {
		v, err := l2.Client().Get(ctx, "lock").Result()
		if err == nil && v != "owner" {
			return fmt.Errorf("lock = %q, want owner", v)
		}
		return err
	})
	clustertest.Eventually(t, "SET after the failover", func() error { return f.Client().Set(ctx, "after", "1", 0).Err() })

	l.Start(t)
	clustertest.Eventually(t, "the restarted node catches up", func() error {
		v, err := l.Client().Get(ctx, "after").Result()
		if err == nil && v != "1" {
			return fmt.Errorf("after = %q", v)
		}
		return err
	})

	// Wipe a follower's data: it rejoins through any other member.
	via := c.Leader(t)
	w := c.Others(via)[1]
	w.Kill()
	w.Wipe(t)
	w.Args = w.MemberArgs("--join", via.RaftAddr())
	w.Start(t)
	clustertest.Eventually(t, "the wiped node serves the lock again", func() error {
		v, err := w.Client().Get(ctx, "lock").Result()
		if err == nil && v != "owner" {
			return fmt.Errorf("lock = %q", v)
		}
		return err
	})
	clustertest.Eventually(t, "the wiped node is a voter again", func() error {
		v, err := c.Leader(t).Client().Do(ctx, "LOCKSERVER", "MEMBERS").Result()
		if err != nil {
			return err
		}
		for _, m := range v.([]any) {
			if m := m.(map[any]any); m["id"] == w.ID() && m["role"] != "nonvoter" {
				return nil
			}
		}
		return fmt.Errorf("members: %v", v)
	})
}

// incr runs INCR key, which must take it to want, as a client across a
// leader change: again after TRYAGAIN and CLUSTERDOWN (nothing was written,
// once go-redis's own retries are spent), and after UNKNOWN the count says
// whether it took effect.
func incr(ctx context.Context, rdb *redis.Client, key string, want int64) error {
	for deadline := time.Now().Add(clustertest.Wait); ; {
		n, err := rdb.Incr(ctx, key).Result()
		if err == nil && n == want {
			return nil
		}
		if err == nil || time.Now().After(deadline) || !clustertest.WriteErr(err) {
			return fmt.Errorf("INCR %s: %d, %v, want %d", key, n, err, want)
		}
		got, err := rdb.Get(ctx, key).Int64()
		for err != nil && !errors.Is(err, redis.Nil) && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond)
			got, err = rdb.Get(ctx, key).Int64()
		}
		switch {
		case err != nil && !errors.Is(err, redis.Nil):
			return fmt.Errorf("GET %s after an INCR whose outcome is unknown: %v", key, err)
		case got == want:
			return nil
		case got != want-1:
			return fmt.Errorf("GET %s after an INCR whose outcome is unknown: %d, want %d or %d", key, got, want-1, want)
		}
	}
}

// Every write a cluster acknowledged survives SIGKILL of all three members
// at once: the last ones are then only in each member's raft journal, not
// yet in bolt (see replication's journal), and are read back at restart.
func TestBinaryClusterKeepsAcknowledgedWritesWhenEveryMemberIsKilled(t *testing.T) {
	nodes := startCluster(t, clustertest.Binary(t)).Nodes
	ctx := context.Background()
	clustertest.Eventually(t, "a leader", func() error { return nodes[0].Client().Set(ctx, "ready", "1", 0).Err() })

	// Clients on every member, each counting its own key up; followers
	// forward to the leader. 900 entries: more than one flush to bolt, and
	// a rest after the last.
	const clients, each = 9, 100
	errs := make(chan error, clients)
	for c := range clients {
		go func() {
			rdb := nodes[c%len(nodes)].Client()
			key := fmt.Sprint("count", c)
			for i := range each {
				if err := incr(ctx, rdb, key, int64(i+1)); err != nil {
					errs <- fmt.Errorf("through %s: %v", nodes[c%len(nodes)].ID(), err)
					return
				}
			}
			errs <- nil
		}()
	}
	for range clients {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}

	for _, n := range nodes {
		n.Kill()
	}
	for _, n := range nodes {
		n.Start(t)
	}
	for c := range clients {
		clustertest.Eventually(t, "every acknowledged INCR after the restart", func() error {
			got, err := nodes[c%len(nodes)].Client().Get(ctx, fmt.Sprint("count", c)).Int()
			if err == nil && got != each {
				return fmt.Errorf("count%d = %d, want %d", c, got, each)
			}
			return err
		})
	}
}

// A leader killed, wiped and restarted at once with --join through a
// follower that still takes the dead leader for the leader: the follower must
// not relay the JOIN to the dead leader's Raft address, which is now the
// joining process's own, and which calls nothing until the join ends. A
// relayed call used to wait out the 30 s admin timeout; the member must be
// back within seconds. (The JOIN can only be sent by the joining process:
// an ordinary client gets NOPERM for it.)
func TestBinaryWipedLeaderRejoinsAtOnce(t *testing.T) {
	c := startCluster(t, clustertest.Binary(t))
	ctx := context.Background()
	l := c.Leader(t)
	clustertest.Eventually(t, "SET before the kill", func() error { return l.Client().Set(ctx, "before", "1", 0).Err() })
	via := c.Followers(l)[0]
	clustertest.Eventually(t, via.ID()+" knows the leader and its client address", func() error {
		v, err := via.Client().Do(ctx, "LOCKSERVER", "LEADER").Result()
		if m, ok := v.(map[any]any); err == nil && (!ok || m["id"] != l.ID() || m["client"] != l.Addr()) {
			err = fmt.Errorf("%s names %v", via.ID(), v)
		}
		return err
	})

	l.Kill()
	l.Wipe(t)
	l.Args = l.MemberArgs("--join", via.RaftAddr())
	start := time.Now()
	// Not Start: the wait for the write is the measure of how soon it is back.
	l.Spawn(t)
	clustertest.Eventually(t, "the rejoined member holds the write", func() error {
		v, err := l.Client().Get(ctx, "before").Result()
		if err == nil && v != "1" {
			err = fmt.Errorf("before = %q", v)
		}
		return err
	})
	t.Logf("the wiped leader rejoined through %s, which took it for the leader, in %v", via.ID(), time.Since(start))
}

// slowDetection are failure-detection flags far longer than a test waits: a
// member that stands for election under them noticed its leader's end by
// other means than a timeout.
var slowDetection = []string{"--heartbeat-timeout", "40s", "--election-timeout", "40s"}

// A leader killed (SIGKILL, as a crash) is noticed by its followers at once:
// its links to them end and its Raft address refuses connections. With
// timeouts of 40 s, a write through a follower is acknowledged by a new
// leader well within half of that.
func TestBinaryFollowersNoticeAKilledLeaderAtOnce(t *testing.T) {
	c := clustertest.StartProcs(t, clustertest.Binary(t), clustertest.ProcClusterOptions{
		Proc: clustertest.ProcOptions{Password: password},
		Args: func(*clustertest.Proc) []string { return slowDetection },
	})
	ctx := context.Background()
	l := c.Leader(t)
	f := c.Followers(l)[0]
	clustertest.Eventually(t, "a write through a follower", func() error { return f.Client().Set(ctx, "before", "1", 0).Err() })

	l.Kill()
	killed := time.Now()
	for {
		err := f.Client().Set(ctx, "after", "1", 0).Err()
		if err == nil {
			break
		}
		if time.Since(killed) > 20*time.Second {
			t.Fatalf("no write acknowledged in %v after the leader's kill, with failure detection of 40 s: the followers did not notice its end: %v",
				time.Since(killed).Round(time.Millisecond), err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("the first write after the kill was acknowledged after %v", time.Since(killed).Round(time.Millisecond))
}

// A follower that a leader alive gives up on (its RPCs time out while the
// follower is paused, and the leader closes the links) sees those links end
// too, but the leader still takes connections: it must not stand.
func TestBinaryFollowerKeepsALiveLeaderWhoseLinksEnd(t *testing.T) {
	testenv.Long(t)
	c := clustertest.StartProcs(t, clustertest.Binary(t), clustertest.ProcClusterOptions{
		Proc: clustertest.ProcOptions{Password: password},
		Args: func(*clustertest.Proc) []string { return slowDetection },
	})
	ctx := context.Background()
	l := c.Leader(t)
	before, err := l.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	f := c.Followers(l)[0]
	// The leader's Raft RPCs time out after 10 s and it closes their links,
	// which the follower, resumed, finds ended.
	f.Pause()
	time.Sleep(13 * time.Second)
	f.Resume()
	clustertest.Eventually(t, "a write through the resumed follower", func() error { return f.Client().Set(ctx, "after", "1", 0).Err() })
	time.Sleep(2 * time.Second)
	for _, n := range c.Nodes {
		s, err := n.Status(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if s.Term != before.Term || s.Leader != l.ID() {
			t.Errorf("%s: term %d and leader %q after the follower's pause; before it, term %d and leader %s", n.ID(), s.Term, s.Leader, before.Term, l.ID())
		}
	}
}

package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/lockserver/lockserver"
	"github.com/lockserver/lockserver/internal/freeport"
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

// node is one lockserver process of a cluster.
type node struct {
	id, addr, raftAddr, dir string
	args                    []string
	cmd                     *exec.Cmd
	log                     *os.File
	rdb                     *redis.Client
}

// newNode prepares member id, with its data in dir: free ports, and a log file
// that a failed test prints. The process is killed when the test ends.
func newNode(t *testing.T, id, dir string) *node {
	t.Helper()
	log, err := os.Create(filepath.Join(t.TempDir(), id+".log"))
	if err != nil {
		t.Fatal(err)
	}
	n := &node{id: id, addr: freeport.MustAddr(t), raftAddr: freeport.MustAddr(t), dir: dir, log: log}
	t.Cleanup(func() {
		n.kill()
		if t.Failed() {
			b, _ := os.ReadFile(log.Name())
			t.Logf("%s log:\n%s", id, b)
		}
	})
	return n
}

// member sets n's arguments: its addresses and data directory, then how it
// finds the cluster (--bootstrap or --join and its value).
func (n *node) member(how ...string) {
	n.args = append([]string{"--addr", n.addr, "--node-id", n.id, "--raft-addr", n.raftAddr, "--data-dir", n.dir,
		// A process starved of CPU for 500 ms on a busy machine moved the
		// leader; the tests survive a leader change, but should seldom see
		// one they did not cause.
		"--heartbeat-timeout", "1500ms", "--election-timeout", "2s"}, how...)
}

func (n *node) start(t *testing.T, bin string) {
	t.Helper()
	n.cmd = exec.Command(bin, n.args...)
	n.cmd.Env = append(os.Environ(), "LOCKSERVER_PASSWORD=secret")
	n.cmd.Stderr = n.log
	if err := n.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	n.rdb = redis.NewClient(&redis.Options{Addr: n.addr, Password: "secret"})
}

func (n *node) kill() {
	if n.cmd != nil {
		n.cmd.Process.Kill()
		n.cmd.Wait()
		n.rdb.Close()
		n.cmd = nil
	}
}

// startCluster starts three members of a new cluster, each with its own
// data directory and, if args is not nil, the flags args returns for it
// after its own.
func startCluster(t *testing.T, bin string, args func(n *node) []string) []*node {
	t.Helper()
	var nodes []*node
	var peers []string
	for i := range 3 {
		n := newNode(t, fmt.Sprint("n", i+1), t.TempDir())
		nodes = append(nodes, n)
		peers = append(peers, n.id+"="+n.raftAddr)
	}
	for _, n := range nodes {
		n.member("--bootstrap", strings.Join(peers, ","))
		if args != nil {
			n.args = append(n.args, args(n)...)
		}
		n.start(t, bin)
	}
	return nodes
}

// otherThan returns a node of nodes that is not l.
func otherThan(nodes []*node, l *node) *node {
	var o *node
	for _, n := range nodes {
		if n != l {
			o = n
		}
	}
	return o
}

// leaderOf returns the running node that a running node names as leader,
// once there is one.
func leaderOf(t *testing.T, nodes []*node) *node {
	t.Helper()
	var l *node
	eventually(t, "a leader", func() error {
		for _, n := range nodes {
			if n.cmd == nil {
				continue
			}
			v, err := n.rdb.Do(context.Background(), "LOCKSERVER", "LEADER").Result()
			if err != nil {
				continue
			}
			for _, m := range nodes {
				if m.cmd != nil && fmt.Sprint(v.(map[any]any)["id"]) == m.id {
					l = m
					return nil
				}
			}
		}
		return fmt.Errorf("no node names a running leader")
	})
	return l
}

// eventually retries op, as a client does across an election.
func eventually(t *testing.T, what string, op func() error) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := op()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %v", what, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Three lockserver processes form a cluster from flags. A lock taken through
// any node survives SIGKILL of the leader; the killed node restarts from its
// data directory; a node whose data directory is wiped rejoins with --join.
func TestBinaryCluster(t *testing.T) {
	bin := buildBinary(t)
	nodes := startCluster(t, bin, nil)
	ctx := context.Background()
	leader := func() *node { return leaderOf(t, nodes) }

	l := leader()
	f := otherThan(nodes, l)
	eventually(t, "SET NX PX through a follower", func() error {
		return f.rdb.SetArgs(ctx, "lock", "owner", redis.SetArgs{Mode: "NX", TTL: time.Minute}).Err()
	})

	l.kill()
	l2 := leader()
	eventually(t, "GET lock after SIGKILL of the leader", func() error {
		v, err := l2.rdb.Get(ctx, "lock").Result()
		if err == nil && v != "owner" {
			return fmt.Errorf("lock = %q, want owner", v)
		}
		return err
	})
	eventually(t, "SET after the failover", func() error { return f.rdb.Set(ctx, "after", "1", 0).Err() })

	l.start(t, bin)
	eventually(t, "the restarted node catches up", func() error {
		v, err := l.rdb.Get(ctx, "after").Result()
		if err == nil && v != "1" {
			return fmt.Errorf("after = %q", v)
		}
		return err
	})

	// Wipe a follower's data: it rejoins through any other member.
	var w *node
	via := leader()
	for _, n := range nodes {
		if n != via {
			w = n
		}
	}
	w.kill()
	if err := os.RemoveAll(w.dir); err != nil {
		t.Fatal(err)
	}
	w.member("--join", via.raftAddr)
	w.start(t, bin)
	eventually(t, "the wiped node serves the lock again", func() error {
		v, err := w.rdb.Get(ctx, "lock").Result()
		if err == nil && v != "owner" {
			return fmt.Errorf("lock = %q", v)
		}
		return err
	})
	eventually(t, "the wiped node is a voter again", func() error {
		v, err := leader().rdb.Do(ctx, "LOCKSERVER", "MEMBERS").Result()
		if err != nil {
			return err
		}
		for _, m := range v.([]any) {
			if m := m.(map[any]any); m["id"] == w.id && m["role"] != "nonvoter" {
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
	for deadline := time.Now().Add(30 * time.Second); ; {
		n, err := rdb.Incr(ctx, key).Result()
		if err == nil && n == want {
			return nil
		}
		if err == nil || time.Now().After(deadline) || !strings.HasPrefix(err.Error(), "TRYAGAIN ") &&
			!strings.HasPrefix(err.Error(), "CLUSTERDOWN ") && !strings.HasPrefix(err.Error(), "UNKNOWN ") {
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
	bin := buildBinary(t)
	nodes := startCluster(t, bin, nil)
	ctx := context.Background()
	eventually(t, "a leader", func() error { return nodes[0].rdb.Set(ctx, "ready", "1", 0).Err() })

	// Clients on every member, each counting its own key up; followers
	// forward to the leader. 900 entries: more than one flush to bolt, and
	// a rest after the last.
	const clients, each = 9, 100
	errs := make(chan error, clients)
	for c := range clients {
		go func() {
			rdb := nodes[c%len(nodes)].rdb
			key := fmt.Sprint("count", c)
			for i := range each {
				if err := incr(ctx, rdb, key, int64(i+1)); err != nil {
					errs <- fmt.Errorf("through %s: %v", nodes[c%len(nodes)].id, err)
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
		n.kill()
	}
	for _, n := range nodes {
		n.start(t, bin)
	}
	for c := range clients {
		eventually(t, "every acknowledged INCR after the restart", func() error {
			got, err := nodes[c%len(nodes)].rdb.Get(ctx, fmt.Sprint("count", c)).Int()
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
	bin := buildBinary(t)
	nodes := startCluster(t, bin, nil)
	ctx := context.Background()
	l := leaderOf(t, nodes)
	eventually(t, "SET before the kill", func() error { return l.rdb.Set(ctx, "before", "1", 0).Err() })
	via := otherThan(nodes, l)
	eventually(t, via.id+" knows the leader and its client address", func() error {
		v, err := via.rdb.Do(ctx, "LOCKSERVER", "LEADER").Result()
		if m, ok := v.(map[any]any); err == nil && (!ok || m["id"] != l.id || m["client"] != l.addr) {
			err = fmt.Errorf("%s names %v", via.id, v)
		}
		return err
	})

	l.kill()
	if err := os.RemoveAll(l.dir); err != nil {
		t.Fatal(err)
	}
	l.member("--join", via.raftAddr)
	start := time.Now()
	l.start(t, bin)
	eventually(t, "the rejoined member holds the write", func() error {
		v, err := l.rdb.Get(ctx, "before").Result()
		if err == nil && v != "1" {
			err = fmt.Errorf("before = %q", v)
		}
		return err
	})
	t.Logf("the wiped leader rejoined through %s, which took it for the leader, in %v", via.id, time.Since(start))
}

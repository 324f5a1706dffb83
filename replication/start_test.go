package replication

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/lockserver/lockserver/internal/testlog"
	"github.com/lockserver/lockserver/keyspace"
)

// startAlone opens a node with in-memory stores on a transport of its own.
func startAlone(t *testing.T, opts RaftOptions) (*Raft, error) {
	t.Helper()
	_, trans := raft.NewInmemTransport("raft-" + raft.ServerAddress(opts.NodeID))
	t.Cleanup(func() { trans.Close() })
	store := raft.NewInmemStore()
	opts.transport, opts.logStore, opts.stableStore, opts.snapshotStore = trans, store, store, raft.NewInmemSnapshotStore()
	if opts.peers == nil {
		opts.peers = &failingPeers{}
	}
	opts.HeartbeatTimeout, opts.ElectionTimeout = 300*time.Millisecond, 300*time.Millisecond
	r, err := NewRaft(opts)
	if err == nil {
		t.Cleanup(func() { r.Close() })
	}
	return r, err
}

// A bootstrap list that leaves this node out, or names it where its transport
// is not, would start a cluster that never elects a leader: refused at start.
func TestBootstrapMustNameThisNode(t *testing.T) {
	for _, c := range []struct {
		name      string
		advertise string
		peers     []Peer
		want      string // in the error; "" for none
	}{
		{"left out", "", []Peer{{"b", "raft-b"}, {"c", "raft-c"}}, "a, is not among the voters; list it too, as a=raft-a"},
		{"elsewhere", "", []Peer{{"a", "raft-x"}, {"b", "raft-b"}}, "name this node, a, at raft-x, but its Raft address is raft-a"},
		{"listed", "", []Peer{{"a", "raft-a"}}, ""},
		{"behind a proxy", "proxy-a", []Peer{{"a", "proxy-a"}, {"b", "raft-b"}}, ""},
		{"behind a proxy, listed at its own address", "proxy-a", []Peer{{"a", "raft-a"}, {"b", "raft-b"}}, "name this node, a, at raft-a, but its Raft address is proxy-a"},
	} {
		_, err := startAlone(t, RaftOptions{NodeID: "a", RaftAdvertise: c.advertise, Bootstrap: c.peers})
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: %v; want an error saying %q", c.name, err, c.want)
		}
	}
	// The list is only read when the node has no state: a member restarted
	// from its data with a stale list still starts.
	_, trans := raft.NewInmemTransport("raft-a")
	defer trans.Close()
	store, snaps := raft.NewInmemStore(), raft.NewInmemSnapshotStore()
	opts := RaftOptions{NodeID: "a", transport: trans, logStore: store, stableStore: store, snapshotStore: snaps, peers: &failingPeers{}}
	first, err := NewRaft(opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	opts.Bootstrap = []Peer{{"b", "raft-b"}}
	again, err := NewRaft(opts)
	if err != nil {
		t.Fatalf("restart with state and a stale bootstrap list: %v", err)
	}
	again.Close()
}

// failingPeers answers every call as an address where nothing listens.
type failingPeers struct{ calls int }

func (p *failingPeers) Call(ctx context.Context, addr string, args ...[]byte) (string, error) {
	p.calls++
	return "", errors.New("connection refused")
}

func (p *failingPeers) Close() error { return nil }

// A join that nobody answers ends with an error once JoinTimeout has passed,
// rather than holding the process's start forever.
func TestJoinGivesUp(t *testing.T) {
	peers := &failingPeers{}
	done := make(chan error, 1)
	go func() {
		_, err := startAlone(t, RaftOptions{NodeID: "a", Join: "client-nobody", JoinTimeout: 200 * time.Millisecond, peers: peers})
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "join via client-nobody: gave up after 200ms") || !strings.Contains(err.Error(), "connection refused") {
			t.Fatalf("join to nobody: %v; want it to give up with the last error", err)
		}
		if peers.calls < 2 {
			t.Errorf("join asked %d times; want retries until the timeout", peers.calls)
		}
	case <-time.After(20 * time.Second): // well short of adminTimeout, the bound of one call
		t.Fatal("a join with a 200ms timeout was still trying after 20s")
	}
}

// A member that hears from no leader after it starts stands for election
// soon, not after raft's one to two heartbeat timeouts: a one-member cluster
// whose timeouts are an hour leads again soon after each start.
func TestMemberStandsSoonAfterStart(t *testing.T) {
	c := newTestClusterWith(t, 1, RaftOptions{HeartbeatTimeout: time.Hour, ElectionTimeout: time.Hour, firstStand: time.Millisecond})
	n := c.leader()
	if r := c.set(n, 0, "k", "v"); r.IsError() {
		t.Fatal(r.Str)
	}
	n.stop()
	n.restart()
	n = c.leader()
	if r := c.do(n, 0, "GET", "k"); !same(r, keyspace.Bulk("v")) {
		t.Errorf("GET k after the restart: %v", r)
	}
}

// Standing early does not unseat a leader. A follower restarts cut off from
// the leader, so that it hears from none and stands; the other follower,
// which has a leader, refuses its pre-vote. Once the cut heals the follower
// catches up under the same leader, in the same term.
func TestMemberStandingAtStartLeavesTheLeader(t *testing.T) {
	opts := RaftOptions{HeartbeatTimeout: 10 * time.Second, ElectionTimeout: 10 * time.Second}
	c := newTestClusterWith(t, 3, opts)
	l := c.leader()
	f := c.followers(l)[0]
	f.stop()
	if r := c.set(l, 0, "k", "v"); r.IsError() {
		t.Fatal(r.Str)
	}
	term := c.Term()
	c.cutPair(l, f)
	logs := &testlog.Buffer{}
	opts.firstStand, opts.Logger = time.Nanosecond, slog.New(slog.NewJSONHandler(logs, nil))
	f.start(opts)
	c.eventually("the restarted follower standing for election", func() bool {
		return strings.Contains(logs.String(), "entering candidate state")
	})
	c.heal()
	c.eventually("the restarted follower holding the write made while it was down", func() bool {
		return same(localGet(f, "k"), keyspace.Bulk("v"))
	})
	if got := c.Term(); got != term {
		t.Errorf("the term went from %d to %d", term, got)
	}
	if now := c.leader(); now != l {
		t.Errorf("%s leads, not %s", now.id, l.id)
	}
}

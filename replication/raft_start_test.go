package replication

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// startAlone opens a node with in-memory stores on a transport of its own.
func startAlone(t *testing.T, opts RaftOptions) (*Raft, error) {
	t.Helper()
	_, trans := raft.NewInmemTransport("raft-" + raft.ServerAddress(opts.NodeID))
	t.Cleanup(func() { trans.Close() })
	store := raft.NewInmemStore()
	opts.Transport, opts.LogStore, opts.StableStore, opts.SnapshotStore = trans, store, store, raft.NewInmemSnapshotStore()
	if opts.Peers == nil {
		opts.Peers = &failingPeers{}
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
	opts := RaftOptions{NodeID: "a", Transport: trans, LogStore: store, StableStore: store, SnapshotStore: snaps, Peers: &failingPeers{}}
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
		_, err := startAlone(t, RaftOptions{NodeID: "a", Join: "client-nobody", JoinTimeout: 200 * time.Millisecond, Peers: peers})
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

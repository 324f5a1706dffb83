// Package embedded runs the members of a test's cluster (package
// clustertest) in the test's process, as three copies of a Go service would
// embed them: each a lockserver.Server opened with lockserver.Open, on
// loopback TCP, with its Raft log on disk unless asked to keep it in memory.
package embedded

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/lockserver/lockserver"
	"github.com/lockserver/lockserver/internal/clustertest"
	"github.com/lockserver/lockserver/internal/freeport"
	"github.com/redis/go-redis/v9"
)

// Member is one member embedded in the test's process, and what it needs to
// start again.
type Member struct {
	// Options are what Start opens the member with.
	Options lockserver.Options

	mu     sync.Mutex
	srv    *lockserver.Server
	client *redis.Client
}

// Cluster is a cluster of embedded members.
type Cluster = clustertest.Cluster[*Member]

func (m *Member) ID() string { return m.Options.Cluster.NodeID }

// Server returns the running server, or nil while the member is stopped.
func (m *Member) Server() *lockserver.Server {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.srv
}

// Client returns a go-redis client of the running member, on its TCP
// address with its password, or nil while the member is stopped.
func (m *Member) Client() *redis.Client {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.client
}

// Start opens the member with Options; a member with a data directory
// starts from what it holds.
func (m *Member) Start(t testing.TB) {
	t.Helper()
	srv, err := lockserver.Open(m.Options)
	if err != nil {
		t.Fatalf("open %s: %v", m.ID(), err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.srv = srv
	m.client = redis.NewClient(&redis.Options{Addr: m.Options.Addr, Password: m.Options.Password})
}

// Stop closes the member, if it runs, and its client.
func (m *Member) Stop() {
	m.mu.Lock()
	srv, client := m.srv, m.client
	m.srv, m.client = nil, nil
	m.mu.Unlock()
	if srv != nil {
		client.Close()
		srv.Close()
	}
}

// Status asks the running member for LOCKSERVER STATUS through Server.Do.
func (m *Member) Status(ctx context.Context) (clustertest.Status, error) {
	srv := m.Server()
	if srv == nil {
		return clustertest.Status{}, fmt.Errorf("%s is stopped", m.ID())
	}
	v, err := srv.Do(ctx, "LOCKSERVER", "STATUS")
	if err != nil {
		return clustertest.Status{}, err
	}
	return clustertest.ParseStatus(v)
}

// Options are how Start starts a cluster.
type Options struct {
	// Password is every member's Options.Password.
	Password string
	// InMemory keeps the members' Raft logs in memory rather than in a
	// data directory of the test's: a member then cannot restart.
	InMemory bool
	// Member, when set, changes member i's options before it starts.
	Member func(i int, o *lockserver.Options)
	// Ready waits, before Start returns, until every member can write
	// through the leader and knows every member's client address (its
	// Sentinel and CLUSTER views are whole).
	Ready bool
}

// Start opens three members, n1, n2 and n3, bootstrapped as one new cluster
// on loopback, with the failure detection of package clustertest; they stop
// when the test ends. It returns once one leads (and, with opts.Ready, the
// cluster is ready). In an attempt (package attempt), the attempt watches
// their term.
func Start(t testing.TB, opts Options) *Cluster {
	t.Helper()
	var peers []lockserver.Peer
	c := &Cluster{}
	for i := range 3 {
		id := fmt.Sprint("n", i+1)
		peers = append(peers, lockserver.Peer{ID: id, RaftAddr: freeport.MustAddr(t)})
		m := &Member{Options: lockserver.Options{
			Addr: freeport.MustAddr(t), Password: opts.Password,
			Cluster: lockserver.ClusterOptions{NodeID: id, RaftAddr: peers[i].RaftAddr,
				HeartbeatTimeout: clustertest.Heartbeat, ElectionTimeout: clustertest.Election},
		}}
		if !opts.InMemory {
			m.Options.Cluster.DataDir = t.TempDir()
		}
		c.Nodes = append(c.Nodes, m)
	}
	for i, m := range c.Nodes {
		m.Options.Cluster.Bootstrap = peers
		if opts.Member != nil {
			opts.Member(i, &m.Options)
		}
		m.Start(t)
		t.Cleanup(m.Stop)
	}
	c.Leader(t)
	if opts.Ready {
		ready(t, c)
	}
	c.Watch(t, "the members")
	return c
}

// ready waits until a write through every member succeeds, which proves
// that each can reach the leader, and each knows every member's client
// address, which members register after they start.
func ready(t testing.TB, c *Cluster) {
	t.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(clustertest.Wait)
	for i, m := range c.Nodes {
		s := m.Server()
		for {
			_, err := s.Do(ctx, "SET", "cluster:ready", i)
			if err == nil && knowsClientAddrs(ctx, s, len(c.Nodes)) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("member %s cannot write through the leader (%v) or does not know every member's client address", m.ID(), err)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// knowsClientAddrs reports whether s knows the client addresses of n members.
func knowsClientAddrs(ctx context.Context, s *lockserver.Server, n int) bool {
	v, err := s.Do(ctx, "LOCKSERVER", "MEMBERS")
	members, _ := v.([]any)
	if err != nil || len(members) != n {
		return false
	}
	for _, m := range members {
		if addr, _ := m.(map[any]any)["client"].(string); addr == "" {
			return false
		}
	}
	return true
}

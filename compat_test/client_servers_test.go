package compat_test

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/lockserver/lockserver"
	"github.com/lockserver/lockserver/internal/attempt"
	"github.com/lockserver/lockserver/internal/freeport"
	"github.com/redis/go-redis/v9"
)

// A clientTarget is one server that the real-client tests point a client
// library at: a redis-server, a standalone lockserver or a member of an
// in-process lockserver cluster. The same scenario runs against each, and
// what the client reports must be the same everywhere.
type clientTarget struct {
	name     string
	addr     string
	password string
	// server is the lockserver behind addr, nil for redis-server.
	server *lockserver.Server
	// dialer, when set, is how go-redis reaches the server instead of addr.
	dialer func(ctx context.Context, network, addr string) (net.Conn, error)
	// tls, when set, is how clients reach addr: over TLS, with a client
	// certificate (see tls_test.go).
	tls *tlsClient
}

// redisTarget starts a redis-server, with requirepass when password is set.
func redisTarget(t testing.TB, password string) clientTarget {
	t.Helper()
	var extra []string
	if password != "" {
		extra = []string{"--requirepass", password}
	}
	return clientTarget{name: "redis-server", addr: startRedis(t, extra...), password: password}
}

// dialerTarget reaches the same lockserver through its in-memory Dialer,
// with no socket.
func (tg clientTarget) dialerTarget() clientTarget {
	tg.name += " (in-memory Dialer)"
	tg.dialer = tg.server.Dialer()
	return tg
}

// lockserverTarget starts a standalone lockserver on a free loopback port.
func lockserverTarget(t testing.TB, password string) clientTarget {
	t.Helper()
	s := startLockserver(t, lockserver.Options{Password: password})
	return clientTarget{name: "lockserver", addr: s.Addr(), password: password, server: s}
}

// goRedis opens a go-redis client on the target with opts (the target's
// password unless opts has one), closed when the test ends.
func (tg clientTarget) goRedis(t testing.TB, opts redis.Options) *redis.Client {
	t.Helper()
	opts.Addr, opts.Dialer = tg.addr, tg.dialer
	if opts.Password == "" {
		opts.Password = tg.password
	}
	if tg.tls != nil {
		opts.TLSConfig = tg.tls.config.Clone()
	}
	rdb := redis.NewClient(&opts)
	t.Cleanup(func() { rdb.Close() })
	return rdb
}

// cluster is three lockserver members embedded in this process, with their
// Raft logs in memory, as three copies of a Go service would run them.
type cluster struct {
	members []*lockserver.Server
	ids     []string
	// leader is the member that led when last found (see findLeader): tests
	// about what the leader does run as attempts (package attempt), each
	// from a leader found anew, and an election voids the attempt.
	leader int
}

// The members' failure detection. Under -race on a busy 2-core machine a
// member can go without CPU for hundreds of milliseconds, and the default
// 500 ms moved the leader in some runs.
const (
	clusterHeartbeat = 1500 * time.Millisecond
	clusterElection  = 2 * time.Second
	// clusterWait bounds a wait for the cluster to get somewhere.
	clusterWait = 30 * time.Second
)

// startCluster opens a three-member cluster on loopback and waits until a
// member answers as the leader and every member can write through it. In an
// attempt, the attempt watches its term.
func startCluster(t testing.TB) *cluster { return startClusterWith(t, nil) }

// startClusterWith is startCluster with member i's options changed by opts.
func startClusterWith(t testing.TB, opts func(i int, o *lockserver.Options)) *cluster {
	t.Helper()
	var peers []lockserver.Peer
	addrs := make([]string, 3)
	for i := range 3 {
		addrs[i] = freeport.MustAddr(t)
		peers = append(peers, lockserver.Peer{ID: fmt.Sprint("c", i+1), RaftAddr: freeport.MustAddr(t)})
	}
	c := &cluster{leader: -1}
	for i := range 3 {
		o := lockserver.Options{
			Addr: addrs[i],
			Cluster: lockserver.ClusterOptions{NodeID: peers[i].ID, RaftAddr: peers[i].RaftAddr, Bootstrap: peers,
				HeartbeatTimeout: clusterHeartbeat, ElectionTimeout: clusterElection},
		}
		if opts != nil {
			opts(i, &o)
		}
		s := startLockserver(t, o)
		c.members = append(c.members, s)
		c.ids = append(c.ids, peers[i].ID)
	}
	c.findLeader(t)
	// A write through every member proves each can reach the leader; and
	// each knows every member's client address (its Sentinel and CLUSTER
	// views are whole) once the members have registered them.
	ctx := context.Background()
	deadline := time.Now().Add(clusterWait)
	for i, s := range c.members {
		for {
			_, err := s.Do(ctx, "SET", "cluster:ready", i)
			if err == nil && knowsClientAddrs(ctx, s, len(addrs)) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("member %d cannot write through the leader (%v) or does not know every member's client address", i, err)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	attempt.Watch(t, "the cluster", c.term)
	return c
}

// findLeader waits until a member says that it leads, and sets c.leader.
func (c *cluster) findLeader(t testing.TB) {
	t.Helper()
	ctx := context.Background()
	c.leader = -1
	for deadline := time.Now().Add(clusterWait); c.leader < 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the in-process cluster had no leader for %v", clusterWait)
		}
		for i, s := range c.members {
			v, err := s.Do(ctx, "LOCKSERVER", "LEADER")
			if m, ok := v.(map[any]any); err == nil && ok && m["id"] == c.ids[i] {
				c.leader = i
			}
		}
	}
}

// term returns the highest Raft term a member reports: it grows with every
// election.
func (c *cluster) term() uint64 {
	var term uint64
	for _, s := range c.members {
		v, err := s.Do(context.Background(), "LOCKSERVER", "STATUS")
		if st, ok := v.(map[any]any); err == nil && ok {
			if n, ok := st["term"].(int64); ok {
				term = max(term, uint64(n))
			}
		}
	}
	return term
}

// attempts runs body as attempts (package attempt) that watch the cluster's
// term, each with the leader found anew: a test on a cluster that it shares
// with others, about what the leader or a follower does.
func (c *cluster) attempts(t *testing.T, body func(t testing.TB)) {
	attempt.Run(t, func(t testing.TB) {
		c.findLeader(t)
		attempt.Watch(t, "the cluster", c.term)
		body(t)
	})
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

// follower returns a member that does not lead, so that every command a
// client sends it is forwarded.
func (c *cluster) follower() *lockserver.Server {
	return c.members[(c.leader+1)%len(c.members)]
}

// target names a cluster member as a client target.
func (c *cluster) target(name string, s *lockserver.Server) clientTarget {
	return clientTarget{name: name, addr: s.Addr(), server: s}
}

package compat_test

import (
	"context"
	"net"
	"slices"
	"testing"

	"github.com/lockserver/lockserver"
	"github.com/lockserver/lockserver/internal/attempt"
	"github.com/lockserver/lockserver/internal/clustertest/embedded"
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

// cluster is the three-member cluster of the tests that need one (package
// clustertest/embedded): members embedded in this process, with their Raft
// logs in memory, as three copies of a Go service would run them.
type cluster struct {
	*embedded.Cluster
	// leader is the index of the member that led when last found (see
	// findLeader): tests about what the leader does run as attempts
	// (package attempt), each from a leader found anew, and an election
	// voids the attempt.
	leader int
}

// startCluster starts a cluster and waits until every member can write
// through the leader and knows every member's client address. In an
// attempt, the attempt watches its term.
func startCluster(t testing.TB) *cluster { return startClusterWith(t, nil) }

// startClusterWith is startCluster with member i's options changed by opts.
func startClusterWith(t testing.TB, opts func(i int, o *lockserver.Options)) *cluster {
	t.Helper()
	c := &cluster{Cluster: embedded.Start(t, embedded.Options{InMemory: true, Member: opts, Ready: true})}
	c.findLeader(t)
	return c
}

// findLeader waits until a member leads, and sets c.leader.
func (c *cluster) findLeader(t testing.TB) {
	t.Helper()
	c.leader = slices.Index(c.Nodes, c.Leader(t))
}

// attempts runs body as attempts (package attempt) that watch the cluster's
// term, each with the leader found anew: a test on a cluster that it shares
// with others, about what the leader or a follower does.
func (c *cluster) attempts(t *testing.T, body func(t testing.TB)) {
	attempt.Run(t, func(t testing.TB) {
		c.findLeader(t)
		c.Watch(t, "the cluster")
		body(t)
	})
}

// server returns member i's server.
func (c *cluster) server(i int) *lockserver.Server { return c.Nodes[i].Server() }

// follower returns a member that does not lead, so that every command a
// client sends it is forwarded.
func (c *cluster) follower() *lockserver.Server {
	return c.server((c.leader + 1) % len(c.Nodes))
}

// target names a cluster member as a client target.
func (c *cluster) target(name string, s *lockserver.Server) clientTarget {
	return clientTarget{name: name, addr: s.Addr(), server: s}
}

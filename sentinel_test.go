package lockserver_test

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lockserver/lockserver"
	"github.com/lockserver/lockserver/internal/attempt"
	"github.com/lockserver/lockserver/internal/clustertest"
	"github.com/lockserver/lockserver/internal/clustertest/embedded"
	"github.com/lockserver/lockserver/internal/testenv"
	"github.com/redis/go-redis/v9"
)

// sentinelClient is go-redis's client for a Sentinel, pointed at a member.
func sentinelClient(t testing.TB, m *embedded.Member) *redis.SentinelClient {
	t.Helper()
	c := redis.NewSentinelClient(&redis.Options{Addr: m.Options.Addr, Password: m.Options.Password})
	t.Cleanup(func() { c.Close() })
	return c
}

// nodeOf returns the id of the member that rdb's connection reaches.
func nodeOf(ctx context.Context, rdb *redis.Client) (string, error) {
	v, err := rdb.Do(ctx, "LOCKSERVER", "STATUS").Result()
	if err != nil {
		return "", err
	}
	return fmt.Sprint(v.(map[any]any)["node"]), nil
}

// waitMasterAddr waits until every running member answers
// SENTINEL GET-MASTER-ADDR-BY-NAME with leader's client address.
func waitMasterAddr(t testing.TB, ms []*embedded.Member, leader *embedded.Member) {
	t.Helper()
	ctx := context.Background()
	for _, m := range ms {
		if m.Server() == nil {
			continue
		}
		s := sentinelClient(t, m)
		clustertest.Eventually(t, "GET-MASTER-ADDR-BY-NAME on "+m.ID(), func() error {
			got, err := s.GetMasterAddrByName(ctx, "mymaster").Result()
			if err != nil {
				return err
			}
			if addr := net.JoinHostPort(got[0], got[1]); addr != leader.Options.Addr {
				return fmt.Errorf("the master is %s, want the leader %s", addr, leader.Options.Addr)
			}
			return nil
		})
	}
}

func addrsOf(ms []*embedded.Member) []string {
	var addrs []string
	for _, m := range ms {
		addrs = append(addrs, m.Options.Addr)
	}
	slices.Sort(addrs)
	return addrs
}

// Every member answers Sentinel's questions about the cluster the same way:
// the leader is the master, the followers are its replicas, the other
// members are Sentinels; ROLE tells each node's part.
func TestSentinelReportsTheCluster(t *testing.T) {
	attempt.Run(t, func(t testing.TB) {
		c := startMembers(t, "")
		ctx := context.Background()
		leader := c.Leader(t)
		followers := c.Followers(leader)
		waitMasterAddr(t, c.Nodes, leader)
		leaderHost, leaderPort, _ := net.SplitHostPort(leader.Options.Addr)

		for _, m := range c.Nodes {
			s := sentinelClient(t, m)
			id := m.ID()
			clustertest.Eventually(t, "SENTINEL REPLICAS on "+id, func() error {
				replicas, err := s.Replicas(ctx, "mymaster").Result()
				if err != nil {
					return err
				}
				var addrs []string
				for _, r := range replicas {
					if r["flags"] != "slave" || r["master-link-status"] != "ok" || r["master-host"] != leaderHost ||
						r["master-port"] != leaderPort || r["slave-priority"] != "100" {
						return fmt.Errorf("replica %v: want flags slave, link ok, master %s, priority 100 (a voter)", r, leader.Options.Addr)
					}
					addrs = append(addrs, net.JoinHostPort(r["ip"], r["port"]))
				}
				slices.Sort(addrs)
				if want := addrsOf(followers); !slices.Equal(addrs, want) {
					return fmt.Errorf("replicas at %v, want the followers %v", addrs, want)
				}
				return nil
			})

			others := c.Others(m)
			sentinels, err := s.Sentinels(ctx, "mymaster").Result()
			if err != nil {
				t.Fatalf("SENTINEL SENTINELS on %s: %v", id, err)
			}
			var addrs []string
			for _, r := range sentinels {
				if r["flags"] != "sentinel" || r["name"] != r["runid"] || len(r["runid"]) != 40 {
					t.Errorf("SENTINEL SENTINELS on %s: entry %v, want flags sentinel and a 40-character runid as name", id, r)
				}
				addrs = append(addrs, net.JoinHostPort(r["ip"], r["port"]))
			}
			slices.Sort(addrs)
			if want := addrsOf(others); !slices.Equal(addrs, want) {
				t.Errorf("SENTINEL SENTINELS on %s: %v, want the other members %v", id, addrs, want)
			}

			master, err := s.Master(ctx, "mymaster").Result()
			if err != nil {
				t.Fatalf("SENTINEL MASTER on %s: %v", id, err)
			}
			for field, want := range map[string]string{"name": "mymaster", "ip": leaderHost, "port": leaderPort, "flags": "master",
				"num-slaves": "2", "num-other-sentinels": "2", "quorum": "2",
				// Sentinel's timeouts are the members' failure detection.
				"down-after-milliseconds": fmt.Sprint(clustertest.Heartbeat.Milliseconds()), "failover-timeout": fmt.Sprint(clustertest.Election.Milliseconds())} {
				if master[field] != want {
					t.Errorf("SENTINEL MASTER on %s: %s is %q, want %q", id, field, master[field], want)
				}
			}
			if got, err := s.CkQuorum(ctx, "mymaster").Result(); got != "OK 3 usable Sentinels. Quorum and failover authorization can be reached" {
				t.Errorf("SENTINEL CKQUORUM on %s = %q, %v", id, got, err)
			}
			if err := s.GetMasterAddrByName(ctx, "other").Err(); err != redis.Nil {
				t.Errorf("GET-MASTER-ADDR-BY-NAME of an unknown name on %s = %v, want nil", id, err)
			}
		}

		// ROLE: the leader lists the followers; a follower names the leader.
		role, err := leader.Client().Do(ctx, "ROLE").Slice()
		if err != nil || len(role) != 3 || role[0] != "master" {
			t.Fatalf("ROLE on the leader = %v, %v; want [master offset replicas]", role, err)
		}
		var replicas []string
		for _, r := range role[2].([]any) {
			r := r.([]any)
			replicas = append(replicas, net.JoinHostPort(r[0].(string), r[1].(string)))
		}
		slices.Sort(replicas)
		if want := addrsOf(followers); !slices.Equal(replicas, want) {
			t.Errorf("ROLE on the leader lists %v, want the followers %v", replicas, want)
		}
		for _, f := range followers {
			role, err := f.Client().Do(ctx, "ROLE").Slice()
			if err != nil || len(role) != 5 || role[0] != "slave" || role[1] != leaderHost ||
				fmt.Sprint(role[2]) != leaderPort || role[3] != "connected" {
				t.Errorf("ROLE on follower %s = %v, %v; want [slave %s %s connected offset]", f.ID(), role, err, leaderHost, leaderPort)
			}
		}
	})
}

// nextLeader waits until the members name a leader other than old: right
// after a handover some may not know of it yet.
func nextLeader(t testing.TB, c *embedded.Cluster, old *embedded.Member) *embedded.Member {
	t.Helper()
	var l *embedded.Member
	clustertest.Eventually(t, "a leader other than "+old.ID(), func() error {
		if l = c.Leader(t); l == old {
			return fmt.Errorf("%s still leads", old.ID())
		}
		return nil
	})
	return l
}

// switchMessages reads the +switch-master messages sub receives until one
// names newAddr as the master, and checks that each moves leadership on from
// where the one before left it, *master, in Sentinel's format; *master
// follows them. Leadership may pass through other members on the way.
func switchMessages(t testing.TB, what string, sub *redis.PubSub, master *string, newAddr string) {
	t.Helper()
	timeout := time.After(clustertest.Wait)
	var got []string
	for *master != newAddr {
		select {
		case msg := <-sub.Channel():
			got = append(got, msg.Payload)
			f := strings.Fields(msg.Payload)
			if len(f) != 5 || f[0] != "mymaster" || net.JoinHostPort(f[1], f[2]) != *master {
				t.Fatalf("%s: +switch-master %q: want \"mymaster <ip> <port> <ip> <port>\" moving from %s", what, msg.Payload, *master)
			}
			*master = net.JoinHostPort(f[3], f[4])
		case <-timeout:
			t.Fatalf("%s: no +switch-master from %s to %s came; got %q", what, *master, newAddr, got)
		}
	}
}

// go-redis's FailoverClient, given one member's address, finds the leader,
// takes a lock, and follows the leader when it hands over (SENTINEL
// FAILOVER) and when it dies: the lock is still held after both.
func TestSentinelFailoverClientFollowsTheLeader(t *testing.T) {
	testenv.Long(t)
	attempt.Run(t, func(t testing.TB) {
		c := startMembers(t, "s3cret")
		ctx := context.Background()
		a := c.Leader(t)
		waitMasterAddr(t, c.Nodes, a)

		var subs []*redis.PubSub
		masters := make([]string, len(c.Nodes)) // the master each subscriber last heard of
		for i, m := range c.Nodes {
			sub := m.Client().Subscribe(ctx, "+switch-master")
			if _, err := sub.Receive(ctx); err != nil {
				t.Fatalf("SUBSCRIBE +switch-master on %s: %v", m.ID(), err)
			}
			t.Cleanup(func() { sub.Close() })
			subs = append(subs, sub)
			masters[i] = a.Options.Addr
		}

		rdb := redis.NewFailoverClient(&redis.FailoverOptions{
			MasterName:       "mymaster",
			SentinelAddrs:    []string{a.Options.Addr},
			Password:         "s3cret",
			SentinelPassword: "s3cret",
		})
		defer rdb.Close()
		if err := rdb.SetArgs(ctx, "lock", "token-1", redis.SetArgs{Mode: "NX", TTL: time.Minute}).Err(); err != nil {
			t.Fatalf("SET NX PX through the FailoverClient: %v", err)
		}
		if id, err := nodeOf(ctx, rdb); id != a.ID() {
			t.Fatalf("the FailoverClient reached %q (%v), want the leader %s", id, err, a.ID())
		}
		// The client follows whichever member leads, wherever leadership
		// went on the way.
		follows := func() {
			t.Helper()
			clustertest.Eventually(t, "the client reaches the leader", func() error {
				l := c.Leader(t)
				id, err := nodeOf(ctx, rdb)
				if err == nil && id != l.ID() {
					return fmt.Errorf("the client reaches %s, %s leads", id, l.ID())
				}
				return err
			})
			clustertest.Eventually(t, "GET lock after the leader changed", func() error {
				got, err := rdb.Get(ctx, "lock").Result()
				if clustertest.WriteErr(err) {
					return err
				}
				if got != "token-1" {
					t.Fatalf("GET lock after the leader changed = %q, %v; want token-1", got, err)
				}
				return nil
			})
		}

		// The leader hands over, asked through a follower.
		attempt.Own(t)
		followers := c.Followers(c.Leader(t))
		if err := sentinelClient(t, followers[0]).Failover(ctx, "mymaster").Err(); err != nil {
			t.Fatalf("SENTINEL FAILOVER through a follower: %v", err)
		}
		b := nextLeader(t, c, a)
		for i, sub := range subs {
			switchMessages(t, "handover, subscriber on "+c.Nodes[i].ID(), sub, &masters[i], b.Options.Addr)
		}
		follows()

		// The leader dies: the client finds the next one through the members
		// the first one listed as Sentinels.
		dead := c.Leader(t)
		dead.Stop()
		next := nextLeader(t, c, dead)
		for i, m := range c.Nodes {
			if m != dead {
				switchMessages(t, "crash, subscriber on "+m.ID(), subs[i], &masters[i], next.Options.Addr)
			}
		}
		follows()
		if ttl, err := rdb.PTTL(ctx, "lock").Result(); err != nil || ttl <= 0 {
			t.Fatalf("PTTL lock after two failovers = %v, %v; want the lock still held", ttl, err)
		}
	})
}

// A standalone server is the master of itself, with no replicas and no other
// Sentinels, over TCP and over the in-memory Dialer.
func TestSentinelStandalone(t *testing.T) {
	s, err := lockserver.Open(lockserver.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()

	sc := redis.NewSentinelClient(&redis.Options{Addr: s.Addr()})
	defer sc.Close()
	got, err := sc.GetMasterAddrByName(ctx, "mymaster").Result()
	if err != nil || net.JoinHostPort(got[0], got[1]) != s.Addr() {
		t.Fatalf("GET-MASTER-ADDR-BY-NAME = %v, %v; want %s", got, err, s.Addr())
	}
	if r, err := sc.Replicas(ctx, "mymaster").Result(); err != nil || len(r) != 0 {
		t.Errorf("SENTINEL REPLICAS = %v, %v; want none", r, err)
	}
	if r, err := sc.Sentinels(ctx, "mymaster").Result(); err != nil || len(r) != 0 {
		t.Errorf("SENTINEL SENTINELS = %v, %v; want none", r, err)
	}
	if err := sc.Failover(ctx, "mymaster").Err(); err == nil || err.Error() != "NOGOODSLAVE No suitable replica to promote" {
		t.Errorf("SENTINEL FAILOVER = %v, want NOGOODSLAVE", err)
	}

	for name, opts := range map[string]*redis.FailoverOptions{
		"tcp":       {MasterName: "mymaster", SentinelAddrs: []string{s.Addr()}},
		"in-memory": {MasterName: "mymaster", SentinelAddrs: []string{"lockserver:0"}, Dialer: s.Dialer()},
	} {
		rdb := redis.NewFailoverClient(opts)
		if err := rdb.Set(ctx, "k-"+name, "v", 0).Err(); err != nil {
			t.Errorf("%s: SET through the FailoverClient: %v", name, err)
		}
		if v, err := rdb.Get(ctx, "k-"+name).Result(); v != "v" {
			t.Errorf("%s: GET through the FailoverClient = %q, %v", name, v, err)
		}
		rdb.Close()
	}

	// A name given in Options is the one answered to.
	named, err := lockserver.Open(lockserver.Options{SentinelMaster: "locks"})
	if err != nil {
		t.Fatal(err)
	}
	defer named.Close()
	nc := redis.NewSentinelClient(&redis.Options{Addr: named.Addr()})
	defer nc.Close()
	if err := nc.GetMasterAddrByName(ctx, "mymaster").Err(); err != redis.Nil {
		t.Errorf("GET-MASTER-ADDR-BY-NAME mymaster when the name is locks = %v, want nil", err)
	}
	if got, err := nc.GetMasterAddrByName(ctx, "locks").Result(); err != nil || net.JoinHostPort(got[0], got[1]) != named.Addr() {
		t.Errorf("GET-MASTER-ADDR-BY-NAME locks = %v, %v; want %s", got, err, named.Addr())
	}
}

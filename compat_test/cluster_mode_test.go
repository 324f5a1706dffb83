package compat_test

import (
	"context"
	"fmt"
	"net"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lockserver/lockserver"
	"github.com/lockserver/lockserver/internal/attempt"
	"github.com/lockserver/lockserver/internal/freeport"
	"github.com/lockserver/lockserver/internal/lockscripts"
	"github.com/lockserver/lockserver/internal/testenv"
	"github.com/redis/go-redis/v9"
)

// The CLUSTER commands of lockserver against real redis-servers in cluster
// mode: a one-node cluster owning every slot beside a standalone lockserver,
// and a master with two replicas beside a three-member lockserver cluster
// (the leader beside the master, a follower beside a replica). Replies must
// have Redis's shape: the same RESP types, the same fields in the same
// order, the same flags, roles and slot ranges. Ids, ports, offsets and
// epochs necessarily differ and are compared by kind only.

// startRedisCluster starts n redis-servers in cluster mode: the first owns
// every slot, the others replicate it. It returns their addresses once every
// node reports the cluster ok with all replicas in sync.
func startRedisCluster(t testing.TB, n int) []string {
	t.Helper()
	var addrs, buses []string
	for range n {
		bus := strconv.Itoa(freeport.MustPort(t))
		// The announced ip makes a lone node report 127.0.0.1 rather than
		// "" (it learns its own address from the other nodes otherwise).
		addrs = append(addrs, startRedis(t, "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
			"--cluster-port", bus, "--cluster-announce-ip", "127.0.0.1"))
		buses = append(buses, bus)
	}
	master := addrs[0]
	mhost, mport, _ := net.SplitHostPort(master)
	if r := sentinelCmd(t, master, "CLUSTER", "ADDSLOTSRANGE", "0", "16383"); r != "+OK\r\n" {
		t.Fatalf("CLUSTER ADDSLOTSRANGE: %q", r)
	}
	id := strings.TrimSpace(strings.Split(sentinelCmd(t, master, "CLUSTER", "MYID"), "\r\n")[1])
	for _, r := range addrs[1:] {
		sentinelCmd(t, r, "CLUSTER", "MEET", mhost, mport, buses[0])
		waitFor(t, func() string {
			if reply := sentinelCmd(t, r, "CLUSTER", "REPLICATE", id); reply != "+OK\r\n" {
				return r + " to replicate the master: " + reply
			}
			return ""
		})
	}
	waitFor(t, func() string {
		for _, a := range addrs {
			info := sentinelCmd(t, a, "CLUSTER", "INFO")
			if !strings.Contains(info, "cluster_state:ok") || !strings.Contains(info, "cluster_known_nodes:"+strconv.Itoa(n)) {
				return a + " to see the cluster ok with every node: " + info
			}
			slots, _ := parseTree(sentinelCmd(t, a, "CLUSTER", "SLOTS"))
			if len(slots.elems) != 1 || len(slots.elems[0].elems) != 2+n {
				return a + " to list every node in CLUSTER SLOTS: " + slots.shape()
			}
			shards, _ := parseTree(sentinelCmd(t, a, "CLUSTER", "SHARDS"))
			if s := shards.shape(); strings.Contains(s, "loading") {
				return a + " to see every replica in sync: " + s
			}
		}
		return ""
	})
	return addrs
}

// clusterInfoShape is CLUSTER INFO's fields in order, with the epochs and
// message counts masked.
func clusterInfoShape(raw string) string {
	v, _ := parseTree(raw)
	var fields []string
	for _, l := range strings.Split(strings.TrimPrefix(v.str, "txt:"), "\r\n") {
		k, val, _ := strings.Cut(l, ":")
		switch {
		case k == "cluster_stats_messages_sent" || k == "cluster_stats_messages_received":
			val = "<int>" // messages of the cluster bus, which lockserver has not
		case strings.HasPrefix(k, "cluster_stats_messages_"):
			continue // per message type, listed by Redis once some were exchanged
		case strings.HasSuffix(k, "_epoch"):
			val = "<int>"
		}
		fields = append(fields, k+":"+val)
	}
	return string(v.typ) + strings.Join(fields, " ")
}

var nodeAddrRE = regexp.MustCompile(`^127\.0\.0\.1:[0-9]+@[0-9]+$`)

// clusterNodesShape is CLUSTER NODES's lines, sorted, each with the id,
// address and numbers masked and the master's id named <master>; it checks
// that the line marked myself is myAddr, and that the master is masterAddr.
func clusterNodesShape(t testing.TB, what, raw, myAddr, masterAddr string) string {
	t.Helper()
	v, _ := parseTree(raw)
	text := strings.TrimPrefix(v.str, "txt:")
	if !strings.HasSuffix(text, "\n") {
		t.Errorf("%s: CLUSTER NODES does not end in a newline: %q", what, text)
	}
	lines := strings.Split(strings.TrimSuffix(text, "\n"), "\n")
	masterID := ""
	for _, l := range lines {
		if f := strings.Fields(l); len(f) > 2 && slices.Contains(strings.Split(f[2], ","), "master") {
			masterID = f[0]
			if addr, _, _ := strings.Cut(f[1], "@"); addr != masterAddr {
				t.Errorf("%s: the master is at %s, want %s", what, addr, masterAddr)
			}
		}
	}
	var shapes []string
	for _, l := range lines {
		f := strings.Fields(l)
		if len(f) < 8 {
			t.Errorf("%s: CLUSTER NODES line %q has %d fields", what, l, len(f))
			continue
		}
		if maskValue(f[0], "") != "<runid>" || !nodeAddrRE.MatchString(f[1]) {
			t.Errorf("%s: CLUSTER NODES line %q: want a 40-hex id and ip:port@cport", what, l)
		}
		if addr, _, _ := strings.Cut(f[1], "@"); strings.Contains(f[2], "myself") && addr != myAddr {
			t.Errorf("%s: myself is at %s, want %s", what, addr, myAddr)
		}
		if f[3] == masterID {
			f[3] = "<master>"
		}
		for _, i := range []int{4, 5, 6} {
			f[i] = maskValue(f[i], "")
		}
		shapes = append(shapes, strings.Join(f[2:], " "))
	}
	slices.Sort(shapes)
	return string(v.typ) + strings.Join(shapes, " | ")
}

// compareCluster compares the CLUSTER replies of a lockserver node with a
// redis-server node in the same role, in RESP2 and RESP3.
func compareCluster(t testing.TB, what, redisAddr, redisMaster, lsAddr, lsMaster string) {
	t.Helper()
	same := [][]string{{"CLUSTER", "MYID"}, {"CLUSTER", "SLOTS"}, {"CLUSTER", "SHARDS"}, {"cluster", "slots"}}
	exact := [][]string{
		{"CLUSTER"}, {"CLUSTER", "NOPE"}, {"CLUSTER", "INFO", "x"},
		{"CLUSTER", "MYID", "x"}, {"CLUSTER", "SLOTS", "x"}, {"CLUSTER", "SHARDS", "x"}, {"CLUSTER", "NODES", "x"},
		{"CLUSTER", "KEYSLOT"}, {"CLUSTER", "KEYSLOT", "a", "b"}, {"CLUSTER", "HELP", "x"},
		{"READONLY"}, {"READWRITE"}, {"ASKING"}, {"READONLY", "x"}, {"READWRITE", "x"}, {"ASKING", "x"},
		{"CLUSTER", "COUNTKEYSINSLOT"}, {"CLUSTER", "COUNTKEYSINSLOT", "1", "2"},
		{"CLUSTER", "GETKEYSINSLOT"}, {"CLUSTER", "GETKEYSINSLOT", "1"}, {"CLUSTER", "GETKEYSINSLOT", "1", "2", "3"},
		// No key is in slot 0 or 16383 (see compareKeysInSlot).
		{"CLUSTER", "COUNTKEYSINSLOT", "0"}, {"cluster", "countkeysinslot", "16383"},
		{"CLUSTER", "GETKEYSINSLOT", "0", "0"}, {"CLUSTER", "GETKEYSINSLOT", "16383", "9223372036854775807"},
	}
	for _, slot := range []string{"16384", "-1", "x", "01", "+1", " 1", "1.0", "", "99999999999999999999", "-9223372036854775809"} {
		exact = append(exact, []string{"CLUSTER", "COUNTKEYSINSLOT", slot},
			[]string{"CLUSTER", "GETKEYSINSLOT", slot, "1"}, []string{"CLUSTER", "GETKEYSINSLOT", "1", slot},
			[]string{"CLUSTER", "GETKEYSINSLOT", slot, "x"}, []string{"CLUSTER", "GETKEYSINSLOT", slot, "-1"})
	}
	for _, key := range []string{"", "a", "foo", "somekey", "{user1}.a", "{user1}.b", "user1", "{}", "a{}b", "{{x}}",
		"{x}}", "}{x}", "{a}{b}", "x{y}z", "{abc", "abc}", "\xff\x00{\x01}", strings.Repeat("k", 1000), "lock", "{lock}:channel"} {
		exact = append(exact, []string{"CLUSTER", "KEYSLOT", key})
	}
	for _, proto := range []string{"2", "3"} {
		rs, ls := dialRaw(t, redisAddr), dialRaw(t, lsAddr)
		rs.Do("HELLO", proto)
		ls.Do("HELLO", proto)
		w := fmt.Sprintf("%s, RESP%s", what, proto)
		for _, cmd := range same {
			sameShape(t, fmt.Sprintf("%s: %q", w, cmd), rs.Do(cmd...), ls.Do(cmd...))
		}
		for _, cmd := range exact {
			if want, got := rs.Do(cmd...), ls.Do(cmd...); got != want {
				t.Errorf("%s: %q:\n redis-server: %q\n   lockserver: %q", w, cmd, want, got)
			}
		}
		if want, got := clusterInfoShape(rs.Do("CLUSTER", "INFO")), clusterInfoShape(ls.Do("CLUSTER", "INFO")); got != want {
			t.Errorf("%s: CLUSTER INFO:\n redis-server: %s\n   lockserver: %s", w, want, got)
		}
		want := clusterNodesShape(t, w+" redis-server", rs.Do("CLUSTER", "NODES"), redisAddr, redisMaster)
		if got := clusterNodesShape(t, w+" lockserver", ls.Do("CLUSTER", "NODES"), lsAddr, lsMaster); got != want {
			t.Errorf("%s: CLUSTER NODES:\n redis-server: %s\n   lockserver: %s", w, want, got)
		}
		// MYID is the id of the node CLUSTER NODES marks myself.
		myID, _ := parseTree(ls.Do("CLUSTER", "MYID"))
		if nodes, _ := parseTree(ls.Do("CLUSTER", "NODES")); !strings.Contains(nodes.str, myID.str+" "+lsAddr+"@") {
			t.Errorf("%s: CLUSTER MYID %s is not the id of %s in CLUSTER NODES:\n%s", w, myID.str, lsAddr, nodes.str)
		}
	}
	// The layout follows the Raft membership: the subcommands that change a
	// Redis Cluster's are unknown, with Redis's error for an unknown one.
	for _, sub := range []string{"ADDSLOTS", "MEET", "REPLICATE", "FAILOVER", "SETSLOT"} {
		want := "-ERR unknown subcommand '" + sub + "'. Try CLUSTER HELP.\r\n"
		if got := sentinelCmd(t, lsAddr, "CLUSTER", sub, "x"); got != want {
			t.Errorf("%s: CLUSTER %s: %q, want %q", what, sub, got, want)
		}
	}
	// CLUSTER HELP lists a subset of Redis's lines.
	redisHelp, _ := parseTree(sentinelCmd(t, redisAddr, "CLUSTER", "HELP"))
	lsHelp, _ := parseTree(sentinelCmd(t, lsAddr, "CLUSTER", "HELP"))
	have := map[string]bool{}
	for _, l := range redisHelp.elems {
		have[l.str] = true
	}
	for _, l := range lsHelp.elems {
		if !have[l.str] {
			t.Errorf("%s: CLUSTER HELP line %q is not Redis's", what, l.str)
		}
	}
}

// slotKeys are the keys compareKeysInSlot writes: all but "a" and
// "{user1}.x" are in slot 15891, the slot of "t" (of its hash tag for the
// others); "{t}b" is deleted and written again, which moves it to the front
// of Redis's list of the slot's keys.
var slotKeys = []string{"{t}a", "{t}b", "t", "{t}zz", "{t}0", "a", "{user1}.x", "{t}" + strings.Repeat("k", 300)}

// compareKeysInSlot writes the same keys to a redis-server cluster's master
// and to a lockserver, through writeRedis and writeLS, then compares CLUSTER
// COUNTKEYSINSLOT and GETKEYSINSLOT on each pair of nodes of nodes
// ({redis-server, lockserver}), in RESP2 and RESP3.
//
// Redis lists a slot's keys newest first, in the order of the list it keeps
// for each slot; lockserver, which keeps no such list (see
// keyspace.forKeysInSlot), lists them in byte order. So GETKEYSINSLOT's
// lists are compared as sets, and one cut short by its count as a subset of
// the slot's keys of the right length.
func compareKeysInSlot(t testing.TB, writeRedis, writeLS string, nodes [][2]string) {
	t.Helper()
	for _, addr := range []string{writeRedis, writeLS} {
		w := dialRaw(t, addr)
		for _, k := range slotKeys {
			w.Write("SET", k, "v")
		}
		w.Write("DEL", "{t}b")
		w.Write("HSET", "{t}b", "f", "v")
		// An expired key is not in its slot any more. Redis drops it from
		// its slot when it deletes it, on the PTTL that finds it expired.
		w.Write("SET", "{t}gone", "v", "PX", "1")
		waitFor(t, func() string {
			if r := w.Do("PTTL", "{t}gone"); r != ":-2\r\n" {
				return addr + " to expire {t}gone: PTTL " + r
			}
			return ""
		})
	}
	slots := []string{"15891", "15495", strconv.Itoa(keySlot(t, writeRedis, "{user1}.x")), "1"}
	for _, pair := range nodes {
		rs, ls := dialRaw(t, pair[0]), dialRaw(t, pair[1])
		// A replica has the keys once it has the master's deletion of {t}gone.
		waitFor(t, func() string {
			if r := rs.Do("CLUSTER", "COUNTKEYSINSLOT", "15891"); r != ":6\r\n" {
				return pair[0] + " to have the 6 keys of slot 15891: " + r
			}
			return ""
		})
		for _, proto := range []string{"2", "3"} {
			rs.Do("HELLO", proto)
			ls.Do("HELLO", proto)
			w := fmt.Sprintf("%s, RESP%s", pair[0], proto)
			for _, slot := range slots {
				cmd := []string{"CLUSTER", "COUNTKEYSINSLOT", slot}
				if want, got := rs.Do(cmd...), ls.Do(cmd...); got != want {
					t.Errorf("%s: %q:\n redis-server: %q\n   lockserver: %q", w, cmd, want, got)
				}
				cmd = []string{"CLUSTER", "GETKEYSINSLOT", slot, "100"}
				want, got := keyList(t, rs.Do(cmd...)), keyList(t, ls.Do(cmd...))
				if !slices.Equal(sorted(got), sorted(want)) {
					t.Errorf("%s: %q:\n redis-server: %q\n   lockserver: %q", w, cmd, want, got)
				}
				if !slices.IsSorted(got) {
					t.Errorf("%s: %q: %q is not in byte order", w, cmd, got)
				}
			}
			all := keyList(t, rs.Do("CLUSTER", "GETKEYSINSLOT", "15891", "100"))
			for _, count := range []string{"0", "1", "3", "6", "7"} {
				cmd := []string{"CLUSTER", "GETKEYSINSLOT", "15891", count}
				want, got := keyList(t, rs.Do(cmd...)), keyList(t, ls.Do(cmd...))
				if len(got) != len(want) || slices.ContainsFunc(got, func(k string) bool { return !slices.Contains(all, k) }) {
					t.Errorf("%s: %q:\n redis-server: %q\n   lockserver: %q, want as many of %q", w, cmd, want, got, all)
				}
			}
			// Inside a transaction, as a read of the entry.
			tx := [][]string{{"MULTI"}, {"CLUSTER", "COUNTKEYSINSLOT", "15891"}, {"CLUSTER", "COUNTKEYSINSLOT", "16384"}, {"EXEC"}}
			for _, cmd := range tx {
				if want, got := rs.Do(cmd...), ls.Do(cmd...); got != want {
					t.Errorf("%s: %q:\n redis-server: %q\n   lockserver: %q", w, cmd, want, got)
				}
			}
		}
	}
}

// keySlot asks the redis-server at addr for key's slot.
func keySlot(t testing.TB, addr, key string) int {
	t.Helper()
	v, _ := parseTree(sentinelCmd(t, addr, "CLUSTER", "KEYSLOT", key))
	n, err := strconv.Atoi(v.str)
	if err != nil {
		t.Fatalf("CLUSTER KEYSLOT %s: %q", key, v.str)
	}
	return n
}

// keyList returns the bulk strings of an array reply.
func keyList(t testing.TB, raw string) []string {
	t.Helper()
	v, _ := parseTree(raw)
	if v.typ != '*' {
		t.Fatalf("want an array, got %q", raw)
	}
	keys := []string{}
	for _, e := range v.elems {
		if e.typ != '$' {
			t.Fatalf("want an array of bulk strings, got %q", raw)
		}
		keys = append(keys, e.str)
	}
	return keys
}

func sorted(s []string) []string { return slices.Sorted(slices.Values(s)) }

func TestDiffClusterModeStandalone(t *testing.T) {
	testenv.Long(t)
	testenv.Need(t, "redis-server")
	redisAddr := startRedisCluster(t, 1)[0]
	ls := startLockserver(t, lockserver.Options{})
	compareCluster(t, "standalone", redisAddr, redisAddr, ls.Addr(), ls.Addr())
	compareKeysInSlot(t, redisAddr, ls.Addr(), [][2]string{{redisAddr, ls.Addr()}})
	// The id stays the same across connections and restarts at one address.
	id := sentinelCmd(t, ls.Addr(), "CLUSTER", "MYID")
	addr := ls.Addr()
	ls.Close()
	again := startLockserver(t, lockserver.Options{Addr: addr})
	if got := sentinelCmd(t, again.Addr(), "CLUSTER", "MYID"); got != id {
		t.Errorf("CLUSTER MYID changed across a restart at %s: %q, then %q", addr, id, got)
	}
}

func TestDiffClusterModeCluster(t *testing.T) {
	testenv.Long(t)
	testenv.Need(t, "redis-server")
	redisAddrs := startRedisCluster(t, 3)
	// An election during an attempt voids it (package attempt): what the
	// members report follows the leader.
	attempt.Run(t, func(t testing.TB) {
		c := startCluster(t)
		leader := c.server(c.leader).Addr()
		// Every member must know the others' client addresses first.
		for _, m := range c.Nodes {
			addr := m.Server().Addr()
			waitFor(t, func() string {
				if info := sentinelCmd(t, addr, "CLUSTER", "INFO"); !strings.Contains(info, "cluster_known_nodes:3") || !strings.Contains(info, "cluster_state:ok") {
					return addr + " to know 3 nodes: " + info
				}
				return ""
			})
		}
		compareCluster(t, "leader", redisAddrs[0], redisAddrs[0], leader, leader)
		compareCluster(t, "follower", redisAddrs[1], redisAddrs[0], c.follower().Addr(), leader)
		compareKeysInSlot(t, redisAddrs[0], leader, [][2]string{{redisAddrs[0], leader}, {redisAddrs[1], c.follower().Addr()}})
	})
}

// clusterLockSession takes and releases locks through a go-redis
// ClusterClient with the scripts of internal/lockscripts and SET NX PX, and
// logs each reply; a lock holder's remaining TTL is logged as its sign.
func clusterLockSession(t testing.TB, rdb *redis.ClusterClient, prefix string) []string {
	t.Helper()
	ctx := context.Background()
	script := func(name string) *redis.Script { return redis.NewScript(lockscripts.MustSource(t, name)) }
	var log []string
	add := func(step string, v any, err error) {
		if n, ok := v.(int64); ok && n > 1000 {
			v = "<ttl>"
		}
		log = append(log, fmt.Sprintf("%s: %v %v", step, v, err))
	}
	lock := "{" + prefix + "}"
	channel := "redisson_lock__channel:" + lock
	v, err := rdb.SetNX(ctx, prefix+":set", "tok", 30*time.Second).Result()
	add("SET NX PX", v, err)
	v, err = rdb.SetNX(ctx, prefix+":set", "tok2", 30*time.Second).Result()
	add("SET NX PX taken", v, err)
	cad := script("compare_and_delete.lua")
	r, err := cad.Run(ctx, rdb, []string{prefix + ":set"}, "tok2").Result()
	add("compare-and-delete wrong token", r, err)
	r, err = cad.Run(ctx, rdb, []string{prefix + ":set"}, "tok").Result()
	add("compare-and-delete", r, err)
	rlock, runlock := script("redisson_lock.lua"), script("redisson_unlock_v2.lua")
	for i, owner := range []string{"a:1", "a:1", "b:1"} {
		r, err = rlock.Run(ctx, rdb, []string{lock}, 30000, owner).Result()
		add("redisson lock "+strconv.Itoa(i), r, err)
	}
	for i, owner := range []string{"b:1", "a:1", "a:1"} {
		r, err = runlock.Run(ctx, rdb, []string{lock, channel}, 0, 30000, owner).Result()
		add("redisson unlock "+strconv.Itoa(i), r, err)
	}
	relock, reunlock := script("reentrant_lock.lua"), script("reentrant_unlock.lua")
	r, err = relock.Run(ctx, rdb, []string{prefix + ":re"}, 30000, "o").Result()
	add("reentrant lock", r, err)
	r, err = reunlock.Run(ctx, rdb, []string{prefix + ":re"}, 0, "o").Result()
	add("reentrant unlock", r, err)
	return log
}

// newClusterClient returns a ClusterClient seeded with addr alone.
func newClusterClient(t testing.TB, addr string) *redis.ClusterClient {
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{addr}})
	t.Cleanup(func() { rdb.Close() })
	return rdb
}

func TestClusterClientGoRedis(t *testing.T) {
	testenv.Long(t)
	testenv.Need(t, "redis-server")
	want := clusterLockSession(t, newClusterClient(t, startRedisCluster(t, 1)[0]), "s")
	// The replies internal/lockscripts/README.md gives, as go-redis reports them.
	readme := []string{
		"SET NX PX: true <nil>", "SET NX PX taken: false <nil>",
		"compare-and-delete wrong token: 0 <nil>", "compare-and-delete: 1 <nil>",
		"redisson lock 0: <nil> redis: nil", "redisson lock 1: <nil> redis: nil", "redisson lock 2: <ttl> <nil>",
		"redisson unlock 0: <nil> redis: nil", "redisson unlock 1: 0 <nil>", "redisson unlock 2: 1 <nil>",
		"reentrant lock: 1 <nil>", "reentrant unlock: 1 <nil>",
	}
	if !slices.Equal(want, readme) {
		t.Fatalf("redis-server through a ClusterClient:\n%s\nthe scripts' README:\n%s", strings.Join(want, "\n"), strings.Join(readme, "\n"))
	}
	t.Run("standalone", func(t *testing.T) {
		ls := startLockserver(t, lockserver.Options{})
		if got := clusterLockSession(t, newClusterClient(t, ls.Addr()), "s"); !slices.Equal(got, want) {
			t.Errorf("redis-server:\n%s\nlockserver:\n%s", strings.Join(want, "\n"), strings.Join(got, "\n"))
		}
	})
	t.Run("cluster", func(t *testing.T) {
		testenv.Long(t)
		attempt.Run(t, func(t testing.TB) {
			c := startCluster(t)
			ctx := context.Background()
			rdb := newClusterClient(t, c.follower().Addr())
			// go-redis finds the shard's master, the leader, from the follower.
			masterAddr := func() string {
				m, err := rdb.MasterForKey(ctx, "x")
				if err != nil {
					t.Fatal(err)
				}
				return m.Options().Addr
			}
			if got := masterAddr(); got != c.server(c.leader).Addr() {
				t.Errorf("go-redis takes %s for the master, the leader is %s", got, c.server(c.leader).Addr())
			}
			if got := clusterLockSession(t, rdb, "c1"); !slices.Equal(got, want) {
				t.Errorf("redis-server:\n%s\nlockserver cluster:\n%s", strings.Join(want, "\n"), strings.Join(got, "\n"))
			}
			// Leadership moves; go-redis, told to reload, follows it, and the
			// old leader, now a follower, keeps serving the client meanwhile.
			attempt.Own(t)
			old := c.server(c.leader).Addr()
			if r := sentinelCmd(t, old, "SENTINEL", "FAILOVER", "mymaster"); r != "+OK\r\n" {
				t.Fatalf("SENTINEL FAILOVER: %q", r)
			}
			if got := clusterLockSession(t, rdb, "c2"); !slices.Equal(got, want) {
				t.Errorf("during the leader change:\nredis-server:\n%s\nlockserver cluster:\n%s", strings.Join(want, "\n"), strings.Join(got, "\n"))
			}
			// go-redis finds the new leader: the node it takes for the master
			// leads, and it is not the old one.
			waitFor(t, func() string {
				rdb.ReloadState(ctx)
				got := masterAddr()
				if r := sentinelCmd(t, got, "ROLE"); got == old || !strings.HasPrefix(r, "*3\r\n$6\r\nmaster\r\n") {
					return fmt.Sprintf("go-redis to take the new leader for the master: %s, whose ROLE is %q", got, r)
				}
				return ""
			})
			if got := clusterLockSession(t, rdb, "c3"); !slices.Equal(got, want) {
				t.Errorf("after the leader change:\nredis-server:\n%s\nlockserver cluster:\n%s", strings.Join(want, "\n"), strings.Join(got, "\n"))
			}
		})
	})
}

package replication

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/lockserver/lockserver/internal/attempt"
	"github.com/lockserver/lockserver/internal/buildinfo"
	"github.com/lockserver/lockserver/internal/lockscripts"
	"github.com/lockserver/lockserver/internal/testenv"
	"github.com/lockserver/lockserver/keyspace"
)

func same(a, b keyspace.Reply) bool { return fmt.Sprint(a) == fmt.Sprint(b) }

func wantReply(t testing.TB, what string, got, want keyspace.Reply) {
	t.Helper()
	if !same(got, want) {
		t.Fatalf("%s = %+v, want %+v", what, got, want)
	}
}

func wantErrPrefix(t testing.TB, what string, got keyspace.Reply, prefixes ...string) {
	t.Helper()
	for _, p := range prefixes {
		if got.Kind == keyspace.KindError && strings.HasPrefix(got.Str, p) {
			return
		}
	}
	t.Fatalf("%s = %+v, want an error starting with one of %q", what, got, prefixes)
}

// A write acknowledged by the leader is on every node, survives the loss of
// the leader, and a restarted node catches up from its own log.
func TestClusterWritesSurviveLeaderLoss(t *testing.T) {
	testenv.Long(t)
	c := newTestCluster(t, 3)
	l := c.leader()
	wantReply(t, "SET on the leader", c.set(l, 0, "k", "v1"), keyspace.OK)
	for _, f := range c.followers(l) {
		c.eventually(f.id+" applies k", func() bool { return same(localGet(f, "k"), keyspace.Bulk("v1")) })
	}

	l = c.leader() // it may have changed since
	l.stop()
	l2 := c.leader()
	if l2 == l {
		t.Fatal("the stopped node still leads")
	}
	wantReply(t, "GET on the new leader", c.do(l2, 0, "GET", "k"), keyspace.Bulk("v1"))
	wantReply(t, "SET on the new leader", c.set(l2, 0, "k2", "v2"), keyspace.OK)

	l.restart()
	c.eventually("the restarted node applies k2", func() bool { return same(localGet(l, "k2"), keyspace.Bulk("v2")) })
	wantReply(t, "GET k on the restarted node", localGet(l, "k"), keyspace.Bulk("v1"))
}

// A pipeline keeps its order on the leader and through a follower: each GET
// sees exactly the INCRs submitted before it, none after, and a transaction
// runs as one entry.
func TestClusterPipelineOrder(t *testing.T) {
	attempt.Run(t, func(t testing.TB) {
		c := newTestCluster(t, 3)
		l := c.leader()
		pipelineOrder(t, l, c.followers(l)[0])
	})
}

func pipelineOrder(t testing.TB, nodes ...*testNode) {
	for _, n := range nodes {
		key := "counter-" + n.id
		var reqs []*Request
		for range 50 {
			for _, cmd := range [][]string{{"INCR", key}, {"GET", key}} {
				req := &Request{Cmds: [][][]byte{words(cmd...)}}
				n.eng.Submit(req)
				reqs = append(reqs, req)
			}
		}
		multi := &Request{Multi: true, Cmds: [][][]byte{words("INCR", key), words("GET", key)}}
		n.eng.Submit(multi)
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		for i, req := range reqs {
			want := keyspace.Int(int64(i/2 + 1))
			if i%2 == 1 {
				want = keyspace.Bulk(fmt.Sprint(i/2 + 1))
			}
			wantReply(t, fmt.Sprintf("%s: reply %d", n.id, i), req.Wait(ctx), want)
		}
		wantReply(t, n.id+": EXEC", multi.Wait(ctx), keyspace.Array(keyspace.Int(51), keyspace.Bulk("51")))
		cancel()
	}
}

// WATCH through a follower reads the versions on the leader, and an EXEC whose
// watched key changed in between runs nothing.
func TestClusterWatch(t *testing.T) {
	attempt.Run(t, func(t testing.TB) {
		c := newTestCluster(t, 3)
		l := c.leader()
		clusterWatch(t, l, c.followers(l)[0])
	})
}

func clusterWatch(t testing.TB, l, f *testNode) {
	watch := func() []Watch {
		req := &Request{WatchKeys: []string{"w"}}
		f.eng.Submit(req)
		r := waitReply(req)
		if r.Kind != keyspace.KindArray || len(r.Elems) != 1 {
			t.Fatalf("WATCH versions = %+v", r)
		}
		return []Watch{{DB: 0, Key: "w", Version: uint64(r.Elems[0].Int)}}
	}
	exec := func(ws []Watch) keyspace.Reply {
		req := &Request{Multi: true, Watch: ws, Cmds: [][][]byte{words("SET", "w", "mine")}}
		f.eng.Submit(req)
		return waitReply(req)
	}
	ws := watch()
	wantReply(t, "SET w by another client", do(l, 0, "SET", "w", "theirs"), keyspace.OK)
	wantReply(t, "EXEC after the watched key changed", exec(ws), keyspace.NullArray)
	wantReply(t, "EXEC with a fresh WATCH", exec(watch()), keyspace.Array(keyspace.OK))
	wantReply(t, "GET w", do(f, 0, "GET", "w"), keyspace.Bulk("mine"))
}

func waitReply(req *Request) keyspace.Reply {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	return req.Wait(ctx)
}

// With no majority there is no leader: a write fails with CLUSTERDOWN, which
// says that nothing was written, once forwardWait has passed.
func TestClusterNoQuorum(t *testing.T) {
	testenv.Long(t)
	c := newTestCluster(t, 3)
	l := c.leader()
	fs := c.followers(l)
	fs[0].stop()
	l.stop()
	// Should the last node have taken the lead meanwhile, it steps down once
	// it hears from no majority, and cannot take it again.
	c.eventually(fs[1].id+" to know it leads no one", func() bool { return fs[1].eng.raft.State() != raft.Leader })
	wantErrPrefix(t, "SET without a majority", do(fs[1], 0, "SET", "k", "v"), "CLUSTERDOWN")
}

// Messages published by an entry are delivered once on every node, the
// followers' included, and a restarted node delivers nothing as it replays.
func TestClusterPubSub(t *testing.T) {
	testenv.Long(t)
	attempt.Run(t, func(t testing.TB) {
		c := newTestCluster(t, 3)
		l := c.leader()
		f := c.followers(l)[0]
		wantReply(t, "PUBLISH through a follower", do(f, 0, "PUBLISH", "ch", "m1"), keyspace.Int(0))
		wantReply(t, "PUBLISH on the leader", do(l, 0, "PUBLISH", "ch", "m2"), keyspace.Int(0))
		want := "[ch:m1 ch:m2]"
		for _, n := range c.Nodes {
			c.eventually(n.id+" delivers both messages", func() bool { return fmt.Sprint(n.hub.messages()) == want })
		}

		f.stop()
		f.hub = &recordingHub{}
		f.restart()
		wantReply(t, "PUBLISH after the restart", do(l, 0, "PUBLISH", "ch", "m3"), keyspace.Int(0))
		c.eventually("the restarted node delivers the new message", func() bool { return len(f.hub.messages()) > 0 })
		if got := fmt.Sprint(f.hub.messages()); got != "[ch:m3]" {
			t.Fatalf("the restarted node delivered %s, want only [ch:m3]: replayed entries must not deliver", got)
		}
	})
}

// The state survives log compaction: a lagging follower receives the
// leader's snapshot, a restarted node restores its own and replays the rest,
// and a node wiped of its data rejoins, catches up and is promoted to voter.
// The script cache and the function libraries are part of it.
func TestClusterSnapshots(t *testing.T) {
	testenv.Long(t)
	c := newTestClusterWith(t, 3, RaftOptions{snapshotThreshold: 1 << 30, trailingLogs: 8})
	c.waitClusterVersion(buildinfo.Current.String(), false) // FUNCTION is 0.2's
	l := c.leader()
	lag := c.followers(l)[0]
	lag.stop()
	lastLag, _ := lag.store.LastIndex()

	for i := range 200 {
		wantReply(t, "SET", c.set(l, i%3, fmt.Sprint("k", i), fmt.Sprint(i)), keyspace.OK)
	}
	wantReply(t, "SET lease", c.set(l, 0, "lease", "x", "PX", "600000"), keyspace.OK)
	script := "return redis.call('GET', KEYS[1])"
	wantReply(t, "SCRIPT LOAD", c.idem(l, 0, "SCRIPT", "LOAD", script), keyspace.Bulk(sha1Hex(script)))
	library := "#!lua name=snaplib\n" +
		"redis.register_function{function_name='readk', callback=function(keys) return redis.call('GET', keys[1]) end, flags={'no-writes'}}\n" +
		"redis.register_function('setk', function(keys, args) return redis.call('SET', keys[1], args[1]) end)"
	wantReply(t, "FUNCTION LOAD", c.idem(l, 0, "FUNCTION", "LOAD", library), keyspace.Bulk("snaplib"))
	// Each running node compacts its log, so that the lagging one needs a
	// snapshot from whichever leads when it comes back.
	c.compactPast(t, l, lastLag)
	check := func(n *testNode) {
		t.Helper()
		c.eventually(n.id+" holds the entry after the snapshot", func() bool { return same(localGet(n, "after"), keyspace.Bulk("2")) })
		n.eng.smMu.Lock()
		defer n.eng.smMu.Unlock()
		for _, i := range []int{0, 1, 199} {
			got := n.eng.sm.Load().read(i%3, [][][]byte{words("GET", fmt.Sprint("k", i))}, false, nil, n.eng.sm.Load().lastTime())
			wantReply(t, fmt.Sprintf("%s: GET k%d in db %d", n.id, i, i%3), got, keyspace.Bulk(fmt.Sprint(i)))
		}
		evalsha := n.eng.sm.Load().read(0, [][][]byte{words("EVALSHA", sha1Hex(script), "1", "k0")}, false, nil, n.eng.sm.Load().lastTime())
		wantReply(t, n.id+": EVALSHA of the script loaded before the snapshot", evalsha, keyspace.Bulk("0"))
		fcall := n.eng.sm.Load().read(0, [][][]byte{words("FCALL", "readk", "1", "k0")}, false, nil, n.eng.sm.Load().lastTime())
		wantReply(t, n.id+": FCALL of the library loaded before the snapshot", fcall, keyspace.Bulk("0"))
		ttl := n.eng.sm.Load().read(0, [][][]byte{words("PTTL", "lease")}, false, nil, n.eng.sm.Load().lastTime())
		if ttl.Kind != keyspace.KindInt || ttl.Int <= 0 || ttl.Int > 600000 {
			t.Fatalf("%s: PTTL lease = %+v, want the lease's remaining time", n.id, ttl)
		}
	}

	lag.restart()
	check(lag)
	// Its log runs on from the snapshot with no gap after its old entries,
	// which a restart would take for entries lost (see checkedStore.verify).
	first, _ := lag.store.FirstIndex()
	last, _ := lag.store.LastIndex()
	for i := first; i <= last; i++ {
		var l raft.Log
		if err := lag.store.GetLog(i, &l); err != nil {
			t.Fatalf("the node that installed a snapshot holds entries %d..%d, but not %d: %v", first, last, i, err)
		}
	}

	l.stop()
	l.restart()
	check(l)
	// Called through a follower of whichever leads now.
	wantReply(t, "FCALL through a follower", c.idem(c.followers(c.leader())[0], 0, "FCALL", "setk", "1", "fk", "v"), keyspace.OK)
	wantReply(t, "FCALL_RO of its write", c.idem(c.leader(), 0, "FCALL_RO", "readk", "1", "fk"), keyspace.Bulk("v"))

	w := c.followers(c.leader())[0]
	w.stop()
	w.wipe()
	w.start(RaftOptions{Join: c.leader().raftAddr()})
	check(w)
	// It learned the cluster's identity from the cluster, and restarted
	// members kept theirs.
	for _, n := range []*testNode{w, lag, l} {
		if got, want := n.eng.cluster, bootstrapClusterID(c.peers, ""); got != want {
			t.Fatalf("%s: cluster identity %s, want the bootstrap list's %s", n.id, got, want)
		}
	}
	c.eventually(w.id+" promoted to voter", func() bool {
		for _, m := range c.leader().eng.Status().Members {
			if m.ID == w.id {
				return m.Voter
			}
		}
		return false
	})
	wantReply(t, "SET with the rejoined node", c.set(w, 0, "end", "1"), keyspace.OK)
}

// No lock expires early because a wall clock is minutes ahead: not the
// leader's (the log clock ignores steps and slews by at most SlewRate), and
// not that of a node that starts with it and then wins an election (a
// follower runs on the stamps it applies). Time never goes backwards across
// the failover.
func TestClusterClockWallJumps(t *testing.T) {
	testenv.Long(t)
	c := newTestCluster(t, 3)
	l := c.leader()
	const lease = 60000
	taken := time.Now()
	wantReply(t, "SET lock PX", c.set(l, 0, "lock", "owner", "PX", fmt.Sprint(lease)), keyspace.OK)

	l.wallAdd.Store(int64(10 * time.Minute))
	time.Sleep(300 * time.Millisecond)
	wantReply(t, "SET tick", c.set(l, 0, "tick", "1"), keyspace.OK)
	leaseBounds(t, "after the leader's wall clock jumped 10 min", pttlOn(t, c, l, "lock"), lease, taken)

	// The followers restart with clocks 10 minutes ahead, and one of them
	// takes over.
	for _, f := range c.followers(l) {
		f.stop()
		f.wallAdd.Store(int64(10 * time.Minute))
		f.restart()
	}
	c.eventually("the followers catch up", func() bool {
		for _, f := range c.followers(l) {
			if !same(localGet(f, "tick"), keyspace.Bulk("1")) {
				return false
			}
		}
		return true
	})
	before := lastTime(l)
	l.stop()
	l2 := c.leader()
	wantReply(t, "SET on the new leader", c.set(l2, 0, "after", "1"), keyspace.OK)
	if got := lastTime(l2); got < before {
		t.Fatalf("time went backwards across the failover: %d after %d", got, before)
	}
	leaseBounds(t, "on a new leader whose wall clock is 10 min ahead", pttlOn(t, c, l2, "lock"), lease, taken)
}

func sha1Hex(s string) string {
	h := sha1.Sum([]byte(s))
	return hex.EncodeToString(h[:])
}

// Redisson's lock and unlock scripts run through a follower, in a pipeline
// that loads the script and calls it by SHA1 before the load is applied; the
// unlock's message is published on every node.
func TestClusterScriptsThroughFollower(t *testing.T) {
	attempt.Run(t, func(t testing.TB) {
		c := newTestCluster(t, 3)
		l := c.leader()
		f := c.followers(l)[0]
		lock, unlock := lockscripts.MustSource(t, "redisson_lock.lua"), lockscripts.MustSource(t, "redisson_unlock_v2.lua")
		submit := func(cmd ...string) *Request {
			req := &Request{Cmds: [][][]byte{words(cmd...)}}
			f.eng.Submit(req)
			return req
		}
		reqs := []*Request{
			submit("SCRIPT", "LOAD", lock),
			submit("EVALSHA", sha1Hex(lock), "1", "lock", "30000", "uuid:1"),
			submit("EVALSHA", sha1Hex(lock), "1", "lock", "30000", "uuid:1"),
			submit("EVALSHA", sha1Hex(lock), "1", "lock", "30000", "uuid:2"),
			submit("HGET", "lock", "uuid:1"),
			submit("EVAL", unlock, "2", "lock", "redisson_lock__channel:{lock}", "0", "30000", "uuid:1"),
			submit("EVAL", unlock, "2", "lock", "redisson_lock__channel:{lock}", "0", "30000", "uuid:1"),
			submit("EXISTS", "lock"),
		}
		want := []keyspace.Reply{
			keyspace.Bulk(sha1Hex(lock)), keyspace.Null, keyspace.Null, {}, // the holder's PTTL
			keyspace.Bulk("2"), keyspace.Int(0), keyspace.Int(1), keyspace.Int(0),
		}
		for i, req := range reqs {
			r := waitReply(req)
			if i == 3 {
				if r.Kind != keyspace.KindInt || r.Int <= 0 || r.Int > 30000 {
					t.Fatalf("the second owner's lock attempt = %+v, want the holder's PTTL", r)
				}
				continue
			}
			wantReply(t, fmt.Sprint("reply ", i), r, want[i])
		}
		for _, n := range c.Nodes {
			c.eventually(n.id+" delivers the unlock message", func() bool {
				return fmt.Sprint(n.hub.messages()) == "[redisson_lock__channel:{lock}:0]"
			})
		}
	})
}

// A function library loads through a follower in a pipeline that calls its
// functions before the load is applied, as a script's SCRIPT LOAD and
// EVALSHA do: the calls wait for the load in the log.
func TestClusterFunctionsThroughFollower(t *testing.T) {
	attempt.Run(t, func(t testing.TB) {
		c := newTestCluster(t, 3)
		c.waitClusterVersion(buildinfo.Current.String(), false) // FUNCTION is 0.2's
		f := c.followers(c.leader())[0]
		submit := func(cmd ...string) *Request {
			req := &Request{Cmds: [][][]byte{words(cmd...)}}
			f.eng.Submit(req)
			return req
		}
		library := "#!lua name=pipelined\n" +
			"redis.register_function('incr_by', function(keys, args) return redis.call('INCRBY', keys[1], args[1]) end)\n" +
			"redis.register_function{function_name='read', callback=function(keys) return redis.call('GET', keys[1]) end, flags={'no-writes'}}"
		reqs := []*Request{
			submit("FUNCTION", "LOAD", library),
			submit("FCALL", "incr_by", "1", "n", "5"),
			submit("FCALL_RO", "read", "1", "n"),
			submit("FCALL", "read", "1", "n"),
			submit("FUNCTION", "DELETE", "pipelined"),
			submit("FCALL", "read", "1", "n"),
		}
		want := []keyspace.Reply{keyspace.Bulk("pipelined"), keyspace.Int(5), keyspace.Bulk("5"), keyspace.Bulk("5"), keyspace.OK, keyspace.Error("ERR Function not found")}
		for i, req := range reqs {
			wantReply(t, fmt.Sprint("reply ", i), waitReply(req), want[i])
		}
	})
}

// Scripts draw math.random from their place in the log: every script its
// own numbers, commands of one EXEC included, and every member the same ones,
// so that what the scripts write is alike everywhere.
func TestClusterScriptRandomIsReplicated(t *testing.T) {
	c := newTestCluster(t, 3)
	const script = "redis.call('set', KEYS[1], tostring(math.random())) return 1"
	keys := []string{"r1", "r2", "r3", "r4", "r5"}
	submit := func(req *Request) keyspace.Reply {
		// The SETs are idempotent: a retry after any error is safe.
		for {
			n := c.leader()
			n.eng.Submit(req)
			ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
			reply := req.Wait(ctx)
			cancel()
			if reply.Kind != keyspace.KindError {
				return reply
			}
			t.Logf("retrying after %s", reply.Str)
			req = &Request{DB: req.DB, Multi: req.Multi, Cmds: req.Cmds}
		}
	}
	for _, k := range keys[:3] {
		submit(&Request{Cmds: [][][]byte{words("EVAL", script, "1", k)}})
	}
	submit(&Request{Multi: true, Cmds: [][][]byte{words("EVAL", script, "1", keys[3]), words("EVAL", script, "1", keys[4])}})

	l := c.leader()
	drawn := map[string]string{}
	for _, k := range keys {
		v := localGet(l, k)
		if v.Kind != keyspace.KindBulk {
			t.Fatalf("the leader holds %s = %+v", k, v)
		}
		if other, ok := drawn[v.Str]; ok {
			t.Fatalf("%s and %s drew the same number %s", other, k, v.Str)
		}
		drawn[v.Str] = k
		for _, f := range c.followers(l) {
			c.eventually(f.id+" applies "+k, func() bool { return same(localGet(f, k), v) })
		}
	}
}

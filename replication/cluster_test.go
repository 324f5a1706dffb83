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
	"github.com/lockserver/lockserver/internal/lockscripts"
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

// A leader cut off from the others answers no read from its old state: the
// reads fail (nothing was written, so with a code clients retry), and after
// the majority elected a leader and wrote, the cut-off node never returns the
// old value.
func TestClusterNoStaleReadFromDeposedLeader(t *testing.T) {
	c := newTestCluster(t, 3)
	old := c.leader()
	wantReply(t, "SET k old", c.set(old, 0, "k", "old"), keyspace.OK)

	c.partition(old)
	// At once, before it notices, the read may still be confirmed: a
	// heartbeat answered just before the cut can come back after the read
	// arrived, and hashicorp/raft's VerifyLeader counts it. That value is not
	// stale (no other leader can exist yet: the follower that answered heard
	// from this one just before the cut, and stands for election only after
	// an election timeout without hearing from it), so "old" or a retry code
	// are both right.
	if r := do(old, 0, "GET", "k"); !same(r, keyspace.Bulk("old")) {
		wantErrPrefix(t, "GET on the partitioned leader", r, "TRYAGAIN", "CLUSTERDOWN")
	}

	l := c.leader()
	wantReply(t, "SET k new on the majority", c.set(l, 0, "k", "new"), keyspace.OK)
	wantErrPrefix(t, "GET on the cut-off node", do(old, 0, "GET", "k"), "TRYAGAIN", "CLUSTERDOWN")

	c.heal()
	c.eventually("the healed node serves the new value", func() bool {
		return same(do(old, 0, "GET", "k"), keyspace.Bulk("new"))
	})
}

// A leader that has not noticed yet that it was deposed (a paused process:
// it has not run its lease check since) must not answer a read from its own
// state once another leader has taken a write that changes the value. Its
// leadership check before each answer (VerifyLeader) is all that tells it.
// The node stands in for a paused process with a lease far longer than the
// others' failure detection: it goes on believing that it leads for seconds
// after the others have elected another leader and written.
func TestClusterNoStaleReadFromLeaderThatHasNotNoticed(t *testing.T) {
	const lease = 12 * time.Second
	c := newTestCluster(t, 3)
	paused := c.followers(c.leader())[0]
	paused.stop()
	paused.start(RaftOptions{HeartbeatTimeout: lease, ElectionTimeout: lease})
	for try := 1; ; try++ {
		c.heal()
		wantReply(t, "SET k old", c.set(c.leader(), 0, "k", "old"), keyspace.OK)
		// It takes over, and has applied k.
		c.eventually(paused.id+" to lead", func() bool {
			if l := c.leading(); l != nil && l != paused {
				l.eng.raft.LeadershipTransferToServer(raft.ServerID(paused.id), raft.ServerAddress(paused.raftAddr())).Error()
			}
			return c.leading() == paused && paused.eng.leading()
		})
		wantReply(t, "GET k on "+paused.id+" while it leads", c.do(paused, 0, "GET", "k"), keyspace.Bulk("old"))
		// Nothing of its own may be in flight at the read: a read waits
		// behind the node's proposals, and fails with them when they cannot
		// commit, whatever VerifyLeader says. The members' registrations of
		// their addresses are such proposals.
		c.registered()
		c.eventually(paused.id+" to have nothing in flight", func() bool {
			paused.eng.localMu.Lock()
			defer paused.eng.localMu.Unlock()
			return len(paused.eng.local) == 0
		})

		c.partition(paused)
		l := c.leader()
		wantReply(t, "SET k new on the new leader "+l.id, c.set(l, 0, "k", "new"), keyspace.OK)
		// Only a node that still believes it leads tests the check: one that
		// stepped down (the machine was slower than its lease) forwards the
		// read, and finds no leader.
		believes := paused.eng.raft.State() == raft.Leader
		req := &Request{Cmds: [][][]byte{words("GET", "k")}}
		paused.eng.Submit(req)
		ctx, cancel := context.WithTimeout(context.Background(), 3*lease)
		r := req.Wait(ctx)
		cancel()
		if same(r, keyspace.Bulk("old")) {
			t.Fatalf("%s, deposed, answered GET k from its own state (old) after %s had written new", paused.id, l.id)
		}
		wantErrPrefix(t, "GET k on the deposed leader", r, "TRYAGAIN", "CLUSTERDOWN")
		if believes {
			return
		}
		if try == 3 {
			t.Fatalf("%s noticed it was cut off before the new leader wrote, %d times: the premise never held", paused.id, try)
		}
		t.Logf("attempt %d: %s had stepped down before the read", try, paused.id)
	}
}

// A write proposed by a leader that loses its majority before the commit has
// an unknown outcome, and says so with a code that clients do not retry.
func TestClusterUnknownOutcome(t *testing.T) {
	c := newTestCluster(t, 3)
	for try := 1; ; try++ {
		l := c.leader()
		// Nothing of the leader's may be in flight when the partition starts:
		// a proposal queued behind a batch that never commits is refused
		// unsent (TRYAGAIN), rightly.
		c.eventually("every member registered", func() bool {
			for _, n := range c.nodes {
				if l.eng.memberAddr(n.id) == "" {
					return false
				}
			}
			return true
		})
		wantReply(t, "SET before the partition", c.set(l, 0, "k", "sure"), keyspace.OK)
		c.partition(l)
		// Only a node that leads when the SET arrives proposes it; one that
		// lost the lead before the cut (a busy machine) forwards it, and
		// finds no leader: that is another test's case.
		leading := l.eng.raft.State() == raft.Leader
		r := do(l, 0, "SET", "k", "maybe")
		if !leading && try < attempt.Max {
			t.Logf("attempt %d: %s had lost the lead before the cut (%s)", try, l.id, r.Str)
			c.heal()
			continue
		}
		wantErrPrefix(t, "SET on a leader that lost its majority", r, "UNKNOWN")
		if !strings.Contains(r.Str, "may or may not") {
			t.Fatalf("the unknown-outcome error does not say so: %q", r.Str)
		}
		return
	}
}

// A forwarded write whose reply is lost has an unknown outcome, and says so;
// it did take effect here. A lost read is simply retried by the client.
func TestClusterUnknownOutcomeForwarded(t *testing.T) {
	attempt.Run(t, func(t testing.TB) {
		c := newTestCluster(t, 3)
		l := c.leader()
		f := c.followers(l)[0]
		c.loseReplies.Store(true)
		// CLUSTERDOWN (no leader known yet) says that nothing was sent.
		r := c.do(f, 0, "SET", "k", "v")
		wantErrPrefix(t, "a forwarded SET whose reply was lost", r, "UNKNOWN")
		wantErrPrefix(t, "a forwarded GET whose reply was lost", do(f, 0, "GET", "k"), "TRYAGAIN")
		c.loseReplies.Store(false)
		wantReply(t, "GET on the leader", c.do(l, 0, "GET", "k"), keyspace.Bulk("v"))
	})
}

// With no majority there is no leader: a write fails with CLUSTERDOWN, which
// says that nothing was written, once ForwardWait has passed.
func TestClusterNoQuorum(t *testing.T) {
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
	attempt.Run(t, func(t testing.TB) {
		c := newTestCluster(t, 3)
		l := c.leader()
		f := c.followers(l)[0]
		wantReply(t, "PUBLISH through a follower", do(f, 0, "PUBLISH", "ch", "m1"), keyspace.Int(0))
		wantReply(t, "PUBLISH on the leader", do(l, 0, "PUBLISH", "ch", "m2"), keyspace.Int(0))
		want := "[ch:m1 ch:m2]"
		for _, n := range c.nodes {
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
func TestClusterSnapshots(t *testing.T) {
	c := newTestClusterWith(t, 3, RaftOptions{SnapshotThreshold: 1 << 30, TrailingLogs: 8})
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
	// Each running node compacts its log, so that the lagging one needs a
	// snapshot from whichever leads when it comes back.
	c.compactPast(t, l, lastLag)
	check := func(n *testNode) {
		t.Helper()
		c.eventually(n.id+" holds the entry after the snapshot", func() bool { return same(localGet(n, "after"), keyspace.Bulk("2")) })
		n.eng.smMu.Lock()
		defer n.eng.smMu.Unlock()
		for _, i := range []int{0, 1, 199} {
			got := n.eng.sm.Load().Read(i%3, [][][]byte{words("GET", fmt.Sprint("k", i))}, false, nil, n.eng.sm.Load().LastTime())
			wantReply(t, fmt.Sprintf("%s: GET k%d in db %d", n.id, i, i%3), got, keyspace.Bulk(fmt.Sprint(i)))
		}
		evalsha := n.eng.sm.Load().Read(0, [][][]byte{words("EVALSHA", sha1Hex(script), "1", "k0")}, false, nil, n.eng.sm.Load().LastTime())
		wantReply(t, n.id+": EVALSHA of the script loaded before the snapshot", evalsha, keyspace.Bulk("0"))
		ttl := n.eng.sm.Load().Read(0, [][][]byte{words("PTTL", "lease")}, false, nil, n.eng.sm.Load().LastTime())
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

	w := c.followers(c.leader())[0]
	w.stop()
	w.wipe()
	w.start(RaftOptions{Join: c.leader().raftAddr()})
	check(w)
	// It learned the cluster's identity from the cluster, and restarted
	// members kept theirs.
	for _, n := range []*testNode{w, lag, l} {
		if got, want := n.eng.ClusterID(), bootstrapClusterID(c.peers, ""); got != want {
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

// A new node joins through any member, serves once caught up and becomes a
// voter; LOCKSERVER REMOVE on any member takes it out again.
func TestClusterJoinAndRemove(t *testing.T) {
	c := newTestCluster(t, 3)
	l := c.leader()
	via := c.followers(l)[0]
	wantReply(t, "SET before the join", c.set(l, 0, "k", "v"), keyspace.OK)
	n4 := c.add("n4")
	n4.start(RaftOptions{Join: via.raftAddr()})
	role := func(id string) string {
		for _, m := range c.leader().eng.Status().Members {
			if m.ID == id {
				if m.Voter {
					return "voter"
				}
				return "nonvoter"
			}
		}
		return "absent"
	}
	c.eventually("n4 promoted to voter", func() bool { return role("n4") == "voter" })
	wantReply(t, "GET through n4", c.do(n4, 0, "GET", "k"), keyspace.Bulk("v"))

	members := do(c.leader(), 0, "LOCKSERVER", "MEMBERS")
	if members.Kind != keyspace.KindArray || len(members.Elems) != 4 {
		t.Fatalf("LOCKSERVER MEMBERS with four nodes = %+v", members)
	}
	wantReply(t, "LOCKSERVER MEMBERS: n4's entry", members.Elems[3], keyspace.Map(
		keyspace.Bulk("id"), keyspace.Bulk("n4"), keyspace.Bulk("raft"), keyspace.Bulk("raft-n4"),
		keyspace.Bulk("client"), keyspace.Bulk("client-n4"), keyspace.Bulk("role"), keyspace.Bulk("voter")))

	// After UNKNOWN, whether n4 is still a member says what happened.
	for r := c.do(via, 0, "LOCKSERVER", "REMOVE", "n4"); !same(r, keyspace.OK); r = c.do(via, 0, "LOCKSERVER", "REMOVE", "n4") {
		wantErrPrefix(t, "LOCKSERVER REMOVE n4", r, "UNKNOWN")
		if role("n4") == "absent" {
			break
		}
	}
	c.eventually("n4 removed", func() bool { return role("n4") == "absent" && c.leader().eng.memberAddr("n4") == "" })
	wantReply(t, "SET after the removal", c.set(via, 0, "k", "w"), keyspace.OK)
}

// A JOIN that names a live member's id at other addresses is refused, through
// the leader or a follower, and the member stays a voter where it is; the same
// addresses are the member itself, wiped and restarted, and get OK. Once the
// member is down, a JOIN of its id at new addresses (it moved) is accepted.
func TestClusterJoinRefusesALiveMembersID(t *testing.T) {
	c := newTestCluster(t, 3)
	l := c.leader()
	fs := c.followers(l)
	live, via := fs[0], fs[1]
	for _, n := range []*testNode{l, via} {
		wantErrPrefix(t, "JOIN of "+live.id+" at other addresses through "+n.id,
			do(n, 0, "LOCKSERVER", "JOIN", live.id, "raft-elsewhere", "client-elsewhere"), "ERR node "+live.id+" is a live member")
	}
	member := func(id string) (Member, bool) {
		for _, m := range c.leader().eng.Status().Members {
			if m.ID == id {
				return m, true
			}
		}
		return Member{}, false
	}
	if m, _ := member(live.id); !m.Voter || m.RaftAddr != live.raftAddr() {
		t.Fatalf("after the refused JOIN, %s is %+v", live.id, m)
	}
	wantReply(t, "SET after the refused JOINs", do(via, 0, "SET", "k", "v"), keyspace.OK)
	c.eventually(live.id+" applies the SET", func() bool { return same(localGet(live, "k"), keyspace.Bulk("v")) })

	// A JOIN's reply is the cluster's identity, which the joiner adopts.
	wantReply(t, "JOIN of "+live.id+" at its own addresses", do(via, 0, "LOCKSERVER", "JOIN", live.id, live.raftAddr(), live.clientAddr()),
		keyspace.Bulk(bootstrapClusterID(c.peers, "").String()))
	c.eventually(live.id+" a voter again", func() bool { m, _ := member(live.id); return m.Voter })

	live.stop()
	c.eventually("the JOIN of the stopped "+live.id+" at new addresses", func() bool {
		return do(c.leader(), 0, "LOCKSERVER", "JOIN", live.id, "raft-moved", "client-moved").Kind != keyspace.KindError
	})
	if m, ok := member(live.id); !ok || m.Voter || m.RaftAddr != "raft-moved" || m.ClientAddr != "client-moved" {
		t.Fatalf("after the JOIN of the stopped member at new addresses, it is %+v", m)
	}
}

// LOCKSERVER answers bad input as Redis answers a container command's.
func TestClusterCommandErrors(t *testing.T) {
	attempt.Run(t, func(t testing.TB) {
		c := newTestCluster(t, 3)
		f := c.followers(c.leader())[0]
		wantReply(t, "unknown subcommand", do(f, 0, "LOCKSERVER", "NOPE"),
			keyspace.Error("ERR unknown subcommand 'NOPE'. Try LOCKSERVER HELP."))
		wantReply(t, "wrong arity", do(f, 0, "LOCKSERVER", "remove"),
			keyspace.Error("ERR wrong number of arguments for 'lockserver|remove' command"))
		wantReply(t, "garbage forwarded", do(f, 0, "LOCKSERVER", "FORWARD", "\xff\x7f"),
			keyspace.Error("ERR decode requests: count 16383 exceeds the input"))
		st := do(f, 0, "LOCKSERVER", "STATUS")
		if st.Kind != keyspace.KindMap || !same(st.Elems[3], keyspace.Bulk("follower")) {
			t.Fatalf("LOCKSERVER STATUS on a follower = %+v", st)
		}
	})
}

// What INFO reports: the leader is the master with both other members as
// connected replicas once they have registered their client addresses (WAIT
// can count them then), one fewer while one is cut off; a follower is a
// replica.
func TestClusterInfo(t *testing.T) {
	attempt.Run(t, func(t testing.TB) {
		c := newTestCluster(t, 3)
		l := c.leader()
		fs := c.followers(l)
		wantReply(t, "SET", do(l, 0, "SET", "k", "v", "PX", "60000"), keyspace.OK)
		c.eventually("the leader counts both replicas", func() bool { return l.eng.Info().Replicas == 2 })
		info := l.eng.Info()
		if info.Role != "master" || info.Replicas != 2 || info.Keys[0] != 1 || info.Expires[0] != 1 {
			t.Fatalf("leader's info = %+v, want a master with 2 replicas, 1 key with a deadline", info)
		}
		if info := fs[0].eng.Info(); info.Role != "slave" || info.Replicas != 0 {
			t.Fatalf("follower's info = %+v, want a replica", info)
		}
		c.partition(fs[0])
		c.eventually("the leader counts one replica while the other is cut off", func() bool { return l.eng.Info().Replicas == 1 })
		c.heal()
		c.eventually("both replicas back", func() bool { return l.eng.Info().Replicas == 2 })
	})
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
		for _, n := range c.nodes {
			c.eventually(n.id+" delivers the unlock message", func() bool {
				return fmt.Sprint(n.hub.messages()) == "[redisson_lock__channel:{lock}:0]"
			})
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

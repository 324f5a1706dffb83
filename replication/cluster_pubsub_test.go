package replication

import (
	"fmt"
	"sync"
	"testing"

	"github.com/lockserver/lockserver/internal/attempt"
	"github.com/lockserver/lockserver/internal/testenv"
	"github.com/lockserver/lockserver/keyspace"
)

// submitTo starts a request on n without waiting for its reply.
func submitTo(n *testNode, multi bool, cmds ...[]string) *Request {
	req := &Request{Multi: multi}
	for _, cmd := range cmds {
		req.Cmds = append(req.Cmds, words(cmd...))
	}
	n.eng.Submit(req)
	return req
}

// holdFSM stops n's state machine from applying entries until the returned
// function, or the end of the test, lets it go on. It first waits until every
// node knows every member's client address: a member registers its own in
// the log after it starts, and on a busy machine that entry could otherwise
// come in behind the hold, and the requests of the test queue behind it.
func (c *testCluster) holdFSM(n *testNode) (release func()) {
	c.registered()
	n.eng.smMu.Lock()
	release = sync.OnceFunc(n.eng.smMu.Unlock)
	c.t.Cleanup(release)
	return release
}

// noRelaysLeft fails the test if n's forwarder still tracks a relayed
// request once every request has been answered.
func noRelaysLeft(t testing.TB, n *testNode) {
	t.Helper()
	f := n.eng.fwd
	f.relayMu.Lock()
	defer f.relayMu.Unlock()
	if len(f.relays) != 0 || f.waiting.Load() != 0 {
		t.Fatalf("%s still tracks %d relayed requests, %d waiting", n.id, len(f.relays), f.waiting.Load())
	}
}

// PUBLISH and SPUBLISH reply how many subscribers of the node the client is
// connected to received the message, as Redis Cluster counts them: through
// the leader and through either follower alike, alone or in a transaction.
// Every node delivers every message once, in log order.
func TestClusterPublishCountsLocalSubscribers(t *testing.T) {
	attempt.Run(t, func(t testing.TB) {
		c := newTestCluster(t, 3)
		l := c.leader()
		fs := c.followers(l)
		sub, other := fs[0], fs[1]
		sub.hub.subscribe("ch", false, 2)
		sub.hub.subscribe("sch", true, 1)
		l.hub.subscribe("ch", false, 1)

		var delivered []string
		for i, tc := range []struct {
			via  *testNode
			cmd  string
			ch   string
			want int64
		}{
			{sub, "PUBLISH", "ch", 2},
			{other, "PUBLISH", "ch", 0},
			{l, "PUBLISH", "ch", 1},
			{sub, "SPUBLISH", "sch", 1},
			{other, "SPUBLISH", "sch", 0},
			{l, "SPUBLISH", "sch", 0},
			{sub, "SPUBLISH", "ch", 0}, // plain subscribers do not hear SPUBLISH
			{sub, "PUBLISH", "sch", 0}, // nor shard subscribers PUBLISH
		} {
			msg := fmt.Sprint("m", i)
			what := fmt.Sprintf("%s %s through %s", tc.cmd, tc.ch, tc.via.id)
			wantReply(t, what, do(tc.via, 0, tc.cmd, tc.ch, msg), keyspace.Int(tc.want))
			delivered = append(delivered, tc.ch+":"+msg)
		}
		for _, n := range []*testNode{sub, other, l} {
			r := waitReply(submitTo(n, true, []string{"SET", "k", n.id}, []string{"PUBLISH", "ch", "tx"}, []string{"SPUBLISH", "sch", "tx"}))
			want := map[*testNode]keyspace.Reply{
				sub:   keyspace.Array(keyspace.OK, keyspace.Int(2), keyspace.Int(1)),
				other: keyspace.Array(keyspace.OK, keyspace.Int(0), keyspace.Int(0)),
				l:     keyspace.Array(keyspace.OK, keyspace.Int(1), keyspace.Int(0)),
			}[n]
			wantReply(t, "MULTI SET PUBLISH SPUBLISH EXEC through "+n.id, r, want)
			delivered = append(delivered, "ch:tx", "sch:tx")
		}
		want := fmt.Sprint(delivered)
		for _, n := range c.Nodes {
			c.eventually(n.id+" delivers every message once", func() bool { return fmt.Sprint(n.hub.messages()) == want })
		}
		for _, n := range c.Nodes {
			noRelaysLeft(t, n)
		}
	})
}

// A follower answers a forwarded PUBLISH with its own count whether the
// leader's answer or its own apply of the entry comes first.
func TestClusterPublishThroughFollowerEitherOrder(t *testing.T) {
	attempt.Run(t, func(t testing.TB) {
		c, l, f := subscribedFollower(t)
		// The follower knows where to forward once it has applied the leader's
		// address.
		wantReply(t, "SET through the follower", do(f, 0, "SET", "k", "v"), keyspace.OK)

		// The leader answers first: the follower's FSM waits.
		release := c.holdFSM(f)
		req := submitTo(f, false, []string{"PUBLISH", "ch", "leader first"})
		c.eventually("the leader's answer", func() bool { return f.eng.fwd.waiting.Load() == 1 })
		if req.Ready() {
			t.Fatalf("answered %+v before the follower applied the entry", req.Wait(t.Context()))
		}
		release()
		wantReply(t, "PUBLISH answered by the leader first", waitReply(req), keyspace.Int(3))

		// The follower applies first: the leader's FSM waits.
		release = c.holdFSM(l)
		req = submitTo(f, false, []string{"PUBLISH", "ch", "follower first"})
		c.eventually("the follower's own apply", req.Ready)
		release()
		wantReply(t, "PUBLISH applied by the follower first", waitReply(req), keyspace.Int(3))

		c.eventually("the leader's answer to the second", func() bool { return len(l.hub.messages()) == 2 })
		for _, n := range c.Nodes {
			c.eventually(n.id+" delivers both", func() bool { return len(n.hub.messages()) == 2 })
		}
		noRelaysLeft(t, f)
	})
}

// Once the follower has answered a relayed request from its own apply, the
// request is its client's again: the server reuses it for the next command
// while the leader's answer to the batch that carried it is still on its way,
// and that answer must not touch it.
func TestClusterRelayedRequestReusedAfterItsAnswer(t *testing.T) {
	attempt.Run(t, func(t testing.TB) {
		c, l, f := subscribedFollower(t)
		wantReply(t, "SET through the follower", do(f, 0, "SET", "k", "v"), keyspace.OK)

		release := c.holdFSM(l)
		req := submitTo(f, false, []string{"PUBLISH", "ch", "m"})
		c.eventually("the follower's own apply", req.Ready)
		wantReply(t, "PUBLISH", waitReply(req), keyspace.Int(3))
		*req = Request{Cmds: [][][]byte{words("GET", "k")}}
		f.eng.Submit(req)
		release()
		wantReply(t, "GET in the reused request", waitReply(req), keyspace.Bulk("v"))
		noRelaysLeft(t, f)
	})
}

// A relayed request whose entry this node does not apply live, because a
// snapshot held it, is answered once this node's applied index reaches the
// leader's at its answer: with the leader's reply, counting none of this
// node's subscribers, which received nothing. The requests here are tagged by
// hand and never reach the log: this node passes the index without them.
func TestClusterRelayedPublishNotAppliedHere(t *testing.T) {
	attempt.Run(t, func(t testing.TB) {
		c, l, f := subscribedFollower(t)
		fwd := f.eng.fwd
		relayed := func(multi bool, cmds ...[]string) *Request {
			req := &Request{Multi: multi}
			for _, cmd := range cmds {
				req.Cmds = append(req.Cmds, words(cmd...))
			}
			req.start()
			fwd.tag([]*Request{req})
			if req.relay.Seq == 0 {
				t.Fatalf("%q not tagged", req.Cmds)
			}
			return req
		}

		// Answered by the leader at an index this node has reached already.
		now := relayed(false, []string{"PUBLISH", "ch", "m"})
		fwd.awaitApply(now.relay.Seq, keyspace.Int(5), nil, f.eng.applied.Load())
		wantReply(t, "PUBLISH whose index this node passed", waitReply(now), keyspace.Int(0))

		// Answered at an index this node reaches later, while its FSM waits.
		release := c.holdFSM(f)
		for i := range 3 {
			wantReply(t, "SET on the leader", do(l, 0, "SET", "k", fmt.Sprint(i)), keyspace.OK)
		}
		leaderApplied := l.eng.applied.Load()
		single := relayed(false, []string{"PUBLISH", "ch", "m"})
		multi := relayed(true, []string{"SET", "k", "v"}, []string{"PUBLISH", "ch", "m"}, []string{"SPUBLISH", "ch", "m"}, []string{"GET", "k"})
		fwd.awaitApply(single.relay.Seq, keyspace.Int(5), nil, leaderApplied)
		fwd.awaitApply(multi.relay.Seq, keyspace.Array(keyspace.OK, keyspace.Int(5), keyspace.Int(6), keyspace.Bulk("v")), nil, leaderApplied)
		if single.Ready() || multi.Ready() {
			t.Fatal("answered before this node reached the leader's applied index")
		}
		release()
		wantReply(t, "PUBLISH", waitReply(single), keyspace.Int(0))
		wantReply(t, "EXEC", waitReply(multi), keyspace.Array(keyspace.OK, keyspace.Int(0), keyspace.Int(0), keyspace.Bulk("v")))
		noRelaysLeft(t, f)
	})
}

// A script sees 0 from PUBLISH on every node, whatever each node's
// subscribers: what a script reads may decide what it writes, and every
// replica must write the same. Each node still delivers the message.
func TestClusterScriptPublishIsDeterministic(t *testing.T) {
	attempt.Run(t, func(t testing.TB) {
		c := newTestCluster(t, 3)
		l := c.leader()
		fs := c.followers(l)
		l.hub.subscribe("ch", false, 1)
		fs[0].hub.subscribe("ch", false, 2)
		script := "local n = redis.call('publish', 'ch', ARGV[1]) redis.call('set', KEYS[1], n) return n"
		for _, n := range []*testNode{l, fs[0], fs[1]} {
			wantReply(t, "the script through "+n.id, do(n, 0, "EVAL", script, "1", "seen-"+n.id, n.id), keyspace.Int(0))
		}
		for _, n := range c.Nodes {
			for _, via := range c.Nodes {
				c.eventually(n.id+" applies the script through "+via.id, func() bool { return same(localGet(n, "seen-"+via.id), keyspace.Bulk("0")) })
			}
			c.eventually(n.id+" delivers the scripts' messages", func() bool {
				return fmt.Sprint(n.hub.messages()) == fmt.Sprintf("[ch:%s ch:%s ch:%s]", l.id, fs[0].id, fs[1].id)
			})
		}
	})
}

// A restarted node, which restores its snapshot and replays the rest of its
// log, delivers none of the messages it replays, and then counts its own
// subscribers in the replies to what it forwards again.
func TestClusterPublishAfterRestart(t *testing.T) {
	testenv.Long(t)
	attempt.Run(t, func(t testing.TB) {
		c := newTestCluster(t, 3)
		l := c.leader()
		f := c.followers(l)[0]
		f.hub.subscribe("ch", false, 1)
		wantReply(t, "PUBLISH before the snapshot", do(f, 0, "PUBLISH", "ch", "m1"), keyspace.Int(1))
		if err := f.eng.raft.Snapshot().Error(); err != nil {
			t.Fatalf("snapshot on %s: %v", f.id, err)
		}
		wantReply(t, "PUBLISH after the snapshot", do(f, 0, "PUBLISH", "ch", "m2"), keyspace.Int(1))

		f.stop()
		f.hub = &recordingHub{}
		f.hub.subscribe("ch", false, 4)
		f.restart()
		wantReply(t, "PUBLISH through the restarted node", do(f, 0, "PUBLISH", "ch", "m3"), keyspace.Int(4))
		if got := fmt.Sprint(f.hub.messages()); got != "[ch:m3]" {
			t.Fatalf("the restarted node delivered %s, want only [ch:m3]", got)
		}
	})
}

// The standalone engine is a single node, as one Redis server: a script sees
// the number of subscribers that received what it published, as in Redis.
func TestStandaloneScriptSeesPublishCount(t *testing.T) {
	hub := &recordingHub{}
	hub.subscribe("ch", false, 2)
	s := NewStandalone(StandaloneOptions{Hub: hub})
	defer s.Close()
	run := func(cmd ...string) keyspace.Reply {
		req := &Request{Cmds: [][][]byte{words(cmd...)}}
		s.Submit(req)
		return waitReply(req)
	}
	wantReply(t, "PUBLISH", run("PUBLISH", "ch", "m1"), keyspace.Int(2))
	wantReply(t, "a script's PUBLISH", run("EVAL", "return redis.call('publish', 'ch', 'm2')", "0"), keyspace.Int(2))
	if got := fmt.Sprint(hub.messages()); got != "[ch:m1 ch:m2]" {
		t.Fatalf("delivered %s", got)
	}
}

// subscribedFollower starts a three-member cluster and returns it, its
// leader, and a follower on which three clients subscribe to "ch".
func subscribedFollower(t testing.TB) (c *testCluster, l, f *testNode) {
	c = newTestCluster(t, 3)
	l = c.leader()
	f = c.followers(l)[0]
	f.hub.subscribe("ch", false, 3)
	return c, l, f
}

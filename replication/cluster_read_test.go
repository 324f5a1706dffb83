package replication

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/lockserver/lockserver/internal/attempt"
	"github.com/lockserver/lockserver/internal/lockscripts"
	"github.com/lockserver/lockserver/internal/testenv"
	"github.com/lockserver/lockserver/keyspace"
	"github.com/lockserver/lockserver/replication/internal/logcodec"
)

// A leader cut off from the others answers no read from its old state: the
// reads fail (nothing was written, so with a code clients retry), and after
// the majority elected a leader and wrote, the cut-off node never returns the
// old value.
func TestClusterNoStaleReadFromDeposedLeader(t *testing.T) {
	testenv.Long(t)
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
// after the others have elected another leader and written. A lock attempt
// that its old state would answer without writing (SET NX on a key held
// there) is held to the same check.
func TestClusterNoStaleReadFromLeaderThatHasNotNoticed(t *testing.T) {
	testenv.Long(t)
	const lease = 12 * time.Second
	c := newTestCluster(t, 3)
	paused := c.followers(c.leader())[0]
	paused.stop()
	paused.start(RaftOptions{HeartbeatTimeout: lease, ElectionTimeout: lease})
	for try := 1; ; try++ {
		c.heal()
		wantReply(t, "SET k old", c.set(c.leader(), 0, "k", "old"), keyspace.OK)
		wantReply(t, "SET lock held", c.set(c.leader(), 0, "lock", "held"), keyspace.OK)
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
		// their addresses, and the cluster version the leader raises once
		// it knows every voter's build, are such proposals.
		c.quiet(paused)

		c.partition(paused)
		l := c.leader()
		wantReply(t, "SET k new on the new leader "+l.id, c.set(l, 0, "k", "new"), keyspace.OK)
		wantReply(t, "DEL lock on the new leader "+l.id, do(l, 0, "DEL", "lock"), keyspace.Int(1))
		// Only a node that still believes it leads tests the check: one that
		// stepped down (the machine was slower than its lease) forwards the
		// read, and finds no leader.
		believes := paused.eng.raft.State() == raft.Leader
		req := &Request{Cmds: [][][]byte{words("GET", "k")}, Alone: true}
		paused.eng.Submit(req)
		attempt := &Request{Cmds: [][][]byte{words("SET", "lock", "mine", "NX")}, Alone: true}
		paused.eng.Submit(attempt)
		ctx, cancel := context.WithTimeout(context.Background(), 3*lease)
		r, ra := req.Wait(ctx), attempt.Wait(ctx)
		cancel()
		if same(r, keyspace.Bulk("old")) {
			t.Fatalf("%s, deposed, answered GET k from its own state (old) after %s had written new", paused.id, l.id)
		}
		wantErrPrefix(t, "GET k on the deposed leader", r, "TRYAGAIN", "CLUSTERDOWN")
		if same(ra, keyspace.Null) {
			t.Fatalf("%s, deposed, answered SET lock NX from its own state (held) after %s had deleted it", paused.id, l.id)
		}
		wantErrPrefix(t, "SET lock NX on the deposed leader", ra, "TRYAGAIN", "CLUSTERDOWN")
		if believes {
			return
		}
		if try == 3 {
			t.Fatalf("%s noticed it was cut off before the new leader wrote, %d times: the premise never held", paused.id, try)
		}
		t.Logf("attempt %d: %s had stepped down before the read", try, paused.id)
	}
}

// A lock attempt that finds the lock held writes nothing and takes no log
// entry: the leader answers it from its state once it has confirmed that it
// leads, whichever member the attempt came through. The attempt that finds
// the lock free goes to the log, and every member applies it.
func TestClusterAttemptsThatWriteNothingTakeNoLogEntry(t *testing.T) {
	testenv.Long(t)
	attempt.Run(t, func(t testing.TB) {
		c := newTestCluster(t, 3)
		script := lockscripts.MustSource(t, "redisson_lock.lua")
		sha := sha1Hex(script)
		l := c.leader()
		// A forwarded attempt that finds the leader with proposals of its own
		// in flight goes to the log (see submit): the test waits until the
		// leader has done its own proposing.
		c.quiet(l)
		wantReply(t, "SCRIPT LOAD", do(l, 0, "SCRIPT", "LOAD", script), keyspace.Bulk(sha))
		wantReply(t, "owner:1 takes the lock", do(l, 0, "EVALSHA", sha, "1", "lock", "30000", "owner:1"), keyspace.Null)
		first, _ := l.store.LastIndex()

		// attempt submits one command through n until an answer that a leader
		// change does not explain.
		attempt := func(n *testNode, alone bool, cmd ...string) keyspace.Reply {
			return c.retry(strings.Join(cmd, " ")+" on "+n.id, func() keyspace.Reply {
				req := &Request{Cmds: [][][]byte{words(cmd...)}, Alone: alone}
				n.eng.Submit(req)
				return waitReply(req)
			})
		}
		for i := range 20 {
			for _, n := range c.nodes() {
				r := attempt(n, i%2 == 0, "EVALSHA", sha, "1", "lock", "30000", "owner:2")
				if r.Kind != keyspace.KindInt || r.Int <= 0 || r.Int > 30000 {
					t.Fatalf("owner:2's attempt through %s = %+v, want the holder's PTTL", n.id, r)
				}
				wantReply(t, "SET lock NX through "+n.id, attempt(n, i%2 == 1, "SET", "lock", "x", "NX"), keyspace.Null)
			}
		}
		if n := attemptEntries(t, c.Nodes[0], first); n != 0 {
			t.Fatalf("the log holds %d entries of attempts that wrote nothing", n)
		}

		wantReply(t, "DEL lock", attempt(c.leader(), true, "DEL", "lock"), keyspace.Int(1))
		wantReply(t, "owner:2 takes the lock", attempt(c.followers(c.leader())[0], true, "EVALSHA", sha, "1", "lock", "30000", "owner:2"), keyspace.Null)
		for _, n := range c.nodes() {
			c.eventually(n.id+" to apply owner:2's lock", func() bool {
				n.eng.smMu.Lock()
				defer n.eng.smMu.Unlock()
				sm := n.eng.sm.Load()
				return same(sm.read(0, [][][]byte{words("HGET", "lock", "owner:2")}, false, nil, sm.lastTime()), keyspace.Bulk("1"))
			})
		}
		if n := attemptEntries(t, c.Nodes[0], first); n != 1 {
			t.Fatalf("the log holds %d entries of owner:2's attempts and SET NX, want 1: the attempt that took the lock", n)
		}
	})
}

// attemptEntries counts the commands of n's log after index from that are
// owner:2's lock attempts or a SET NX.
func attemptEntries(t testing.TB, n *testNode, from uint64) int {
	last, _ := n.store.LastIndex()
	count := 0
	for i := from + 1; i <= last; i++ {
		var rl raft.Log
		if n.store.GetLog(i, &rl) != nil || rl.Type != raft.LogCommand {
			continue
		}
		entries, err := logcodec.DecodeBatch(rl.Data)
		if err != nil {
			t.Fatalf("log entry %d: %v", i, err)
		}
		for _, e := range entries {
			for _, args := range e.Entry.Cmds {
				if slices.ContainsFunc(args, func(a []byte) bool { return string(a) == "owner:2" || string(a) == "NX" }) {
					count++
				}
			}
		}
	}
	return count
}

// quiet waits until leader l has no proposal of its own in flight and none
// to come: the members registered their addresses, and the cluster version
// is raised as far as the voters' builds allow.
func (c *testCluster) quiet(l *testNode) {
	c.t.Helper()
	c.registered()
	c.eventually(l.id+" to have nothing in flight", func() bool {
		lowest, known := l.eng.votersLowestBuild()
		if !known || clusterVersionOf(l).get() != lowest {
			return false
		}
		l.eng.localMu.Lock()
		defer l.eng.localMu.Unlock()
		return len(l.eng.local) == 0
	})
}

// Reads placed behind this node's proposals while the FSM applies them and
// takes them off the list: a read's place, found before the FSM removed
// some, pointed past the end of the list (a panic, with proposeMu and
// localMu held for good: every later request hung) or at a later proposal
// than its own. Each GET, pipelined after its client's SET, reads that SET's
// value.
func TestReadsPlacedWhileProposalsApply(t *testing.T) {
	c := newTestCluster(t, 3)
	l := c.leader()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	end := time.Now().Add(3 * time.Second)
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			key := fmt.Sprint("k", w)
			for i := 0; time.Now().Before(end); i++ {
				var sets, gets []*Request
				for j := range 4 {
					value := fmt.Sprint(i, ".", j)
					set := &Request{Cmds: [][][]byte{words("SET", key, value)}}
					get := &Request{Cmds: [][][]byte{words("GET", key)}}
					l.eng.Submit(set)
					l.eng.Submit(get)
					sets, gets = append(sets, set), append(gets, get)
				}
				for j := range sets {
					set, get := sets[j].Wait(ctx), gets[j].Wait(ctx)
					switch {
					case ctx.Err() != nil:
						t.Errorf("requests unanswered after a minute: %+v %+v", set, get)
						return
					case set.IsError() || get.IsError():
						continue // a leader change: the client would try again
					case get.Str != fmt.Sprint(i, ".", j):
						t.Errorf("GET after SET %d.%d read %q", i, j, get.Str)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
}

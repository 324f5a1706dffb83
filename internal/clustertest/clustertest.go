// Package clustertest is the one harness of the cluster tests. A cluster's
// members are of one kind behind one interface, Node: servers embedded in the
// test's process (package embedded), lockserver processes (Proc), or what a
// package's own tests run. Cluster asks them what every cluster test needs
// to know: which member leads, when every member has caught up, and the
// term, which package attempt watches. Eventually and WriteErr meet a leader
// change as a client does.
//
// Every cluster test runs with the same failure detection (Heartbeat,
// Election) and waits as long (Wait) for a cluster to get somewhere.
//
// The package imports none of the packages a member runs, so that their own
// tests can use it without an import cycle.
package clustertest

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/lockserver/lockserver/internal/attempt"
)

// The members' failure detection, in every cluster test. Under -race on a
// busy 2-core machine a member can go without CPU for longer than raft's
// default timeouts, which moved the leader in some runs: tests must survive
// a leader change (see Eventually and package attempt), but should seldom
// see one they did not cause. The two differ so that a test can tell them
// apart where a member reports them (SENTINEL MASTER).
const (
	Heartbeat = 1500 * time.Millisecond
	Election  = 2 * time.Second
	// Wait bounds a wait for a cluster to get somewhere: a failover takes up
	// to two heartbeat timeouts to notice and two election timeouts to
	// elect, and more on a busy machine.
	Wait = 30 * time.Second
)

// poll is how often a wait asks the members again.
const poll = 20 * time.Millisecond

// Status is what a member says of itself, as LOCKSERVER STATUS reports it.
type Status struct {
	// State is the member's Raft state: "leader", "follower", "candidate"
	// or "shutdown".
	State string
	// Leader is the id of the member it takes for the leader; "" when it
	// knows of none.
	Leader string
	Term   uint64
	// Commit and Applied are the index of the last entry it knows to be
	// committed and of the last one its state machine applied.
	Commit, Applied uint64
}

// ParseStatus reads a LOCKSERVER STATUS reply as go-redis (RESP3) and
// lockserver's Server.Do return it.
func ParseStatus(v any) (Status, error) {
	m, ok := v.(map[any]any)
	if !ok {
		return Status{}, fmt.Errorf("LOCKSERVER STATUS = %#v, want a map", v)
	}
	str := func(k string) string { s, _ := m[k].(string); return s }
	num := func(k string) uint64 { n, _ := m[k].(int64); return uint64(n) }
	return Status{State: str("state"), Leader: str("leader"), Term: num("term"),
		Commit: num("commit_index"), Applied: num("applied_index")}, nil
}

// Node is a cluster member, whatever runs it.
type Node interface {
	// ID is the member's node id, by which the others name it.
	ID() string
	// Status returns what the member says of itself, or an error when it
	// cannot answer: it is stopped, paused, or cut off from the test.
	Status(ctx context.Context) (Status, error)
}

// Cluster is a test's cluster: its members, running or not.
type Cluster[N Node] struct {
	Nodes []N
}

// Leader waits until, of the members among (all of them when among is
// empty) that answer, one leads in the highest term and every other one
// names it, and returns it; it fails the test after Wait. A member that does
// not answer is not waited for; one that answers but is cut off from the
// others must be left out of among.
func (c *Cluster[N]) Leader(t testing.TB, among ...N) N {
	t.Helper()
	if len(among) == 0 {
		among = c.Nodes
	}
	deadline := time.Now().Add(Wait)
	for {
		sts, errs := statuses(among)
		leader := -1
		for i, st := range sts {
			if errs[i] == nil && st.State == "leader" && (leader < 0 || st.Term > sts[leader].Term) {
				leader = i
			}
		}
		agreed := leader >= 0
		for i, st := range sts {
			if errs[i] == nil && i != leader && agreed && st.Leader != among[leader].ID() {
				agreed = false
			}
		}
		if agreed {
			return among[leader]
		}
		if time.Now().After(deadline) {
			t.Fatalf("no leader among %s within %v: %s", ids(among), Wait, describe(among, sts, errs))
		}
		time.Sleep(poll)
	}
}

// statuses asks each of ns for its status.
func statuses[N Node](ns []N) ([]Status, []error) {
	sts, errs := make([]Status, len(ns)), make([]error, len(ns))
	for i, n := range ns {
		sts[i], errs[i] = n.Status(context.Background())
	}
	return sts, errs
}

func ids[N Node](ns []N) string {
	var s []string
	for _, n := range ns {
		s = append(s, n.ID())
	}
	return strings.Join(s, ", ")
}

// describe says what each of ns answered, for a failure message.
func describe[N Node](ns []N, sts []Status, errs []error) string {
	var s []string
	for i, n := range ns {
		if errs[i] != nil {
			s = append(s, fmt.Sprintf("%s: %v", n.ID(), errs[i]))
		} else {
			s = append(s, fmt.Sprintf("%s: %+v", n.ID(), sts[i]))
		}
	}
	return strings.Join(s, "; ")
}

// Followers returns the members other than l that answer, in order.
func (c *Cluster[N]) Followers(l N) []N {
	var fs []N
	for _, n := range c.Others(l) {
		if _, err := n.Status(context.Background()); err == nil {
			fs = append(fs, n)
		}
	}
	return fs
}

// Others returns the members other than n, running or not, in order.
func (c *Cluster[N]) Others(n N) []N {
	var rest []N
	for _, m := range c.Nodes {
		if m.ID() != n.ID() {
			rest = append(rest, m)
		}
	}
	return rest
}

// Term returns the highest Raft term a member answers with: it grows with
// every election.
func (c *Cluster[N]) Term() uint64 {
	var term uint64
	sts, errs := statuses(c.Nodes)
	for i, st := range sts {
		if errs[i] == nil {
			term = max(term, st.Term)
		}
	}
	return term
}

// Watch tells the attempt of t, if t is one (package attempt), to watch the
// cluster's term; what names the cluster in messages.
func (c *Cluster[N]) Watch(t testing.TB, what string) {
	attempt.Watch(t, what, c.Term)
}

// WaitHealthy waits until one member leads and every member answers, names
// it, and has applied what it had committed when the wait began; it returns
// the leader, and fails the test after Wait.
func (c *Cluster[N]) WaitHealthy(t testing.TB) N {
	t.Helper()
	ctx := context.Background()
	l := c.Leader(t)
	st, err := l.Status(ctx)
	deadline := time.Now().Add(Wait)
	for _, n := range c.Nodes {
		for {
			s, serr := n.Status(ctx)
			if err == nil && serr == nil && s.Applied >= st.Commit && s.Leader == l.ID() {
				break
			}
			if err != nil {
				st, err = l.Status(ctx)
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s did not catch up with leader %s (commit %d, %v) within %v: %+v, %v", n.ID(), l.ID(), st.Commit, err, Wait, s, serr)
			}
			time.Sleep(poll)
		}
	}
	return l
}

package clustertest

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fakeNode is a member whose answers the test sets.
type fakeNode struct {
	id string
	mu sync.Mutex
	st Status
	// err, when set, is what Status returns: the member does not answer.
	err error
}

func (n *fakeNode) ID() string { return n.id }

func (n *fakeNode) Status(context.Context) (Status, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.st, n.err
}

func (n *fakeNode) set(st Status, err error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.st, n.err = st, err
}

func fakeCluster(sts ...Status) *Cluster[*fakeNode] {
	c := &Cluster[*fakeNode]{}
	for i, st := range sts {
		c.Nodes = append(c.Nodes, &fakeNode{id: string(rune('a' + i)), st: st})
	}
	return c
}

// later changes n's answer after a while; the flag it returns says whether
// it has.
func later(n *fakeNode, st Status, err error) *atomic.Bool {
	var changed atomic.Bool
	go func() {
		time.Sleep(200 * time.Millisecond)
		changed.Store(true)
		n.set(st, err)
	}()
	return &changed
}

// The leader is the one of the highest term that every answering member
// names; a member that does not answer is not waited for.
func TestLeaderIsTheOneEveryAnsweringMemberNames(t *testing.T) {
	c := fakeCluster(
		Status{State: "follower", Leader: "b", Term: 3},
		Status{State: "leader", Leader: "b", Term: 3},
		Status{},
	)
	c.Nodes[2].err = errors.New("stopped")
	if l := c.Leader(t); l != c.Nodes[1] {
		t.Fatalf("Leader = %s, want b", l.ID())
	}
	if fs := c.Followers(c.Nodes[1]); len(fs) != 1 || fs[0] != c.Nodes[0] {
		t.Fatalf("Followers of b = %v, want a alone (c does not answer)", ids(fs))
	}
	if os := c.Others(c.Nodes[1]); len(os) != 2 || os[0] != c.Nodes[0] || os[1] != c.Nodes[2] {
		t.Fatalf("Others of b = %v, want a and c", ids(os))
	}
	if term := c.Term(); term != 3 {
		t.Fatalf("Term = %d, want 3", term)
	}
}

// Two members that say they lead: the one of the higher term is the leader
// once the other names it; until then there is none.
func TestLeaderWaitsForAgreement(t *testing.T) {
	c := fakeCluster(
		Status{State: "leader", Leader: "a", Term: 4},
		Status{State: "leader", Leader: "b", Term: 5},
		Status{State: "follower", Leader: "b", Term: 5},
	)
	agreed := later(c.Nodes[0], Status{State: "follower", Leader: "b", Term: 5}, nil)
	if l := c.Leader(t); l != c.Nodes[1] {
		t.Fatalf("Leader = %s, want b", l.ID())
	}
	if !agreed.Load() {
		t.Fatal("Leader returned while a still said that it leads")
	}
}

// A member left out of among, as one cut off from the others is, is neither
// a candidate nor waited for.
func TestLeaderAmongSome(t *testing.T) {
	c := fakeCluster(
		Status{State: "leader", Leader: "a", Term: 9}, // cut off, in a term of its own
		Status{State: "leader", Leader: "b", Term: 7},
		Status{State: "follower", Leader: "b", Term: 7},
	)
	if l := c.Leader(t, c.Nodes[1:]...); l != c.Nodes[1] {
		t.Fatalf("Leader among b and c = %s, want b", l.ID())
	}
}

// WaitHealthy returns once every member has applied what the leader had
// committed.
func TestWaitHealthy(t *testing.T) {
	c := fakeCluster(
		Status{State: "leader", Leader: "a", Term: 2, Commit: 10, Applied: 10},
		Status{State: "follower", Leader: "a", Term: 2, Commit: 10, Applied: 10},
		Status{State: "follower", Leader: "a", Term: 2, Commit: 8, Applied: 7},
	)
	caught := later(c.Nodes[2], Status{State: "follower", Leader: "a", Term: 2, Commit: 10, Applied: 10}, nil)
	if l := c.WaitHealthy(t); l != c.Nodes[0] {
		t.Fatalf("WaitHealthy = %s, want a", l.ID())
	}
	if !caught.Load() {
		t.Fatal("WaitHealthy returned before c caught up")
	}
}

func TestParseStatus(t *testing.T) {
	st, err := ParseStatus(map[any]any{"node": "a", "state": "follower", "term": int64(4), "leader": "b",
		"commit_index": int64(12), "applied_index": int64(11), "ready": int64(1)})
	if want := (Status{State: "follower", Leader: "b", Term: 4, Commit: 12, Applied: 11}); err != nil || st != want {
		t.Fatalf("ParseStatus = %+v, %v; want %+v", st, err, want)
	}
	if _, err := ParseStatus([]any{"state", "leader"}); err == nil {
		t.Fatal("ParseStatus of an array: no error")
	}
}

func TestWriteErr(t *testing.T) {
	for err, want := range map[error]bool{
		nil: false,
		errors.New("TRYAGAIN the leader changed"):    true,
		errors.New("CLUSTERDOWN no leader"):          true,
		errors.New("UNKNOWN the outcome is unknown"): true,
		errors.New("ERR wrong number of arguments"):  false,
		errors.New("TRYAGAINX"):                      false,
	} {
		if got := WriteErr(err); got != want {
			t.Errorf("WriteErr(%v) = %v, want %v", err, got, want)
		}
	}
}

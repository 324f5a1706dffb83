package embedded

import (
	"context"
	"testing"

	"github.com/lockserver/lockserver/internal/clustertest"
	"github.com/lockserver/lockserver/internal/testenv"
)

// A ready cluster has a leader that the two others follow; a write through a
// follower with the password reaches every member; once the leader stops,
// another leads in a later term; the stopped member starts again from its
// data directory and catches up.
func TestCluster(t *testing.T) {
	testenv.Long(t)
	c := Start(t, Options{Password: "pw", Ready: true})
	l := c.Leader(t)
	fs := c.Followers(l)
	if len(fs) != 2 {
		t.Fatalf("%d followers, want 2", len(fs))
	}
	ctx := context.Background()
	clustertest.Eventually(t, "SET through a follower", func() error { return fs[0].Client().Set(ctx, "k", "v", 0).Err() })
	term := c.Term()

	l.Stop()
	if l.Server() != nil || l.Client() != nil {
		t.Fatal("a stopped member has a server or a client")
	}
	if _, err := l.Status(ctx); err == nil {
		t.Fatal("a stopped member answered Status")
	}
	next := c.Leader(t)
	if next == l || c.Term() <= term {
		t.Fatalf("after the leader stopped: %s leads in term %d (before: %s in %d)", next.ID(), c.Term(), l.ID(), term)
	}
	l.Start(t)
	c.WaitHealthy(t)
	if v, err := l.Server().Do(ctx, "GET", "k"); err != nil || v != "v" {
		t.Fatalf("GET k on the restarted member = %v, %v; want v", v, err)
	}
}

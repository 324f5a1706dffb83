package replication

import (
	"fmt"
	"strings"
	"time"

	"github.com/hashicorp/raft"
	"github.com/lockserver/lockserver/internal/clustertest"
	"github.com/lockserver/lockserver/keyspace"
)

// How tests hold when the leader changes under them, as it may on a busy
// machine even with the harness's long timeouts: a test that moves the leader
// itself talks to the cluster as a client would (retry, set, incr below); a
// test about what a leader does while it leads runs as attempts, each on a
// cluster of its own (see package attempt).

// notWritten reports whether r says that nothing was written, so that a
// client sends the command again.
func notWritten(r keyspace.Reply) bool {
	return r.Kind == keyspace.KindError && (strings.HasPrefix(r.Str, "TRYAGAIN") || strings.HasPrefix(r.Str, "CLUSTERDOWN"))
}

// isUnknown reports whether r says that the command may or may not
// have taken effect.
func isUnknown(r keyspace.Reply) bool {
	return r.Kind == keyspace.KindError && strings.HasPrefix(r.Str, "UNKNOWN")
}

// retry runs send until its reply is not one that says nothing was written,
// as a client does across an election, for up to clustertest.Wait.
func (c *testCluster) retry(what string, send func() keyspace.Reply) keyspace.Reply {
	c.t.Helper()
	deadline := time.Now().Add(clustertest.Wait)
	for {
		r := send()
		if !notWritten(r) {
			return r
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("%s: still %q after %v", what, r.Str, clustertest.Wait)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// do sends cmd to n as a client connected to n: again while the reply says
// that nothing was written.
func (c *testCluster) do(n *testNode, db int, cmd ...string) keyspace.Reply {
	c.t.Helper()
	return c.retry(strings.Join(cmd, " ")+" on "+n.id, func() keyspace.Reply { return do(n, db, cmd...) })
}

// idem sends an idempotent command to n as a client that may send it again
// whatever happened: after UNKNOWN too, since applying it twice is applying
// it once.
func (c *testCluster) idem(n *testNode, db int, cmd ...string) keyspace.Reply {
	c.t.Helper()
	for {
		if r := c.do(n, db, cmd...); !isUnknown(r) {
			return r
		}
	}
}

// set writes key through n with SET key value and args, as a client that
// reads back after UNKNOWN: if GET shows the value, the write took effect;
// else it is sent again. Nothing else may write key meanwhile.
func (c *testCluster) set(n *testNode, db int, key, value string, args ...string) keyspace.Reply {
	c.t.Helper()
	cmd := append([]string{"SET", key, value}, args...)
	for {
		r := c.do(n, db, cmd...)
		if !isUnknown(r) {
			return r
		}
		if same(c.do(n, db, "GET", key), keyspace.Bulk(value)) {
			return keyspace.OK
		}
	}
}

// incr runs INCR key through n, which must take key to want, as a client
// that reads back after UNKNOWN: if GET shows want, the INCR took effect; if
// it shows one less, it did not and is sent again. It returns the INCR's
// reply, or want once read back. Nothing else may write key meanwhile.
func (c *testCluster) incr(n *testNode, key string, want int64) keyspace.Reply {
	c.t.Helper()
	for {
		r := c.do(n, 0, "INCR", key)
		if !isUnknown(r) {
			return r
		}
		switch got := c.do(n, 0, "GET", key); {
		case same(got, keyspace.Bulk(fmt.Sprint(want))):
			return keyspace.Int(want)
		case !same(got, keyspace.Bulk(fmt.Sprint(want-1))):
			c.t.Fatalf("INCR %s after UNKNOWN: GET = %+v, want %d or %d", key, got, want-1, want)
		}
	}
}

// leading returns the running node whose raft says it leads now, without
// waiting; nil if none does (or, during a partition, the first found).
func (c *testCluster) leading() *testNode {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, n := range c.Nodes {
		if n.eng != nil && !n.eng.closed.Load() && n.eng.raft.State() == raft.Leader {
			return n
		}
	}
	return nil
}

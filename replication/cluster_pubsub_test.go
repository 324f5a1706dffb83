package replication

import (
	"fmt"
	"testing"

	"github.com/lockserver/lockserver/keyspace"
)

// A script sees 0 from PUBLISH on every node, whatever each node's
// subscribers: what a script reads may decide what it writes, and every
// replica must write the same. Each node still delivers the message.
func TestClusterScriptPublishIsDeterministic(t *testing.T) {
	c := newTestCluster(t, 3)
	l := c.leader()
	fs := c.followers(l)
	l.hub.subscribe("ch", false, 1)
	fs[0].hub.subscribe("ch", false, 2)
	script := "local n = redis.call('publish', 'ch', ARGV[1]) redis.call('set', KEYS[1], n) return n"
	for _, n := range []*testNode{l, fs[0], fs[1]} {
		wantReply(t, "the script through "+n.id, do(n, 0, "EVAL", script, "1", "seen-"+n.id, n.id), keyspace.Int(0))
	}
	for _, n := range c.nodes {
		for _, via := range c.nodes {
			c.eventually(n.id+" applies the script through "+via.id, func() bool { return same(localGet(n, "seen-"+via.id), keyspace.Bulk("0")) })
		}
		c.eventually(n.id+" delivers the scripts' messages", func() bool {
			return fmt.Sprint(n.hub.messages()) == fmt.Sprintf("[ch:%s ch:%s ch:%s]", l.id, fs[0].id, fs[1].id)
		})
	}
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

package compat_test

import "testing"

// PUBLISH and SPUBLISH count the subscribers that received the message, a
// client subscribed to a channel and a matching pattern twice; a script sees
// the same count on a single node, as on one redis-server. (A cluster node
// returns 0 to scripts, on every node alike: see keyspace.Replicated and
// replication's TestClusterScriptPublishIsDeterministic.)
func TestDiffPublishCounts(t *testing.T) {
	p := newPair(t)
	sub, shard := p.another(), p.another()
	sub.Do("SUBSCRIBE", "ch")
	sub.Do("PSUBSCRIBE", "c*")
	shard.Do("SSUBSCRIBE", "ch")

	p.Do("PUBLISH", "ch", "plain")
	sub.Read()
	sub.Read()
	p.Do("SPUBLISH", "ch", "sharded")
	shard.Read()
	p.Do("EVAL", "return redis.call('publish', KEYS[1], 'from a script')", "1", "ch")
	sub.Read()
	sub.Read()
	p.Do("EVAL", "return redis.call('spublish', KEYS[1], 'from a script')", "1", "ch")
	shard.Read()
	p.Do("EVAL", "return redis.call('publish', 'cx', 'pattern only') + redis.call('publish', 'nobody', 'x')", "0")
	sub.Read()
	p.Run([][]string{
		{"MULTI"},
		{"PUBLISH", "ch", "in a transaction"},
		{"SPUBLISH", "ch", "in a transaction"},
		{"EXEC"},
	})
	sub.Read()
	sub.Read()
	shard.Read()
}

package lock_test

import (
	"testing"

	"github.com/lockserver/lockserver/internal/clustertest/embedded"
	"github.com/lockserver/lockserver/lock"
	"github.com/redis/go-redis/v9"
)

// The Mutex through the other go-redis clients a Backend takes: a
// ClusterClient (lockserver answers as one shard owning every slot) and a
// FailoverClient that finds the leader through the Sentinel commands, each
// given a follower's address. 16 holders exclude each other.
func TestMutexThroughClusterAndFailoverClients(t *testing.T) {
	c := embedded.Start(t, embedded.Options{})
	addr := c.Followers(c.Leader(t))[0].Options.Addr
	for _, c := range []struct {
		name   string
		client redis.UniversalClient
	}{
		{"ClusterClient", redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{addr}})},
		{"FailoverClient", redis.NewFailoverClient(&redis.FailoverOptions{MasterName: "mymaster", SentinelAddrs: []string{addr}})},
	} {
		t.Run(c.name, func(t *testing.T) {
			defer c.client.Close()
			ctx := testContext(t)
			b := lock.Redis(c.client)
			defer b.Close()
			mutexExcludes(t, ctx, b, "clients:"+c.name, 16, 4)
		})
	}
}

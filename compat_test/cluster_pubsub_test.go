package compat_test

import (
	"testing"

	"github.com/lockserver/lockserver/internal/attempt"
	"github.com/lockserver/lockserver/internal/testenv"
)

// On a three-member cluster, subscribers on one member hear what is
// published through any member, once each. PUBLISH and SPUBLISH reply how
// many receivers the member the client is connected to has, as Redis Cluster
// counts them: the subscribing member's own here, none elsewhere. A script's
// PUBLISH returns 0 on every member, so that the script does the same on
// every replica.
func TestClusterPublishAcrossMembers(t *testing.T) {
	testenv.Long(t)
	attempt.Run(t, func(t testing.TB) {
		c := startCluster(t)
		home := (c.leader + 1) % 3
		sub, shard := dialRaw(t, c.server(home).Addr()), dialRaw(t, c.server(home).Addr())
		sub.Do("SUBSCRIBE", "ch")
		shard.Do("SSUBSCRIBE", "sch")
		roles := map[int]string{c.leader: "leader", home: "subscribers' follower", (c.leader + 2) % 3: "other follower"}
		for i, m := range c.Nodes {
			conn := dialRaw(t, m.Server().Addr())
			want := ":0\r\n"
			if i == home {
				want = ":1\r\n"
			}
			for _, step := range []struct{ cmd, ch, want string }{
				{"PUBLISH", "ch", want},
				{"SPUBLISH", "sch", want},
			} {
				msg := step.cmd + " through the " + roles[i]
				if got := conn.Do(step.cmd, step.ch, msg); got != step.want {
					t.Errorf("%s: %q, want %q", msg, got, step.want)
				}
			}
			if got := conn.Do("EVAL", "return redis.call('publish', KEYS[1], ARGV[1])", "1", "ch", "script through the "+roles[i]); got != ":0\r\n" {
				t.Errorf("a script's PUBLISH through the %s: %q, want :0", roles[i], got)
			}
			for _, want := range []string{
				respArray("message", "ch", "PUBLISH through the "+roles[i]),
				respArray("message", "ch", "script through the "+roles[i]),
			} {
				if got := sub.Read(); got != want {
					t.Errorf("the subscriber read %q, want %q", got, want)
				}
			}
			if got, want := shard.Read(), respArray("smessage", "sch", "SPUBLISH through the "+roles[i]); got != want {
				t.Errorf("the shard subscriber read %q, want %q", got, want)
			}
		}
	})
}

package replication

import (
	"testing"

	"github.com/lockserver/lockserver/internal/attempt"
	"github.com/lockserver/lockserver/keyspace"
)

// LOCKSERVER answers bad input as Redis answers a container command's.
func TestClusterCommandErrors(t *testing.T) {
	attempt.Run(t, func(t testing.TB) {
		c := newTestCluster(t, 3)
		f := c.followers(c.leader())[0]
		wantReply(t, "unknown subcommand", do(f, 0, "LOCKSERVER", "NOPE"),
			keyspace.Error("ERR unknown subcommand 'NOPE'. Try LOCKSERVER HELP."))
		wantReply(t, "wrong arity", do(f, 0, "LOCKSERVER", "remove"),
			keyspace.Error("ERR wrong number of arguments for 'lockserver|remove' command"))
		wantReply(t, "garbage forwarded", do(f, 0, "LOCKSERVER", "FORWARD", "\xff\x7f"),
			keyspace.Error("ERR decode requests: count 16383 exceeds the input"))
		st := do(f, 0, "LOCKSERVER", "STATUS")
		if st.Kind != keyspace.KindMap || !same(st.Elems[3], keyspace.Bulk("follower")) {
			t.Fatalf("LOCKSERVER STATUS on a follower = %+v", st)
		}
	})
}

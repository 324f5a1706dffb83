package replication

import (
	"context"
	"strings"
	"testing"

	"github.com/lockserver/lockserver/keyspace"
	"github.com/lockserver/lockserver/replication/internal/logcodec"
)

// TestReadOnlyByCommandTable: a forwarded request whose fate is unknown is
// answered TRYAGAIN only when it cannot have written. The expectations are
// Redis 7.0's command flags (COMMAND INFO): a subcommand is judged by its own
// row, and a script by nothing short of running it.
func TestReadOnlyByCommandTable(t *testing.T) {
	for _, tc := range []struct {
		cmds []string
		want bool
	}{
		{[]string{"GET k"}, true},
		{[]string{"HGETALL k", "PTTL k"}, true},
		{[]string{"CLUSTER COUNTKEYSINSLOT 0"}, true},
		{[]string{"CLUSTER GETKEYSINSLOT 0 10"}, true},
		{[]string{"MEMORY USAGE k"}, true},
		{[]string{"SET k v"}, false},
		{[]string{"GET k", "DEL k"}, false},
		{[]string{"PUBLISH ch m"}, false},
		{[]string{"EVALSHA_RO 0123456789012345678901234567890123456789 0"}, false},
		{[]string{"SCRIPT LOAD return 1"}, false},
		{[]string{"NOSUCH k"}, false},
		{[]string{"MEMORY NOSUCH k"}, false},
	} {
		req := &Request{}
		for _, c := range tc.cmds {
			req.Cmds = append(req.Cmds, words(strings.Fields(c)...))
		}
		if got := readOnly(req); got != tc.want {
			t.Errorf("readOnly(%q) = %v, want %v", tc.cmds, got, tc.want)
		}
	}
}

// A forwarded batch runs under the leader's memory verdict, which the leader's
// server sets on the FORWARD request, not under anything the sender says:
// the same SET forwarded to a leader over maxmemory gets OOM, and under it
// succeeds.
func TestForwardTakesTheLeadersMemoryVerdict(t *testing.T) {
	c := newTestCluster(t, 3)
	forward := func(over bool) keyspace.Reply {
		payload := encodeForward([]*Request{{Cmds: [][][]byte{words("SET", "k", "v")}}})
		var res keyspace.Reply
		for range 50 { // a node that no longer leads refuses the batch: try the new leader
			req := &Request{Cmds: [][][]byte{{argLockserver, argForward, payload}}, OverMemory: over}
			c.leader().eng.Submit(req)
			if res = req.Wait(context.Background()); !strings.HasPrefix(res.Str, "TRYAGAIN") {
				break
			}
		}
		if res.Kind != keyspace.KindBulk {
			t.Fatalf("FORWARD = %+v", res)
		}
		_, replies, _, err := logcodec.DecodeForwardReply([]byte(res.Str))
		if err != nil || len(replies) != 1 {
			t.Fatalf("FORWARD reply %q: %v", res.Str, err)
		}
		return replies[0]
	}
	if got := forward(true); got.Str != ErrOOM.Str {
		t.Fatalf("SET forwarded to a leader over maxmemory = %+v, want %q", got, ErrOOM.Str)
	}
	if got := forward(false); got.Kind != keyspace.KindStatus || got.Str != "OK" {
		t.Fatalf("SET forwarded to a leader under maxmemory = %+v, want OK", got)
	}
}

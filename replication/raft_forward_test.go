package replication

import (
	"strings"
	"testing"
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

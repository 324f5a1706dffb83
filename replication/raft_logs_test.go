package replication

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"testing"
)

// jsonLog collects a logger's JSON lines.
type jsonLog struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *jsonLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *jsonLog) events(event string) []map[string]any {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []map[string]any
	for _, line := range strings.Split(l.b.String(), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) == nil && m["event"] == event {
			out = append(out, m)
		}
	}
	return out
}

// A leader change, a snapshot and a membership change each log one line an
// operator can filter on.
func TestClusterLogsEvents(t *testing.T) {
	logs := &jsonLog{}
	c := newTestClusterWith(t, 3, RaftOptions{Logger: slog.New(slog.NewJSONHandler(logs, nil))})
	defer c.close()
	l := c.leader()
	c.eventually("a leader_change line naming the leader", func() bool {
		for _, e := range logs.events("leader_change") {
			if e["leader"] == l.id && e["node"] != nil && e["term"] != nil {
				return true
			}
		}
		return false
	})
	if r := do(l, 0, "SET", "k", "v"); r.IsError() {
		t.Fatal(r.Str)
	}
	if r := do(l, 0, "LOCKSERVER", "SNAPSHOT"); r.IsError() {
		t.Fatalf("LOCKSERVER SNAPSHOT: %s", r.Str)
	}
	snaps := logs.events("snapshot")
	if len(snaps) != 1 || snaps[0]["node"] != l.id || snaps[0]["bytes"].(float64) <= 0 || snaps[0]["index"] == nil {
		t.Errorf("snapshot lines: %v", snaps)
	}
	gone := c.followers(l)[0]
	if r := do(l, 0, "LOCKSERVER", "REMOVE", gone.id); r.IsError() {
		t.Fatalf("LOCKSERVER REMOVE: %s", r.Str)
	}
	if ev := logs.events("membership"); len(ev) != 1 || ev[0]["change"] != "remove" || ev[0]["id"] != gone.id {
		t.Errorf("membership lines: %v", ev)
	}
}

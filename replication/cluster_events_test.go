package replication

import (
	"fmt"
	"log/slog"
	"testing"

	"github.com/lockserver/lockserver/internal/testenv"
	"github.com/lockserver/lockserver/internal/testlog"
	"github.com/lockserver/lockserver/keyspace"
	"github.com/prometheus/client_golang/prometheus"
)

// A leader change, a snapshot and a membership change each log one line an
// operator can filter on.
func TestClusterLogsEvents(t *testing.T) {
	logs := &testlog.Buffer{}
	c := newTestClusterWith(t, 3, RaftOptions{Logger: slog.New(slog.NewJSONHandler(logs, nil))})
	defer c.close()
	l := c.leader()
	c.eventually("a leader_change line naming the leader", func() bool {
		for _, e := range logs.Events("leader_change") {
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
	snaps := logs.Events("snapshot")
	if len(snaps) != 1 || snaps[0]["node"] != l.id || snaps[0]["bytes"].(float64) <= 0 || snaps[0]["index"] == nil {
		t.Errorf("snapshot lines: %v", snaps)
	}
	gone := c.followers(l)[0]
	if r := do(l, 0, "LOCKSERVER", "REMOVE", gone.id); r.IsError() {
		t.Fatalf("LOCKSERVER REMOVE: %s", r.Str)
	}
	if ev := logs.Events("membership"); len(ev) != 1 || ev[0]["change"] != "remove" || ev[0]["id"] != gone.id {
		t.Errorf("membership lines: %v", ev)
	}
}

// restores returns a member's count of snapshots restored from source, as
// its Collector reports it.
func restores(t *testing.T, n *testNode, source string) float64 {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(n.eng.Collector())
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "lockserver_raft_snapshot_restores_total" {
			continue
		}
		for _, m := range mf.Metric {
			for _, l := range m.Label {
				if l.GetName() == "source" && l.GetValue() == source {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	t.Fatalf("%s: no snapshot_restores_total{source=%q}", n.id, source)
	return 0
}

// A member that is sent the leader's snapshot, and one that restarts from
// its own, count it and log a snapshot line saying which.
func TestClusterCountsSnapshotRestores(t *testing.T) {
	testenv.Long(t)
	logs := &testlog.Buffer{}
	c := newTestClusterWith(t, 3, RaftOptions{snapshotThreshold: 1 << 30, trailingLogs: 4,
		Logger: slog.New(slog.NewJSONHandler(logs, nil))})
	defer c.close()
	l := c.leader()
	lag := c.followers(l)[0]
	lag.stop()
	lastLag, _ := lag.store.LastIndex()
	for i := range 40 {
		wantReply(t, "SET", c.set(l, 0, fmt.Sprint("k", i), "v"), keyspace.OK)
	}
	running := c.compactPast(t, l, lastLag)
	restored := func(n *testNode, source string) bool {
		for _, e := range logs.Events("snapshot") {
			if e["node"] == n.id && e["source"] == source && e["msg"] == "snapshot restored" && e["bytes"].(float64) > 0 {
				return true
			}
		}
		return false
	}
	if restored(lag, "leader") {
		t.Fatal("a restore logged before the lagging member came back")
	}

	lag.restart()
	c.eventually(lag.id+" catches up", func() bool { return same(localGet(lag, "after"), keyspace.Bulk("2")) })
	if got := restores(t, lag, "leader"); got != 1 {
		t.Errorf("%s: snapshot_restores_total{source=leader} = %v after it was sent the leader's snapshot, want 1", lag.id, got)
	}
	if !restored(lag, "leader") {
		t.Errorf("%s: no snapshot line for the snapshot the leader sent: %v", lag.id, logs.Events("snapshot"))
	}

	// A member that took snapshots restarts from its own.
	n := running[0]
	if n == c.leader() {
		n = running[1]
	}
	n.stop()
	n.restart()
	if got := restores(t, n, "start"); got != 1 {
		t.Errorf("%s: snapshot_restores_total{source=start} = %v after restarting from its snapshot, want 1", n.id, got)
	}
	if got := restores(t, n, "leader"); got != 0 {
		t.Errorf("%s: snapshot_restores_total{source=leader} = %v after restarting from its own snapshot, want 0", n.id, got)
	}
	if !restored(n, "start") {
		t.Errorf("%s: no snapshot line for its restart: %v", n.id, logs.Events("snapshot"))
	}
}

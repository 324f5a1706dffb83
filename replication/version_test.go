package replication

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/lockserver/lockserver/internal/buildinfo"
	"github.com/lockserver/lockserver/internal/clustertest"
	"github.com/lockserver/lockserver/internal/testenv"
	"github.com/lockserver/lockserver/keyspace"
	"github.com/lockserver/lockserver/replication/internal/logcodec"
)

// newVersionedCluster starts three nodes that play the given builds ("" for
// this build's own).
func newVersionedCluster(t testing.TB, builds ...string) *testCluster {
	c := &testCluster{t: t, cut: map[[2]string]bool{}, logs: newNodeLog(t)}
	var peers []Peer
	for i, b := range builds {
		n := c.add(fmt.Sprintf("n%d", i+1))
		n.build = b
		peers = append(peers, Peer{ID: n.id, RaftAddr: n.raftAddr()})
	}
	c.opts.Bootstrap, c.peers = peers, peers
	for _, n := range c.Nodes {
		n.start(c.opts)
	}
	t.Cleanup(c.close)
	c.leader()
	return c
}

// restartAs starts a stopped node again, playing build.
func (n *testNode) restartAs(build string) {
	n.c.mu.Lock()
	n.build = build
	n.c.mu.Unlock()
	n.restart()
}

// clusterVersionOf returns the cluster version n's state machine applied.
func clusterVersionOf(n *testNode) clusterVersion {
	n.eng.smMu.Lock()
	defer n.eng.smMu.Unlock()
	return n.eng.sm.Load().cluster
}

// waitClusterVersion waits until every running node has applied version v.
func (c *testCluster) waitClusterVersion(v string, pinned bool) {
	c.t.Helper()
	want := clusterVersion{version: buildinfo.MustParse(v), pinned: pinned}
	c.eventually("cluster version "+v+" on every node", func() bool {
		for _, n := range c.nodes() {
			if n.eng != nil && clusterVersionOf(n) != want {
				return false
			}
		}
		return true
	})
}

// The leader raises the cluster version once every voter runs the release,
// and not before: while one voter runs the one before, the members write
// only what it reads.
func TestClusterVersionRisesOnceEveryVoterRunsTheRelease(t *testing.T) {
	testenv.Long(t)
	c := newVersionedCluster(t, "0.2.0", "0.2.0", "0.1.0")
	l := c.leader()
	// Long enough for the leader to have looked several times.
	time.Sleep(3 * time.Second)
	for _, n := range c.nodes() {
		if got := clusterVersionOf(n); got != (clusterVersion{}) {
			t.Fatalf("%s applied cluster version %+v while a voter runs 0.1.0", n.id, got)
		}
	}
	wantReply(t, "SET", c.set(l, 0, "k", "v"), keyspace.OK)

	// Clients write as the version rises, so that proposals wait beside it;
	// through the leader unless it is the member about to be stopped (a
	// follower forwards to whichever member leads).
	old := c.Nodes[2]
	w := l
	if w == old {
		w = c.Nodes[0]
	}
	stop := make(chan struct{})
	var writers sync.WaitGroup
	for i := range 4 {
		writers.Add(1)
		go func() {
			defer writers.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				do(w, 0, "SET", fmt.Sprint("w", i), "v")
			}
		}()
	}
	old.stop()
	old.restartAs("0.2.0")
	c.waitClusterVersion("0.2", false)
	close(stop)
	writers.Wait()

	// The entry went alone in its Raft log entry: a 0.1 member, which skips
	// what it cannot decode, skips nothing else.
	first, _ := c.Nodes[0].store.FirstIndex()
	last, _ := c.Nodes[0].store.LastIndex()
	found := false
	for i := first; i <= last; i++ {
		var rl raft.Log
		if c.Nodes[0].store.GetLog(i, &rl) != nil || rl.Type != raft.LogCommand {
			continue
		}
		entries, err := logcodec.DecodeBatch(rl.Data)
		if err != nil {
			t.Fatalf("log entry %d: %v", i, err)
		}
		for _, e := range entries {
			if e.Kind == logcodec.KindClusterVersion {
				found = true
				if len(entries) != 1 {
					t.Errorf("log entry %d holds the cluster version with %d other entries", i, len(entries)-1)
				}
			}
		}
	}
	if !found {
		t.Fatal("no cluster version entry in the log")
	}
}

// A member that meets a cluster version above its own build is too old to
// be a member: it stops, saying which release it needs, and applies nothing
// past the entry.
func TestMemberOlderThanTheClusterVersionStops(t *testing.T) {
	testenv.Long(t)
	c := newVersionedCluster(t, "", "", "")
	c.waitClusterVersion(buildinfo.Current.String(), false)
	l := c.leader()
	f := c.followers(l)[0]
	f.stop()
	wantReply(t, "SET after the follower stopped", c.set(l, 0, "after", "1"), keyspace.OK)

	f.restartAs("0.1.0")
	err := waitFault(t, f)
	for _, want := range []string{"too old to be a member", "run " + buildinfo.Current.String() + " or later"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the fault %q does not say %q", err, want)
		}
	}
	if got := localGet(f, "after"); got.Kind != keyspace.KindNull {
		t.Errorf("the member that stopped applied past the cluster version: GET after = %+v", got)
	}
}

// A member that meets a log entry it cannot decode stops rather than skip
// it, which would leave its state unlike the members that decode it.
func TestUndecodableEntryStopsTheMember(t *testing.T) {
	testenv.Long(t)
	c := newTestCluster(t, 3)
	l := c.leader()
	wantReply(t, "SET", c.set(l, 0, "before", "1"), keyspace.OK)
	// A batch of one entry of a kind no release has written; the leader
	// applies it once a majority holds it.
	f := l.eng.raft.Apply([]byte{1, 10, 99, 1, 0, 0, 0, 0, 0, 0, 0, 1}, 0)
	if err := f.Error(); err != nil {
		t.Fatalf("append: %v", err)
	}
	if err := waitFault(t, l); !strings.Contains(err.Error(), "cannot decode it") {
		t.Errorf("the leader's fault %q does not say it cannot decode the entry", err)
	}
	// Each other node halts when it applies the entry, or never applies it:
	// it learns the entry committed from a leader, and a leader that commits
	// it applies it and halts.
	for _, n := range c.followers(l) {
		select {
		case err := <-n.eng.Fault():
			if !strings.Contains(err.Error(), "cannot decode it") {
				t.Errorf("%s's fault %q does not say it cannot decode the entry", n.id, err)
			}
		case <-time.After(5 * time.Second):
		}
	}
	for _, n := range c.nodes() {
		if n.eng.applied.Load() >= f.Index() {
			t.Errorf("%s applied past the entry it could not decode (applied %d, the entry %d)", n.id, n.eng.applied.Load(), f.Index())
		}
		if _, err := (*fsm)(n.eng).Snapshot(); n.eng.cannotApply() != nil && err == nil {
			t.Errorf("%s takes snapshots after an entry it could not decode", n.id)
		}
	}
}

// waitFault waits for the error that stopped n.
func waitFault(t *testing.T, n *testNode) error {
	t.Helper()
	select {
	case err := <-n.eng.Fault():
		return err
	case <-time.After(clustertest.Wait):
		t.Fatalf("%s did not stop", n.id)
		return nil
	}
}

// A snapshot carries the cluster version once it allows it: a member that
// restarts from a snapshot taken after the version rose knows it with no
// entry of it left in its log.
func TestSnapshotCarriesTheClusterVersion(t *testing.T) {
	testenv.Long(t)
	c := newTestClusterWith(t, 3, RaftOptions{snapshotThreshold: 1 << 30, trailingLogs: 1})
	c.waitClusterVersion(buildinfo.Current.String(), false)
	l := c.leader()
	f := c.followers(l)[0]
	idx := f.eng.applied.Load() // at or past the cluster version's entry
	// A snapshot keeps the log since the one before, and compactSlack more.
	for i := range 2 {
		for j := range compactSlack + 8 {
			wantReply(t, "SET", c.set(l, 0, "k", fmt.Sprint(i, j)), keyspace.OK)
		}
		c.eventually(f.id+" applies the SET", func() bool { return f.eng.applied.Load() >= l.eng.applied.Load() })
		wantReply(t, "LOCKSERVER SNAPSHOT on "+f.id, do(f, 0, "LOCKSERVER", "SNAPSHOT"), keyspace.OK)
	}
	if first, _ := f.store.FirstIndex(); first <= idx {
		t.Fatalf("%s kept its log from %d, the cluster version's entry among it (at or before %d)", f.id, first, idx)
	}
	f.stop()
	f.restart()
	if got := clusterVersionOf(f); got.get() != buildinfo.Current {
		t.Fatalf("restarted from a snapshot, %s knows cluster version %v, want %v", f.id, got.get(), buildinfo.Current)
	}
}

// LOCKSERVER DOWNGRADE lowers the cluster version and pins it, so that the
// members write only what the release before reads, and each takes a
// snapshot of that release's form; CANCEL lets it rise again.
func TestDowngradePinsTheClusterVersion(t *testing.T) {
	testenv.Long(t)
	c := newVersionedCluster(t, "", "", "")
	cur := buildinfo.Current.String()
	c.waitClusterVersion(cur, false)
	l := c.leader()
	f := c.followers(l)[0]

	for _, bad := range []struct{ arg, want string }{
		{"0.0", "ERR this build reads no cluster version below " + buildinfo.Oldest.String()},
		{cur, "ERR the cluster version is " + cur + ": a downgrade lowers it"},
		{"one", "ERR version \"one\""},
		{"cancel", "ERR no downgrade to cancel"},
	} {
		if got := c.do(f, 0, "LOCKSERVER", "DOWNGRADE", bad.arg); !strings.HasPrefix(got.Str, bad.want) {
			t.Errorf("DOWNGRADE %s: %+v, want %q", bad.arg, got, bad.want)
		}
	}

	wantReply(t, "DOWNGRADE through a follower", c.do(f, 0, "LOCKSERVER", "DOWNGRADE", buildinfo.Oldest.String()), keyspace.OK)
	c.waitClusterVersion(buildinfo.Oldest.String(), true)
	// Every member's newest snapshot is of the older release's form.
	for _, n := range c.nodes() {
		c.eventually(n.id+"'s snapshot after the downgrade", func() bool {
			metas, _ := n.snaps.List()
			// The in-memory store lists a snapshot as it is being written:
			// read it once raft says it is complete.
			return len(metas) > 0 && n.eng.raft.Stats()["last_snapshot_index"] == strconv.FormatUint(metas[0].Index, 10) &&
				snapshotHeaderVersion(t, n, metas[0].ID) == snapshotHeaderV2
		})
	}
	time.Sleep(2 * time.Second) // the leader looked again, and did not raise it
	c.waitClusterVersion(buildinfo.Oldest.String(), true)

	wantReply(t, "DOWNGRADE CANCEL", c.do(l, 0, "LOCKSERVER", "DOWNGRADE", "CANCEL"), keyspace.OK)
	c.waitClusterVersion(cur, false)
}

// snapshotHeaderVersion returns the version of the engine's header in n's
// snapshot id.
func snapshotHeaderVersion(t *testing.T, n *testNode, id string) byte {
	t.Helper()
	_, rc, err := n.snaps.Open(id)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	header, err := newStateMachine(n.eng.opts.Lua, nil, true).readSnapshot(rc)
	if err != nil {
		t.Fatal(err)
	}
	return header[len(snapshotMagic)]
}

// A leader that closes hands leadership over first: by the time Close
// returns, another node leads, with no wait for the failure detection.
func TestCloseHandsLeadershipOver(t *testing.T) {
	testenv.Long(t)
	c := newTestCluster(t, 3)
	l := c.leader()
	wantReply(t, "SET", c.set(l, 0, "k", "v"), keyspace.OK)
	l.stop()
	n := c.leading()
	if n == nil || n == l {
		t.Fatal("no other node led when the leader's Close returned")
	}
	if !strings.Contains(c.logs.String(), `msg="handed leadership over before stopping"`) {
		t.Errorf("the leader did not log the hand-over:\n%s", c.logs.String())
	}
	wantReply(t, "GET on the new leader", c.do(n, 0, "GET", "k"), keyspace.Bulk("v"))
}

// Every command of the state machine (the keyspace's and the scripting
// layer's) that lockserver 0.1 did not have is in commandsAdded, and only
// those: a command added without gating would be applied by this release's
// members and refused by 0.1's in a cluster of both. A container's
// subcommands are gated with it (FUNCTION).
func TestCommandsAddedSince01(t *testing.T) {
	b, err := os.ReadFile("testdata/commands-0.1.txt")
	if err != nil {
		t.Fatal(err)
	}
	old := map[string]bool{}
	for _, line := range strings.Split(string(b), "\n") {
		if line != "" && !strings.HasPrefix(line, "#") {
			old[line] = true
		}
	}
	check := func(cmd *keyspace.Command, container string) {
		if cmd.Layer != keyspace.KeyspaceLayer && cmd.Layer != keyspace.ScriptingLayer {
			return
		}
		_, gated := commandsAdded[cmd.Name]
		if _, whole := commandsAdded[container]; whole && !old[cmd.Name] {
			gated = true
		}
		switch {
		case !old[cmd.Name] && !gated:
			t.Errorf("%s is new since 0.1 and not in commandsAdded", cmd.Name)
		case old[cmd.Name] && gated:
			t.Errorf("%s is in commandsAdded, but 0.1 had it", cmd.Name)
		}
	}
	for _, cmd := range keyspace.Commands() {
		check(cmd, "")
		for _, sub := range cmd.Subcommands {
			check(sub, cmd.Name)
		}
	}
	for name := range commandsAdded {
		if keyspace.Lookup([]byte(name)) == nil {
			t.Errorf("commandsAdded names %s, which is no command", name)
		}
	}
}

// A command that a later release added is unknown, to clients and to
// scripts, on every member while the cluster version is older, and exists
// once it is raised.
func TestCommandsOfALaterReleaseWaitForTheClusterVersion(t *testing.T) {
	testenv.Long(t)
	c := newVersionedCluster(t, "", "", "")
	c.waitClusterVersion(buildinfo.Current.String(), false)
	l := c.leader()
	wantReply(t, "DOWNGRADE", c.do(l, 0, "LOCKSERVER", "DOWNGRADE", buildinfo.Oldest.String()), keyspace.OK)
	c.waitClusterVersion(buildinfo.Oldest.String(), true)
	script := "local r = redis.pcall('GEOADD', KEYS[1], '13.361389', '38.115556', 'Palermo') if type(r) == 'table' then return r['err'] end return r"
	const library = "#!lua name=lib\nredis.register_function('f', function() return 'lib' end)"
	const longScript = "local n = 0 for i = 1, 1000000 do n = n + 1 end return n"
	for _, n := range c.nodes() {
		if got := c.do(n, 0, "GEOADD", "Sicily", "13.361389", "38.115556", "Palermo"); !strings.HasPrefix(got.Str, "ERR unknown command 'GEOADD'") {
			t.Errorf("GEOADD through %s at cluster version %s: %+v, want an unknown command", n.id, buildinfo.Oldest, got)
		}
		if got := c.do(n, 0, "EVAL", script, "1", "Sicily"); got.Str != "ERR Unknown Redis command called from script" {
			t.Errorf("GEOADD from a script through %s at cluster version %s: %+v, want an unknown command", n.id, buildinfo.Oldest, got)
		}
		if got := c.do(n, 0, "FUNCTION", "LOAD", library); !strings.HasPrefix(got.Str, "ERR unknown command 'FUNCTION'") {
			t.Errorf("FUNCTION LOAD through %s at cluster version %s: %+v, want an unknown command", n.id, buildinfo.Oldest, got)
		}
	}
	// 0.1's default script budget too: a script of some 3 million steps is
	// stopped, on every member alike.
	if got := c.do(l, 0, "EVAL", longScript, "0"); !strings.Contains(got.Str, "execution budget of 2000000 steps") {
		t.Errorf("a script of 3 million steps at cluster version %s: %.200s, want 0.1's budget error", buildinfo.Oldest, got.Str)
	}
	wantReply(t, "DOWNGRADE CANCEL", c.do(l, 0, "LOCKSERVER", "DOWNGRADE", "CANCEL"), keyspace.OK)
	c.waitClusterVersion(buildinfo.Current.String(), false)
	f := c.followers(c.leader())[0]
	wantReply(t, "GEOADD once every member runs this release", c.idem(f, 0, "GEOADD", "Sicily", "13.361389", "38.115556", "Palermo"), keyspace.Int(1))
	wantReply(t, "GEOADD from a script", c.idem(f, 0, "EVAL", script, "1", "Sicily2"), keyspace.Int(1))
	wantReply(t, "FUNCTION LOAD once every member runs this release", c.idem(f, 0, "FUNCTION", "LOAD", "REPLACE", library), keyspace.Bulk("lib"))
	wantReply(t, "FCALL", c.idem(f, 0, "FCALL", "f", "0"), keyspace.Bulk("lib"))
	wantReply(t, "a script of 3 million steps under this release's budget", c.idem(f, 0, "EVAL", longScript, "0"), keyspace.Int(1_000_000))
}

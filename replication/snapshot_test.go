package replication

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/lockserver/lockserver/internal/testenv"
	"github.com/lockserver/lockserver/keyspace"
	"github.com/lockserver/lockserver/luaexec"
	"github.com/lockserver/lockserver/replication/internal/logcodec"
)

// stateBytes writes sm's state (keyspace and script cache) as a snapshot
// does, with no engine header: equal states give equal bytes.
func stateBytes(t *testing.T, sm *stateMachine) []byte {
	t.Helper()
	var buf bytes.Buffer
	snap := sm.freeze()
	defer snap.release()
	if err := snap.write(&buf, nil); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// replayLog builds a state machine by applying the entries of n's log up to
// index, in order, as a node that never took a snapshot would have.
func replayLog(t *testing.T, n *testNode, index uint64) *stateMachine {
	t.Helper()
	sm := newStateMachine(luaexec.Options{}, nil, false)
	first, _ := n.store.FirstIndex()
	if first != 1 {
		t.Fatalf("%s's log starts at %d: the test needs all of it", n.id, first)
	}
	for i := first; i <= index; i++ {
		var l raft.Log
		if err := n.store.GetLog(i, &l); err != nil {
			t.Fatalf("log entry %d: %v", i, err)
		}
		if l.Type != raft.LogCommand {
			continue
		}
		entries, err := logcodec.DecodeBatch(l.Data)
		if err != nil {
			t.Fatalf("log entry %d: %v", i, err)
		}
		for j, e := range entries {
			switch e.Kind {
			case logcodec.KindCommand:
				sm.apply(&e.Entry, i<<16|uint64(j), nil)
			case logcodec.KindSweep:
				sm.sweep(e.Entry.Time, e.Entry.DB, e.Sweep.From, e.Sweep.Shards)
			}
		}
	}
	return sm
}

// A snapshot taken while clients keep writing (changing keys in place that
// it holds, adding and deleting others, loading scripts) holds exactly the
// state at its index: what applying the log up to that index gives.
func TestSnapshotWhileWritingMatchesTheLog(t *testing.T) {
	c := newTestClusterWith(t, 3, RaftOptions{snapshotThreshold: 1 << 30, trailingLogs: 1 << 30})
	l := c.leader()
	// Enough keys that writing them takes a while.
	const keys = 20000
	for i := 0; i < keys; i += 500 {
		cmd := []string{"MSET"}
		for j := i; j < i+500; j++ {
			cmd = append(cmd, fmt.Sprint("k", j), fmt.Sprint(j))
		}
		wantReply(t, "MSET", c.idem(l, 0, cmd...), keyspace.OK)
	}
	var stop atomic.Bool
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewSource(int64(w)))
			for !stop.Load() {
				k := fmt.Sprint("k", r.Intn(keys))
				var cmd []string
				switch r.Intn(7) {
				case 0:
					cmd = []string{"APPEND", k, "x"}
				case 1:
					cmd = []string{"DEL", k}
				case 2:
					cmd = []string{"HINCRBY", "h" + k, "f", "1"}
				case 3:
					cmd = []string{"RPUSH", "list", k}
				case 4:
					cmd = []string{"PEXPIRE", k, "600000"}
				case 5:
					cmd = []string{"EVAL", fmt.Sprintf("return redis.call('INCR', KEYS[1]) + %d", r.Intn(3)), "1", "n" + k}
				default:
					cmd = []string{"SADD", "set", k}
				}
				// A leader change fails some writes; any outcome is in the log.
				do(l, 0, cmd...)
			}
		}()
	}
	wantReply(t, "LOCKSERVER SNAPSHOT", do(l, 0, "LOCKSERVER", "SNAPSHOT"), keyspace.OK)
	// Writes go on for a while after the snapshot's index.
	applied := l.eng.applied.Load()
	c.eventually("more writes", func() bool { return l.eng.applied.Load() > applied+200 })
	stop.Store(true)
	wg.Wait()

	metas, err := l.snaps.List()
	if err != nil || len(metas) == 0 {
		t.Fatalf("no snapshot: %v", err)
	}
	_, rc, err := l.snaps.Open(metas[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	sm, _, index, err := readSnapshot(rc, l.eng)
	rc.Close()
	if err != nil {
		t.Fatal(err)
	}
	if index != metas[0].Index {
		t.Fatalf("the snapshot says it holds the log up to %d; raft says %d", index, metas[0].Index)
	}
	if got, want := stateBytes(t, sm), stateBytes(t, replayLog(t, l, index)); !bytes.Equal(got, want) {
		t.Fatalf("the snapshot at index %d is not the state the log gives at that index", index)
	}
}

// corruptSnapshots is a snapshot store whose snapshots come back with one
// byte changed, as a disk or a network could change them.
type corruptSnapshots struct {
	raft.SnapshotStore
	at int64 // the byte changed
}

func (s corruptSnapshots) Open(id string) (*raft.SnapshotMeta, io.ReadCloser, error) {
	meta, rc, err := s.SnapshotStore.Open(id)
	if err != nil {
		return nil, nil, err
	}
	b, err := io.ReadAll(rc)
	rc.Close()
	if err != nil {
		return nil, nil, err
	}
	b[s.at%int64(len(b))] ^= 0x10
	return meta, io.NopCloser(bytes.NewReader(b)), nil
}

// A node whose snapshot comes back changed refuses to start with it, wherever
// the change is, rather than run with a state that differs from the others'.
func TestSnapshotCorruptRefused(t *testing.T) {
	c := newTestCluster(t, 3)
	l := c.leader()
	c.idem(l, 0, "SCRIPT", "LOAD", "return 1")
	for i := range 300 {
		wantReply(t, "SET", c.set(l, 0, fmt.Sprint("key", i), strings.Repeat("v", i)), keyspace.OK)
	}
	n := c.followers(l)[0]
	c.eventually(n.id+" applies the writes", func() bool { return same(localGet(n, "key299"), keyspace.Bulk(strings.Repeat("v", 299))) })
	wantReply(t, "LOCKSERVER SNAPSHOT", do(n, 0, "LOCKSERVER", "SNAPSHOT"), keyspace.OK)
	n.stop()
	metas, _ := n.snaps.List()
	good := n.snaps
	for _, at := range []int64{3, 9, 20, 60, metas[0].Size / 2, metas[0].Size - 3} {
		n.snaps = corruptSnapshots{good, at}
		eng, err := n.open(c.opts)
		n.trans.Close()
		if err == nil {
			eng.Close()
			t.Fatalf("byte %d of %d changed: the node started", at, metas[0].Size)
		}
		if !strings.Contains(err.Error(), "snapshot") {
			t.Fatalf("byte %d of %d changed: %v", at, metas[0].Size, err)
		}
	}
	n.snaps = good
	n.restart()
	c.eventually("the node restarts with the snapshot unchanged", func() bool { return same(localGet(n, "key1"), keyspace.Bulk("v")) })
}

// A node snapshots by the bytes of log written since its last snapshot:
// once they reach snapshotLogBytes and half that snapshot's size, and not
// before. After it, the log keeps the entries written since the snapshot
// before.
func TestSnapshotsByLogBytes(t *testing.T) {
	testenv.Long(t)
	const minLog = 16 << 10
	c := newTestClusterWith(t, 3, RaftOptions{snapshotLogBytes: minLog, trailingLogs: 1})
	l := c.leader()
	value := strings.Repeat("v", 1000)
	// A state of about 200 kB, written in 50 entries.
	for i := range 50 {
		cmd := []string{"MSET"}
		for j := range 4 {
			cmd = append(cmd, fmt.Sprint("big", i, ":", j), value)
		}
		wantReply(t, "MSET", do(l, 0, cmd...), keyspace.OK)
	}
	c.eventually("a snapshot of the state", func() bool { return l.eng.snapSize.Load() > 200_000 })
	first, size := l.eng.snapIndex.Load(), l.eng.snapSize.Load()
	// Small writes, under half the snapshot's size in all: no snapshot.
	written := 0
	for i := 0; uint64(written) < size/2-20_000; i++ {
		wantReply(t, "SET", do(l, 0, "SET", fmt.Sprint("small", i), value), keyspace.OK)
		written += len(value)
	}
	time.Sleep(2 * snapshotCheck)
	if got := l.eng.snapIndex.Load(); got != first {
		t.Fatalf("a snapshot at index %d after %d bytes of log; the last one, at %d, had %d", got, written, first, size)
	}
	// The first snapshot kept every entry written before it: none before.
	if lo, _ := l.store.FirstIndex(); lo != 1 {
		t.Fatalf("the first snapshot, at %d, compacted the log to %d", first, lo)
	}
	// Past half its size: a snapshot, which keeps in the log the entries
	// written since the first one.
	for i := 0; uint64(written) < size/2+20_000; i++ {
		wantReply(t, "SET", do(l, 0, "SET", fmt.Sprint("more", i), value), keyspace.OK)
		written += len(value)
	}
	c.eventually("the next snapshot", func() bool { return l.eng.snapIndex.Load() > first })
	c.eventually("the log compacted to the entries since the first snapshot", func() bool {
		lo, _ := l.store.FirstIndex()
		return lo > 1 && lo <= first+1
	})
}

// A node that closes with much log written since its last snapshot takes
// one first, so that its restart reads that snapshot and no log; one that
// closes with little does not.
func TestSnapshotBeforeClose(t *testing.T) {
	testenv.Long(t)
	c := newTestClusterWith(t, 3, RaftOptions{snapshotLogBytes: 1 << 20})
	l := c.leader()
	n := c.followers(l)[0]
	wantReply(t, "SET", do(l, 0, "SET", "small", "x"), keyspace.OK)
	c.eventually(n.id+" applies it", func() bool { return same(localGet(n, "small"), keyspace.Bulk("x")) })
	n.stop()
	if metas, _ := n.snaps.List(); len(metas) != 0 {
		t.Fatalf("%s closed with a few hundred bytes of log and took a snapshot", n.id)
	}
	n.restart()
	value := strings.Repeat("v", 1000)
	for i := range 300 { // 300 kB: more than an eighth of 1 MB, less than 1 MB
		wantReply(t, "SET", do(l, 0, "SET", fmt.Sprint("k", i), value), keyspace.OK)
	}
	c.eventually(n.id+" applies them", func() bool { return same(localGet(n, "k299"), keyspace.Bulk(value)) })
	applied := n.eng.applied.Load()
	n.stop()
	metas, _ := n.snaps.List()
	if len(metas) == 0 || metas[0].Index < applied {
		t.Fatalf("%s closed after applying %d with 300 kB of log: snapshots %+v", n.id, applied, metas)
	}
	n.restart()
	if got := n.eng.snapIndex.Load(); got < applied {
		t.Fatalf("%s restarted from a snapshot at %d, not the one it took at %d", n.id, got, applied)
	}
}

// A snapshot at close that runs past CloseSnapshotTimeout is abandoned:
// none is kept, not even in part, and the restart replays the log, which
// loses nothing.
func TestSnapshotBeforeCloseIsBounded(t *testing.T) {
	d := newDiskNode(t)
	d.stop()
	d.opts.snapshotLogBytes, d.opts.CloseSnapshotTimeout = 1<<20, time.Nanosecond
	if err := d.start(); err != nil {
		t.Fatal(err)
	}
	value := strings.Repeat("v", 1000)
	for i := range 300 { // as in TestSnapshotBeforeClose: enough for a snapshot at close
		d.set(fmt.Sprint("k", i), value)
	}
	d.stop()
	if dirs, err := os.ReadDir(filepath.Join(d.opts.DataDir, "snapshots")); err != nil || len(dirs) != 0 {
		t.Fatalf("the node closed with no time for a snapshot, and its snapshots directory holds %v (%v)", dirs, err)
	}
	if err := d.start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(15 * time.Second)
	for i := 0; i < 300; {
		d.eng.smMu.Lock()
		got := d.eng.sm.Load().read(0, [][][]byte{words("GET", fmt.Sprint("k", i))}, false, nil, d.eng.sm.Load().lastTime())
		d.eng.smMu.Unlock()
		if same(got, keyspace.Bulk(value)) {
			i++
			continue
		}
		if time.Now().After(deadline) {
			t.Fatalf("restarted from its log, the node holds k%d = %v", i, got)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A snapshot pauses after each frame while the node serves (see storage.Pacer),
// and no longer once it closes, and fails once the time Close gave it is up.
func TestSnapshotWriterPacesUntilClose(t *testing.T) {
	var by atomic.Int64
	paused := 0
	c := &counter{w: io.Discard, pace: func() { paused++ }, by: &by}
	frame := make([]byte, 64<<10)
	if _, err := c.Write(frame); err != nil || paused == 0 {
		t.Fatalf("a serving node's snapshot wrote a frame (%v) without pausing after it", err)
	}
	paused = 0
	by.Store(time.Now().Add(time.Hour).UnixNano())
	if _, err := c.Write(frame); err != nil || paused != 0 {
		t.Fatalf("a closing node's snapshot paused after a frame (err %v)", err)
	}
	by.Store(time.Now().Add(-time.Nanosecond).UnixNano())
	if n, err := c.Write(frame); !errors.Is(err, errSnapshotAbandoned) || n != 0 || c.n != 2*uint64(len(frame)) {
		t.Fatalf("a write past the close deadline wrote %d bytes (%d in all), err %v", n, c.n, err)
	}
}

// A follower that falls behind by less than the log written since the
// leader's snapshot before last catches up from the log: after a snapshot,
// the leader keeps the entries written since its previous one, however few
// trailingLogs asks for, so the follower receives no snapshot.
func TestFollowerBehindCatchesUpFromTheLog(t *testing.T) {
	testenv.Long(t)
	c := newTestClusterWith(t, 3, RaftOptions{snapshotLogBytes: 1 << 30, trailingLogs: 8})
	l := c.leader()
	for i := range 100 {
		wantReply(t, "SET", c.set(l, 0, fmt.Sprint("a", i), "v"), keyspace.OK)
	}
	snapshotAll := func() {
		t.Helper()
		for _, n := range c.Nodes {
			if n.eng != nil {
				wantReply(t, "LOCKSERVER SNAPSHOT on "+n.id, do(n, 0, "LOCKSERVER", "SNAPSHOT"), keyspace.OK)
			}
		}
	}
	snapshotAll()
	l = c.leader()
	f := c.followers(l)[0]
	c.eventually(f.id+" applies the first writes", func() bool { return same(localGet(f, "a99"), keyspace.Bulk("v")) })
	// It holds the log up to every member's snapshot (an entry the leader
	// appends after the writes, such as a sweep, may reach it later): the
	// next compaction keeps the log from there, and it is not behind that.
	c.eventually(f.id+" holds the log up to every member's snapshot", func() bool {
		last, _ := f.store.LastIndex()
		for _, n := range c.Nodes {
			if metas, _ := n.snaps.List(); n != f && len(metas) > 0 && metas[0].Index > last {
				return false
			}
		}
		return true
	})
	f.stop()
	behind, _ := f.store.LastIndex()
	// 100 entries more, then a snapshot on every running member: more than
	// trailingLogs past where the follower stopped, fewer than since the
	// first snapshot.
	for i := range 100 {
		wantReply(t, "SET", c.set(l, 0, fmt.Sprint("b", i), "v"), keyspace.OK)
	}
	snapshotAll()
	for _, n := range c.Nodes {
		if n == f {
			continue
		}
		if first, _ := n.store.FirstIndex(); first > behind {
			t.Fatalf("%s compacted its log to %d; the follower stopped at %d", n.id, first, behind)
		}
	}
	f.restart()
	c.eventually(f.id+" catches up", func() bool { return same(localGet(f, "b99"), keyspace.Bulk("v")) })
	// Its own snapshot, from before it stopped, is all it holds.
	metas, _ := f.snaps.List()
	for _, m := range metas {
		if m.Index > behind {
			t.Fatalf("%s, stopped at %d, received a snapshot at %d rather than the log", f.id, behind, m.Index)
		}
	}
}

// A snapshot taken while a client goes on writing keeps in the log every
// entry since the snapshot before, that one's included: raft compacts once
// the snapshot is written, counting back from the log's last entry then, not
// from the one there was when the snapshot began.
func TestSnapshotWhileWritingKeepsTheLogSinceTheLast(t *testing.T) {
	c := newTestClusterWith(t, 3, RaftOptions{snapshotLogBytes: 1 << 30, trailingLogs: 1})
	l := c.leader()
	value := strings.Repeat("v", 1000)
	for i := range 100 { // 2 MB of state, whose snapshot takes a while
		cmd := []string{"MSET"}
		for j := range 20 {
			cmd = append(cmd, fmt.Sprint("k", i, ":", j), value)
		}
		wantReply(t, "MSET", do(l, 0, cmd...), keyspace.OK)
	}
	if err := l.eng.takeSnapshot(); err != nil {
		t.Fatal(err)
	}
	first := l.eng.snapIndex.Load()
	for i := range 50 {
		wantReply(t, "SET", do(l, 0, "SET", fmt.Sprint("before", i), "x"), keyspace.OK)
	}
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
				do(l, 0, "SET", fmt.Sprint("during", i%100), "x")
			}
		}
	}()
	err := l.eng.takeSnapshot()
	close(stop)
	<-done
	if err != nil {
		t.Fatal(err)
	}
	if lo, _ := l.store.FirstIndex(); lo > first {
		t.Fatalf("the snapshot at %d, taken while writes went on, compacted the log to %d, past the snapshot before it at %d", l.eng.snapIndex.Load(), lo, first)
	}
}

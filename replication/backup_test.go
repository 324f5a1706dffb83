package replication

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/lockserver/lockserver/internal/testenv"
	"github.com/lockserver/lockserver/keyspace"
)

// readBackup reads the backup that began on n, whose begin reply is begun,
// to its end, and checks the leader's SHA-256 of it against one computed
// here.
func readBackup(t *testing.T, n *testNode, begun keyspace.Reply) []byte {
	t.Helper()
	var id string
	for i := 0; i+1 < len(begun.Elems); i += 2 {
		if begun.Elems[i].Str == "id" {
			id = begun.Elems[i+1].Str
		}
	}
	var body []byte
	for {
		r := n.eng.backupNext(id)
		if r.Kind == keyspace.KindError || len(r.Elems) != 2 {
			t.Fatalf("LOCKSERVER BACKUP %s: %v", id, r)
		}
		body = append(body, r.Elems[0].Str...)
		if r.Elems[1].Kind == keyspace.KindBulk {
			if sum := sha256.Sum256(body); hex.EncodeToString(sum[:]) != r.Elems[1].Str {
				t.Fatalf("the leader's SHA-256 of the backup is %s, of what was read %x", r.Elems[1].Str, sum)
			}
			return body
		}
	}
}

// A backup holds every write acknowledged before it began, even on a
// leader whose state machine is behind its log: it waits for a barrier.
// Here the new leader's state machine is held back, with a write the old
// leader acknowledged in its log and not applied, when the backup begins.
func TestBackupWaitsForTheBarrier(t *testing.T) {
	testenv.Long(t)
	c := newTestCluster(t, 3)
	behind := c.followers(c.leader())[0]
	gate := make(chan struct{})
	close(gate)
	var held chan struct{}
	behind.stop()
	o := c.opts
	o.beforeApply = func() {
		c.mu.Lock()
		g := gate
		c.mu.Unlock()
		<-g
	}
	behind.start(o)
	wantReply(t, "SET before", c.set(c.leader(), 0, "before", "1"), keyspace.OK)
	c.eventually(behind.id+" to apply SET before", func() bool { return same(localGet(behind, "before"), keyspace.Bulk("1")) })

	c.mu.Lock()
	held = make(chan struct{})
	gate = held
	c.mu.Unlock()
	wantReply(t, "SET k", c.set(c.leader(), 0, "k", "acknowledged"), keyspace.OK)
	c.eventually(behind.id+" to lead", func() bool {
		if l := c.leading(); l != nil && l != behind {
			l.eng.raft.LeadershipTransferToServer(raft.ServerID(behind.id), raft.ServerAddress(behind.raftAddr())).Error()
		}
		return c.leading() == behind && behind.eng.leading()
	})
	if same(localGet(behind, "k"), keyspace.Bulk("acknowledged")) {
		t.Fatalf("%s applied SET k while held back: the premise failed", behind.id)
	}

	begun := make(chan keyspace.Reply, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		r, err := behind.eng.backupBegin(ctx)
		if err != nil {
			r = keyspace.Error(err.Error())
		}
		begun <- r
	}()
	var r keyspace.Reply
	select {
	case r = <-begun:
		close(held)
	case <-time.After(time.Second):
		close(held)
		r = <-begun
	}
	if r.Kind == keyspace.KindError {
		t.Fatalf("LOCKSERVER BACKUP on %s: %s", behind.id, r.Str)
	}
	body := readBackup(t, behind, r)
	sm, _, _, err := readSnapshot(bytes.NewReader(body), behind.eng)
	if err != nil {
		t.Fatal(err)
	}
	if got := sm.read(0, [][][]byte{words("GET", "k")}, false, nil, sm.lastTime()); !same(got, keyspace.Bulk("acknowledged")) {
		t.Fatalf("the backup holds k = %v, want the value acknowledged before it began", got)
	}
}

// Only the leader backs up; a follower says so.
func TestBackupOnAFollowerIsRefused(t *testing.T) {
	testenv.Long(t)
	c := newTestCluster(t, 3)
	f := c.followers(c.leader())[0]
	r := do(f, 0, "LOCKSERVER", "BACKUP")
	wantErrPrefix(t, "LOCKSERVER BACKUP on a follower", r, "ERR not the leader", "ERR no leader")
	wantErrPrefix(t, "LOCKSERVER BACKUP of no backup", do(f, 0, "LOCKSERVER", "BACKUP", "nosuch"), "ERR no backup")
}

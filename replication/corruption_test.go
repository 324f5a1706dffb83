package replication

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	"github.com/lockserver/lockserver/internal/freeport"
	"github.com/lockserver/lockserver/replication/internal/storage"
)

// wantCorruption checks that err is a CorruptionError of file at index, whose
// message tells the remedy.
func wantCorruption(t *testing.T, err error, file string, index uint64) {
	t.Helper()
	var ce *storage.CorruptionError
	if !errors.As(err, &ce) {
		t.Fatalf("got %v, want a CorruptionError of %s", err, file)
	}
	if filepath.Base(ce.Path) != file || ce.Index != index {
		t.Fatalf("corruption of %s at index %d, want %s at %d: %v", ce.Path, ce.Index, file, index, err)
	}
	if msg := err.Error(); !strings.Contains(msg, "wipe its data directory "+filepath.Dir(ce.Path)) || !strings.Contains(msg, "--join") || strings.Contains(msg, "\n") {
		t.Fatalf("the message does not tell the remedy on one line: %q", msg)
	}
}

// diskNode is a single-node cluster with its data in a directory, as the
// binary runs one.
type diskNode struct {
	t    *testing.T
	opts RaftOptions
	eng  *Raft
}

func newDiskNode(t *testing.T) *diskNode {
	d := &diskNode{t: t, opts: RaftOptions{NodeID: "n1", RaftAddr: freeport.MustAddr(t), DataDir: t.TempDir(),
		HeartbeatTimeout: 300 * time.Millisecond, ElectionTimeout: 300 * time.Millisecond}}
	if err := d.start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.stop)
	return d
}

func (d *diskNode) start() error {
	eng, err := NewRaft(d.opts)
	d.eng = eng
	return err
}

func (d *diskNode) stop() {
	if d.eng != nil {
		d.eng.Close()
		d.eng = nil
	}
}

// set writes key=val once the node leads.
func (d *diskNode) set(key, val string) {
	d.t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		req := &Request{Cmds: [][][]byte{words("SET", key, val)}}
		d.eng.Submit(req)
		reply := req.Wait(context.Background())
		if !reply.IsError() {
			return
		}
		if time.Now().After(deadline) {
			d.t.Fatalf("SET %s: %+v", key, reply)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// snapshotted writes, snapshots, writes and snapshots again (the store keeps
// two), and stops the node. It returns the newest snapshot's directory.
func (d *diskNode) snapshotted() (string, *raft.SnapshotMeta) {
	d.t.Helper()
	for round := range 2 {
		for i := range 20 {
			d.set(fmt.Sprint("k", round, i), "owner-"+fmt.Sprint(round, i))
		}
		if err := d.eng.raft.Snapshot().Error(); err != nil {
			d.t.Fatal(err)
		}
	}
	for i := range 5 {
		d.set(fmt.Sprint("after", i), "1")
	}
	d.stop()
	store, err := raft.NewFileSnapshotStore(d.opts.DataDir, 2, io.Discard)
	if err != nil {
		d.t.Fatal(err)
	}
	metas, err := store.List()
	if err != nil || len(metas) != 2 {
		d.t.Fatalf("snapshots: %d, %v; want 2", len(metas), err)
	}
	return filepath.Join(d.opts.DataDir, "snapshots", metas[0].ID), metas[0]
}

// A node whose newest snapshot fails its checksum refuses to start, where
// raft restored the older one and went on without a word.
func TestSnapshotThatFailsItsChecksumIsRefused(t *testing.T) {
	d := newDiskNode(t)
	dir, meta := d.snapshotted()
	path := filepath.Join(dir, "state.bin")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	i := bytes.Index(b, []byte("owner-1"))
	if i < 0 {
		t.Fatalf("the snapshot does not hold the second round's owners")
	}
	b[i+6] = '7'
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	wantCorruption(t, d.start(), "state.bin", meta.Index)
}

// A newest snapshot whose metadata no longer reads, or names a term that the
// log holds its last entry in another, is refused.
func TestSnapshotWithBadMetadataIsRefused(t *testing.T) {
	for _, c := range []struct {
		name   string
		change func(meta []byte, m *raft.SnapshotMeta) []byte
	}{
		{"unreadable", func(b []byte, _ *raft.SnapshotMeta) []byte { return b[:len(b)/2] }},
		{"another term", func(b []byte, m *raft.SnapshotMeta) []byte {
			return bytes.Replace(b, []byte(fmt.Sprintf(`"Term":%d`, m.Term)), []byte(fmt.Sprintf(`"Term":%d`, m.Term+1)), 1)
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := newDiskNode(t)
			dir, meta := d.snapshotted()
			path := filepath.Join(dir, "meta.json")
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			changed := c.change(b, meta)
			if bytes.Equal(changed, b) {
				t.Fatalf("meta.json unchanged: %s", b)
			}
			if err := os.WriteFile(path, changed, 0o600); err != nil {
				t.Fatal(err)
			}
			var ce *storage.CorruptionError
			err = d.start()
			if !errors.As(err, &ce) || filepath.Base(ce.Path) != "meta.json" {
				t.Fatalf("start with %s metadata: %v, want a CorruptionError of meta.json", c.name, err)
			}
		})
	}
}

// A log that starts past the entry after the newest snapshot lost entries:
// refused.
func TestSnapshotFollowedByAGapIsRefused(t *testing.T) {
	d := newDiskNode(t)
	_, meta := d.snapshotted()
	dir, err := storage.OpenDir(d.opts.DataDir, hclog.NewNullLogger(), nil)
	if err != nil {
		t.Fatal(err)
	}
	first, _ := dir.LogStore.FirstIndex()
	err = dir.LogStore.DeleteRange(first, meta.Index+1)
	dir.Close()
	if err != nil {
		t.Fatal(err)
	}
	wantCorruption(t, d.start(), "meta.json", meta.Index+1)
}

// A snapshot is checked as a whole, not only as far as its encoding goes:
// bytes after its end, which the decoder never reads, fail the check, and
// the node refuses to start.
func TestSnapshotWithBytesAfterItsEndIsRefused(t *testing.T) {
	d := newDiskNode(t)
	dir, meta := d.snapshotted()
	f, err := os.OpenFile(filepath.Join(dir, "state.bin"), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.Write([]byte{0})
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	wantCorruption(t, d.start(), "state.bin", meta.Index)
}

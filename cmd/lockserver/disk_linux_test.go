//go:build linux

package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lockserver/lockserver/internal/clustertest"
)

// A member whose disk fills stops: the write in flight gets UNKNOWN, the
// process logs the write error and exits with status 1, and once restarted
// with room it has every write it acknowledged. The disk is a small tmpfs,
// which only root can mount.
func TestBinaryExitsWhenItsDiskIsFull(t *testing.T) {
	bin := clustertest.Binary(t)
	disk := t.TempDir()
	if err := syscall.Mount("tmpfs", disk, "tmpfs", 0, "size=16m"); err != nil {
		t.Skipf("needs a small tmpfs to fill, which takes root: mount: %v", err)
	}
	t.Cleanup(func() { syscall.Unmount(disk, syscall.MNT_DETACH) })
	n := clustertest.NewProc(t, bin, "n1", clustertest.ProcOptions{Dir: filepath.Join(disk, "data"), Password: password})
	n.Args = n.MemberArgs("--bootstrap", n.ID()+"="+n.RaftAddr())
	n.Start(t)
	ctx := context.Background()
	clustertest.Eventually(t, "a leader", func() error { return n.Client().Set(ctx, "first", "1", 0).Err() })

	// 100 values of 200 kB cannot fit in 16 MB (the raft journal takes 4).
	value := strings.Repeat("v", 200<<10)
	acked := []string{"first"}
	var failed error
	for i := 0; i < 100 && failed == nil; i++ {
		key := fmt.Sprint("k", i)
		if failed = n.Client().Set(ctx, key, value, 0).Err(); failed == nil {
			acked = append(acked, key)
		}
	}
	if failed == nil || !strings.HasPrefix(failed.Error(), "UNKNOWN") {
		t.Fatalf("the SET that filled the disk: %v, want UNKNOWN", failed)
	}
	if err := n.Wait(15 * time.Second); exitCode(err) != 1 {
		t.Fatalf("after its failed write: %v, want exit status 1", err)
	}
	if b, _ := os.ReadFile(n.LogPath()); !strings.Contains(string(b), "no space left on device") {
		t.Errorf("the log does not say why the node stopped:\n%s", b)
	}

	if err := syscall.Mount("tmpfs", disk, "tmpfs", syscall.MS_REMOUNT, "size=64m"); err != nil {
		t.Fatal(err)
	}
	n.Start(t)
	clustertest.Eventually(t, "the restarted node", func() error { return n.Client().Ping(ctx).Err() })
	for _, key := range acked {
		want := int64(len(value))
		if key == "first" {
			want = 1
		}
		clustertest.Eventually(t, "acknowledged "+key, func() error {
			got, err := n.Client().StrLen(ctx, key).Result()
			if err == nil && got != want {
				return fmt.Errorf("STRLEN %s = %d, want %d", key, got, want)
			}
			return err
		})
	}
	if len(acked) < 2 {
		t.Errorf("only %d write fit before the disk filled; the check of what survives is thin", len(acked))
	}
}

// A follower whose disk fills stops as the leader does: it exits with status
// 1 and logs the write error, rather than stay up, lagging for good, while
// the other two go on acknowledging writes.
func TestBinaryFollowerExitsWhenItsDiskIsFull(t *testing.T) {
	bin := clustertest.Binary(t)
	disk := t.TempDir()
	if err := syscall.Mount("tmpfs", disk, "tmpfs", 0, "size=16m"); err != nil {
		t.Skipf("needs a small tmpfs to fill, which takes root: mount: %v", err)
	}
	t.Cleanup(func() { syscall.Unmount(disk, syscall.MNT_DETACH) })
	c := clustertest.StartProcs(t, bin, clustertest.ProcClusterOptions{Proc: clustertest.ProcOptions{Password: password},
		Member: func(i int, o *clustertest.ProcOptions) {
			if i == 2 {
				o.Dir = filepath.Join(disk, "data")
			}
		}})
	full := c.Nodes[2]
	ctx := context.Background()
	l := c.Leader(t)
	for l == full {
		if err := full.Client().Do(ctx, "SENTINEL", "FAILOVER", "mymaster").Err(); err != nil {
			t.Logf("SENTINEL FAILOVER: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
		l = c.Leader(t)
	}

	// 100 values of 200 kB cannot fit in 16 MB (the raft journal takes 4);
	// the leader and the other follower acknowledge every one.
	value := strings.Repeat("v", 200<<10)
	for i := range 100 {
		key := fmt.Sprint("k", i)
		clustertest.Eventually(t, "SET "+key, func() error { return l.Client().Set(ctx, key, value, 0).Err() })
	}
	if err := full.Wait(15 * time.Second); exitCode(err) != 1 {
		t.Fatalf("the follower whose disk filled: %v, want exit status 1", err)
	}
	if b, _ := os.ReadFile(full.LogPath()); !strings.Contains(string(b), "no space left on device") {
		t.Errorf("the log does not say why the follower stopped:\n%s", b)
	}
	clustertest.Eventually(t, "SET with the two others", func() error { return l.Client().Set(ctx, "after", "1", 0).Err() })
}

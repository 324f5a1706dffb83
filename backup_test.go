package lockserver_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lockserver/lockserver"
	"github.com/lockserver/lockserver/internal/clustertest"
	"github.com/lockserver/lockserver/internal/testenv"
)

// Only a user allowed LOCKSERVER BACKUP (an @admin, @dangerous command)
// may back up: one allowed every other command is refused, one allowed
// LOCKSERVER LEADER and BACKUP alone is not, and its backup holds what was
// written, and says so when inspected.
func TestBackupNeedsPermission(t *testing.T) {
	testenv.Long(t)
	c := startMembers(t, "s3cret")
	ctx := context.Background()
	f := c.Followers(c.Leader(t))[0]
	aclOn(t, f, "ACL", "SETUSER", "locker", "on", ">locker-secret", "~*", "+@all", "-@dangerous")
	aclOn(t, f, "ACL", "SETUSER", "operator", "on", ">operator-secret", "+lockserver|leader", "+lockserver|backup")
	for _, k := range []string{"a", "b", "c"} {
		clustertest.Eventually(t, "SET "+k, func() error { return f.Client().Set(ctx, k, "1", 0).Err() })
	}
	dir := t.TempDir()
	denied := filepath.Join(dir, "denied.lkbackup")
	clustertest.Eventually(t, "a backup as locker, refused", func() error {
		_, err := lockserver.Backup(ctx, lockserver.BackupOptions{Addr: f.Options.Addr, Username: "locker", Password: "locker-secret", To: denied})
		if err == nil {
			t.Fatal("locker, who may not run @dangerous commands, took a backup")
		}
		if !strings.Contains(err.Error(), "NOPERM") {
			return err // the user may not be on this member yet
		}
		return nil
	})
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Fatalf("a refused backup left %d files", len(entries))
	}
	var got uint64
	info, err := lockserver.Backup(ctx, lockserver.BackupOptions{Addr: f.Options.Addr, Username: "operator", Password: "operator-secret",
		To: filepath.Join(dir, "b.lkbackup"), Progress: func(n uint64) { got = n }})
	if err != nil {
		t.Fatal(err)
	}
	if info.Keys < 3 || got != info.Bytes || info.Bytes == 0 {
		t.Fatalf("the backup holds %d keys in %d bytes, %d received; want the 3 written", info.Keys, info.Bytes, got)
	}
	again, err := lockserver.InspectBackup(filepath.Join(dir, "b.lkbackup"))
	if err != nil || again != info {
		t.Fatalf("InspectBackup = %+v, %v; Backup said %+v", again, err, info)
	}
	if _, err := lockserver.InspectBackup(filepath.Join(dir, "none")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("InspectBackup of no file: %v", err)
	}
}

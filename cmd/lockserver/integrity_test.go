package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lockserver/lockserver/internal/clustertest"
)

// A follower whose log was damaged while it was stopped, after the cluster
// acknowledged ten writes it holds, refuses to start: it exits with status 1
// and one line that names the file, the log index and the remedy, rather than
// start without the writes and vote or lead with a log that forgot them.
func TestBinaryRefusesADamagedLog(t *testing.T) {
	bin := clustertest.Binary(t)
	for _, tc := range []struct {
		name string
		// term stops the follower with SIGTERM, which moves the journal's
		// entries into raft.db; else SIGKILL leaves them in the journal.
		term   bool
		damage func(t *testing.T, dir string)
		file   string
	}{
		{"a byte flipped in a journal record", false, func(t *testing.T, dir string) {
			replaceAll(t, filepath.Join(dir, "raft.journal"), "owner-C", "owner-X")
		}, "raft.journal"},
		{"the journal cut before a record", false, func(t *testing.T, dir string) {
			path := filepath.Join(dir, "raft.journal")
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.Truncate(path, int64(bytes.Index(b, []byte("owner-E")))); err != nil {
				t.Fatal(err)
			}
		}, "raft.journal"},
		{"a byte flipped in raft.db", true, func(t *testing.T, dir string) {
			replaceAll(t, filepath.Join(dir, "raft.db"), "owner-A", "owner-B")
		}, "raft.db"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := startCluster(t, bin)
			l := c.Leader(t)
			f := c.Followers(l)[0]
			ctx := context.Background()
			for i := range 10 {
				key, owner := fmt.Sprint("lock", i), fmt.Sprintf("owner-%c", 'A'+i)
				clustertest.Eventually(t, "SET "+key, func() error { return l.Client().Set(ctx, key, owner, 0).Err() })
			}
			// LOCKSERVER APPLIED is the members' own; STATUS tells a client.
			applied := func(n *clustertest.Proc) (uint64, error) {
				st, err := n.Status(ctx)
				return st.Applied, err
			}
			clustertest.Eventually(t, f.ID()+" applies the writes", func() error {
				want, err := applied(l)
				if err != nil {
					return err
				}
				got, err := applied(f)
				if err == nil && got < want {
					err = fmt.Errorf("applied %d, the leader %d", got, want)
				}
				return err
			})
			if tc.term {
				f.Stop(t)
			} else {
				f.Kill()
			}
			tc.damage(t, f.Dir())

			start := time.Now()
			f.Spawn(t)
			if err := f.Wait(30 * time.Second); exitCode(err) != 1 {
				t.Fatalf("the damaged member: %v after %v, want exit status 1", err, time.Since(start))
			}
			line := lastLogLine(t, f)
			t.Log(line)
			want := fmt.Sprintf("corrupt data in %s at log index ", filepath.Join(f.Dir(), tc.file))
			if !strings.Contains(line, want) || !strings.Contains(line, "wipe its data directory "+f.Dir()+" and restart it with --join") {
				t.Fatalf("the line it exits with: %q, want it to name %s, an index and the remedy", line, tc.file)
			}
		})
	}
}

// replaceAll replaces every occurrence of from in the file at path with to,
// of the same length, as a flipped byte would (a page bolt rewrote elsewhere
// may hold an older copy); there must be one at least.
func replaceAll(t *testing.T, path, from, to string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(b, []byte(from)) {
		t.Fatalf("%s does not hold %q", path, from)
	}
	if err := os.WriteFile(path, bytes.ReplaceAll(b, []byte(from), []byte(to)), 0o600); err != nil {
		t.Fatal(err)
	}
}

// lastLogLine returns the last line p logged.
func lastLogLine(t *testing.T, p *clustertest.Proc) string {
	t.Helper()
	b, err := os.ReadFile(p.LogPath())
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return lines[len(lines)-1]
}

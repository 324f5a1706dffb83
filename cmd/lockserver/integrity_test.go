package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A follower whose log was damaged while it was stopped, after the cluster
// acknowledged ten writes it holds, refuses to start: it exits with status 1
// and one line that names the file, the log index and the remedy, rather than
// start without the writes and vote or lead with a log that forgot them.
func TestBinaryRefusesADamagedLog(t *testing.T) {
	bin := buildBinary(t)
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
			nodes := startCluster(t, bin, nil)
			l := leaderOf(t, nodes)
			f := otherThan(nodes, l)
			ctx := context.Background()
			for i := range 10 {
				key, owner := fmt.Sprint("lock", i), fmt.Sprintf("owner-%c", 'A'+i)
				eventually(t, "SET "+key, func() error { return l.rdb.Set(ctx, key, owner, 0).Err() })
			}
			// LOCKSERVER APPLIED is the members' own; STATUS tells a client.
			applied := func(n *node) (int64, error) {
				st, err := n.rdb.Do(ctx, "LOCKSERVER", "STATUS").Result()
				if err != nil {
					return 0, err
				}
				return st.(map[any]any)["applied_index"].(int64), nil
			}
			eventually(t, f.id+" applies the writes", func() error {
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
				f.terminate(t)
			} else {
				f.kill()
			}
			tc.damage(t, f.dir)

			start := time.Now()
			f.start(t, bin)
			if err := f.wait(30 * time.Second); exitCode(err) != 1 {
				t.Fatalf("the damaged member: %v after %v, want exit status 1", err, time.Since(start))
			}
			line := f.lastLogLine(t)
			t.Log(line)
			want := fmt.Sprintf("corrupt data in %s at log index ", filepath.Join(f.dir, tc.file))
			if !strings.Contains(line, want) || !strings.Contains(line, "wipe its data directory "+f.dir+" and restart it with --join") {
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

// terminate stops n with SIGTERM and waits for it to exit.
func (n *node) terminate(t *testing.T) {
	t.Helper()
	if err := n.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := n.wait(30 * time.Second); err != nil {
		t.Fatalf("%s after SIGTERM: %v", n.id, err)
	}
}

// wait waits up to timeout for n to exit by itself, and returns how it ended.
func (n *node) wait(timeout time.Duration) error {
	done := make(chan error, 1)
	go func() { done <- n.cmd.Wait() }()
	select {
	case err := <-done:
		n.rdb.Close()
		n.cmd = nil
		return err
	case <-time.After(timeout):
		return fmt.Errorf("%s still runs after %v", n.id, timeout)
	}
}

// lastLogLine returns the last line n logged.
func (n *node) lastLogLine(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(n.log.Name())
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return lines[len(lines)-1]
}

package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lockserver/lockserver/internal/clustertest"
	"github.com/lockserver/lockserver/lock"
)

// admin runs one of the binary's operator commands and returns its output;
// it fails the test when the command fails and ok is set, and when it
// succeeds and ok is not.
func admin(t *testing.T, bin string, ok bool, args ...string) string {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "LOCKSERVER_PASSWORD="+password)
	out, err := cmd.CombinedOutput()
	if (err == nil) != ok {
		t.Fatalf("lockserver %s: %v, want success %v\n%s", strings.Join(args, " "), err, ok, out)
	}
	return string(out)
}

// field reads "name: value" from the output of an operator command.
func field(t *testing.T, out, name string) string {
	t.Helper()
	m := regexp.MustCompile(`(?m)^` + name + `: (\S+)`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no %s in\n%s", name, out)
	}
	return m[1]
}

// status reads one field of LOCKSERVER STATUS from p.
func status(t *testing.T, p *clustertest.Proc, name string) string {
	t.Helper()
	var v string
	clustertest.Eventually(t, "LOCKSERVER STATUS of "+p.ID(), func() error {
		r, err := p.Client().Do(context.Background(), "LOCKSERVER", "STATUS").Result()
		if err != nil {
			return err
		}
		v = fmt.Sprint(r.(map[any]any)[name])
		return nil
	})
	return v
}

// lockWorkload takes locks through every member until stop is closed:
// held locks, each taken once and kept (an hour's lease), and a hot lock
// taken and released in turn. It records when each held lock was
// acknowledged and the highest token any lock was given.
type lockWorkload struct {
	mu       sync.Mutex
	held     map[string]time.Time
	maxToken uint64
	hot      int // acquisitions of the hot lock
	wg       sync.WaitGroup
	stop     chan struct{}
}

func startLockWorkload(c *clustertest.Cluster[*clustertest.Proc]) *lockWorkload {
	w := &lockWorkload{held: map[string]time.Time{}, stop: make(chan struct{})}
	for i, p := range c.Nodes {
		b := lock.Redis(p.Client())
		w.wg.Add(1)
		go func() {
			defer w.wg.Done()
			for k := 0; ; k++ {
				select {
				case <-w.stop:
					return
				default:
				}
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				name := fmt.Sprintf("held-%d-%d", i, k)
				m := lock.NewMutex(b, name, nil)
				if err := m.LockFor(ctx, time.Hour); err == nil {
					w.record(name, m.Token())
				}
				hot := lock.NewMutex(b, "hot", nil)
				if err := hot.LockFor(ctx, 3*time.Second); err == nil {
					w.record("", hot.Token())
					hot.Unlock(ctx)
				}
				cancel()
			}
		}()
	}
	return w
}

func (w *lockWorkload) record(held string, token uint64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if held != "" {
		w.held[held] = time.Now()
	} else {
		w.hot++
	}
	w.maxToken = max(w.maxToken, token)
}

// hotAcquisitions returns how many times the hot lock was taken so far.
func (w *lockWorkload) hotAcquisitions() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.hot
}

func (w *lockWorkload) end() {
	close(w.stop)
	w.wg.Wait()
}

// waitFor waits until cond holds, for a minute at most.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("waited a minute for %s", what)
		}
	}
}

// A backup taken from a cluster under the lock workload, through a
// follower's address, restores into three new members: every lock
// acknowledged before the backup began is held there, and a token issued
// after the restore exceeds every token issued before, also those issued
// after the backup, which the restored counters never saw. A damaged copy
// of the backup is refused, with the offset of the damage. A member of the
// old cluster, started where a restored member was, is refused by the link
// check. A function library loaded before the backup is callable after the
// restore.
func TestBackupRestore(t *testing.T) {
	bin := clustertest.Binary(t)
	c := startCluster(t, bin)
	ctx := context.Background()
	const library = "#!lua name=backedup\nredis.register_function('answer', function() return 42 end)"
	// FUNCTION exists once the cluster version, recorded soon after the
	// start, is this release's.
	clustertest.Eventually(t, "FUNCTION LOAD", func() error {
		return c.Leader(t).Client().FunctionLoadReplace(ctx, library).Err()
	})
	w := startLockWorkload(c)
	waitFor(t, "locks before the backup", func() bool { return w.hotAcquisitions() >= 20 })

	file := filepath.Join(t.TempDir(), "cluster.lkbackup")
	began := time.Now()
	out := admin(t, bin, true, "backup", "--to", file, c.Followers(c.Leader(t))[0].Addr())
	index, _ := strconv.ParseUint(field(t, out, "index"), 10, 64)
	oldCluster := field(t, out, "cluster")
	// Tokens the backup does not hold.
	after := w.hotAcquisitions()
	waitFor(t, "locks after the backup", func() bool { return w.hotAcquisitions() >= after+20 })
	w.end()
	var before []string
	for name, at := range w.held {
		if at.Before(began) {
			before = append(before, name)
		}
	}
	if len(before) == 0 {
		t.Fatal("no lock was acknowledged before the backup: the premise failed")
	}
	for _, p := range c.Nodes {
		p.Kill()
	}

	inspected := admin(t, bin, true, "backup", "inspect", file)
	if locks, _ := strconv.Atoi(field(t, inspected, "locks")); locks < len(before) || field(t, inspected, "index") != fmt.Sprint(index) {
		t.Fatalf("backup inspect says %d locks at index %s; %d were acknowledged before the backup began at index %d\n%s", locks, field(t, inspected, "index"), len(before), index, inspected)
	}

	// A flipped byte, in the middle of the body.
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	flip := len(raw) / 2
	raw[flip] ^= 1
	damaged := filepath.Join(t.TempDir(), "damaged.lkbackup")
	if err := os.WriteFile(damaged, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	refused := admin(t, bin, false, "backup", "inspect", damaged)
	m := regexp.MustCompile(`damaged at offset (\d+) \(bytes \d+-(\d+)\)`).FindStringSubmatch(refused)
	if m == nil {
		t.Fatalf("backup inspect of a damaged backup said\n%s", refused)
	}
	if from, _ := strconv.Atoi(m[1]); from > flip {
		t.Fatalf("the damage is at %d, reported from %s", flip, m[1])
	}
	if to, _ := strconv.Atoi(m[2]); to < flip {
		t.Fatalf("the damage is at %d, reported to %s", flip, m[2])
	}
	wasted := t.TempDir()
	admin(t, bin, false, "restore", "--from", damaged, "--data-dir", wasted, "--node-id", "x", "--bootstrap", "x=127.0.0.1:1")
	if entries, _ := os.ReadDir(wasted); len(entries) != 0 {
		t.Fatalf("a refused restore left %d files in the data directory", len(entries))
	}

	// Restore into three new members.
	rc := &clustertest.Cluster[*clustertest.Proc]{}
	var voters []string
	for i := range 3 {
		p := clustertest.NewProc(t, bin, fmt.Sprint("r", i+1), clustertest.ProcOptions{Password: password})
		rc.Nodes = append(rc.Nodes, p)
		voters = append(voters, p.ID()+"="+p.RaftAddr())
	}
	for _, p := range rc.Nodes {
		admin(t, bin, true, "restore", "--from", file, "--data-dir", p.Dir(), "--node-id", p.ID(), "--bootstrap", strings.Join(voters, ","))
		p.Args = p.MemberArgs()
		p.Start(t)
	}
	l := rc.Leader(t)
	if cl := status(t, l, "cluster"); cl == oldCluster {
		t.Fatalf("the restored cluster has the old one's identity %s", cl)
	}
	for _, name := range before {
		clustertest.Eventually(t, "lock "+name+" in the restored cluster", func() error {
			n, err := rc.Leader(t).Client().Exists(ctx, name).Result()
			if err == nil && n != 1 {
				return fmt.Errorf("lock %s, acknowledged before the backup, is not held after the restore", name)
			}
			return err
		})
	}
	clustertest.Eventually(t, "FCALL of the library backed up", func() error {
		n, err := rc.Leader(t).Client().FCall(ctx, "answer", nil).Int()
		if err == nil && n != 42 {
			return fmt.Errorf("FCALL answer = %d, want 42", n)
		}
		return err
	})
	b := lock.Redis(rc.Leader(t).Client())
	for _, name := range []string{"hot", "new"} {
		m := lock.NewMutex(b, name, nil)
		lctx, cancel := context.WithTimeout(ctx, time.Minute)
		err := m.LockFor(lctx, time.Minute)
		cancel()
		if err != nil {
			t.Fatalf("lock %s after the restore: %v", name, err)
		}
		if m.Token() <= w.maxToken {
			t.Fatalf("lock %s after the restore has token %d, not above %d, issued before", name, m.Token(), w.maxToken)
		}
	}

	// A member of the old cluster, with its data, where r3 was.
	r3 := rc.Nodes[2]
	r3.Kill()
	old := c.Nodes[0]
	old.Args = append(old.MemberArgs(), "--raft-addr", r3.RaftAddr())
	old.Start(t)
	waitFor(t, "the old member to refuse the restored cluster's leader", func() bool {
		log, _ := os.ReadFile(old.LogPath())
		return strings.Contains(string(log), "belongs to another cluster")
	})
	clustertest.Eventually(t, "a write to the restored cluster with r3 gone", func() error {
		return rc.Leader(t, rc.Nodes[:2]...).Client().Set(ctx, "after-restore", "1", 0).Err()
	})
	// It has no leader (CLUSTERDOWN, or a timeout first), or its own state.
	if v, err := old.Client().Get(ctx, "after-restore").Result(); err == nil {
		t.Fatalf("the old member serves the restored cluster's write (%q)", v)
	}
}

// applied returns p's applied index.
func applied(t *testing.T, p *clustertest.Proc) uint64 {
	t.Helper()
	st, err := p.Status(context.Background())
	if err != nil {
		return 0
	}
	return st.Applied
}

// A cluster that lost two members of three for good recovers from the
// third: recover makes it a cluster of its own, with every write it had
// applied, two members with no data join it, and the tokens it issues
// exceed every token issued before, also those the two lost members
// issued while the third was down.
func TestRecoverFromMinority(t *testing.T) {
	bin := clustertest.Binary(t)
	c := startCluster(t, bin)
	ctx := context.Background()
	w := startLockWorkload(c)
	var keys []string
	for i := range 50 {
		k := fmt.Sprint("k", i)
		clustertest.Eventually(t, "SET "+k, func() error { return c.Nodes[i%3].Client().Set(ctx, k, i, 0).Err() })
		keys = append(keys, k)
	}
	survivor := c.Followers(c.Leader(t))[0]
	target := applied(t, c.Leader(t))
	waitFor(t, survivor.ID()+" to apply the writes", func() bool { return applied(t, survivor) >= target })
	oldCluster := status(t, survivor, "cluster")
	survivor.Kill()
	// The two others go on, and issue tokens the survivor never hears of.
	more := w.hotAcquisitions()
	waitFor(t, "locks without "+survivor.ID(), func() bool { return w.hotAcquisitions() >= more+20 })
	w.end()
	lost := c.Others(survivor)
	for _, p := range lost {
		p.Kill()
		p.Wipe(t)
	}

	// A wiped member's directory holds nothing to inspect or recover, and
	// asking leaves it so.
	for _, cmd := range [][]string{{"inspect", "--data-dir", lost[0].Dir()}, {"recover", "--data-dir", lost[0].Dir(), "--node-id", lost[0].ID(), "--raft-addr", lost[0].RaftAddr()}} {
		if out := admin(t, bin, false, cmd...); !strings.Contains(out, "holds no member's data") {
			t.Fatalf("lockserver %s of a wiped directory: %s", cmd[0], out)
		}
	}
	if entries, _ := os.ReadDir(lost[0].Dir()); len(entries) != 0 {
		t.Fatalf("inspect and recover of a wiped directory left %d files in it", len(entries))
	}
	inspected := admin(t, bin, true, "inspect", "--data-dir", survivor.Dir())
	if field(t, inspected, "cluster") != oldCluster {
		t.Fatalf("inspect names another cluster than %s:\n%s", oldCluster, inspected)
	}
	if last, _ := strconv.ParseUint(field(t, inspected, "last_index"), 10, 64); last < target {
		t.Fatalf("inspect says the last index is %d, below the %d applied:\n%s", last, target, inspected)
	}
	if n := strings.Count(inspected, "member: "); n != 3 {
		t.Fatalf("inspect names %d members, want 3:\n%s", n, inspected)
	}
	admin(t, bin, true, "recover", "--data-dir", survivor.Dir(), "--node-id", survivor.ID(), "--raft-addr", survivor.RaftAddr())
	survivor.Args = survivor.MemberArgs()
	survivor.Start(t)
	for _, p := range lost {
		p.Args = p.MemberArgs("--join", survivor.RaftAddr())
		p.Start(t)
	}
	l := c.Leader(t)
	if cl := status(t, l, "cluster"); cl == oldCluster {
		t.Fatalf("the recovered cluster kept the identity %s", cl)
	}
	for _, p := range c.Nodes {
		clustertest.Eventually(t, p.ID()+" to be a voter with the writes", func() error {
			for _, k := range keys {
				if v, err := p.Client().Get(ctx, k).Result(); err != nil || v != strings.TrimPrefix(k, "k") {
					return fmt.Errorf("GET %s on %s = %q, %v", k, p.ID(), v, err)
				}
			}
			v, err := c.Leader(t).Client().Do(ctx, "LOCKSERVER", "MEMBERS").Result()
			if err != nil {
				return err
			}
			for _, m := range v.([]any) {
				if m := m.(map[any]any); m["id"] == p.ID() && m["role"] != "nonvoter" {
					return nil
				}
			}
			return fmt.Errorf("%s is not a voter: %v", p.ID(), v)
		})
	}
	m := lock.NewMutex(lock.Redis(c.Leader(t).Client()), "hot", nil)
	lctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := m.LockFor(lctx, time.Minute); err != nil {
		t.Fatal(err)
	}
	if m.Token() <= w.maxToken {
		t.Fatalf("the recovered cluster's token %d is not above %d, issued before", m.Token(), w.maxToken)
	}
}

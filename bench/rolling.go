package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lockserver/lockserver/internal/buildinfo"
)

// The rolling-restart workload: what a rolling restart of a loaded cluster
// costs its clients, member by member, with this build, whose leader hands
// leadership over as it stops, and with the previous release, whose leader
// just stops. rollingClients clients each write their own key (INCR), each
// through a member that is not the one restarting, as clients of a load
// balancer that drains a member first would; the member stays stopped for
// rollingDown. A write that gets an error
// reply or none is sent again, through the next member, until it is
// acknowledged. For each restart the row gives the longest time any write
// took from its first sending to its acknowledgement, and the replies that
// refused it (TRYAGAIN, CLUSTERDOWN, the node stopping) or left it unknown
// (UNKNOWN, a broken connection).

// rollingClients is how many clients write during the restarts.
const rollingClients = 16

// rollingQuiet is how long the clients run before and after each restart,
// and rollingDown how long a member stays stopped: as an orchestrator
// replaces it (a new container, a new binary), longer than the cluster's
// failure detection. A member started again at once is back before the
// others notice that it left.
const (
	rollingQuiet = 2 * time.Second
	rollingDown  = 3 * time.Second
)

func rollingSkip(inst *instance) string {
	if len(inst.members) != 3 || !strings.HasPrefix(inst.members[0].name, "lockserver-") {
		return "runs on a three-member lockserver cluster"
	}
	return ""
}

// runRollingRestart restarts each member of inst in turn, then of a cluster
// of the previous release.
func runRollingRestart(ctx context.Context, b *bench, sys system, inst *instance) []row {
	rows := rollingRestarts(ctx, b, sys.name, inst)
	b.progress.step(sys.name + " rolling restart")
	prev, version, err := b.previousRelease(ctx)
	name := sys.name + " (" + version + ")"
	if err != nil {
		return append(rows, row{Workload: "rolling-restart", System: name, Status: "n/a", Note: err.Error()})
	}
	old, err := startLockserverClusterBin(ctx, b, prev, func(addr string) []string { return []string{"--addr", addr} })
	if err != nil {
		return append(rows, row{Workload: "rolling-restart", System: name}.failed(err))
	}
	defer old.stop()
	rows = append(rows, rollingRestarts(ctx, b, name, old)...)
	b.progress.step(name + " rolling restart")
	return rows
}

// rollingRestarts restarts each member of inst in turn under the clients.
func rollingRestarts(ctx context.Context, b *bench, system string, inst *instance) []row {
	w := startRollingWriters(ctx, b, inst)
	defer w.stop()
	var rows []row
	for _, m := range inst.members {
		r := row{Workload: "rolling-restart", System: system, Clients: rollingClients}
		leading, _ := infoField(ctx, m.addr, "replication", "role")
		r.Event = "restart " + strings.TrimPrefix(m.name, "lockserver-")
		if leading == "master" {
			r.Event += " (the leader)"
		}
		w.avoid(m.addr)
		sleepCtx(ctx, rollingQuiet)
		w.begin()
		start := time.Now()
		m.stop()
		sleepCtx(ctx, rollingDown)
		if err := m.start(); err != nil {
			return append(rows, r.failed(err))
		}
		if err := m.process().waitReadyFor(ctx, 5*time.Minute, statusReady(m.addr)); err != nil {
			return append(rows, r.failed(err))
		}
		r.Took = time.Since(start)
		sleepCtx(ctx, rollingQuiet)
		longest, refused, unknown := w.end()
		r.Longest, r.Errors = longest, refused+unknown
		r.Note = fmt.Sprintf("%d refused (TRYAGAIN, CLUSTERDOWN, stopping), %d unknown (UNKNOWN, connection lost)", refused, unknown)
		rows = append(rows, r)
	}
	return rows
}

// rollingWriters are the clients of the rolling-restart workload.
type rollingWriters struct {
	addrs   []string
	avoided atomic.Pointer[string]
	cancel  context.CancelFunc
	wg      sync.WaitGroup

	mu        sync.Mutex
	recording bool
	since     time.Time     // when recording began
	first     time.Duration // from since to the first write sent after it acknowledged
	acked     chan struct{} // closed at that acknowledgement
	longest   time.Duration
	refused   int
	unknown   int
}

func startRollingWriters(ctx context.Context, b *bench, inst *instance) *rollingWriters {
	w := &rollingWriters{}
	for _, m := range inst.members {
		w.addrs = append(w.addrs, m.addr)
	}
	none := ""
	w.avoided.Store(&none)
	ctx, w.cancel = context.WithCancel(ctx)
	clients := make([]respClient, len(w.addrs))
	for i, a := range w.addrs {
		clients[i] = tcpClient(a)(rollingClients)
	}
	for i := range rollingClients {
		key := fmt.Sprintf("%s:rolling:%d", b.prefix(), i)
		w.wg.Add(1)
		go func() {
			defer w.wg.Done()
			next := i
			for ctx.Err() == nil {
				start := time.Now()
				for ctx.Err() == nil {
					next = w.through(next)
					sent := time.Now()
					_, err := clients[next].do(ctx, "INCR", key)
					if err == nil {
						w.ack(sent)
						break
					}
					w.failed(err)
					next++
					sleepCtx(ctx, 5*time.Millisecond)
				}
				w.observe(time.Since(start))
			}
		}()
	}
	go func() {
		w.wg.Wait()
		for _, c := range clients {
			c.close()
		}
	}()
	return w
}

// through returns the index of the member, from i on, that a write goes
// through: not the one being restarted.
func (w *rollingWriters) through(i int) int {
	i %= len(w.addrs)
	if w.addrs[i] == *w.avoided.Load() {
		i = (i + 1) % len(w.addrs)
	}
	return i
}

// avoid sends every later write through a member other than addr.
func (w *rollingWriters) avoid(addr string) { w.avoided.Store(&addr) }

func (w *rollingWriters) observe(took time.Duration) {
	w.mu.Lock()
	if w.recording {
		w.longest = max(w.longest, took)
	}
	w.mu.Unlock()
}

func (w *rollingWriters) failed(err error) {
	msg := err.Error()
	refused := false
	for _, p := range []string{"TRYAGAIN", "CLUSTERDOWN"} {
		refused = refused || strings.HasPrefix(msg, p)
	}
	refused = refused || strings.Contains(msg, "nothing was written")
	w.mu.Lock()
	if w.recording {
		if refused {
			w.refused++
		} else {
			w.unknown++
		}
	}
	w.mu.Unlock()
}

// ack records the acknowledgement of a write sent at sent.
func (w *rollingWriters) ack(sent time.Time) {
	w.mu.Lock()
	if w.recording && w.first == 0 && sent.After(w.since) {
		w.first = time.Since(w.since)
		close(w.acked)
	}
	w.mu.Unlock()
}

// begin starts recording, afresh.
func (w *rollingWriters) begin() {
	w.mu.Lock()
	w.recording, w.longest, w.refused, w.unknown = true, 0, 0, 0
	w.since, w.first, w.acked = time.Now(), 0, make(chan struct{})
	w.mu.Unlock()
}

// firstAck waits for the first acknowledgement of a write sent since begin,
// and returns how long after begin it came; 0 if ctx ended first.
func (w *rollingWriters) firstAck(ctx context.Context) time.Duration {
	w.mu.Lock()
	acked := w.acked
	w.mu.Unlock()
	select {
	case <-acked:
	case <-ctx.Done():
		return 0
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.first
}

// end stops recording and returns what it recorded.
func (w *rollingWriters) end() (longest time.Duration, refused, unknown int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.recording = false
	return w.longest, w.refused, w.unknown
}

func (w *rollingWriters) stop() {
	w.cancel()
	w.wg.Wait()
}

// previousRelease builds the release before this build (the lockserver
// module's releases.txt) from its commit in this git clone, once per run,
// and returns the binary and the release's version.
func (b *bench) previousRelease(ctx context.Context) (string, string, error) {
	var prev buildinfo.Published
	for _, r := range buildinfo.Releases() {
		if v, err := buildinfo.Parse(r.Version); err == nil && v.Less(buildinfo.Current) {
			prev = r
		}
	}
	if prev.Version == "" {
		return "", "previous release", fmt.Errorf("releases.txt names no release before %s", buildinfo.Version)
	}
	if bin := os.Getenv("LOCKSERVER_PREVIOUS_BINARY"); bin != "" {
		return bin, prev.Version, nil
	}
	dir, err := b.tempDir("release-" + prev.Version)
	if err != nil {
		return "", prev.Version, err
	}
	src := filepath.Join(dir, "src")
	if err := os.MkdirAll(src, 0o700); err != nil {
		return "", prev.Version, err
	}
	top, err := exec.CommandContext(ctx, "git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		return "", prev.Version, fmt.Errorf("build %s from its commit: not in a git clone (set LOCKSERVER_PREVIOUS_BINARY): %w", prev.Version, err)
	}
	archive := exec.CommandContext(ctx, "git", "-C", strings.TrimSpace(string(top)), "archive", "--format=tar", prev.Commit)
	extract := exec.CommandContext(ctx, "tar", "-x", "-C", src)
	// Each its own: the two run at once.
	var archiveErr, extractErr bytes.Buffer
	archive.Stderr, extract.Stderr = &archiveErr, &extractErr
	if extract.Stdin, err = archive.StdoutPipe(); err != nil {
		return "", prev.Version, err
	}
	if err := extract.Start(); err != nil {
		return "", prev.Version, err
	}
	if err := archive.Run(); err != nil {
		return "", prev.Version, fmt.Errorf("git archive %s (of %s): %w: %s", prev.Commit, prev.Version, err, archiveErr.String())
	}
	if err := extract.Wait(); err != nil {
		return "", prev.Version, fmt.Errorf("extract %s: %w: %s", prev.Version, err, extractErr.String())
	}
	bin := filepath.Join(dir, "lockserver")
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/lockserver")
	build.Dir = src
	if out, err := build.CombinedOutput(); err != nil {
		return "", prev.Version, fmt.Errorf("build %s: %w\n%s", prev.Version, err, out)
	}
	return bin, prev.Version, nil
}

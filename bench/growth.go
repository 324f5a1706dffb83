package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// The held-growth workload loads millions of held locks into a system and
// runs lock clients through what a large state costs a server: a snapshot
// (BGSAVE for redis-server) on the leader and on a follower, a follower's
// restart, the whole cluster's restart (redis-server's restart from its
// RDB), a backup to a file (lockserver backup; redis-cli --rdb), and a mass
// expiry of locks that all expire at one moment. For each
// event it reports how long it took, the clients' throughput against the
// seconds before, their p99 and their longest request (the longest stall),
// errors, and whether the cluster's leader changed (its term moved); at each
// size, memory per lock, every member's RSS and what it keeps on disk.

// growthClients is how many lock clients run through the events, the issue's
// count.
const growthClients = 16

// growthSkip says why a system cannot run held-growth: it restarts the
// server's processes, and compares with redis-server's snapshots.
func growthSkip(inst *instance) string {
	switch {
	case inst.members == nil:
		return "runs in the bench process: nothing to restart"
	case inst.sameServerAs != "":
		return "same server as " + inst.sameServerAs
	case inst.etcd != nil:
		return "etcd's mutex is not a Redis hash lock"
	case len(inst.members) == 1 && !strings.HasPrefix(inst.members[0].name, "redis"):
		return "a single lockserver node keeps nothing on disk to snapshot or restart from"
	case inst.members[0].name == "redis-aof":
		return "redis (RDB) is the row to compare with"
	}
	return ""
}

// growth is one system's run of the workload.
type growth struct {
	b       *bench
	sys     system
	inst    *instance
	cluster bool // a lockserver cluster; else a redis-server
	prefix  string
	held    int // locks loaded so far
	mem0    int64
	rec     *opRecorder
	quiet   time.Duration // the window of normal operation before each event
}

func runGrowth(ctx context.Context, b *bench, sys system, inst *instance) []row {
	g := &growth{b: b, sys: sys, inst: inst, cluster: len(inst.members) > 1, prefix: b.prefix(),
		quiet: max(b.cfg.duration, 300*time.Millisecond)}
	var rows []row
	mem0, _, err := settledMemory(ctx, inst)
	if err != nil {
		return []row{g.row("load", 0).failed(err)}
	}
	g.mem0 = mem0
	for _, size := range b.cfg.growth {
		b.progress.step(fmt.Sprintf("%s loading %s held locks", sys.name, fmtCount(size)))
		r, err := g.load(ctx, size)
		rows = append(rows, r)
		if err != nil {
			return rows
		}
		b.progress.step(fmt.Sprintf("%s events at %s held locks", sys.name, fmtCount(size)))
		rows = append(rows, g.events(ctx)...)
		if ctx.Err() != nil {
			return rows
		}
	}
	b.progress.step(fmt.Sprintf("%s mass expiry of %s locks", sys.name, fmtCount(b.cfg.expire)))
	return append(rows, g.massExpiry(ctx))
}

// growthSteps is how many progress steps the workload takes on one system.
func growthSteps(b *bench) int { return 2*len(b.cfg.growth) + 1 }

func (g *growth) row(event string, held int) row {
	return row{Workload: "held-growth", System: g.sys.name, Clients: growthClients, Held: held, Event: event}
}

// leader returns the member that leads (redis-server's only member),
// waiting up to a minute for an election.
func (g *growth) leader(ctx context.Context) (*member, error) {
	if !g.cluster {
		return g.inst.members[0], nil
	}
	return leaderOf(ctx, g.inst.members)
}

// leaderOf returns the member of a lockserver cluster that leads, waiting up
// to a minute for an election.
func leaderOf(ctx context.Context, members []*member) (*member, error) {
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); sleepCtx(ctx, 50*time.Millisecond) {
		for _, m := range members {
			st, err := clusterStatus(ctx, m.addr)
			if err == nil && st["state"] == "leader" {
				return m, nil
			}
		}
	}
	return nil, errors.New("no member led within a minute")
}

// term returns the highest Raft term any member reports (0 for redis-server).
func (g *growth) term(ctx context.Context) uint64 {
	var top uint64
	if !g.cluster {
		return 0
	}
	for _, m := range g.inst.members {
		if st, err := clusterStatus(ctx, m.addr); err == nil {
			t, _ := strconv.ParseUint(st["term"], 10, 64)
			top = max(top, t)
		}
	}
	return top
}

// load grows the held locks to size, then measures memory, RSS and disk.
func (g *growth) load(ctx context.Context, size int) (row, error) {
	r := g.row("load", size)
	start := time.Now()
	if err := loadHeldLocks(ctx, g.inst, g.b.owner(0), g.prefix, g.held, size); err != nil {
		return r.failed(err), err
	}
	r.Took = time.Since(start)
	g.held = size
	if g.cluster {
		// Every member holds the locks before they are measured.
		if err := g.caughtUp(ctx, nil); err != nil {
			return r.failed(err), err
		}
	}
	mem, how, err := settledMemory(ctx, g.inst)
	if err != nil {
		return r.failed(err), err
	}
	r.Value, r.Unit, r.Note = float64(mem-g.mem0)/float64(size), "B/lock", how
	r.RSS, r.Disk = g.rss(), g.disk()
	return r, nil
}

// rss returns every member's resident set size.
func (g *growth) rss() [3]int64 {
	var out [3]int64
	for i, m := range g.inst.members[:min(3, len(g.inst.members))] {
		out[i], _ = procRSS(m.process().pid())
	}
	return out
}

// disk returns the bytes every member keeps on disk.
func (g *growth) disk() int64 {
	var total int64
	for _, m := range g.inst.members {
		filepath.WalkDir(m.data, func(path string, d fs.DirEntry, err error) error {
			if err == nil && d.Type().IsRegular() && !strings.HasSuffix(path, ".log") {
				if info, err := d.Info(); err == nil {
					total += info.Size()
				}
			}
			return nil
		})
	}
	return total
}

// events runs the lock clients through each event at the current size.
func (g *growth) events(ctx context.Context) []row {
	rec, err := g.startClients(ctx)
	if err != nil {
		return []row{g.row("clients", g.held).failed(err)}
	}
	defer rec.stop()
	var rows []row
	if g.cluster {
		rows = append(rows,
			g.event(ctx, "snapshot", true, g.snapshot(true)),
			g.event(ctx, "follower snapshot", true, g.snapshot(false)),
			g.event(ctx, "backup", true, g.backup),
			g.event(ctx, "follower restart", true, g.followerRestart),
			g.event(ctx, "cluster restart", false, g.clusterRestart))
	} else {
		rows = append(rows,
			g.event(ctx, "snapshot", true, g.bgsave),
			g.event(ctx, "backup", true, g.backup),
			g.event(ctx, "restart", false, g.redisRestart))
	}
	return rows
}

// eventFunc runs an event and returns how long it took, how long the
// cluster then took to catch up, and a note.
type eventFunc func(ctx context.Context) (took, catchUp time.Duration, note string, err error)

// event measures the lock clients in a quiet window, then while run runs
// (for as long as the quiet window at least). sameLeader says the event must
// not change the leader.
func (g *growth) event(ctx context.Context, name string, sameLeader bool, run eventFunc) row {
	r := g.row(name, g.held)
	term := g.term(ctx)
	g.rec.begin()
	sleepCtx(ctx, g.quiet)
	t0 := time.Now()
	cpu0, cpuErr := g.inst.cpu()
	took, catchUp, note, err := run(ctx)
	note = withCPU(note, g.inst, cpu0, cpuErr)
	// An event shorter than the quiet window is measured over as long.
	t1 := time.Now()
	if t1.Before(t0.Add(g.quiet)) {
		t1 = t0.Add(g.quiet)
	}
	sleepCtx(ctx, time.Until(t1)+min(g.quiet, time.Second))
	ops, errs := g.rec.end()
	if err != nil {
		return r.failed(err)
	}
	r.Took, r.CatchUp, r.Note = took, catchUp, note
	r.fillWindow(ops, errs, t0, t1)
	if g.cluster && sameLeader {
		changes := int(g.term(ctx) - term)
		r.LeaderChanges = &changes
	}
	return r
}

// fillWindow sets the throughput before t0 (Normal) and in [t0, t1] (Value),
// the p99 of the requests that ended in [t0, t1], the longest request that
// overlapped it, and the errors in it.
func (r *row) fillWindow(ops []opRecord, errs []time.Time, t0, t1 time.Time) {
	var before, during int
	var first time.Time
	var hist histogram
	for _, op := range ops {
		end := time.Unix(0, op.end)
		begin := end.Add(-time.Duration(op.took))
		if first.IsZero() || begin.Before(first) {
			first = begin
		}
		switch {
		case end.Before(t0):
			before++
		case !end.After(t1):
			during++
			hist.record(time.Duration(op.took))
		}
		if !end.Before(t0) && !begin.After(t1) {
			r.Longest = max(r.Longest, time.Duration(op.took))
		}
	}
	if !first.IsZero() && first.Before(t0) {
		r.Normal = float64(before) / t0.Sub(first).Seconds()
	}
	if d := t1.Sub(t0).Seconds(); d > 0 {
		r.Value, r.Unit = float64(during)/d, "ops/s"
	}
	r.P99 = hist.quantile(0.99)
	for _, e := range errs {
		if !e.Before(t0) && !e.After(t1) {
			r.Errors++
		}
	}
}

// snapshot has a member take a snapshot: the leader, or a follower while
// the clients use the leader.
func (g *growth) snapshot(onLeader bool) eventFunc {
	return func(ctx context.Context) (time.Duration, time.Duration, string, error) {
		l, err := g.leader(ctx)
		if err != nil {
			return 0, 0, "", err
		}
		m := l
		if !onLeader {
			m = g.follower(l)
		}
		c := newGoRedis(&redis.Options{Addr: m.addr, ReadTimeout: 10 * time.Minute}, 1)
		defer c.close()
		start := time.Now()
		if _, err := c.do(ctx, "LOCKSERVER", "SNAPSHOT"); err != nil {
			return 0, 0, "", fmt.Errorf("LOCKSERVER SNAPSHOT on %s: %w", m.name, err)
		}
		return time.Since(start), 0, "on " + m.name, nil
	}
}

// withCPU adds to note the CPU time the servers used since cpu0, unless
// one was restarted meanwhile (its count starts again).
func withCPU(note string, inst *instance, cpu0 time.Duration, err0 error) string {
	cpu1, err := inst.cpu()
	if err != nil || err0 != nil || cpu1 < cpu0 {
		return note
	}
	s := "servers' CPU " + fmtDur(cpu1-cpu0)
	if note == "" {
		return s
	}
	return note + "; " + s
}

// follower returns a member other than l.
func (g *growth) follower(l *member) *member {
	for _, m := range g.inst.members {
		if m != l {
			return m
		}
	}
	return l
}

// bgsave has redis-server write its RDB in a forked child, and waits for it.
func (g *growth) bgsave(ctx context.Context) (time.Duration, time.Duration, string, error) {
	c := newGoRedis(&redis.Options{Addr: g.inst.members[0].addr}, 1)
	defer c.close()
	start := time.Now()
	if _, err := c.do(ctx, "BGSAVE"); err != nil {
		return 0, 0, "", fmt.Errorf("BGSAVE: %w", err)
	}
	for {
		v, err := c.do(ctx, "INFO", "persistence")
		if err != nil {
			return 0, 0, "", err
		}
		s, _ := v.(string)
		if busy, _ := infoValue(s, "rdb_bgsave_in_progress"); busy == "0" {
			if status, _ := infoValue(s, "rdb_last_bgsave_status"); status != "ok" {
				return 0, 0, "", fmt.Errorf("BGSAVE: rdb_last_bgsave_status:%s", status)
			}
			took := time.Since(start)
			fork, err := infoField(ctx, g.inst.members[0].addr, "stats", "latest_fork_usec")
			if err != nil {
				return 0, 0, "", err
			}
			return took, 0, "fork " + fork + " µs", nil
		}
		if !sleepCtx(ctx, 10*time.Millisecond) {
			return 0, 0, "", ctx.Err()
		}
	}
}

// backup copies the state to a file of the bench's, as an operator's
// machine would over the client port: lockserver backup (from the leader,
// after a barrier), redis-cli --rdb (a full sync's RDB, with no delay for
// other replicas to share it). The note gives the
// file's size and, for a cluster, how long lockserver restore then took to
// make a new member's data directory of it.
func (g *growth) backup(ctx context.Context) (time.Duration, time.Duration, string, error) {
	dir, err := g.b.tempDir("backup")
	if err != nil {
		return 0, 0, "", err
	}
	defer os.RemoveAll(dir)
	file := filepath.Join(dir, "state.backup")
	var cmd *exec.Cmd
	if g.cluster {
		bin, err := g.b.lockserverBinary(ctx)
		if err != nil {
			return 0, 0, "", err
		}
		cmd = exec.CommandContext(ctx, bin, "backup", "--to", file, g.inst.members[0].addr)
	} else {
		// A full sync waits repl-diskless-sync-delay (5 s) for more
		// replicas to share it: not what is measured here.
		c := newGoRedis(&redis.Options{Addr: g.inst.members[0].addr}, 1)
		_, err := c.do(ctx, "CONFIG", "SET", "repl-diskless-sync-delay", "0")
		c.close()
		if err != nil {
			return 0, 0, "", err
		}
		host, port, _ := net.SplitHostPort(g.inst.members[0].addr)
		cmd = exec.CommandContext(ctx, "redis-cli", "-h", host, "-p", port, "--rdb", file)
	}
	start := time.Now()
	if out, err := cmd.CombinedOutput(); err != nil {
		return 0, 0, "", fmt.Errorf("%s: %w\n%s", strings.Join(cmd.Args, " "), err, out)
	}
	took := time.Since(start)
	st, err := os.Stat(file)
	if err != nil {
		return 0, 0, "", err
	}
	note := fmt.Sprintf("file %.1f MB", float64(st.Size())/1e6)
	if g.cluster {
		bin, _ := g.b.lockserverBinary(ctx)
		restoreAt := filepath.Join(dir, "restored")
		start := time.Now()
		out, err := exec.CommandContext(ctx, bin, "restore", "--from", file, "--data-dir", restoreAt,
			"--node-id", "r", "--bootstrap", "r=127.0.0.1:1").CombinedOutput()
		if err != nil {
			return 0, 0, "", fmt.Errorf("lockserver restore: %w\n%s", err, out)
		}
		note += "; lockserver restore of it " + fmtDur(time.Since(start))
	}
	return took, 0, note, nil
}

// followerRestart stops a follower and starts it again: took is until it
// answers, catch-up until it has applied what the leader had then (the note
// says how long it took to stop: a member that closes with much log since
// its last snapshot takes one first).
func (g *growth) followerRestart(ctx context.Context) (time.Duration, time.Duration, string, error) {
	l, err := g.leader(ctx)
	if err != nil {
		return 0, 0, "", err
	}
	f := g.follower(l)
	stopping := time.Now()
	f.stop()
	stopped := time.Since(stopping)
	start := time.Now()
	if err := f.start(); err != nil {
		return 0, 0, "", err
	}
	if err := f.process().waitReadyFor(ctx, 30*time.Minute, statusReady(f.addr)); err != nil {
		return 0, 0, "", err
	}
	took := time.Since(start)
	if err := g.caughtUp(ctx, []*member{f}); err != nil {
		return 0, 0, "", err
	}
	return took, time.Since(start), fmt.Sprintf("%s; it stopped in %s", f.name, fmtDur(stopped)), nil
}

// clusterRestart stops every member and starts them all again: took is until
// the first write succeeds, catch-up until every member has applied it.
func (g *growth) clusterRestart(ctx context.Context) (time.Duration, time.Duration, string, error) {
	var wg sync.WaitGroup
	stopping := time.Now()
	for _, m := range g.inst.members {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m.stop()
		}()
	}
	wg.Wait()
	stopped := time.Since(stopping)
	start := time.Now()
	for _, m := range g.inst.members {
		if err := m.start(); err != nil {
			return 0, 0, "", err
		}
	}
	if err := g.inst.members[0].process().waitReadyFor(ctx, 30*time.Minute, writeReady(g.inst.members[0].addr)); err != nil {
		return 0, 0, "", err
	}
	took := time.Since(start)
	if err := g.caughtUp(ctx, nil); err != nil {
		return 0, 0, "", err
	}
	return took, time.Since(start), "the members stopped in " + fmtDur(stopped), nil
}

// redisRestart stops redis-server (which saves nothing on the way: no save
// points) and starts it again, to load the RDB of the last BGSAVE: took is
// until it accepts a write.
func (g *growth) redisRestart(ctx context.Context) (time.Duration, time.Duration, string, error) {
	m := g.inst.members[0]
	stopping := time.Now()
	m.stop()
	stopped := time.Since(stopping)
	start := time.Now()
	if err := m.start(); err != nil {
		return 0, 0, "", err
	}
	if err := m.process().waitReadyFor(ctx, 30*time.Minute, writeReady(m.addr)); err != nil {
		return 0, 0, "", err
	}
	return time.Since(start), 0, "from the RDB of the BGSAVE; it stopped in " + fmtDur(stopped), nil
}

// caughtUp waits until each member of ms (every member when nil) has
// applied what the leader had applied when it began to wait.
func (g *growth) caughtUp(ctx context.Context, ms []*member) error {
	if ms == nil {
		ms = g.inst.members
	}
	var target uint64
	for deadline := time.Now().Add(30 * time.Minute); ; {
		for _, m := range g.inst.members {
			if st, err := clusterStatus(ctx, m.addr); err == nil && st["state"] == "leader" && target == 0 {
				target, _ = strconv.ParseUint(st["applied_index"], 10, 64)
			}
		}
		done := target > 0
		for _, m := range ms {
			st, err := clusterStatus(ctx, m.addr)
			applied, _ := strconv.ParseUint(st["applied_index"], 10, 64)
			if err != nil || applied < target {
				done = false
			}
		}
		if done {
			return nil
		}
		if time.Now().After(deadline) {
			return errors.New("the members did not catch up within 30 minutes")
		}
		if !sleepCtx(ctx, 20*time.Millisecond) {
			return ctx.Err()
		}
	}
}

// expiryWait is how long a mass expiry is given to be reclaimed: past it,
// the row says how many keys were left, and took is expiryWait.
const expiryWait = 10 * time.Minute

// massExpiry adds locks that all expire at one moment and measures how long
// the system takes to reclaim them after it, with the clients running, and
// the members' RSS before, at the moment and after.
func (g *growth) massExpiry(ctx context.Context) row {
	n := g.b.cfg.expire
	r := g.row("mass expiry", g.held)
	prefix := g.prefix + ":exp"
	// The keyspace holds more than the held locks (the keys of the
	// workloads run before on the same servers): it is back to what it
	// was once the expiring locks are reclaimed.
	before, err := g.keys(ctx)
	if err != nil {
		return r.failed(err)
	}
	start := time.Now()
	if err := loadHeldLocks(ctx, g.inst, g.b.owner(0), prefix, 0, n); err != nil {
		return r.failed(err)
	}
	// They expire together once their deadlines are set, after twice as
	// long as loading them took, by the server's clock (a cluster's log
	// clock, which never jumps forward, may run behind the wall clock after
	// the cluster's restart).
	now, err := g.serverTime(ctx)
	if err != nil {
		return r.failed(err)
	}
	at := now.Add(max(2*time.Since(start), 10*time.Second))
	if err := expireAt(ctx, g.inst, prefix, n, at); err != nil {
		return r.failed(err)
	}
	if now, err := g.serverTime(ctx); err != nil || !now.Before(at) {
		return r.failed(fmt.Errorf("setting the deadlines took past them (%v, %v)", now.Sub(at), err))
	}
	rss0 := g.rss()
	rec, err := g.startClients(ctx)
	if err != nil {
		return r.failed(err)
	}
	defer rec.stop()
	g.rec.begin()
	term := g.term(ctx)
	for {
		now, err := g.serverTime(ctx)
		if err != nil {
			g.rec.end()
			return r.failed(err)
		}
		if !now.Before(at) {
			break
		}
		sleepCtx(ctx, min(at.Sub(now), 20*time.Millisecond))
	}
	t0 := time.Now()
	cpu0, cpuErr := g.inst.cpu()
	want := before + growthClients // and each client's lock, held at the moment
	var reclaimed time.Time
	left := 0
	for deadline := t0.Add(expiryWait); reclaimed.IsZero(); {
		keys, err := g.keys(ctx)
		switch {
		case err != nil:
			g.rec.end()
			return r.failed(err)
		case keys <= want:
			reclaimed = time.Now()
		case time.Now().After(deadline):
			reclaimed, left = time.Now(), keys-want
		default:
			sleepCtx(ctx, 20*time.Millisecond)
		}
	}
	rss1 := g.rss()
	cpuNote := withCPU("", g.inst, cpu0, cpuErr)
	sleepCtx(ctx, 5*time.Second)
	ops, errs := g.rec.end()
	r.fillWindow(ops, errs, t0, reclaimed)
	r.Took = reclaimed.Sub(t0)
	rss2 := g.rss()
	r.RSS = rss2
	r.Note = fmt.Sprintf("%s locks expired together; %s; RSS (MB) before, when reclaimed, 5 s later: %s, %s, %s",
		fmtCount(n), cpuNote, fmtMB(rss0), fmtMB(rss1), fmtMB(rss2))
	if left > 0 {
		r.Note = fmt.Sprintf("NOT RECLAIMED: %d of the %s still there after %v; %s", left, fmtCount(n), expiryWait, r.Note)
	}
	if g.cluster {
		changes := int(g.term(ctx) - term)
		r.LeaderChanges = &changes
	}
	return r
}

// serverTime returns the leader's clock (TIME).
func (g *growth) serverTime(ctx context.Context) (time.Time, error) {
	l, err := g.leader(ctx)
	if err != nil {
		return time.Time{}, err
	}
	c := newGoRedis(&redis.Options{Addr: l.addr}, 1)
	defer c.close()
	v, err := c.do(ctx, "TIME")
	parts, ok := v.([]any)
	if err != nil || !ok || len(parts) != 2 {
		return time.Time{}, fmt.Errorf("TIME: %v %v", v, err)
	}
	sec, err1 := strconv.ParseInt(fmt.Sprint(parts[0]), 10, 64)
	usec, err2 := strconv.ParseInt(fmt.Sprint(parts[1]), 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return time.Time{}, fmt.Errorf("TIME: %w", err)
	}
	return time.Unix(sec, usec*1000), nil
}

// keys returns the number of keys of database 0 on every member: the most
// any member still holds.
func (g *growth) keys(ctx context.Context) (int, error) {
	top := 0
	for _, m := range g.inst.members {
		v, err := infoField(ctx, m.addr, "keyspace", "db0")
		if err != nil {
			return 0, err
		}
		k, _, _ := strings.Cut(strings.TrimPrefix(v, "keys="), ",")
		n, err := strconv.Atoi(k)
		if err != nil {
			return 0, fmt.Errorf("INFO keyspace db0:%s", v)
		}
		top = max(top, n)
	}
	return top, nil
}

// fmtMB formats each member's RSS in megabytes.
func fmtMB(rss [3]int64) string {
	var parts []string
	for _, v := range rss {
		if v > 0 {
			parts = append(parts, strconv.FormatInt(v>>20, 10))
		}
	}
	return strings.Join(parts, "/")
}

// expireAt sets the deadline of the locks [0, n) of prefix to at.
func expireAt(ctx context.Context, inst *instance, prefix string, n int, at time.Time) error {
	return inPipelines(ctx, inst, "expire locks", prefix, 0, n, func(p redis.Pipeliner, key string) {
		p.PExpireAt(ctx, key, at)
	})
}

// clusterStatus reads LOCKSERVER STATUS from the member at addr.
func clusterStatus(ctx context.Context, addr string) (map[string]string, error) {
	c := newGoRedis(&redis.Options{Addr: addr, DialTimeout: time.Second, ReadTimeout: 2 * time.Second}, 1)
	defer c.close()
	v, err := c.do(ctx, "LOCKSERVER", "STATUS")
	if err != nil {
		return nil, err
	}
	flat, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("LOCKSERVER STATUS replied %T", v)
	}
	st := map[string]string{}
	for i := 0; i+1 < len(flat); i += 2 {
		st[fmt.Sprint(flat[i])] = fmt.Sprint(flat[i+1])
	}
	return st, nil
}

// statusReady succeeds once a member answers LOCKSERVER STATUS.
func statusReady(addr string) func(context.Context) error {
	return func(ctx context.Context) error {
		_, err := clusterStatus(ctx, addr)
		return err
	}
}

// opRecord is one lock operation: when it ended (Unix nanoseconds) and how
// long it took.
type opRecord struct{ end, took int64 }

// opRecorder runs the lock clients and records their operations between
// begin and end.
type opRecorder struct {
	mu        sync.Mutex
	recording bool
	ops       []opRecord
	errs      []time.Time
	cancel    context.CancelFunc
	wg        sync.WaitGroup
}

// startClients starts growthClients lock clients on the leader, each locking
// and unlocking its own key with Redisson's scripts; after an error a client
// deletes its key, since the lock's state is then unknown, and goes on.
func (g *growth) startClients(ctx context.Context) (*opRecorder, error) {
	l, err := g.leader(ctx)
	if err != nil {
		return nil, err
	}
	rec := &opRecorder{}
	ctx, rec.cancel = context.WithCancel(ctx)
	c := tcpClient(l.addr)(growthClients)
	var started atomic.Int32
	for i := range growthClients {
		key := fmt.Sprintf("%s:client:%d", g.prefix, i)
		keys := []string{key, redissonChannel(key)}
		owner := g.b.owner(i)
		rec.wg.Add(1)
		go func() {
			defer rec.wg.Done()
			started.Add(1)
			for ctx.Err() == nil {
				start := time.Now()
				acquired, _, err := g.b.redissonTryLock(ctx, c, key, owner)
				if err == nil && !acquired {
					err = errors.New("redisson_lock.lua: a free key is held")
				}
				if err == nil {
					rec.observe(start)
					start = time.Now()
					err = g.b.redissonUnlock(ctx, c, keys, owner)
				}
				if err == nil {
					rec.observe(start)
					continue
				}
				if ctx.Err() != nil {
					return
				}
				rec.failed()
				for ctx.Err() == nil {
					if _, err := c.do(ctx, "DEL", key); err == nil {
						break
					}
					sleepCtx(ctx, 50*time.Millisecond)
				}
			}
		}()
	}
	g.rec = rec
	go func() {
		rec.wg.Wait()
		c.close()
	}()
	for started.Load() < growthClients {
		time.Sleep(time.Millisecond)
	}
	return rec, nil
}

func (rec *opRecorder) observe(start time.Time) {
	end := time.Now()
	rec.mu.Lock()
	if rec.recording {
		rec.ops = append(rec.ops, opRecord{end: end.UnixNano(), took: int64(end.Sub(start))})
	}
	rec.mu.Unlock()
}

func (rec *opRecorder) failed() {
	rec.mu.Lock()
	if rec.recording {
		rec.errs = append(rec.errs, time.Now())
	}
	rec.mu.Unlock()
}

// begin starts recording, afresh.
func (rec *opRecorder) begin() {
	rec.mu.Lock()
	rec.recording, rec.ops, rec.errs = true, nil, nil
	rec.mu.Unlock()
}

// end stops recording and returns what was recorded.
func (rec *opRecorder) end() ([]opRecord, []time.Time) {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	rec.recording = false
	ops, errs := rec.ops, rec.errs
	rec.ops, rec.errs = nil, nil
	slices.SortFunc(ops, func(a, b opRecord) int { return int(a.end - b.end) })
	return ops, errs
}

// stop stops the clients and waits for them.
func (rec *opRecorder) stop() {
	rec.cancel()
	rec.wg.Wait()
}

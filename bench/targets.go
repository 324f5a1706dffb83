package main

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"time"
)

// find returns the measured row of system in a setting, if there is one.
func find(rows []row, system, workload string, clients, pipeline int) (row, bool) {
	for _, r := range rows {
		if r.System == system && r.Workload == workload && r.Clients == clients && r.Pipeline == pipeline && r.Held == 0 && r.Status == "" {
			return r, true
		}
	}
	return row{}, false
}

// memoryRow returns system's bytes-per-lock row.
func memoryRow(rows []row, system string) (row, bool) {
	for _, r := range rows {
		if r.System == system && r.Workload == "memory" && r.Status == "" {
			return r, true
		}
	}
	return row{}, false
}

// targets sets each goal of issues 2, 3, 4, 16 and 18 beside this run's figures.
func targets(rows []row) []target {
	var out []target
	// relative checks a ratio of a system's figure to another's, in one setting.
	relative := func(goal, sys, other, workload string, clients, pipeline int, min float64) {
		a, okA := find(rows, sys, workload, clients, pipeline)
		b, okB := find(rows, other, workload, clients, pipeline)
		t := target{Goal: goal, Status: "not measured"}
		if okA && okB && b.Value > 0 {
			ratio := a.Value / b.Value
			t.Measured = fmt.Sprintf("%s vs %s: %.2fx", fmtRate(a.Value, a.Unit), fmtRate(b.Value, b.Unit), ratio)
			t.Status = metIf(ratio >= min)
		}
		out = append(out, t)
	}
	relative("embedded (in-memory Dialer) >= 5x redis-server, lock cycles at 50 clients", "embedded", "redis", "lock", 50, 0, 5)
	// Through go-redis no server can do better than go-redis with none.
	if t := &out[len(out)-1]; t.Status == "not met" {
		a, okA := find(rows, "go-redis-alone", "lock", 50, 0)
		b, okB := find(rows, "redis", "lock", 50, 0)
		if okA && okB && b.Value > 0 && a.Value/b.Value < 5 {
			t.Measured += fmt.Sprintf("; go-redis with no server behind it: %s, %.2fx", fmtRate(a.Value, a.Unit), a.Value/b.Value)
			t.Status = "out of reach"
		}
	}
	relative("embedded (direct Do) >= 5x redis-server, lock cycles at 50 clients", "embedded-do", "redis", "lock", 50, 0, 5)
	relative("single node >= 0.8x redis-server, lock cycles at 50 clients", "lockserver", "redis", "lock", 50, 0, 0.8)
	for _, t := range rbTests {
		relative("single node >= 0.8x redis-server, redis-benchmark "+t.name+" -c 50 -P 1", "lockserver", "redis", "rb "+t.name, rbClients, 1, 0.8)
	}
	relative("3-node cluster >= 0.5x redis-server appendfsync always, lock cycles at 50 clients", "lockserver-raft3", "redis-aof", "lock", 50, 0, 0.5)
	relative("3-node cluster well ahead of etcd 3-node (> 1x), lock cycles at 50 clients", "lockserver-raft3", "etcd3", "lock", 50, 0, 1)

	t := target{Goal: "3-node cluster >= 20k lock ops/s (acquires + releases) at 256 clients", Status: "not measured"}
	if r, ok := find(rows, "lockserver-raft3", "lock", 256, 0); ok {
		t.Measured, t.Status = fmtRate(r.Value, r.Unit), metIf(r.Value >= 20000)
	}
	out = append(out, t)
	t = target{Goal: "3-node cluster p99 < 10 ms at 16 clients", Status: "not measured"}
	if r, ok := find(rows, "lockserver-raft3", "lock", 16, 0); ok {
		t.Measured, t.Status = "p99 "+fmtDur(r.P99), metIf(r.P99 < 10*time.Millisecond)
	}
	out = append(out, t)

	// Issue 18: the Go Mutex on the cluster hands a hot lock off faster
	// (p50) than etcd's Mutex and than redsync on redis-server with
	// appendfsync always.
	for _, c := range handoffClients {
		for _, other := range []struct{ sys, workload, name string }{
			{"etcd3", "handoff-mutex", "etcd 3-node concurrency.Mutex"},
			{"redis-aof", "handoff-redsync", "redsync on redis-server appendfsync always"},
		} {
			t := target{Goal: fmt.Sprintf("3-node cluster Mutex hand-off p50 below %s, %d contenders", other.name, c), Status: "not measured"}
			a, okA := find(rows, "lockserver-raft3", "handoff-mutex", c, 0)
			b, okB := find(rows, other.sys, other.workload, c, 0)
			if okA && okB && a.P50 > 0 && b.P50 > 0 {
				t.Measured = fmt.Sprintf("p50 %s vs %s", fmtDur(a.P50), fmtDur(b.P50))
				t.Status = metIf(a.P50 < b.P50)
			}
			out = append(out, t)
		}
	}

	// Issue 16: TLS costs lockserver no more of its throughput than it
	// costs redis-server: the TLS row's share of the plain row's, each.
	for _, sys := range []string{"lockserver", "lockserver-raft3"} {
		t := target{Goal: sys + ": TLS keeps as much of its throughput as redis-server's TLS keeps of its own, lock cycles at 50 clients", Status: "not measured"}
		a, okA := find(rows, sys+"-tls", "lock", 50, 0)
		b, okB := find(rows, sys, "lock", 50, 0)
		c, okC := find(rows, "redis-tls", "lock", 50, 0)
		d, okD := find(rows, "redis", "lock", 50, 0)
		if okA && okB && okC && okD && b.Value > 0 && d.Value > 0 {
			mine, theirs := a.Value/b.Value, c.Value/d.Value
			t.Measured = fmt.Sprintf("%s with TLS %.2fx of without; redis-server %.2fx", sys, mine, theirs)
			t.Status = metIf(mine >= theirs)
		}
		out = append(out, t)
	}

	for _, sys := range []string{"lockserver", "embedded"} {
		t := target{Goal: sys + " memory per held lock <= 1.5x redis-server's", Status: "not measured"}
		a, okA := memoryRow(rows, sys)
		b, okB := memoryRow(rows, "redis")
		switch {
		case !okA || !okB:
		case a.Value <= 0 || b.Value <= 0:
			// Too few held locks (--smoke) for the growth to show over the noise.
			t.Measured = fmt.Sprintf("%.0f vs %.0f B/lock: too few held locks to tell", a.Value, b.Value)
		default:
			ratio := a.Value / b.Value
			t.Measured = fmt.Sprintf("%.0f vs %.0f B/lock (%s): %.2fx", a.Value, b.Value, a.Note, ratio)
			t.Status = metIf(ratio <= 1.5)
		}
		out = append(out, t)
	}
	out = append(out, growthTargets(rows)...)
	return append(out, rollingTarget(rows), failoverTarget(rows))
}

// failoverTarget sets the goal of issue 30 beside the failover rows: the
// first acknowledged write at most 1.5 s after a leader's kill, on average.
func failoverTarget(rows []row) target {
	t := target{Goal: "failover: the first write after a leader kill at most 1.5 s, mean over the kills", Status: "not measured"}
	var sum time.Duration
	var n int
	for _, r := range rows {
		if r.Workload == "failover" && r.Status == "" {
			sum += r.Took
			n++
		}
	}
	if n > 0 {
		mean := sum / time.Duration(n)
		t.Measured = fmt.Sprintf("%s mean of %d kills", fmtDur(mean), n)
		t.Status = metIf(mean <= 1500*time.Millisecond)
	}
	return t
}

// rollingTarget sets the goal of the hand-over on stop beside the
// rolling-restart rows: the longest write at a leader's restart with this
// build at most a tenth of it with the previous release, whose leader just
// stops.
func rollingTarget(rows []row) target {
	t := target{Goal: "rolling restart: the longest write at a leader's restart at most 0.1x the previous release's (no hand-over)", Status: "not measured"}
	var ours, theirs time.Duration
	var prev string
	for _, r := range rows {
		if r.Workload != "rolling-restart" || r.Status != "" || !strings.HasSuffix(r.Event, "(the leader)") {
			continue
		}
		if strings.Contains(r.System, "(") {
			theirs, prev = max(theirs, r.Longest), r.System
		} else {
			ours = max(ours, r.Longest)
		}
	}
	if ours > 0 && theirs > 0 {
		ratio := float64(ours) / float64(theirs)
		t.Measured = fmt.Sprintf("%s vs %s (%s): %.2fx", fmtDur(ours), fmtDur(theirs), prev, ratio)
		t.Status = metIf(ratio <= 0.1)
	}
	return t
}

// growthRow returns system's held-growth row of event at held locks.
func growthRow(rows []row, system, event string, held int) (row, bool) {
	for _, r := range rows {
		if r.Workload == "held-growth" && r.System == system && r.Event == event && r.Held == held && r.Status == "" {
			return r, true
		}
	}
	return row{}, false
}

// growthTargets sets the goals of the issue on millions of held locks
// beside the held-growth rows at the largest count both systems reached.
func growthTargets(rows []row) []target {
	const ls, rs = "lockserver-raft3", "redis"
	held := 0
	for _, r := range rows {
		if _, ok := growthRow(rows, rs, "snapshot", r.Held); ok && r.Workload == "held-growth" && r.System == ls && r.Event == "snapshot" && r.Status == "" {
			held = max(held, r.Held)
		}
	}
	at := fmtCount(held)
	var out []target
	compare := func(goal string, events []string, redisEvent string, figure func(row) time.Duration) {
		t := target{Goal: goal, Status: "not measured"}
		theirs, ok := growthRow(rows, rs, redisEvent, held)
		var parts []string
		worst := time.Duration(0)
		for _, e := range events {
			ours, okE := growthRow(rows, ls, e, held)
			ok = ok && okE
			worst = max(worst, figure(ours))
			parts = append(parts, e+" "+fmtDur(figure(ours)))
		}
		if ok {
			t.Measured = fmt.Sprintf("%s; redis-server's %s %s", strings.Join(parts, ", "), redisEvent, fmtDur(figure(theirs)))
			t.Status = metIf(worst <= figure(theirs))
		}
		out = append(out, t)
	}
	longest := func(r row) time.Duration { return r.Longest }
	took := func(r row) time.Duration { return r.Took }
	compare("at "+at+" held locks no request on the leader waits longer during a snapshot (its own or a follower's) than redis-server's longest during BGSAVE",
		[]string{"snapshot", "follower snapshot"}, "snapshot", longest)
	t := target{Goal: "at " + at + " held locks the leader's throughput during a snapshot >= 50% of before", Status: "not measured"}
	if r, ok := growthRow(rows, ls, "snapshot", held); ok && r.Normal > 0 {
		t.Measured = fmt.Sprintf("%s of %s: %.2fx", fmtRate(r.Value, r.Unit), fmtRate(r.Normal, r.Unit), r.Value/r.Normal)
		t.Status = metIf(r.Value >= r.Normal/2)
	}
	out = append(out, t)
	compare("at "+at+" held locks a member's restart, and the whole cluster's, no slower than redis-server's restart from its RDB",
		[]string{"follower restart", "cluster restart"}, "restart", took)
	compare("simultaneous expiries reclaimed no slower than redis-server", []string{"mass expiry"}, "mass expiry", took)
	t = target{Goal: "no leader change in any held-growth event but the whole cluster's restart", Status: "not measured"}
	changes, events := 0, 0
	for _, r := range rows {
		if r.Workload == "held-growth" && r.System == ls && r.LeaderChanges != nil {
			changes += *r.LeaderChanges
			events++
		}
	}
	if events > 0 {
		t.Measured = fmt.Sprintf("%d leader changes in %d events", changes, events)
		t.Status = metIf(changes == 0)
	}
	return append(out, t)
}

func metIf(ok bool) string {
	if ok {
		return "met"
	}
	return "not met"
}

// machine describes where the figures were measured.
type machine struct {
	CPUs    int    `json:"cpus"`
	CPU     string `json:"cpu_model,omitempty"`
	Memory  string `json:"memory"`
	Kernel  string `json:"kernel"`
	Go      string `json:"go"`
	Redis   string `json:"redis_server,omitempty"`
	Etcd    string `json:"etcd,omitempty"`
	Loadavg string `json:"loadavg_at_start,omitempty"`
}

func describeMachine() machine {
	m := machine{CPUs: runtime.NumCPU(), Go: runtime.Version()}
	first := func(name string, args ...string) string {
		out, err := exec.Command(name, args...).Output()
		if err != nil {
			return ""
		}
		line, _, _ := strings.Cut(strings.TrimSpace(string(out)), "\n")
		return line
	}
	m.Kernel = first("uname", "-sr")
	m.Redis = first("redis-server", "--version")
	m.Etcd = first("etcd", "--version")
	if out, err := exec.Command("free", "-g").Output(); err == nil {
		for _, line := range strings.Split(string(out), "\n") {
			if f := strings.Fields(line); len(f) > 1 && f[0] == "Mem:" {
				m.Memory = f[1] + " GiB"
			}
		}
	}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "model name"); ok {
				m.CPU = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(v), ":"))
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		m.Loadavg = strings.Join(strings.Fields(string(b))[:3], " ")
	}
	return m
}

func (m machine) summary() string {
	return fmt.Sprintf("%d CPUs (%s), %s memory, %s, %s, load %s", m.CPUs, m.CPU, m.Memory, m.Kernel, m.Go, m.Loadavg)
}

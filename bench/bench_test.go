package main

import (
	"encoding/xml"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestHistogramBucketsCoverEveryValueWithinOnePart128(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	prev := -1
	for _, v := range []uint64{0, 1, 255, 256, 258, 511, 512, 1 << 40, 1<<64 - 1} {
		i := histIndex(v)
		if i <= prev || i >= histBuckets {
			t.Fatalf("histIndex(%d) = %d after %d: not increasing within [0, %d)", v, i, prev, histBuckets)
		}
		prev = i
	}
	for range 100000 {
		v := rng.Uint64() >> rng.UintN(64)
		lo, hi := histBounds(histIndex(v))
		if v < lo || v > hi {
			t.Fatalf("value %d outside its bucket [%d, %d]", v, lo, hi)
		}
		if float64(hi-lo) > float64(lo)/128 {
			t.Fatalf("bucket [%d, %d] of %d is wider than 1/128 of its value", lo, hi, v)
		}
	}
}

func TestHistogramQuantilesOfAWorkedExample(t *testing.T) {
	// 1..10000 µs, once each: the p-th percentile is p*100 µs exactly.
	var h histogram
	for i := 1; i <= 10000; i++ {
		h.record(time.Duration(i) * time.Microsecond)
	}
	for _, c := range []struct {
		q    float64
		want time.Duration
	}{{0.5, 5000 * time.Microsecond}, {0.99, 9900 * time.Microsecond}, {0.999, 9990 * time.Microsecond}, {1, 10000 * time.Microsecond}} {
		got := h.quantile(c.q)
		// Never reported better than it was, and at most one bucket worse.
		if got < c.want || float64(got-c.want) > float64(c.want)/128 {
			t.Errorf("quantile(%v) = %v, want %v (+0.8%%)", c.q, got, c.want)
		}
	}
	if h.mean() != 5000500*time.Nanosecond {
		t.Errorf("mean = %v, want 5.0005ms", h.mean())
	}

	// Small values are exact; merging adds counts.
	var a, b histogram
	a.record(1)
	a.record(2)
	b.record(3)
	a.merge(&b)
	if a.n != 3 || a.quantile(0.5) != 2 || a.quantile(1) != 3 || a.min != 1 {
		t.Errorf("merged histogram: n=%d p50=%v max=%v min=%d, want 3, 2ns, 3ns, 1", a.n, a.quantile(0.5), a.quantile(1), a.min)
	}
}

func TestParseRedisBenchmarkCSV(t *testing.T) {
	// Output of redis-benchmark 7.0.15 -q --csv -t set, as printed.
	out := `"test","rps","avg_latency_ms","min_latency_ms","p50_latency_ms","p95_latency_ms","p99_latency_ms","max_latency_ms"
"SET","47619.05","0.569","0.160","0.511","0.711","2.719","3.063"
`
	got, err := parseRedisBenchmarkCSV([]byte(out))
	if err != nil {
		t.Fatal(err)
	}
	want := rbResult{rps: 47619.05, p50: 511 * time.Microsecond, p99: 2719 * time.Microsecond}
	if got != want {
		t.Errorf("got %+v, want %+v", got, want)
	}
	if _, err := parseRedisBenchmarkCSV([]byte(out[:strings.Index(out, "\n")+1])); err == nil {
		t.Error("a header with no result line parsed without error")
	}
}

func TestFlags(t *testing.T) {
	cfg, err := parseFlags([]string{"--quick", "--clients", "50,1,16,1", "--systems", "redis,embedded"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(cfg.clients, []int{1, 16, 50}) {
		t.Errorf("clients = %v, want [1 16 50]", cfg.clients)
	}
	// Chosen systems keep the table's order, not the command line's.
	if !slices.Equal(cfg.systems, []string{"embedded", "redis"}) {
		t.Errorf("systems = %v, want [embedded redis]", cfg.systems)
	}
	// --quick sets what the command line left alone.
	if cfg.duration != quickPreset.duration || cfg.held != quickPreset.held {
		t.Errorf("quick preset not applied: duration %v held %d", cfg.duration, cfg.held)
	}
	cfg, err = parseFlags([]string{"--quick", "--smoke", "--duration", "2s"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.duration != 2*time.Second || cfg.requests != smokePreset.requests {
		t.Errorf("explicit --duration or --smoke lost: duration %v requests %d", cfg.duration, cfg.requests)
	}
	for _, bad := range [][]string{{"--clients", "0"}, {"--systems", "postgres"}, {"--workloads", "lock,nope"}, {"--held", "10"}, {"--repeat", "0"}, {"extra"}} {
		if _, err := parseFlags(bad, io.Discard); err == nil {
			t.Errorf("parseFlags(%q) accepted bad input", bad)
		}
	}
}

// TestMedianRun: of three runs and a failed one, the row kept is the run of
// median throughput, whole, with the others' range in its note; a single run
// is kept as it is; when every run failed, the first failure stands.
func TestMedianRun(t *testing.T) {
	run := func(v float64, p50 time.Duration) row {
		return row{Workload: "lock", System: "redis", Clients: 50, Value: v, Unit: "ops/s", P50: p50}
	}
	failed := row{Workload: "lock", System: "redis", Clients: 50}.failed(errors.New("refused"))
	got := medianRun([]row{run(30000, 1), failed, run(10000, 3), run(20000, 2)})
	if got.Value != 20000 || got.P50 != 2 {
		t.Errorf("median run = %v ops/s p50 %v, want the 20000 ops/s run (p50 2)", got.Value, got.P50)
	}
	if want := "median of 3 runs, 10.0k ops/s to 30.0k ops/s; 1 failed"; got.Note != want {
		t.Errorf("note = %q, want %q", got.Note, want)
	}
	if one := run(5, 4); medianRun([]row{one}) != one {
		t.Errorf("a single run changed: %+v", medianRun([]row{one}))
	}
	if got := medianRun([]row{failed, failed}); got.Status != "error" || got.Note != "refused" {
		t.Errorf("all runs failed: got %+v", got)
	}
}

func TestCommandLineQuotesForAShell(t *testing.T) {
	got := commandLine([]string{"--quick", "--note", "it's loaded", "--json", "/tmp/a b.json", ""})
	want := `cd bench && go run . --quick --note 'it'\''s loaded' --json '/tmp/a b.json' ''`
	if got != want {
		t.Errorf("commandLine = %s\nwant           %s", got, want)
	}
}

func TestHeldSteps(t *testing.T) {
	for _, c := range []struct {
		max  int
		want []int
	}{{1000000, []int{1000, 10000, 100000, 1000000}}, {100000, []int{1000, 10000, 100000}}, {2000, []int{1000, 2000}}, {1000, []int{1000}}} {
		if got := heldSteps(c.max); !slices.Equal(got, c.want) {
			t.Errorf("heldSteps(%d) = %v, want %v", c.max, got, c.want)
		}
	}
}

func TestRatiosAndTargets(t *testing.T) {
	rows := []row{
		{Workload: "lock", System: "redis", Clients: 50, Value: 100000, Unit: "ops/s", P50: 400 * time.Microsecond, CPUPerOp: 10e-6},
		{Workload: "lock", System: "embedded", Clients: 50, Value: 600000, Unit: "ops/s", P50: 100 * time.Microsecond, CPUPerOp: 5e-6},
		{Workload: "lock", System: "lockserver", Clients: 50, Value: 70000, Unit: "ops/s"},
		{Workload: "lock", System: "embedded", Clients: 1, Value: 1, Unit: "ops/s"}, // no redis row at c=1
		{Workload: "memory", System: "redis", Held: 1000, Value: 200, Unit: "B/lock"},
		{Workload: "memory", System: "lockserver", Held: 1000, Value: 320, Unit: "B/lock"},
		{Workload: "lock", System: "miniredis", Clients: 50, Status: "error", Note: "boom"},
	}
	setRatios(rows, "redis")
	if r := rows[1].Ratio; r == nil || r.Value != 6 || r.P50 != 0.25 || r.CPU != 0.5 {
		t.Errorf("embedded ratios = %+v, want value 6, p50 0.25, cpu 0.5", r)
	}
	if rows[3].Ratio != nil || rows[6].Ratio != nil {
		t.Error("a row with no baseline, or an error row, got ratios")
	}
	if rows[5].Ratio == nil || rows[5].Ratio.Value != 1.6 {
		t.Errorf("memory ratio = %+v, want 1.6", rows[5].Ratio)
	}
	status := map[string]string{}
	for _, tg := range targets(rows) {
		status[tg.Goal] = tg.Status
	}
	for goal, want := range map[string]string{
		"embedded (in-memory Dialer) >= 5x redis-server, lock cycles at 50 clients": "met",
		"single node >= 0.8x redis-server, lock cycles at 50 clients":               "not met",
		"lockserver memory per held lock <= 1.5x redis-server's":                    "not met",
		"3-node cluster p99 < 10 ms at 16 clients":                                  "not measured",
	} {
		if status[goal] != want {
			t.Errorf("target %q: %q, want %q", goal, status[goal], want)
		}
	}
}

// A target through go-redis that go-redis with no server behind it misses
// too is out of reach, not merely not met.
func TestTargetOutOfTheClientsReach(t *testing.T) {
	const goal = "embedded (in-memory Dialer) >= 5x redis-server, lock cycles at 50 clients"
	for _, c := range []struct {
		alone float64
		want  string
	}{{0, "not met"}, {450000, "out of reach"}, {550000, "not met"}} {
		rows := []row{
			{Workload: "lock", System: "redis", Clients: 50, Value: 100000, Unit: "ops/s"},
			{Workload: "lock", System: "embedded", Clients: 50, Value: 200000, Unit: "ops/s"},
		}
		if c.alone > 0 {
			rows = append(rows, row{Workload: "lock", System: "go-redis-alone", Clients: 50, Value: c.alone, Unit: "ops/s"})
		}
		for _, tg := range targets(rows) {
			if tg.Goal == goal && tg.Status != c.want {
				t.Errorf("go-redis alone at %.0f ops/s: %q (%s), want %q", c.alone, tg.Status, tg.Measured, c.want)
			}
		}
	}
}

func TestPlotIsWellFormedSVG(t *testing.T) {
	rep := &report{Date: "2026-01-01 00:00 UTC", Command: "cd bench && go run . --smoke & <check escaping>"}
	for _, sys := range []string{"embedded", "redis", "etcd3"} {
		for _, c := range []int{1, 16, 50} {
			rep.Rows = append(rep.Rows,
				row{Workload: "lock", System: sys, Clients: c, Value: float64(1000 * c), Unit: "ops/s", P50: 100 * time.Microsecond, P99: time.Millisecond, P999: 3 * time.Millisecond},
				row{Workload: "lock-hot", System: sys, Clients: c, Value: float64(100 * c), Unit: "acq/s"})
		}
	}
	rep.Rows = append(rep.Rows, row{Workload: "rb SET", System: "redis", Clients: 50, Pipeline: 1, Value: 85000, Unit: "req/s"},
		row{Workload: "memory", System: "redis", Held: 1000, Value: 200, Unit: "B/lock"})
	rep.Systems = []systemStatus{{Name: "lockserver-raft3", Skipped: "no flags"}}
	path := filepath.Join(t.TempDir(), "chart.svg")
	if err := writePlot(path, rep); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	d := xml.NewDecoder(strings.NewReader(string(b)))
	elements := 0
	for {
		tok, err := d.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("chart is not well-formed XML: %v", err)
		}
		if _, ok := tok.(xml.StartElement); ok {
			elements++
		}
	}
	for _, want := range []string{"embedded", "etcd3", "not run: lockserver-raft3", "redis: 200 B/lock", "&lt;check escaping&gt;"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("chart lacks %q", want)
		}
	}
	if elements < 50 {
		t.Errorf("chart has %d elements; expected lines, points and labels", elements)
	}
}

// TestHandoffTimesFromTheFirstRelease works through a lock that its holder
// takes back twice before a waiter gets it: one hand-off, timed from the
// holder's first release, and two acquisitions that hand nothing off.
func TestHandoffTimesFromTheFirstRelease(t *testing.T) {
	var recording atomic.Bool
	recording.Store(true)
	m := &meter{recording: &recording, live: new(atomic.Int64)}
	h := &handoff{}
	h.acquired(m, 0) // the first holder: nothing was released before
	first := time.Now()
	h.releasing(0)
	time.Sleep(20 * time.Millisecond)
	h.acquired(m, 0) // client 0 takes it straight back
	h.releasing(0)
	h.acquired(m, 0)
	h.releasing(0)
	h.acquired(m, 1) // a waiter at last
	took := time.Since(first)
	if m.ops != 1 || h.retaken.Load() != 2 {
		t.Fatalf("recorded %d hand-offs and %d retakes, want 1 and 2", m.ops, h.retaken.Load())
	}
	if got := m.hist.quantile(0.5); got < 20*time.Millisecond || got > took+took/64 {
		t.Fatalf("the hand-off took %v, want it timed from the first release (at least 20ms, at most %v)", got, took)
	}
	if got, want := h.note(m.ops), "the releaser took the lock back in 67% of acquisitions (2), not hand-offs"; got != want {
		t.Fatalf("note %q, want %q", got, want)
	}
	h.releasing(1)
	h.acquired(m, 2)
	if m.ops != 2 {
		t.Fatalf("a plain hand-off from 1 to 2 was not recorded: %d hand-offs", m.ops)
	}
}

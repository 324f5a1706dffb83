package main

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
)

// row is one line of the table: one system measured by one workload at one
// setting. Latencies are nanoseconds; zero means not measured.
type row struct {
	Workload string  `json:"workload"`
	System   string  `json:"system"`
	Clients  int     `json:"clients,omitempty"`
	Pipeline int     `json:"pipeline,omitempty"`
	Held     int     `json:"held_locks,omitempty"`
	Value    float64 `json:"value,omitempty"` // per second, or bytes per lock
	Unit     string  `json:"unit,omitempty"`
	Ops      int64   `json:"ops,omitempty"`
	Seconds  float64 `json:"seconds,omitempty"`

	P50  time.Duration `json:"p50_ns,omitempty"`
	P99  time.Duration `json:"p99_ns,omitempty"`
	P999 time.Duration `json:"p999_ns,omitempty"`

	// CPUPerOp is CPU seconds per operation; CPUScope says whose CPU.
	CPUPerOp float64 `json:"cpu_seconds_per_op,omitempty"`
	CPUScope string  `json:"cpu_scope,omitempty"`

	// A held-growth row (see growth.go): the event, how long it took and
	// what the members caught up in, the clients' throughput before it
	// (Value is during it), their longest request and errors in it, whether
	// the leader changed, and each member's RSS and their disk in all.
	Event         string        `json:"event,omitempty"`
	Took          time.Duration `json:"took_ns,omitempty"`
	CatchUp       time.Duration `json:"catch_up_ns,omitempty"`
	Normal        float64       `json:"normal_per_second,omitempty"`
	Longest       time.Duration `json:"longest_ns,omitempty"`
	Errors        int           `json:"errors,omitempty"`
	LeaderChanges *int          `json:"leader_changes,omitempty"`
	RSS           [3]int64      `json:"rss_bytes"` // one per member, up to three
	Disk          int64         `json:"disk_bytes,omitempty"`

	Ratio *ratios `json:"ratio_to_redis,omitempty"`
	// Status is "" for a measurement, "error" or "n/a".
	Status string `json:"status,omitempty"`
	Note   string `json:"note,omitempty"`
}

// ratios are a row's figures divided by redis-server's in the same setting.
type ratios struct {
	Value float64 `json:"value,omitempty"`
	P50   float64 `json:"p50,omitempty"`
	P99   float64 `json:"p99,omitempty"`
	P999  float64 `json:"p999,omitempty"`
	CPU   float64 `json:"cpu,omitempty"`
}

func (r row) notApplicable(reason string) row {
	r.Status, r.Note = "n/a", reason
	return r
}

func (r row) failed(err error) row {
	r.Status, r.Note = "error", err.Error()
	return r
}

// fill sets a row's figures from a closed-loop measurement.
func (r row) fill(m measurement, unit string, inst *instance) row {
	if m.err != nil {
		return r.failed(m.err)
	}
	r.Unit = unit
	r.Ops, r.Seconds = m.ops, m.window.Seconds()
	r.Value = float64(m.ops) / m.window.Seconds()
	if m.ops == 0 {
		// A system this slow is a result, not a failure: it shows as zero.
		r.Note = fmt.Sprintf("no operation completed within the %v measured", m.window.Round(time.Millisecond))
		return r
	}
	r.P50, r.P99, r.P999 = m.hist.quantile(0.50), m.hist.quantile(0.99), m.hist.quantile(0.999)
	if m.cpuErr == nil {
		r.CPUPerOp = m.cpu.Seconds() / float64(m.ops)
		r.CPUScope = cpuScope(inst, true)
	}
	return r
}

// cpuScope says whose CPU a row's CPU/op counts. clientsInside is whether
// the load generator runs in the bench process too (it does, but for
// redis-benchmark).
func cpuScope(inst *instance, clientsInside bool) string {
	switch {
	case !inst.inProcess:
		return "server processes"
	case clientsInside:
		return "bench process (server and clients)"
	}
	return "bench process (server; redis-benchmark apart)"
}

// setting identifies what a row measured, apart from the system.
func (r row) setting() string {
	return fmt.Sprintf("%s/c%d/P%d/h%d", r.Workload, r.Clients, r.Pipeline, r.Held)
}

// medianRun returns, of the runs of one point on one system, the run of
// median throughput, whole (its latencies and CPU are that run's), noting the
// range of the others; runs that failed count only when all did.
func medianRun(runs []row) row {
	var ok []row
	for _, r := range runs {
		if r.Status == "" {
			ok = append(ok, r)
		}
	}
	if len(ok) == 0 {
		return runs[0]
	}
	if len(runs) == 1 {
		return ok[0]
	}
	slices.SortFunc(ok, func(a, b row) int { return cmp.Compare(a.Value, b.Value) })
	m := ok[(len(ok)-1)/2]
	note := fmt.Sprintf("median of %d runs, %s to %s", len(ok), fmtRate(ok[0].Value, m.Unit), fmtRate(ok[len(ok)-1].Value, m.Unit))
	if failed := len(runs) - len(ok); failed > 0 {
		note += fmt.Sprintf("; %d failed", failed)
	}
	if m.Note != "" {
		note = m.Note + "; " + note
	}
	m.Note = note
	return m
}

// setRatios divides each measured row by the row of system base in the same setting.
func setRatios(rows []row, base string) {
	baseOf := map[string]row{}
	for _, r := range rows {
		if r.System == base && r.Status == "" {
			baseOf[r.setting()] = r
		}
	}
	div := func(a, b float64) float64 {
		if a == 0 || b == 0 {
			return 0
		}
		return a / b
	}
	for i, r := range rows {
		b, ok := baseOf[r.setting()]
		if !ok || r.Status != "" {
			continue
		}
		rows[i].Ratio = &ratios{
			Value: div(r.Value, b.Value),
			P50:   div(float64(r.P50), float64(b.P50)),
			P99:   div(float64(r.P99), float64(b.P99)),
			P999:  div(float64(r.P999), float64(b.P999)),
			CPU:   div(r.CPUPerOp, b.CPUPerOp),
		}
	}
}

// workloadOrder sorts the table by workload as the issue lists them.
var workloadOrder = []string{"lock", "lock-hot", "setnx", "rb SET", "rb GET", "rb EVALSHA", "held", "memory", "redis-benchmark"}

// sortRows orders rows by workload, setting, then system in the order of systems().
func sortRows(rows []row) {
	sysOrder := map[string]int{}
	for i, s := range systems() {
		sysOrder[s.name] = i
	}
	slices.SortStableFunc(rows, func(a, b row) int {
		if c := slices.Index(workloadOrder, a.Workload) - slices.Index(workloadOrder, b.Workload); c != 0 {
			return c
		}
		for _, c := range []int{a.Pipeline - b.Pipeline, a.Held - b.Held, a.Clients - b.Clients, sysOrder[a.System] - sysOrder[b.System]} {
			if c != 0 {
				return c
			}
		}
		return 0
	})
}

// report is everything a run produced, as --json writes it.
type report struct {
	Date     string            `json:"date"`
	Command  string            `json:"command"`
	Machine  machine           `json:"machine"`
	Config   map[string]string `json:"config"`
	Systems  []systemStatus    `json:"systems"`
	Rows     []row             `json:"rows"`
	Targets  []target          `json:"targets"`
	Duration float64           `json:"run_seconds"`
}

type systemStatus struct {
	Name    string `json:"name"`
	About   string `json:"about"`
	Install string `json:"install"`
	Skipped string `json:"skipped,omitempty"`
}

// target is one of the issues' goals, shown beside what this run measured.
// Nothing is asserted: Status is "met", "not met", "not measured", or "out
// of reach" when even the client alone, with no server, does not meet it.
type target struct {
	Goal     string `json:"goal"`
	Measured string `json:"measured"`
	Status   string `json:"status"`
}

// cell renderers shared by the terminal table and RESULTS.md.

func fmtRate(v float64, unit string) string {
	if unit == "B/lock" {
		return fmt.Sprintf("%.0f %s", v, unit)
	}
	switch {
	case v >= 1e6:
		return fmt.Sprintf("%.2fM %s", v/1e6, unit)
	case v >= 1e4:
		return fmt.Sprintf("%.1fk %s", v/1e3, unit)
	case v >= 1e3:
		return fmt.Sprintf("%.2fk %s", v/1e3, unit)
	default:
		return fmt.Sprintf("%.0f %s", v, unit)
	}
}

func fmtDur(d time.Duration) string {
	if d <= 0 {
		return "-"
	}
	f := float64(d)
	unit, scale := "ns", 1.0
	switch {
	case d >= time.Second:
		unit, scale = "s", 1e9
	case d >= time.Millisecond:
		unit, scale = "ms", 1e6
	case d >= time.Microsecond:
		unit, scale = "µs", 1e3
	}
	v := f / scale
	switch {
	case v >= 100:
		return fmt.Sprintf("%.0f%s", v, unit)
	case v >= 10:
		return fmt.Sprintf("%.1f%s", v, unit)
	default:
		return fmt.Sprintf("%.2f%s", v, unit)
	}
}

func fmtRatio(v float64) string {
	switch {
	case v == 0 || math.IsInf(v, 0) || math.IsNaN(v):
		return "-"
	case v < 0.1:
		return fmt.Sprintf("%.3fx", v)
	}
	return fmt.Sprintf("%.2fx", v)
}

func fmtCPU(r row) string {
	if r.CPUPerOp == 0 {
		return "-"
	}
	s := fmtDur(time.Duration(r.CPUPerOp * 1e9))
	if strings.Contains(r.CPUScope, "clients") {
		s += "*" // includes the clients' CPU
	}
	return s
}

func settingLabel(r row) string {
	switch {
	case r.Workload == "memory":
		return fmt.Sprintf("at %s held", fmtCount(r.Held))
	case r.Held > 0:
		return fmt.Sprintf("c=%d, %s held", r.Clients, fmtCount(r.Held))
	case r.Pipeline > 0:
		return fmt.Sprintf("c=%d -P %d", r.Clients, r.Pipeline)
	case r.Clients > 0:
		return "c=" + strconv.Itoa(r.Clients)
	}
	return ""
}

func fmtCount(n int) string {
	switch {
	case n >= 1e6 && n%1e6 == 0:
		return fmt.Sprintf("%dM", n/1e6)
	case n >= 1e3 && n%1e3 == 0:
		return fmt.Sprintf("%dk", n/1e3)
	}
	return strconv.Itoa(n)
}

var tableHeader = []string{"workload", "setting", "system", "throughput", "x redis", "p50", "x", "p99", "x", "p999", "x", "CPU/op", "x", "note"}

// tableCells renders the measured and failed rows; n/a rows are listed apart.
func tableCells(rows []row, maxNote int) [][]string {
	var out [][]string
	for _, r := range rows {
		if r.Status == "n/a" || r.Workload == "held-growth" || r.Workload == "rolling-restart" || r.Workload == "failover" {
			continue
		}
		note := r.Note
		if r.Status == "error" {
			note = "ERROR: " + note
		}
		if len(note) > maxNote {
			note = note[:maxNote-3] + "..."
		}
		note = strings.ReplaceAll(note, "\n", " ")
		if r.Status != "" {
			out = append(out, []string{r.Workload, settingLabel(r), r.System, "-", "-", "-", "-", "-", "-", "-", "-", "-", "-", note})
			continue
		}
		var q ratios
		if r.Ratio != nil {
			q = *r.Ratio
		}
		out = append(out, []string{r.Workload, settingLabel(r), r.System,
			fmtRate(r.Value, r.Unit), fmtRatio(q.Value),
			fmtDur(r.P50), fmtRatio(q.P50), fmtDur(r.P99), fmtRatio(q.P99), fmtDur(r.P999), fmtRatio(q.P999),
			fmtCPU(r), fmtRatio(q.CPU), note})
	}
	return out
}

// writeTable prints cells in aligned columns, numbers right-aligned; with
// grouped, a blank line separates runs of rows with different first cells.
func writeTable(w io.Writer, header []string, cells [][]string, grouped bool) {
	width := make([]int, len(header))
	for _, line := range append([][]string{header}, cells...) {
		for i, c := range line {
			width[i] = max(width[i], len([]rune(c)))
		}
	}
	left := map[int]bool{0: true, 1: true, 2: true, len(header) - 1: true}
	print := func(line []string) {
		var b strings.Builder
		for i, c := range line {
			pad := strings.Repeat(" ", width[i]-len([]rune(c)))
			if left[i] {
				b.WriteString(c + pad)
			} else {
				b.WriteString(pad + c)
			}
			b.WriteString("  ")
		}
		fmt.Fprintln(w, strings.TrimRight(b.String(), " "))
	}
	print(header)
	prev := ""
	for _, line := range cells {
		if grouped && prev != "" && line[0] != prev {
			fmt.Fprintln(w)
		}
		prev = line[0]
		print(line)
	}
}

var growthHeader = []string{"system", "held", "event", "took", "caught up", "ops/s during", "x before", "p99", "longest", "errors", "leader changes", "B/lock", "RSS MB", "disk MB", "note"}

// growthCells renders the held-growth rows.
func growthCells(rows []row, maxNote int) [][]string {
	var out [][]string
	for _, r := range rows {
		if r.Workload != "held-growth" || r.Status == "n/a" {
			continue
		}
		note := strings.ReplaceAll(r.Note, "\n", " ")
		if r.Status == "error" {
			note = "ERROR: " + note
		}
		if len(note) > maxNote {
			note = note[:maxNote-3] + "..."
		}
		line := []string{r.System, fmtCount(r.Held), r.Event, fmtDur(r.Took), fmtDur(r.CatchUp), "-", "-", fmtDur(r.P99), fmtDur(r.Longest), "-", "-", "-", "-", "-", note}
		if r.Status == "" {
			if r.Unit == "ops/s" {
				line[5] = fmtRate(r.Value, r.Unit)
				if r.Normal > 0 {
					line[6] = fmtRatio(r.Value / r.Normal)
				}
				line[9] = strconv.Itoa(r.Errors)
			}
			if r.LeaderChanges != nil {
				line[10] = strconv.Itoa(*r.LeaderChanges)
			}
			if r.Unit == "B/lock" {
				line[11] = fmt.Sprintf("%.0f", r.Value)
			}
			if r.RSS[0] > 0 {
				line[12] = fmtMB(r.RSS)
			}
			if r.Disk > 0 {
				line[13] = strconv.FormatInt(r.Disk>>20, 10)
			}
		}
		out = append(out, line)
	}
	return out
}

var rollingHeader = []string{"system", "event", "took", "longest write", "refused or unknown", "note"}

// rollingCells renders the rolling-restart and failover rows.
func rollingCells(rows []row, maxNote int) [][]string {
	var out [][]string
	for _, r := range rows {
		if r.Workload != "rolling-restart" && r.Workload != "failover" {
			continue
		}
		note := strings.ReplaceAll(r.Note, "\n", " ")
		if r.Status != "" {
			note = strings.ToUpper(r.Status) + ": " + note
		}
		if len(note) > maxNote {
			note = note[:maxNote-3] + "..."
		}
		line := []string{r.System, r.Event, "-", "-", "-", note}
		if r.Status == "" {
			line[2], line[3], line[4] = fmtDur(r.Took), fmtDur(r.Longest), strconv.Itoa(r.Errors)
		}
		out = append(out, line)
	}
	return out
}

// writeText prints the whole report for a person at a terminal.
func writeText(w io.Writer, rep *report) {
	fmt.Fprintf(w, "\nlockserver bench, %s, %s\n%s\n\n", rep.Date, rep.Machine.summary(), rep.Command)
	writeTable(w, tableHeader, tableCells(rep.Rows, 70), true)
	if cells := growthCells(rep.Rows, 70); len(cells) > 0 {
		fmt.Fprintln(w, "\nheld-growth:")
		writeTable(w, growthHeader, cells, true)
	}
	if cells := rollingCells(rep.Rows, 100); len(cells) > 0 {
		fmt.Fprintln(w, "\nrolling-restart and failover:")
		writeTable(w, rollingHeader, cells, true)
	}
	fmt.Fprintln(w)
	writeLegend(w, rep, false)
}

// writeLegend explains the columns and lists what was not run and why, as
// plain lines or as a Markdown list.
func writeLegend(w io.Writer, rep *report, markdown bool) {
	top, sub := "", "  "
	if markdown {
		top, sub = "- ", "  - "
	}
	fmt.Fprintln(w, top+"x columns: the figure divided by redis-server's (system \"redis\") in the same setting; above 1 is better for throughput, below 1 is better for latency, CPU and memory.")
	fmt.Fprintln(w, top+"CPU/op: CPU time of the server processes per operation (every member of a cluster), from /proc/<pid>/stat; for in-process systems, of the bench process, and * marks those figures that include the clients too.")
	fmt.Fprintln(w, top+"Latency of in-process systems with more clients than cores includes the clients' own wait for a core: Go runs a goroutine that does not block for up to 10 ms before switching, so their p99 and p999 say more about the scheduler than about the server.")
	fmt.Fprintln(w, top+"Workloads:")
	for _, wl := range workloads() {
		fmt.Fprintf(w, "%s%s: %s\n", sub, wl.name, wl.about)
	}
	fmt.Fprintln(w, top+"Systems:")
	for _, s := range rep.Systems {
		line := fmt.Sprintf("%s%s: %s", sub, s.Name, s.About)
		if s.Skipped != "" {
			line += ". SKIPPED: " + strings.ReplaceAll(s.Skipped, "\n", " ")
		}
		fmt.Fprintln(w, line)
	}
	var na []string
	for _, r := range rep.Rows {
		if r.Status == "n/a" {
			na = append(na, fmt.Sprintf("%s %s (%s)", r.System, r.Workload, r.Note))
		}
	}
	if len(na) > 0 {
		fmt.Fprintln(w, top+"Not applicable: "+strings.Join(na, "; ")+".")
	}
}

func writeTargets(w io.Writer, targets []target, markdown bool) {
	if markdown {
		fmt.Fprintln(w, "| goal | measured | status |\n|---|---|---|")
		for _, t := range targets {
			fmt.Fprintf(w, "| %s | %s | %s |\n", t.Goal, t.Measured, t.Status)
		}
		return
	}
	cells := make([][]string, len(targets))
	for i, t := range targets {
		cells[i] = []string{t.Goal, t.Measured, t.Status}
	}
	fmt.Fprintln(w, "\nTargets of the issues (shown, not asserted):")
	writeTable(w, []string{"goal", "measured", "status"}, cells, false)
}

func writeJSON(path string, rep *report) error {
	b, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return fmt.Errorf("write json: %w", err)
	}
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("write json: %w", err)
	}
	return nil
}

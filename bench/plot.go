package main

import (
	"fmt"
	"html"
	"math"
	"os"
	"slices"
	"strings"
	"time"
)

// systemColor gives each system one color in every panel; redis-server, the
// baseline, is the strong orange.
var systemColor = map[string]string{
	"embedded":           "#1b9e77",
	"embedded-do":        "#66c2a5",
	"go-redis-alone":     "#bdbdbd",
	"lockserver":         "#7570b3",
	"lockserver-allcpus": "#b3a6d9",
	"lockserver-raft3":   "#e7298a",
	"redis":              "#d95f02",
	"redis-aof":          "#a6761d",
	"miniredis":          "#8c8c8c",
	"etcd3":              "#1f78b4",
}

const (
	plotW      = 1200
	panelW     = 580
	panelH     = 320
	plotTop    = 100 // title, subtitle and legend
	panelGap   = 20
	marginL    = 70
	marginR    = 20
	marginT    = 34
	marginB    = 46
	fontFamily = "system-ui, -apple-system, 'Segoe UI', Helvetica, Arial, sans-serif"
)

// svg accumulates an SVG document.
type svg struct{ strings.Builder }

func (s *svg) f(format string, args ...any) { fmt.Fprintf(s, format, args...) }

func (s *svg) text(x, y float64, anchor, style, text string) {
	s.f(`<text x="%.1f" y="%.1f" text-anchor="%s" %s>%s</text>`+"\n", x, y, anchor, style, html.EscapeString(text))
}

// panel is one chart's box; inner coordinates exclude the axes' margins.
type panel struct{ x, y float64 }

func (p panel) left() float64   { return p.x + marginL }
func (p panel) right() float64  { return p.x + panelW - marginR }
func (p panel) top() float64    { return p.y + marginT }
func (p panel) bottom() float64 { return p.y + panelH - marginB }

func (p panel) frame(s *svg, title, subtitle string) {
	s.f(`<rect x="%.1f" y="%.1f" width="%d" height="%d" rx="6" fill="#fff" stroke="#ddd"/>`+"\n", p.x, p.y, panelW, panelH)
	s.text(p.x+12, p.y+20, "start", `font-size="14" font-weight="600" fill="#222"`, title)
	if subtitle != "" {
		s.text(p.x+panelW-12, p.y+20, "end", `font-size="11" fill="#777"`, subtitle)
	}
}

func (p panel) empty(s *svg, why string) {
	s.text(p.x+panelW/2, p.y+panelH/2, "middle", `font-size="13" fill="#999"`, why)
}

// series is one system's points in a line chart.
type series struct {
	system string
	xs, ys []float64
}

// lineChart draws ys against xs on a log x axis (client counts, held locks)
// and a linear y axis from zero.
//
// headroom is the fraction of the height kept free above the highest point,
// for labels drawn there.
func (p panel) lineChart(s *svg, all []series, xTicks []float64, xLabel func(float64) string, yUnit string, headroom float64) {
	if len(all) == 0 || len(xTicks) == 0 {
		p.empty(s, "not measured in this run")
		return
	}
	yMax := 0.0
	for _, sr := range all {
		for _, y := range sr.ys {
			yMax = max(yMax, y)
		}
	}
	ticks := niceTicks(yMax * (1 + headroom))
	top := ticks[len(ticks)-1]
	lo, hi := math.Log(xTicks[0]), math.Log(xTicks[len(xTicks)-1])
	px := func(x float64) float64 {
		if hi == lo {
			return (p.left() + p.right()) / 2
		}
		return p.left() + 16 + (math.Log(x)-lo)/(hi-lo)*(p.right()-p.left()-32)
	}
	py := func(y float64) float64 { return p.bottom() - y/top*(p.bottom()-p.top()) }
	for _, t := range ticks {
		s.f(`<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#eee"/>`+"\n", p.left(), py(t), p.right(), py(t))
		s.text(p.left()-6, py(t)+4, "end", `font-size="11" fill="#555"`, fmtCompact(t))
	}
	s.text(p.x+14, (p.top()+p.bottom())/2, "middle", fmt.Sprintf(`font-size="11" fill="#555" transform="rotate(-90 %.1f %.1f)"`, p.x+14, (p.top()+p.bottom())/2), yUnit)
	for _, x := range xTicks {
		s.f(`<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#ccc"/>`+"\n", px(x), p.bottom(), px(x), p.bottom()+4)
		s.text(px(x), p.bottom()+17, "middle", `font-size="11" fill="#555"`, xLabel(x))
	}
	s.f(`<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#999"/>`+"\n", p.left(), p.bottom(), p.right(), p.bottom())
	for _, sr := range all {
		color := systemColor[sr.system]
		var pts []string
		for i := range sr.xs {
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", px(sr.xs[i]), py(sr.ys[i])))
		}
		width := "2"
		if sr.system == baseline {
			width = "3"
		}
		s.f(`<polyline points="%s" fill="none" stroke="%s" stroke-width="%s"/>`+"\n", strings.Join(pts, " "), color, width)
		for i := range sr.xs {
			s.f(`<circle cx="%.1f" cy="%.1f" r="3.5" fill="%s"><title>%s: %s</title></circle>`+"\n",
				px(sr.xs[i]), py(sr.ys[i]), color, sr.system, html.EscapeString(fmtRate(sr.ys[i], yUnit)))
		}
	}
}

// niceTicks returns axis ticks from zero to at least v in steps of 1, 2 or 5
// times a power of ten.
func niceTicks(v float64) []float64 {
	if v <= 0 {
		return []float64{0, 1}
	}
	raw := v / 5
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	step := mag * 10
	for _, m := range []float64{1, 2, 5} {
		if m*mag >= raw {
			step = m * mag
			break
		}
	}
	var ticks []float64
	for t := 0.0; ; t += step {
		ticks = append(ticks, t)
		if t >= v {
			return ticks
		}
	}
}

func fmtCompact(v float64) string {
	switch {
	case v >= 1e6:
		return strings.TrimSuffix(strings.TrimSuffix(fmt.Sprintf("%.1f", v/1e6), "0"), ".") + "M"
	case v >= 1e3:
		return strings.TrimSuffix(strings.TrimSuffix(fmt.Sprintf("%.1f", v/1e3), "0"), ".") + "k"
	}
	return fmt.Sprintf("%.0f", v)
}

// seriesOf collects, per system, the measured rows of one workload.
func seriesOf(rows []row, workload string, x func(row) float64) []series {
	by := map[string]*series{}
	for _, r := range rows {
		if r.Workload != workload || r.Status != "" {
			continue
		}
		sr := by[r.System]
		if sr == nil {
			sr = &series{system: r.System}
			by[r.System] = sr
		}
		sr.xs, sr.ys = append(sr.xs, x(r)), append(sr.ys, r.Value)
	}
	var out []series
	for _, name := range systemNames() {
		if sr := by[name]; sr != nil {
			out = append(out, *sr)
		}
	}
	return out
}

func xValues(all []series) []float64 {
	var xs []float64
	for _, sr := range all {
		for _, x := range sr.xs {
			if !slices.Contains(xs, x) {
				xs = append(xs, x)
			}
		}
	}
	slices.Sort(xs)
	return xs
}

// latencyChart draws p50, p99 and p999 of one setting per system on a log
// axis: a bar from p50 to p999 with the three marked.
func (p panel) latencyChart(s *svg, rs []row) {
	if len(rs) == 0 {
		p.empty(s, "not measured in this run")
		return
	}
	lo, hi := math.Inf(1), 0.0
	for _, r := range rs {
		lo = min(lo, float64(r.P50))
		hi = max(hi, float64(max(r.P999, r.P99)))
	}
	dLo, dHi := math.Floor(math.Log10(lo)), math.Ceil(math.Log10(hi))
	if dHi == dLo {
		dHi++
	}
	// The axis leaves room for system names on the left and each row's
	// figures on the right.
	left, right := p.left()+40, p.right()-150
	px := func(d time.Duration) float64 {
		return left + (math.Log10(float64(d))-dLo)/(dHi-dLo)*(right-left)
	}
	for d := dLo; d <= dHi; d++ {
		x := left + (d-dLo)/(dHi-dLo)*(right-left)
		s.f(`<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#eee"/>`+"\n", x, p.top(), x, p.bottom())
		s.text(x, p.bottom()+17, "middle", `font-size="11" fill="#555"`, fmtDecade(time.Duration(math.Pow(10, d))))
	}
	band := (p.bottom() - p.top()) / float64(len(rs))
	for i, r := range rs {
		color := systemColor[r.System]
		y := p.top() + band*(float64(i)+0.5)
		s.text(left-10, y+4, "end", `font-size="11" fill="#333"`, r.System)
		end := r.P999
		if end == 0 {
			end = r.P99
		}
		s.f(`<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="6" stroke-opacity="0.35" stroke-linecap="round"/>`+"\n", px(r.P50), y, px(end), y, color)
		s.f(`<circle cx="%.1f" cy="%.1f" r="5" fill="%s"><title>p50 %s</title></circle>`+"\n", px(r.P50), y, color, fmtDur(r.P50))
		s.f(`<circle cx="%.1f" cy="%.1f" r="5" fill="#fff" stroke="%s" stroke-width="2"><title>p99 %s</title></circle>`+"\n", px(r.P99), y, color, fmtDur(r.P99))
		if r.P999 > 0 {
			s.f(`<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="2.5"><title>p999 %s</title></line>`+"\n", px(r.P999), y-7, px(r.P999), y+7, color, fmtDur(r.P999))
		}
		s.text(right+14, y+4, "start", `font-size="10" fill="#666"`, fmt.Sprintf("%s / %s / %s", fmtDur(r.P50), fmtDur(r.P99), fmtDur(r.P999)))
	}
	s.f(`<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#999"/>`+"\n", left, p.bottom(), right, p.bottom())
	// Marker key.
	kx, ky := left, p.bottom()+34
	s.f(`<circle cx="%.1f" cy="%.1f" r="4" fill="#555"/>`, kx, ky-4)
	s.text(kx+8, ky, "start", `font-size="10" fill="#555"`, "p50")
	s.f(`<circle cx="%.1f" cy="%.1f" r="4" fill="#fff" stroke="#555" stroke-width="2"/>`, kx+44, ky-4)
	s.text(kx+52, ky, "start", `font-size="10" fill="#555"`, "p99")
	s.f(`<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#555" stroke-width="2.5"/>`, kx+90, ky-10, kx+90, ky+2)
	s.text(kx+96, ky, "start", `font-size="10" fill="#555"`, "p999 (log scale)")
}

// fmtDecade labels a power of ten of nanoseconds: 100µs, 1ms, 10ms.
func fmtDecade(d time.Duration) string {
	switch {
	case d >= time.Second:
		return fmt.Sprintf("%gs", d.Seconds())
	case d >= time.Millisecond:
		return fmt.Sprintf("%gms", float64(d)/1e6)
	case d >= time.Microsecond:
		return fmt.Sprintf("%gµs", float64(d)/1e3)
	}
	return fmt.Sprintf("%dns", d)
}

// barChart draws grouped vertical bars: one group per label, one bar per system.
func (p panel) barChart(s *svg, groups []string, systemsIn []string, value func(group, system string) (float64, bool), unit string) {
	yMax := 0.0
	for _, g := range groups {
		for _, sys := range systemsIn {
			if v, ok := value(g, sys); ok {
				yMax = max(yMax, v)
			}
		}
	}
	if yMax == 0 {
		p.empty(s, "not measured in this run")
		return
	}
	ticks := niceTicks(yMax)
	top := ticks[len(ticks)-1]
	py := func(y float64) float64 { return p.bottom() - y/top*(p.bottom()-p.top()) }
	for _, t := range ticks {
		s.f(`<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#eee"/>`+"\n", p.left(), py(t), p.right(), py(t))
		s.text(p.left()-6, py(t)+4, "end", `font-size="11" fill="#555"`, fmtCompact(t))
	}
	s.text(p.x+14, (p.top()+p.bottom())/2, "middle", fmt.Sprintf(`font-size="11" fill="#555" transform="rotate(-90 %.1f %.1f)"`, p.x+14, (p.top()+p.bottom())/2), unit)
	groupW := (p.right() - p.left()) / float64(len(groups))
	barW := (groupW - 12) / float64(max(1, len(systemsIn)))
	for gi, g := range groups {
		gx := p.left() + float64(gi)*groupW + 6
		for si, sys := range systemsIn {
			v, ok := value(g, sys)
			if !ok {
				continue
			}
			x := gx + float64(si)*barW
			s.f(`<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"><title>%s %s: %s</title></rect>`+"\n",
				x, py(v), max(barW-1, 1), p.bottom()-py(v), systemColor[sys], sys, html.EscapeString(g), html.EscapeString(fmtRate(v, unit)))
		}
		s.text(gx+groupW/2-6, p.bottom()+17, "middle", `font-size="11" fill="#555"`, g)
	}
	s.f(`<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#999"/>`+"\n", p.left(), p.bottom(), p.right(), p.bottom())
}

// latencyClients picks the client count the latency panel shows: 50, the
// issue's reference, or the largest measured below it.
func latencyClients(rows []row) int {
	best := 0
	for _, r := range rows {
		if r.Workload == "lock" && r.Status == "" && r.Clients <= 50 {
			best = max(best, r.Clients)
		}
	}
	return best
}

// writePlot writes the chart: throughput against clients for the three lock
// workloads, latency percentiles, redis-benchmark and the scale workload.
func writePlot(path string, rep *report) error {
	var s svg
	rowsN := 3
	height := plotTop + rowsN*(panelH+panelGap)
	s.f(`<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="%s">`+"\n", plotW, height, plotW, height, fontFamily)
	s.f(`<rect width="100%%" height="100%%" fill="#f7f7f8"/>` + "\n")
	s.text(20, 30, "start", `font-size="20" font-weight="700" fill="#111"`, "lockserver vs redis-server, miniredis and etcd")
	command := rep.Command
	if len(command) > 120 {
		command = command[:117] + "..."
	}
	s.text(20, 50, "start", `font-size="11" fill="#666"`, fmt.Sprintf("%s · %d CPUs, %s · %s", rep.Date, rep.Machine.CPUs, rep.Machine.Kernel, command))

	// Legend: one swatch per system measured.
	measured := map[string]bool{}
	for _, r := range rep.Rows {
		if r.Status == "" {
			measured[r.System] = true
		}
	}
	lx := 20.0
	for _, name := range systemNames() {
		if !measured[name] {
			continue
		}
		s.f(`<rect x="%.1f" y="64" width="14" height="14" rx="3" fill="%s"/>`+"\n", lx, systemColor[name])
		s.text(lx+20, 76, "start", `font-size="12" fill="#333"`, name)
		lx += 30 + float64(len(name))*7.5
	}
	var skipped []string
	for _, st := range rep.Systems {
		if st.Skipped != "" {
			skipped = append(skipped, st.Name)
		}
	}
	if len(skipped) > 0 {
		s.text(plotW-20, 76, "end", `font-size="11" fill="#999"`, "not run: "+strings.Join(skipped, ", "))
	}

	at := func(col, row int) panel {
		return panel{x: 10 + float64(col)*(panelW+panelGap), y: plotTop + float64(row)*(panelH+panelGap)}
	}
	byClients := func(r row) float64 { return float64(r.Clients) }
	clientLabel := func(x float64) string { return fmt.Sprintf("%.0f", x) }

	p := at(0, 0)
	p.frame(&s, "Redisson lock + unlock, one key per client", "ops/s vs clients")
	sr := seriesOf(rep.Rows, "lock", byClients)
	p.lineChart(&s, sr, xValues(sr), clientLabel, "ops/s", 0)

	p = at(1, 0)
	c := latencyClients(rep.Rows)
	p.frame(&s, fmt.Sprintf("Latency per operation, lock cycles at %d clients", c), "p50 · p99 · p999")
	var lat []row
	for _, name := range systemNames() {
		if r, ok := find(rep.Rows, name, "lock", c, 0); ok {
			lat = append(lat, r)
		}
	}
	p.latencyChart(&s, lat)

	p = at(0, 1)
	p.frame(&s, "Hot keys: Redisson waiters subscribe and retry", "acquisitions/s vs clients")
	sr = seriesOf(rep.Rows, "lock-hot", byClients)
	p.lineChart(&s, sr, xValues(sr), clientLabel, "acq/s", 0)

	p = at(1, 1)
	p.frame(&s, "SET NX PX + compare-and-delete (redsync)", "ops/s vs clients")
	sr = seriesOf(rep.Rows, "setnx", byClients)
	p.lineChart(&s, sr, xValues(sr), clientLabel, "ops/s", 0)

	p = at(0, 2)
	p.frame(&s, "redis-benchmark -c 50", "requests/s")
	var groups, rbSystems []string
	for _, pl := range rbPipelines {
		for _, t := range rbTests {
			groups = append(groups, fmt.Sprintf("%s -P%d", t.name, pl))
		}
	}
	for _, name := range systemNames() {
		for _, r := range rep.Rows {
			if strings.HasPrefix(r.Workload, "rb ") && r.System == name && r.Status == "" {
				rbSystems = append(rbSystems, name)
				break
			}
		}
	}
	p.barChart(&s, groups, rbSystems, func(g, sys string) (float64, bool) {
		name, pl, _ := strings.Cut(g, " -P")
		for _, r := range rep.Rows {
			if r.System == sys && r.Workload == "rb "+name && fmt.Sprint(r.Pipeline) == pl && r.Status == "" {
				return r.Value, true
			}
		}
		return 0, false
	}, "req/s")

	p = at(1, 2)
	held := 0
	for _, r := range rep.Rows {
		if r.Workload == "held" && r.Status == "" {
			held = r.Clients
		}
	}
	p.frame(&s, fmt.Sprintf("Lock cycles at %d clients as held locks grow", held), "ops/s vs held locks; memory per lock")
	sr = seriesOf(rep.Rows, "held", func(r row) float64 { return float64(r.Held) })
	p.lineChart(&s, sr, xValues(sr), func(x float64) string { return fmtCount(int(x)) }, "ops/s", 0.6)
	// Bytes per held lock, the other half of the scale workload.
	y := p.top() + 4
	for _, name := range systemNames() {
		if r, ok := memoryRow(rep.Rows, name); ok {
			s.text(p.right()-4, y, "end", fmt.Sprintf(`font-size="11" fill="%s"`, systemColor[name]),
				fmt.Sprintf("%s: %.0f B/lock", name, r.Value))
			y += 14
		}
	}
	s.f("</svg>\n")
	if err := os.WriteFile(path, []byte(s.String()), 0o644); err != nil {
		return fmt.Errorf("write plot: %w", err)
	}
	return nil
}

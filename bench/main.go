// Command bench measures lockserver side by side with the lock stores people
// run today: redis-server with and without fsync, miniredis and etcd.
//
//	cd bench
//	go run .                 # every system, every workload (about 15 minutes)
//	go run . --quick         # fewer points, under 3 minutes on 2 cores
//	go run . --quick --smoke # seconds: proves the harness works (CI)
//
// It is a module of its own, so that its clients of the systems it measures
// (etcd's, with gRPC and zap) are no dependency of the library's module.
//
// It starts every system itself on free loopback ports, measures each setting
// of each workload on every system in turn (so that a ratio compares figures
// taken moments apart), stops them, and prints one table with each figure's
// ratio to redis-server's. --json, --plot and --markdown write the
// same results as JSON, an SVG chart and RESULTS.md.
package main

import (
	"context"
	"crypto/rand"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// config is the command line, with the presets of --quick and --smoke applied
// under any flag given explicitly.
type config struct {
	duration, warmup time.Duration
	clients          []int
	systems          []string
	workloads        []string
	requests         int
	held             int
	growth           []int // held-growth's sizes
	expire           int   // held-growth's mass expiry
	repeat           int
	jsonPath         string
	plotPath         string
	mdPath           string
	note             string
	quick, smoke     bool
	keep             bool
}

// preset is what --quick and --smoke change.
type preset struct {
	duration, warmup time.Duration
	clients          string
	requests, held   int
	growth           string
	expire           int
}

var (
	fullPreset  = preset{duration: 5 * time.Second, warmup: time.Second, clients: "1,16,50,256", requests: 200000, held: 1000000, growth: "1000000,5000000", expire: 1000000}
	quickPreset = preset{duration: 500 * time.Millisecond, warmup: 150 * time.Millisecond, clients: "1,16,50,256", requests: 10000, held: 100000, growth: "100000,300000", expire: 100000}
	smokePreset = preset{duration: 100 * time.Millisecond, warmup: 30 * time.Millisecond, clients: "1,4", requests: 500, held: 2000, growth: "2000,5000", expire: 2000}
)

func parseFlags(args []string, stderr io.Writer) (*config, error) {
	cfg := &config{}
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var systemList, workloadList, clientList, growthList string
	fs.DurationVar(&cfg.duration, "duration", fullPreset.duration, "measured `time` of each point (after the warm-up)")
	fs.DurationVar(&cfg.warmup, "warmup", fullPreset.warmup, "warm-up `time` before each point, not counted")
	fs.StringVar(&clientList, "clients", fullPreset.clients, "concurrent client `counts`, comma-separated")
	fs.StringVar(&systemList, "systems", "all", "`systems` to run, comma-separated: "+strings.Join(systemNames(), ","))
	fs.StringVar(&workloadList, "workloads", "all", "`workloads` to run, comma-separated: "+strings.Join(workloadNames(), ",")+" (all: every one but held-growth, unless --smoke, and rolling-restart)")
	fs.IntVar(&cfg.requests, "requests", fullPreset.requests, "redis-benchmark requests per test (-n)")
	fs.IntVar(&cfg.held, "held", fullPreset.held, "held locks at the end of the scale workload")
	fs.StringVar(&growthList, "growth", fullPreset.growth, "held-growth: the held-lock `counts` it loads and measures at, comma-separated")
	fs.IntVar(&cfg.expire, "expire", fullPreset.expire, "held-growth: how many locks expire together in its mass expiry")
	fs.IntVar(&cfg.repeat, "repeat", 1, "measure each point `n` times, the systems taking turns, and keep each system's median run (a busy host moves single runs by a third)")
	fs.StringVar(&cfg.jsonPath, "json", "", "write the results as JSON to `file`")
	fs.StringVar(&cfg.plotPath, "plot", "", "write an SVG chart to `file`")
	fs.StringVar(&cfg.mdPath, "markdown", "", "write the results as Markdown to `file` (bench/RESULTS.md)")
	fs.StringVar(&cfg.note, "note", "", "a paragraph to put in the Markdown results, e.g. about the machine's load")
	fs.BoolVar(&cfg.quick, "quick", false, "fewer and shorter points: under 3 minutes on 2 cores")
	fs.BoolVar(&cfg.smoke, "smoke", false, "tiny durations and sizes, only to prove the harness works")
	fs.BoolVar(&cfg.keep, "keep", false, "keep the temporary directory of the servers' data and logs, and print its path")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	for _, p := range []struct {
		on bool
		preset
	}{{cfg.quick, quickPreset}, {cfg.smoke, smokePreset}} {
		if !p.on {
			continue
		}
		if !set["duration"] {
			cfg.duration = p.duration
		}
		if !set["warmup"] {
			cfg.warmup = p.warmup
		}
		if !set["clients"] {
			clientList = p.clients
		}
		if !set["requests"] {
			cfg.requests = p.requests
		}
		if !set["held"] {
			cfg.held = p.held
		}
		if !set["growth"] {
			growthList = p.growth
		}
		if !set["expire"] {
			cfg.expire = p.expire
		}
	}
	var err error
	if cfg.clients, err = parseCounts(clientList); err != nil {
		return nil, fmt.Errorf("--clients: %w", err)
	}
	if cfg.growth, err = parseSizes(growthList); err != nil {
		return nil, fmt.Errorf("--growth: %w", err)
	}
	if cfg.systems, err = choose(systemList, systemNames()); err != nil {
		return nil, fmt.Errorf("--systems: %w", err)
	}
	if cfg.workloads, err = choose(workloadList, workloadNames()); err != nil {
		return nil, fmt.Errorf("--workloads: %w", err)
	}
	// held-growth loads millions of locks and restarts servers for the best
	// part of an hour: it runs when named, or at --smoke's sizes.
	// rolling-restart builds the previous release from this clone's history:
	// it runs when named.
	if workloadList == "all" {
		cfg.workloads = slices.DeleteFunc(cfg.workloads, func(w string) bool {
			return w == "held-growth" && !cfg.smoke || w == "rolling-restart"
		})
	}
	switch {
	case cfg.duration <= 0:
		return nil, errors.New("--duration must be positive")
	case cfg.warmup < 0:
		return nil, errors.New("--warmup must not be negative")
	case cfg.requests <= 0:
		return nil, errors.New("--requests must be positive")
	case cfg.held < 1000:
		return nil, errors.New("--held must be at least 1000")
	case cfg.expire < 1000:
		return nil, errors.New("--expire must be at least 1000")
	case cfg.repeat < 1:
		return nil, errors.New("--repeat must be at least 1")
	}
	return cfg, nil
}

func parseCounts(list string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(list, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 || n > 10000 {
			return nil, fmt.Errorf("%q is not a client count from 1 to 10000", f)
		}
		if !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out, nil
}

// parseSizes parses held-lock counts, in increasing order.
func parseSizes(list string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(list, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1000 || n > 100_000_000 {
			return nil, fmt.Errorf("%q is not a count from 1000 to 100000000", f)
		}
		if !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out, nil
}

// choose resolves a comma-separated selection ("all" for every name) against
// the known names, keeping their order.
func choose(list string, known []string) ([]string, error) {
	if list == "all" {
		return known, nil
	}
	want := map[string]bool{}
	for _, f := range strings.Split(list, ",") {
		f = strings.TrimSpace(f)
		if !slices.Contains(known, f) {
			return nil, fmt.Errorf("unknown name %q (known: %s)", f, strings.Join(known, ", "))
		}
		want[f] = true
	}
	var out []string
	for _, k := range known {
		if want[k] {
			out = append(out, k)
		}
	}
	return out, nil
}

func systemNames() []string {
	var out []string
	for _, s := range systems() {
		out = append(out, s.name)
	}
	return out
}

func workloadNames() []string {
	var out []string
	for _, w := range workloads() {
		out = append(out, w.name)
	}
	return out
}

// bench is the state of one run.
type bench struct {
	cfg      *config
	scripts  *scripts
	tmp      string
	progress *progress
	ownerID  string // the UUID part of Redisson's "uuid:threadId" lock owners
	seq      atomic.Int64

	buildOnce sync.Once
	binary    string
	buildErr  error

	certsOnce sync.Once // see certs
	certsVal  *benchCerts
	certsErr  error
}

// prefix returns a fresh key prefix, so that no run sees another's keys.
func (b *bench) prefix() string { return fmt.Sprintf("bench:%d", b.seq.Add(1)) }

// owner is client i's lock owner, shaped as Redisson's uuid:threadId.
func (b *bench) owner(i int) string { return b.ownerID + ":" + strconv.Itoa(i+1) }

func (b *bench) tempDir(name string) (string, error) {
	dir, err := os.MkdirTemp(b.tmp, name+"-")
	if err != nil {
		return "", fmt.Errorf("temporary directory: %w", err)
	}
	return dir, nil
}

func newOwnerID() string {
	u := make([]byte, 16)
	rand.Read(u)
	return fmt.Sprintf("%x-%x-%x-%x-%x", u[0:4], u[4:6], u[6:8], u[8:10], u[10:])
}

// started is a system that is running.
type started struct {
	sys  system
	inst *instance
}

// runAll starts every system, measures each point of each workload on every
// system in turn, then runs each system's sequences and stops it.
func (b *bench) runAll(ctx context.Context, chosen []system, wls []workload) ([]systemStatus, []row) {
	var statuses []systemStatus
	var live []started
	defer func() {
		for _, l := range live {
			l.inst.stop()
		}
	}()
	stepsPerSystem := 0
	for _, w := range wls {
		stepsPerSystem += w.stepsOn(b)
	}
	for _, sys := range chosen {
		st := systemStatus{Name: sys.name, About: sys.about, Install: sys.install}
		b.progress.status("starting " + sys.name)
		inst, err := sys.start(ctx, b)
		if err != nil {
			st.Skipped = err.Error()
			if !errors.As(err, new(skipError)) {
				st.Skipped = "failed to start: " + st.Skipped
			}
			b.progress.printf("%s skipped: %s", sys.name, strings.ReplaceAll(st.Skipped, "\n", " "))
			b.progress.skip(stepsPerSystem)
		} else {
			live = append(live, started{sys, inst})
		}
		statuses = append(statuses, st)
	}

	var rows []row
	for _, w := range wls {
		if w.points == nil {
			continue
		}
		for i, p := range w.points(b) {
			runs := make([][]row, len(live))
			for round := range b.cfg.repeat {
				for j, l := range live {
					if ctx.Err() != nil {
						return statuses, rows
					}
					if why := w.skipOn(l.inst); why != "" {
						if i == 0 && round == 0 {
							rows = append(rows, row{Workload: w.name, System: l.sys.name}.notApplicable(why))
						}
						b.progress.skip(1)
						continue
					}
					runs[j] = append(runs[j], p(ctx, b, l.sys, l.inst))
				}
			}
			for _, r := range runs {
				if len(r) > 0 {
					rows = append(rows, medianRun(r))
				}
			}
		}
	}
	for len(live) > 0 {
		l := live[0]
		for _, w := range wls {
			if w.sequence == nil || ctx.Err() != nil {
				continue
			}
			if why := w.skipOn(l.inst); why != "" {
				rows = append(rows, row{Workload: w.name, System: l.sys.name}.notApplicable(why))
				b.progress.skip(w.steps(b))
				continue
			}
			rows = append(rows, w.sequence(ctx, b, l.sys, l.inst)...)
		}
		// Stopped before the next system's sequence, so that its held
		// locks no longer weigh on the machine (or on this process's GC).
		b.progress.status("stopping " + l.sys.name)
		l.inst.stop()
		live = live[1:]
	}
	return statuses, rows
}

// commandLine is the command that reproduces this run from the project root,
// quoted for a shell.
func commandLine(args []string) string {
	words := []string{"cd", "bench", "&&", "go", "run", "."}
	for _, a := range args {
		if a == "" || strings.ContainsFunc(a, func(r rune) bool { return !strings.ContainsRune(shellSafe, r) }) {
			a = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
		words = append(words, a)
	}
	return strings.Join(words, " ")
}

const shellSafe = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_=+,./:@%"

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	began := time.Now()
	cfg, err := parseFlags(args, stderr)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	sc, err := loadScripts()
	if err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "lockserver-bench-")
	if err != nil {
		return fmt.Errorf("temporary directory: %w", err)
	}
	if cfg.keep {
		fmt.Fprintln(stderr, "bench: keeping", tmp)
	} else {
		defer os.RemoveAll(tmp)
	}
	b := &bench{cfg: cfg, scripts: sc, tmp: tmp, ownerID: newOwnerID(), progress: newProgress(stderr)}

	var chosenSystems []system
	for _, s := range systems() {
		if slices.Contains(cfg.systems, s.name) {
			chosenSystems = append(chosenSystems, s)
		}
	}
	var chosenWorkloads []workload
	stepsPerSystem := 0
	for _, w := range workloads() {
		if slices.Contains(cfg.workloads, w.name) {
			chosenWorkloads = append(chosenWorkloads, w)
			stepsPerSystem += w.stepsOn(b)
		}
	}
	rep := &report{
		Date:    began.UTC().Format("2006-01-02 15:04 UTC"),
		Command: commandLine(args),
		Machine: describeMachine(),
		Config: map[string]string{
			"duration": cfg.duration.String(), "warmup": cfg.warmup.String(),
			"clients": fmt.Sprint(cfg.clients), "requests": strconv.Itoa(cfg.requests),
			"held": strconv.Itoa(cfg.held), "growth": fmt.Sprint(cfg.growth), "expire": strconv.Itoa(cfg.expire),
		},
	}
	b.progress.start(len(chosenSystems) * stepsPerSystem)
	rep.Systems, rep.Rows = b.runAll(ctx, chosenSystems, chosenWorkloads)
	b.progress.stop()
	if ctx.Err() != nil {
		fmt.Fprintln(stderr, "bench: interrupted; the table shows what was measured")
	}

	setRatios(rep.Rows, baseline)
	sortRows(rep.Rows)
	rep.Targets = targets(rep.Rows)
	rep.Duration = time.Since(began).Seconds()
	writeText(stdout, rep)
	writeTargets(stdout, rep.Targets, false)

	var errs []error
	if cfg.jsonPath != "" {
		errs = append(errs, writeJSON(cfg.jsonPath, rep))
	}
	if cfg.plotPath != "" {
		errs = append(errs, writePlot(cfg.plotPath, rep))
	}
	if cfg.mdPath != "" {
		errs = append(errs, writeMarkdown(cfg.mdPath, cfg.plotPath, cfg.note, rep))
	}
	return errors.Join(errs...)
}

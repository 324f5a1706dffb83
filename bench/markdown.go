package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// writeMarkdown writes the report as bench/RESULTS.md reads: how to run and
// install, the machine, the chart, the table and the targets.
func writeMarkdown(path, plotPath, note string, rep *report) error {
	var b strings.Builder
	fmt.Fprintf(&b, "# lockserver bench results\n\n")
	fmt.Fprintf(&b, "Measured %s with:\n\n    %s\n\n", rep.Date, rep.Command)
	if note != "" {
		fmt.Fprintf(&b, "%s\n\n", note)
	}
	fmt.Fprintf(&b, "Machine: `nproc` %d (%s), `free -g` total %s, kernel %s, %s; %s; %s; load average at start %s. The run took %.0f s.\n\n",
		rep.Machine.CPUs, rep.Machine.CPU, rep.Machine.Memory, rep.Machine.Kernel, rep.Machine.Go,
		orNone(rep.Machine.Redis, "no redis-server"), orNone(rep.Machine.Etcd, "no etcd"), rep.Machine.Loadavg, rep.Duration)

	b.WriteString("## Running it\n\n")
	b.WriteString("`go run .` in `bench/` (a module of its own) starts every system on free loopback ports, runs every workload against each, stops them and prints the table. Each setting is measured on every system back to back, so that a ratio compares figures taken moments apart; only the held-locks workload runs system by system, each system stopping after it. ")
	b.WriteString("`--quick` takes under 3 minutes on 2 cores; `--smoke` shrinks every duration to prove the harness works (CI: `go run . --quick --smoke`). ")
	b.WriteString("`--systems`, `--workloads`, `--clients`, `--duration` choose what runs; `--repeat N` measures each point N times, the systems taking turns, and keeps each system's median run, for a host whose load moves single runs; `--json FILE`, `--plot FILE.svg` and `--markdown FILE` write the results. `go run . --help` lists every flag.\n\n")
	b.WriteString("A system that is not installed is skipped with the reason printed. To install each:\n\n")
	for _, s := range systems() {
		fmt.Fprintf(&b, "- **%s** (%s): %s.\n", s.name, s.about, s.install)
	}
	b.WriteString("\n")

	if plotPath != "" {
		rel, err := filepath.Rel(filepath.Dir(path), plotPath)
		if err != nil {
			rel = plotPath
		}
		fmt.Fprintf(&b, "## Chart\n\n![throughput vs clients, latency percentiles, redis-benchmark and held locks](%s)\n\n", filepath.ToSlash(rel))
	}

	b.WriteString("## Table\n\n")
	writeMarkdownTable(&b, tableHeader, tableCells(rep.Rows, 160))
	b.WriteString("\n")
	if cells := growthCells(rep.Rows, 300); len(cells) > 0 {
		b.WriteString("## held-growth\n\n")
		writeMarkdownTable(&b, growthHeader, cells)
		b.WriteString("\n")
	}
	if cells := rollingCells(rep.Rows, 300); len(cells) > 0 {
		b.WriteString("## rolling-restart and failover\n\n")
		writeMarkdownTable(&b, rollingHeader, cells)
		b.WriteString("\n")
	}
	writeLegend(&b, rep, true)
	b.WriteString("\n## Targets (shown, not asserted)\n\n")
	writeTargets(&b, rep.Targets, true)
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		return fmt.Errorf("write markdown: %w", err)
	}
	return nil
}

// writeMarkdownTable writes cells under header as a Markdown table.
func writeMarkdownTable(b *strings.Builder, header []string, cells [][]string) {
	b.WriteString("| " + strings.Join(header, " | ") + " |\n|")
	for range header {
		b.WriteString("---|")
	}
	b.WriteString("\n")
	for _, line := range cells {
		for i := range line {
			line[i] = strings.ReplaceAll(line[i], "|", "\\|")
		}
		b.WriteString("| " + strings.Join(line, " | ") + " |\n")
	}
}

func orNone(s, none string) string {
	if s == "" {
		return none
	}
	return s
}

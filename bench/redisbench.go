package main

import (
	"bytes"
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// rbTest is one redis-benchmark test: a built-in one (-t) or a command line.
type rbTest struct {
	name string
	// args select the test: "-t set" or the command to send.
	args func(b *bench) []string
	// check sends the same command once through go-redis, so that a system
	// answering errors shows an error row rather than the rate of its errors
	// (redis-benchmark counts error replies as requests).
	check func(ctx context.Context, b *bench, c respClient) error
}

var rbTests = []rbTest{
	{name: "SET", args: func(*bench) []string { return []string{"-t", "set"} },
		check: func(ctx context.Context, b *bench, c respClient) error {
			_, err := c.do(ctx, "SET", "key:__rand_int__", "xxx")
			return err
		}},
	{name: "GET", args: func(*bench) []string { return []string{"-t", "get"} },
		check: func(ctx context.Context, b *bench, c respClient) error {
			_, err := c.do(ctx, "GET", "key:__rand_int__")
			return err
		}},
	{name: "EVALSHA", args: func(b *bench) []string {
		// The locks outlive the run (an hour's lease), so that none expires
		// while the held-locks workload reads memory.
		return []string{"EVALSHA", b.scripts.lock.Hash(), "1", "bench:rb:lock:__rand_int__", strconv.Itoa(int(heldLease.Milliseconds())), b.owner(0)}
	}, check: checkLockScriptLoaded},
}

// checkLockScriptLoaded loads redisson_lock.lua with SCRIPT LOAD, as a
// Redisson deployment warms its cache, and runs it once by its SHA1.
func checkLockScriptLoaded(ctx context.Context, b *bench, c respClient) error {
	sha, err := c.do(ctx, "SCRIPT", "LOAD", b.scripts.lock.src)
	if err != nil {
		return fmt.Errorf("SCRIPT LOAD: %w", err)
	}
	if sha != b.scripts.lock.Hash() {
		return fmt.Errorf("SCRIPT LOAD replied %v, want the script's SHA1 %s", sha, b.scripts.lock.Hash())
	}
	if _, err := c.do(ctx, "EVALSHA", sha, 1, "bench:rb:check", leaseMs, b.owner(0)); err != nil {
		return fmt.Errorf("EVALSHA: %w", err)
	}
	return nil
}

// rbPipelines are the pipeline depths each test runs at.
var rbPipelines = []int{1, 16}

// rbClients is redis-benchmark's connection count, as the issues measured it.
const rbClients = 50

func redisBenchmarkSkip(inst *instance) string {
	_, err := exec.LookPath("redis-benchmark")
	switch {
	case inst.addr == "" && inst.sameServerAs != "":
		return "same server as " + inst.sameServerAs + ", whose row measures it over loopback"
	case inst.addr == "":
		return "not a Redis-protocol server"
	case err != nil:
		return "redis-benchmark is not installed; " + redisInstall
	}
	return ""
}

func redisBenchmarkPoints(b *bench) []point {
	var out []point
	for _, pipeline := range rbPipelines {
		for _, t := range rbTests {
			out = append(out, func(ctx context.Context, b *bench, sys system, inst *instance) row {
				b.progress.step(fmt.Sprintf("%s redis-benchmark %s -P %d", sys.name, t.name, pipeline))
				r := row{Workload: "rb " + t.name, System: sys.name, Clients: rbClients, Pipeline: pipeline}
				c := inst.client(1)
				err := t.check(ctx, b, c)
				c.close()
				if err != nil {
					return r.failed(err)
				}
				return b.redisBenchmark(ctx, inst, t, pipeline, r)
			})
		}
	}
	return out
}

// redisBenchmark runs one redis-benchmark test and reads its CSV line.
func (b *bench) redisBenchmark(ctx context.Context, inst *instance, t rbTest, pipeline int, r row) row {
	bin, err := exec.LookPath("redis-benchmark")
	if err != nil {
		return r.failed(err)
	}
	host, port, _ := strings.Cut(inst.addr, ":")
	args := []string{"-h", host, "-p", port, "-c", strconv.Itoa(rbClients), "-n", strconv.Itoa(b.cfg.requests),
		"-P", strconv.Itoa(pipeline), "-r", "100000", "-q", "--csv"}
	args = append(args, t.args(b)...)
	// A server that stops answering must not hang the run: allow far more
	// than the slowest system here needs (2 ms a request, about 500/s).
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second+time.Duration(b.cfg.requests)*2*time.Millisecond)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cpu0, err0 := inst.cpu()
	start := time.Now()
	err = cmd.Run()
	elapsed := time.Since(start)
	cpu1, err1 := inst.cpu()
	if err != nil {
		return r.failed(fmt.Errorf("redis-benchmark: %w: %s", err, strings.TrimSpace(stderr.String()+stdout.String())))
	}
	res, err := parseRedisBenchmarkCSV(stdout.Bytes())
	if err != nil {
		return r.failed(err)
	}
	r.Value, r.Unit = res.rps, "req/s"
	r.Ops, r.Seconds = int64(b.cfg.requests), elapsed.Seconds()
	r.P50, r.P99 = res.p50, res.p99
	if err := errors.Join(err0, err1); err == nil {
		r.CPUPerOp = (cpu1 - cpu0).Seconds() / float64(b.cfg.requests)
		r.CPUScope = cpuScope(inst, false)
	}
	return r
}

type rbResult struct {
	rps      float64
	p50, p99 time.Duration
}

// parseRedisBenchmarkCSV reads the output of redis-benchmark -q --csv: a
// header line naming the columns, then one line per test.
func parseRedisBenchmarkCSV(out []byte) (rbResult, error) {
	recs, err := csv.NewReader(bytes.NewReader(out)).ReadAll()
	if err != nil {
		return rbResult{}, fmt.Errorf("redis-benchmark output: %w: %q", err, out)
	}
	if len(recs) < 2 {
		return rbResult{}, fmt.Errorf("redis-benchmark output has no result line: %q", out)
	}
	col := map[string]int{}
	for i, h := range recs[0] {
		col[h] = i
	}
	last := recs[len(recs)-1]
	field := func(name string) (float64, error) {
		i, ok := col[name]
		if !ok || i >= len(last) {
			return 0, fmt.Errorf("redis-benchmark output has no %s column: %q", name, out)
		}
		v, err := strconv.ParseFloat(last[i], 64)
		if err != nil {
			return 0, fmt.Errorf("redis-benchmark %s: %w", name, err)
		}
		return v, nil
	}
	rps, err1 := field("rps")
	p50, err2 := field("p50_latency_ms")
	p99, err3 := field("p99_latency_ms")
	if err := errors.Join(err1, err2, err3); err != nil {
		return rbResult{}, err
	}
	ms := func(v float64) time.Duration { return time.Duration(v * float64(time.Millisecond)) }
	return rbResult{rps: rps, p50: ms(p50), p99: ms(p99)}, nil
}

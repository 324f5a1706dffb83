package compat_test

import (
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// infoLines parses the "name:value" lines of one INFO section into a map.
func infoLines(reply string) map[string]string {
	out := map[string]string{}
	for _, line := range strings.Split(reply, "\r\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && !strings.HasPrefix(line, "#") && !strings.HasPrefix(line, "$") && !strings.HasPrefix(line, "=") {
			out[k] = v
		}
	}
	return out
}

// subFields parses "a=1,b=2" into a map.
func subFields(v string) map[string]string {
	out := map[string]string{}
	for _, kv := range strings.Split(v, ",") {
		k, v, _ := strings.Cut(kv, "=")
		out[k] = v
	}
	return out
}

// The commands that have run, how often, how many were rejected before
// running and how many failed are Redis's own figures for the same commands;
// only the times differ.
func TestDiffInfoCommandStats(t *testing.T) {
	p := newPair(t)
	p.Run([][]string{
		{"SET", "a", "1"},
		{"GET", "a"},
		{"GET", "nosuch"},
		{"SET", "a"},            // wrong arity: rejected
		{"NOSUCHCOMMAND"},       // unknown: in no command's figures
		{"CONFIG", "NOSUCH"},    // unknown subcommand: likewise
		{"INCR", "a"},           // 2
		{"HSET", "a", "f", "v"}, // WRONGTYPE: failed
		{"INCRBY", "a", "x"},    // not an integer: failed
		{"CONFIG", "GET", "maxmemory"},
		{"MULTI"},
		{"SET", "b", "1"},
		{"LPUSH", "a", "x"}, // fails inside EXEC
		{"EXEC"},
		{"MULTI"},
		{"GET"}, // rejected while queuing: EXEC aborts
		{"EXEC"},
		{"PING"},
	})
	// EXEC's commands have no latency of their own (see docs/operations.md).
	compareCommandStats(t, p, "commandstats", "errorstats")
	// INFO and INFO ALL: commandstats and latencystats only in the second.
	for _, args := range [][]string{{"INFO"}, {"INFO", "ALL"}, {"INFO", "everything"}} {
		for _, sec := range []string{"# Commandstats", "# Latencystats"} {
			if w, g := strings.Contains(p.redis.Do(args...), sec), strings.Contains(p.ls.Do(args...), sec); w != g {
				t.Errorf("%q: has %q: lockserver %v, redis-server %v", args, sec, g, w)
			}
		}
	}
	p.Do("CONFIG", "RESETSTAT")
	p.Do("GET", "a")
	norm := regexp.MustCompile(`usec=\d+,usec_per_call=[\d.]+`)
	p.DoNorm(func(s string) string { return sortLines(norm.ReplaceAllString(s, "usec=U")) }, "INFO", "commandstats")
}

// compareCommandStats compares INFO sections of the pair (commandstats,
// errorstats, latencystats) but for the times: which commands have a line,
// and their counts.
func compareCommandStats(t *testing.T, p *pair, sections ...string) {
	t.Helper()
	for _, section := range sections {
		want := infoLines(p.redis.Do("INFO", section))
		got := infoLines(p.ls.Do("INFO", section))
		if len(want) == 0 {
			t.Fatalf("redis-server's INFO %s is empty", section)
		}
		for name, wv := range want {
			gv, ok := got[name]
			if !ok {
				t.Errorf("INFO %s: lockserver has no %s (redis-server: %s)", section, name, wv)
				continue
			}
			w, g := subFields(wv), subFields(gv)
			for _, f := range []string{"calls", "rejected_calls", "failed_calls", "count"} {
				if w[f] != g[f] {
					t.Errorf("INFO %s %s: %s=%s, redis-server %s", section, name, f, g[f], w[f])
				}
			}
			if section == "commandstats" {
				for _, f := range []string{"usec", "usec_per_call"} {
					if _, err := strconv.ParseFloat(g[f], 64); err != nil {
						t.Errorf("INFO commandstats %s: %s=%q is not a number", name, f, g[f])
					}
				}
			}
		}
		for name := range got {
			if _, ok := want[name]; !ok {
				t.Errorf("INFO %s: lockserver has %s, redis-server has not", section, name)
			}
		}
	}
}

// The commands a script calls count as Redis 7.0 counts them: each that ran
// in commandstats (calls, failed_calls), latencystats and
// total_commands_processed; each refused before it ran (arity, a command
// scripts may not call, a write from EVAL_RO, OOM) as rejected; every error
// they were given in errorstats and total_error_replies, once: a script
// that raises or returns a command's error (ignore_error_stats_update) does
// not count it again, though the script still fails.
func TestDiffInfoScriptCalls(t *testing.T) {
	p := newPair(t)
	p.Run([][]string{
		{"SET", "s", "str"},
		{"CONFIG", "RESETSTAT"},
		{"EVAL", "redis.call('set', KEYS[1], '1'); return redis.call('get', KEYS[1])", "1", "a"},
		{"EVAL", "redis.pcall('incr', 's'); return 1", "0"},                                    // failed, swallowed
		{"EVAL", "return redis.pcall('incr', 's')", "0"},                                       // failed, returned
		{"EVAL", "redis.call('lpush', 's', 'x')", "0"},                                         // failed, raised
		{"EVAL", "return redis.call('GEOADD', 's', '13.361389', '38.115556', 'Palermo')", "0"}, // WRONGTYPE, raised
		{"FUNCTION", "LOAD", "#!lua name=stats\nredis.register_function('fw', function(keys) return redis.call('incr', keys[1]) end)\n" +
			"redis.register_function{function_name='fr', callback=function(keys) return redis.call('get', keys[1]) end, flags={'no-writes'}}"},
		{"FCALL", "fw", "1", "n"},
		{"FCALL", "fw", "1", "s"}, // failed
		{"FCALL_RO", "fr", "1", "n"},
		{"FCALL_RO", "fw", "1", "n"}, // refused: a write function
		{"FCALL", "nosuch", "0"},
		{"EVAL", "redis.pcall('incr', 's'); return redis.error_reply('XY no')", "0"},
		{"EVAL", "redis.pcall('get'); return 1", "0"},                // arity: rejected
		{"EVAL", "redis.pcall('nosuchcommand'); return 1", "0"},      // unknown: an error only
		{"EVAL", "return redis.pcall('subscribe', 'ch')", "0"},       // not from scripts
		{"EVAL", "return redis.pcall('eval', 'return 1', '0')", "0"}, // likewise
		{"EVAL_RO", "return redis.pcall('set', 'b', '1')", "0"},      // a write from EVAL_RO
		{"EVAL", "return {err='ERR mine', ignore_error_stats_update=true}", "0"},
		{"EVAL", "error({err='ERR raised', ignore_error_stats_update=true})", "0"},
		{"EVALSHA", "a8e7b8a0b8b07f5b4b9f7d7aa98bd3a1c9d3f1f3", "1", "h"}, // NOSCRIPT
		{"MULTI"},
		{"EVAL", "return redis.call('set', 'c', '1')", "0"},
		{"SET", "d", "1"},
		{"EXEC"},
		{"CONFIG", "SET", "maxmemory", "1"},
		{"EVAL", "redis.pcall('get', 'a'); return redis.pcall('set', 'a', '2')", "0"}, // OOM: rejected
		{"CONFIG", "SET", "maxmemory", "0"},
	})
	loaded := strings.Split(p.Do("SCRIPT", "LOAD", "return redis.call('hincrby', KEYS[1], 'f', 1)"), "\r\n")
	p.Do("EVALSHA", loaded[1], "1", "h")
	compareCommandStats(t, p, "commandstats", "errorstats", "latencystats")
	for _, f := range []string{"total_commands_processed", "total_error_replies"} {
		// Asked of both in the same order, so that each counts the same INFOs.
		w, g := infoLines(p.redis.Do("INFO", "stats"))[f], infoLines(p.ls.Do("INFO", "stats"))[f]
		if w != g || w == "" {
			t.Errorf("INFO stats %s: %s, redis-server %s", f, g, w)
		}
	}
}

// sortLines sorts the lines of a reply: Redis lists commands in the order of
// its hash table, lockserver in its command table's.
// The length of the bulk string goes, as the figures' widths differ.
func sortLines(s string) string {
	lines := strings.Split(s, "\r\n")
	if strings.HasPrefix(lines[0], "$") {
		lines[0] = "$"
	}
	slices.Sort(lines)
	return strings.Join(lines, "\r\n")
}

// latencystats: a line per command that ran, with the configured
// percentiles in Redis's format; latency-tracking no stops it.
func TestDiffInfoLatencyStats(t *testing.T) {
	p := newPair(t)
	norm := regexp.MustCompile(`=\d+\.\d{3}`)
	normalise := func(s string) string { return sortLines(norm.ReplaceAllString(s, "=N")) }
	p.Run([][]string{
		{"CONFIG", "RESETSTAT"},
		{"SET", "a", "1"},
		{"GET", "a"},
		{"GET", "a"},
		{"CONFIG", "GET", "latency-tracking"},
		{"CONFIG", "GET", "latency-tracking-info-percentiles"},
		{"CONFIG", "SET", "latency-tracking", "maybe"},
		{"CONFIG", "SET", "latency-tracking-info-percentiles", "abc"},
		{"CONFIG", "SET", "latency-tracking-info-percentiles", "101"},
		{"CONFIG", "SET", "latency-tracking-info-percentiles", "-1"},
	})
	// Redis counts INFO's own latency once it has run: ask twice.
	p.redis.Do("INFO", "latencystats")
	p.ls.Do("INFO", "latencystats")
	p.DoNorm(normalise, "INFO", "latencystats")
	p.Run([][]string{
		{"CONFIG", "SET", "latency-tracking-info-percentiles", "99.99 50.0 3"},
		{"CONFIG", "GET", "latency-tracking-info-percentiles"},
	})
	p.DoNorm(normalise, "INFO", "latencystats")
	p.Run([][]string{
		{"CONFIG", "SET", "latency-tracking-info-percentiles", ""},
		{"CONFIG", "GET", "latency-tracking-info-percentiles"},
	})
	p.DoNorm(normalise, "INFO", "latencystats")
	p.Run([][]string{
		{"CONFIG", "SET", "latency-tracking-info-percentiles", "50"},
		{"CONFIG", "RESETSTAT"},
		{"CONFIG", "SET", "latency-tracking", "no"},
		{"SET", "a", "2"},
	})
	p.DoNorm(normalise, "INFO", "latencystats")
	// The percentiles are ordered and positive.
	p.Do("CONFIG", "SET", "latency-tracking", "yes")
	p.Do("CONFIG", "SET", "latency-tracking-info-percentiles", "50 99 99.9")
	for range 20 {
		p.ls.Do("GET", "a")
	}
	f := subFields(infoLines(p.ls.Do("INFO", "latencystats"))["latency_percentiles_usec_get"])
	var last float64
	for _, q := range []string{"p50", "p99", "p99.9"} {
		v, err := strconv.ParseFloat(f[q], 64)
		if err != nil || v <= 0 || v < last {
			t.Errorf("latency_percentiles_usec_get %s=%q after %v", q, f[q], last)
		}
		last = v
	}
}

// INFO stats counts each read of a client's connection and each write of
// its replies: one of each for a command the client sends and waits for.
func TestDiffInfoReadsWrites(t *testing.T) {
	p := newPair(t)
	p.Do("CONFIG", "RESETSTAT")
	for range 5 {
		p.Do("PING")
	}
	p.Do("SET", "k", "v")
	w, g := infoLines(p.redis.Do("INFO", "stats")), infoLines(p.ls.Do("INFO", "stats"))
	for _, f := range []string{"total_reads_processed", "total_writes_processed"} {
		if w[f] == "" || g[f] != w[f] {
			t.Errorf("INFO stats %s: %q, redis-server %q", f, g[f], w[f])
		}
	}
}

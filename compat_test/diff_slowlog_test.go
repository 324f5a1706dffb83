package compat_test

import (
	"crypto/sha1"
	"encoding/hex"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// normSlow replaces what differs by nature in slow log entries: times,
// durations and client ports.
func normSlow(s string) string {
	s = slowTimes.ReplaceAllString(s, "${1}:T\r\n:D\r\n")
	return slowAddr.ReplaceAllString(s, "$$A\r\n127.0.0.1:P\r\n")
}

var (
	slowTimes = regexp.MustCompile(`(\*6\r\n:\d+\r\n):\d+\r\n:\d+\r\n`)
	slowAddr  = regexp.MustCompile(`\$\d+\r\n127\.0\.0\.1:\d+\r\n`)
)

func TestDiffSlowlog(t *testing.T) {
	p := newPair(t)
	long := strings.Repeat("x", 200)
	many := []string{"DEL"}
	for i := range 40 {
		many = append(many, "k"+string(rune('a'+i%26)))
	}
	p.Run([][]string{
		{"SLOWLOG"},
		{"SLOWLOG", "FOO"},
		{"SLOWLOG", "HELP"},
		{"SLOWLOG", "LEN", "x"},
		{"SLOWLOG", "RESET", "x"},
		{"SLOWLOG", "GET", "abc"},
		{"SLOWLOG", "GET", "-2"},
		{"CONFIG", "GET", "slowlog-log-slower-than"},
		{"CONFIG", "GET", "slowlog-max-len"},
		{"CONFIG", "SET", "slowlog-log-slower-than", "abc"},
		{"CONFIG", "SET", "slowlog-log-slower-than", "-5"},
		{"CONFIG", "SET", "slowlog-max-len", "-1"},
		{"CONFIG", "SET", "slowlog-max-len", "abc"},
		{"SLOWLOG", "RESET"},
		{"SLOWLOG", "LEN"},
		{"CONFIG", "SET", "slowlog-log-slower-than", "0"},
		{"SET", "a", "1"},
		{"GET", "a"},
		{"SET", "b", long},
		many,
		{"AUTH", "user", "secret"},
		{"CLIENT", "SETNAME", "probe"},
		{"GET", "nosuch"},
		{"SLOWLOG", "LEN"},
	})
	p.DoNorm(normSlow, "SLOWLOG", "GET")
	p.DoNorm(normSlow, "SLOWLOG", "GET", "2")
	p.DoNorm(normSlow, "SLOWLOG", "GET", "0")
	p.DoNorm(normSlow, "SLOWLOG", "GET", "-1")
	p.Run([][]string{
		{"CONFIG", "SET", "slowlog-max-len", "3"},
		{"SLOWLOG", "LEN"},
		{"CONFIG", "SET", "slowlog-log-slower-than", "-1"},
		{"SET", "c", "1"},
		{"SLOWLOG", "LEN"},
		{"CONFIG", "SET", "slowlog-max-len", "128"},
	})
	p.DoNorm(normSlow, "SLOWLOG", "GET", "-1")
	p.Run([][]string{{"SLOWLOG", "RESET"}, {"SLOWLOG", "LEN"}, {"SLOWLOG", "GET"}})
	p.DoNorm(normID, "HELLO", "3")
	p.Do("CONFIG", "SET", "slowlog-log-slower-than", "0")
	p.Do("GET", "a")
	p.DoNorm(normSlow, "SLOWLOG", "GET", "1")
}

// A slow script's entry names it by its SHA1: EVALSHA's argument, and, a
// difference from Redis, beside EVAL's body.
func TestSlowlogNamesScripts(t *testing.T) {
	p := newPair(t)
	body := "return redis.call('get', KEYS[1])"
	sum := sha1.Sum([]byte(body))
	sha := hex.EncodeToString(sum[:])
	c := p.ls
	c.Do("CONFIG", "SET", "slowlog-log-slower-than", "0")
	c.Do("EVAL", body, "1", "k")
	c.Do("EVALSHA", sha, "1", "k")
	got := c.Do("SLOWLOG", "GET", "2")
	if !strings.Contains(got, body+" (sha1 "+sha+")") {
		t.Errorf("EVAL's entry does not carry the script's SHA1 %s: %q", sha, got)
	}
	if !strings.Contains(got, "$40\r\n"+sha+"\r\n") {
		t.Errorf("EVALSHA's entry does not carry its SHA1 %s: %q", sha, got)
	}
}

// normLatency replaces times and latencies in LATENCY replies, and the
// buckets of LATENCY HISTOGRAM.
func normLatency(s string) string {
	s = latencyBuckets.ReplaceAllString(s, "$$14\r\nhistogram_usec\r\nH")
	return latencyInts.ReplaceAllString(s, ":N\r\n")
}

var (
	latencyBuckets = regexp.MustCompile(`\$14\r\nhistogram_usec\r\n[*%]\d+\r\n(?::\d+\r\n)*`)
	latencyInts    = regexp.MustCompile(`:\d+\r\n`)
)

func TestDiffLatency(t *testing.T) {
	p := newPair(t)
	p.Run([][]string{
		{"LATENCY"},
		{"LATENCY", "FOO"},
		{"LATENCY", "LATEST", "x"},
		{"LATENCY", "HISTORY"},
		{"LATENCY", "HISTORY", "command"},
		{"LATENCY", "LATEST"},
		{"LATENCY", "RESET"},
		{"LATENCY", "RESET", "foo", "bar"},
		{"CONFIG", "GET", "latency-monitor-threshold"},
		{"CONFIG", "SET", "latency-monitor-threshold", "-1"},
		{"CONFIG", "SET", "latency-monitor-threshold", "abc"},
		{"CONFIG", "RESETSTAT"},
		{"SET", "a", "1"},
		{"GET", "a"},
		{"GET", "a"},
		{"LATENCY", "HISTOGRAM", "nosuch"},
	})
	p.DoNorm(normLatency, "LATENCY", "HISTOGRAM", "nosuch", "get", "GET", "set")
	p.DoNorm(normLatency, "LATENCY", "HISTOGRAM", "config|resetstat")
	// Without a name: every command that ran, in an order of its own.
	names := regexp.MustCompile(`\$\d+\r\n([a-z|]+)\r\n\*4\r\n\$5\r\ncalls`)
	list := func(reply string) []string {
		var out []string
		for _, m := range names.FindAllStringSubmatch(reply, -1) {
			out = append(out, m[1])
		}
		slices.Sort(out)
		return out
	}
	if want, got := list(p.redis.Do("LATENCY", "HISTOGRAM")), list(p.ls.Do("LATENCY", "HISTOGRAM")); !slices.Equal(got, want) || len(got) < 3 {
		t.Errorf("LATENCY HISTOGRAM lists %v, redis-server %v", got, want)
	}
	// A script that takes milliseconds on both servers is a "command" event.
	p.Run([][]string{
		{"CONFIG", "SET", "latency-monitor-threshold", "1"},
		{"EVAL", "local s = string.rep('x', 10000000) return #s", "0"},
		{"LATENCY", "RESET", "fast-command"},
	})
	p.DoNorm(normLatency, "LATENCY", "LATEST")
	p.DoNorm(normLatency, "LATENCY", "HISTORY", "command")
	p.Run([][]string{{"LATENCY", "RESET"}, {"LATENCY", "LATEST"},
		// DOCTOR with no event: enabled (at a threshold no command reaches),
		// then disabled.
		{"CONFIG", "SET", "latency-monitor-threshold", "1000000"},
		{"LATENCY", "DOCTOR"},
		{"CONFIG", "SET", "latency-monitor-threshold", "0"},
		{"LATENCY", "DOCTOR"},
		{"LATENCY", "DOCTOR", "x"},
	})
	// HELP lists what lockserver has: Redis's, less GRAPH.
	want := strings.Split(p.redis.Do("LATENCY", "HELP"), "\r\n")
	var kept []string
	for i := 0; i < len(want); i++ {
		if strings.HasPrefix(want[i], "+GRAPH") {
			i++ // and its description
			continue
		}
		kept = append(kept, want[i])
	}
	kept[0] = "*" + strconv.Itoa(len(kept)-2)
	if got := p.ls.Do("LATENCY", "HELP"); got != strings.Join(kept, "\r\n") {
		t.Errorf("LATENCY HELP: %q, want Redis's less GRAPH: %q", got, strings.Join(kept, "\r\n"))
	}
	// A command with subcommands stands for those that ran.
	p.DoNorm(normLatency, "CONFIG", "RESETSTAT")
	p.DoNorm(normLatency, "CLIENT", "ID")
	p.DoNorm(normLatency, "CLIENT", "GETNAME")
	for _, args := range [][]string{{"LATENCY", "HISTOGRAM", "client"}, {"LATENCY", "HISTOGRAM", "client|id", "config"}} {
		redisNames, lsNames := list(p.redis.Do(args...)), list(p.ls.Do(args...))
		if len(redisNames) == 0 || !slices.Equal(lsNames, redisNames) {
			t.Errorf("%q names:\n redis-server: %v\n   lockserver: %v", args, redisNames, lsNames)
		}
	}
	p.DoNorm(normID, "HELLO", "3")
	p.DoNorm(normLatency, "LATENCY", "HISTOGRAM", "get")
}

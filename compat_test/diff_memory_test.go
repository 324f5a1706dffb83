package compat_test

import (
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// MEMORY against redis-server: the replies that can match it byte for byte
// (errors, null, HELP's lines) do; MEMORY USAGE's figure is lockserver's own
// estimate, so it is checked for what holds on both servers: an integer
// above 0 that grows with the value.

func TestDiffMemory(t *testing.T) {
	p := newPair(t)
	for _, proto := range []string{"2", "3"} {
		p.redis.Do("HELLO", proto)
		p.ls.Do("HELLO", proto)
		p.Run([][]string{
			{"SET", "k", "v"},
			{"MEMORY"}, {"memory"}, {"MEMORY", "NOPE"}, {"memory", "nope", "x"},
			{"MEMORY", "a\r\nb"}, {"MEMORY", strings.Repeat("x", 200)},
			{"MEMORY", "USAGE"}, {"memory", "usage"}, {"MEMORY", "HELP", "x"},
			{"MEMORY", "USAGE", "nokey"}, {"MEMORY", "USAGE", "nokey", "SAMPLES", "0"},
			{"MEMORY", "USAGE", "nokey", "SAMPLES", "x"}, {"MEMORY", "USAGE", "nokey", "foo"},
			{"MEMORY", "USAGE", "k", "SAMPLES"}, {"MEMORY", "USAGE", "k", "samples", "x"},
			{"MEMORY", "USAGE", "k", "SAMPLES", "-1"}, {"MEMORY", "USAGE", "k", "SAMPLES", "1.5"},
			{"MEMORY", "USAGE", "k", "SAMPLES", "99999999999999999999"},
			{"MEMORY", "USAGE", "k", "foo", "1"}, {"MEMORY", "USAGE", "k", "SAMPLES", "1", "foo"},
			{"MEMORY", "USAGE", "k", "SAMPLES", "1", "SAMPLES"},
			// A script gets the same null (false) for a missing key.
			{"EVAL", "return redis.call('memory', 'usage', KEYS[1])", "1", "nokey"},
			{"EVAL", "return redis.call('memory', 'usage', KEYS[1], 'samples', 'x')", "1", "k"},
			{"MULTI"}, {"MEMORY", "USAGE", "nokey"}, {"MEMORY", "USAGE", "k", "SAMPLES", "-1"}, {"EXEC"},
		})
	}

	// The figure: an integer above 0, for every form of SAMPLES, in a script
	// too; more for a longer value and for a hash with more fields.
	usage := func(who string, c *rawClient, args ...string) int64 {
		t.Helper()
		r := c.Do(args...)
		n, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimPrefix(r, ":"), "\r\n"), 10, 64)
		if !strings.HasPrefix(r, ":") || err != nil || n <= 0 {
			t.Fatalf("%s: %q = %q, want an integer above 0", who, args, r)
		}
		return n
	}
	for who, c := range map[string]*rawClient{"redis-server": p.redis, "lockserver": p.ls} {
		c.Do("SET", "short", "v")
		c.Do("SET", "along", strings.Repeat("v", 100))
		c.Do("HSET", "h1", "f1", "v")
		c.Do("HSET", "h5", "f1", "v", "f2", "v", "f3", "v", "f4", "v", "f5", "v")
		for _, args := range [][]string{{"SAMPLES", "0"}, {"SAMPLES", "5"}, {"samples", "1", "SAMPLES", "2"}} {
			usage(who, c, append([]string{"MEMORY", "USAGE", "short"}, args...)...)
		}
		usage(who, c, "EVAL", "return redis.call('memory', 'usage', KEYS[1])", "1", "short")
		if s, l := usage(who, c, "MEMORY", "USAGE", "short"), usage(who, c, "MEMORY", "USAGE", "along"); l <= s {
			t.Errorf("%s: MEMORY USAGE of a 1-byte value %d, of a 100-byte value %d", who, s, l)
		}
		if one, five := usage(who, c, "MEMORY", "USAGE", "h1"), usage(who, c, "MEMORY", "USAGE", "h5"); five <= one {
			t.Errorf("%s: MEMORY USAGE of a hash of 1 field %d, of 5 fields %d", who, one, five)
		}
	}

	// An expired key has no figure. Redis reports one until it reclaims the
	// key (MEMORY USAGE does not expire it); lockserver never does.
	p.Do("SET", "brief", "v", "PX", "1")
	waitFor(t, func() string {
		if r := p.redis.Do("MEMORY", "USAGE", "brief"); r != "_\r\n" {
			return "redis-server to reclaim an expired key: MEMORY USAGE " + r
		}
		return ""
	})
	p.Do("MEMORY", "USAGE", "brief")

	// PURGE answers as Redis's does; the subcommands that report on Redis's
	// allocator do not exist, with Redis's error for an unknown one.
	// DOCTOR on a server that holds little answers Redis's text.
	p.Do("MEMORY", "PURGE")
	p.Do("MEMORY", "PURGE", "now")
	p.Do("MEMORY", "DOCTOR", "now")
	// DOCTOR on a server that holds little gives Redis's verdict for one.
	// This lockserver's heap is the test process's: it holds little only
	// while INFO's used_memory is under 5 MB.
	redisDoc, lsDoc := p.redis.Do("MEMORY", "DOCTOR"), p.ls.Do("MEMORY", "DOCTOR")
	used, _ := strconv.ParseInt(regexp.MustCompile(`used_memory:(\d+)`).FindStringSubmatch(p.ls.Do("INFO", "memory"))[1], 10, 64)
	switch {
	case !strings.Contains(redisDoc, "this instance is empty"):
		t.Errorf("MEMORY DOCTOR of an empty redis-server: %q", redisDoc)
	case used < 5<<20 && lsDoc != redisDoc:
		t.Errorf("MEMORY DOCTOR with used_memory %d: %q, want redis-server's %q", used, lsDoc, redisDoc)
	case used >= 5<<20 && !strings.Contains(lsDoc, "Hi Sam, I can't find any memory issue") && !strings.Contains(lsDoc, "Sam, I detected a few issues"):
		t.Errorf("MEMORY DOCTOR with used_memory %d: %q, want one of Redis's verdicts", used, lsDoc)
	}
	for _, sub := range []string{"STATS", "MALLOC-STATS"} {
		want := "-ERR unknown subcommand '" + sub + "'. Try MEMORY HELP.\r\n"
		if got := p.ls.Do("MEMORY", sub); got != want {
			t.Errorf("MEMORY %s: %q, want %q", sub, got, want)
		}
	}
	// HELP lists Redis's lines for what exists, in Redis's order.
	redisHelp, _ := parseTree(p.redis.Do("MEMORY", "HELP"))
	lsHelp, _ := parseTree(p.ls.Do("MEMORY", "HELP"))
	var want []string
	keep := true // the title line; then a subcommand's line and its indented ones
	for _, l := range redisHelp.elems {
		if !strings.HasPrefix(l.str, " ") && !strings.HasPrefix(l.str, "MEMORY ") {
			keep = strings.HasPrefix(l.str, "USAGE ") || l.str == "DOCTOR" || l.str == "PURGE" || l.str == "HELP"
		}
		if keep {
			want = append(want, string(l.typ)+l.str)
		}
	}
	var got []string
	for _, l := range lsHelp.elems {
		got = append(got, string(l.typ)+l.str)
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("MEMORY HELP:\n redis-server's lines for USAGE and HELP:\n%s\n lockserver:\n%s", strings.Join(want, "\n"), strings.Join(got, "\n"))
	}
}

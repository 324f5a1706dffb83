package compat_test

import (
	"regexp"
	"slices"
	"strings"
	"testing"
)

// monitorLine matches the time and the client's port in a MONITOR line.
var monitorLine = regexp.MustCompile(`^\+\d+\.\d{6} \[(\d+) (?:127\.0\.0\.1:\d+|lua)`)

func normMonitor(s string) string {
	return monitorLine.ReplaceAllStringFunc(s, func(m string) string {
		sub := monitorLine.FindStringSubmatch(m)
		who := "C"
		if strings.HasSuffix(m, "lua") {
			who = "lua"
		}
		return "+T [" + sub[1] + " " + who
	})
}

// readUntil reads MONITOR lines until one holds marker.
func readUntil(t *testing.T, c *rawClient, marker string) []string {
	t.Helper()
	var lines []string
	for {
		l := c.Read()
		if !strings.HasPrefix(l, "+") || !monitorLine.MatchString(l) {
			t.Fatalf("not a MONITOR line: %q (after %q)", l, lines)
		}
		lines = append(lines, normMonitor(l))
		if strings.Contains(l, marker) {
			return lines
		}
	}
}

// MONITOR shows each command another client runs as redis-server shows it:
// time, database, client and quoted arguments; a script's calls as "lua";
// passwords redacted; administrative and refused commands left out.
func TestDiffMonitor(t *testing.T) {
	p := newPair(t)
	mon := p.another()
	mon.Do("MONITOR")
	p.Run([][]string{
		{"SET", "a b", "x\"y\nz\\\t"},
		{"GET", "a b"},
		{"EVAL", "redis.call('set','k','v') redis.call('select','3') return redis.pcall('incr','k')", "0"},
		{"EVAL", "return redis.pcall('nosuch')", "0"},
		{"FUNCTION", "LOAD", "#!lua name=mon\nredis.register_function('f', function(keys, args) redis.call('set', keys[1], args[1]) return redis.call('get', keys[1]) end)"},
		{"FCALL", "f", "1", "fk", "fv"},
		{"FCALL", "nosuch", "0"},
		{"CONFIG", "GET", "maxmemory"},
		{"AUTH", "foo", "bar"},
		{"SET", "a"},
		{"NOSUCH"},
		{"SLOWLOG", "LEN"},
		{"SELECT", "2"},
		{"GET", "x"},
		{"SET", "bin", "\x01\xff\x7f"},
		{"MULTI"},
		{"SET", "m", "1"},
		{"INCR", "m"},
		{"EXEC"},
		{"SELECT", "0"},
		{"PING", "end"},
	})
	want, got := readUntil(t, mon.redis, `"end"`), readUntil(t, mon.ls, `"end"`)
	if !slices.Equal(got, want) {
		t.Errorf("MONITOR lines:\n redis-server: %q\n   lockserver: %q", want, got)
	}
	// The monitor's own commands: PING answered and shown, data commands
	// refused, a second MONITOR ignored (no reply), RESET ends it.
	mon.Send("PING")
	mon.Read()
	if w, g := normMonitor(mon.redis.Read()), normMonitor(mon.ls.Read()); w != g {
		t.Errorf("the monitor's own PING: redis-server %q, lockserver %q", w, g)
	}
	mon.Do("GET", "x")
	mon.Send("MONITOR")
	mon.Do("RESET")
	mon.Do("GET", "a b")
	p.Do("SET", "after", "1")
	mon.Do("PING", "quiet") // no MONITOR line came before this reply
}

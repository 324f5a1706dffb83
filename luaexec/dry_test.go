package luaexec

import (
	"testing"

	"github.com/lockserver/lockserver/internal/lockscripts"
	"github.com/lockserver/lockserver/keyspace"
)

// dry runs one command as a dry run (keyspace.Call.Dry).
func (h *harness) dry(args ...string) keyspace.Reply {
	c := h.call(args)
	c.Dry = true
	return h.e.exec(c, false)
}

// holder describes a lock key as reads see it.
func (h *harness) holder(key string) string {
	return show(h.read("HGETALL", key)) + " pttl " + show(h.read("PTTL", key))
}

// A dry run of a lock script answers as the real run does when the lock is
// another's, and stops, having changed nothing, where the real run writes.
func TestDryRunOfLockScripts(t *testing.T) {
	lock := lockscripts.MustSource(t, "redisson_lock.lua")
	unlock := lockscripts.MustSource(t, "redisson_unlock_v2.lua")
	h := newHarness(t, Options{})
	h.do("SCRIPT", "LOAD", lock)
	h.do("SCRIPT", "LOAD", unlock)
	for _, c := range []struct {
		name       string
		args       []string
		wouldWrite bool
	}{
		{"lock, free", []string{"EVAL", lock, "1", "l", "30000", "me"}, true},
		{"lock, mine", []string{"EVAL", lock, "1", "l", "30000", "me"}, true},
		{"lock, another's", []string{"EVAL", lock, "1", "l", "30000", "other"}, false},
		{"unlock, another's", []string{"EVAL", unlock, "2", "l", "ch", "0", "30000", "other", "rlk", "m"}, false},
		{"unlock, mine", []string{"EVAL", unlock, "2", "l", "ch", "0", "30000", "me", "rlk", "m"}, true},
		{"unlock, free", []string{"EVAL", unlock, "2", "l", "ch", "0", "30000", "me", "rlk", "m"}, true}, // it publishes
	} {
		before := h.holder("l")
		got := h.dry(c.args...)
		if after := h.holder("l"); after != before {
			t.Errorf("%s: the dry run changed the lock from %s to %s", c.name, before, after)
		}
		real := h.do(c.args...)
		switch {
		case c.wouldWrite && !got.IsWouldWrite():
			t.Errorf("%s: dry run answered %s, want WouldWrite (the real run writes: %s)", c.name, show(got), h.holder("l"))
		case !c.wouldWrite && show(got) != show(real):
			t.Errorf("%s: dry run answered %s, the real run %s", c.name, show(got), show(real))
		}
		if !c.wouldWrite && h.holder("l") != before {
			t.Errorf("%s: the premise failed: the real run wrote", c.name)
		}
	}
}

// A dry run stops at the first write command a script calls, wherever it
// calls it, and a script that catches the stop cannot go on.
func TestDryRunStopsAtTheFirstWrite(t *testing.T) {
	h := newHarness(t, Options{})
	for _, script := range []string{
		"redis.call('set', 'x', 1) return 1",
		"local ok = pcall(redis.call, 'set', 'x', 1) redis.call('set', 'went', 'on') return 1",
		"local ok = pcall(redis.call, 'set', 'x', 1) while true do end",
		"local ok = redis.pcall('set', 'x', 1) return redis.call('get', 'x')",
		"local co = coroutine.create(function() redis.call('set', 'x', 1) end) coroutine.resume(co) return 'resumed'",
		"redis.call('publish', 'ch', 'm') return 1",
	} {
		if got := h.dry("EVAL", script, "0"); !got.IsWouldWrite() {
			t.Errorf("%q: dry run answered %s, want WouldWrite", script, show(got))
		}
		for _, k := range []string{"x", "went"} {
			if got := h.read("EXISTS", k); show(got) != ":0" {
				t.Errorf("%q: the dry run wrote %s", script, k)
			}
		}
	}
	// What writes nothing runs to its end, errors and all, as the real run.
	h.do("SET", "k", "v")
	for _, script := range []string{
		"return redis.call('get', 'k')",
		"return redis.pcall('incr', 'nokey', 'x')",
		"return redis.call('hget', 'k', 'f')",
	} {
		if got, want := show(h.dry("EVAL", script, "0")), show(h.do("EVAL", script, "0")); got != want {
			t.Errorf("%q: dry run answered %s, the real run %s", script, got, want)
		}
	}
}

// SET NX and XX and SETNX, run dry, answer as they do when they find
// nothing to write, and stop where they would write.
func TestDryRunOfConditionalSet(t *testing.T) {
	h := newHarness(t, Options{})
	h.do("SET", "held", "v")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"SET", "held", "w", "NX"}, "nil"},
		{[]string{"SET", "held", "w", "NX", "GET"}, `"v"`},
		{[]string{"SETNX", "held", "w"}, ":0"},
		{[]string{"SET", "free", "w", "XX", "PX", "100"}, "nil"},
		{[]string{"SET", "free", "w", "NX"}, "would write"},
		{[]string{"SETNX", "free", "w"}, "would write"},
		{[]string{"SET", "held", "w", "XX"}, "would write"},
		{[]string{"SET", "free", "w", "NX", "PX", "-1"}, "-ERR invalid expire time in 'set' command"},
	} {
		got := show(h.dry(c.args...))
		if h.dry(c.args...).IsWouldWrite() {
			got = "would write"
		}
		if got != c.want {
			t.Errorf("%q run dry: %s, want %s", c.args, got, c.want)
		}
		if show(h.read("GET", "held")) != `"v"` || show(h.read("EXISTS", "free")) != ":0" {
			t.Fatalf("%q run dry changed the keyspace", c.args)
		}
	}
}

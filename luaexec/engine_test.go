package luaexec

import (
	"slices"
	"strings"
	"testing"

	"github.com/lockserver/lockserver/keyspace"
)

// Error texts, worked from redis-server 7.0's replies.
func TestErrorTexts(t *testing.T) {
	h := newHarness(t, Options{})
	h.do("SET", "str", "v")
	h.expect([][2]string{
		{"x x", "-ERR Error compiling script (new function): user_script:1: '=' expected near 'x'"},
		{"\n\n return 1 +", "-ERR Error compiling script (new function): user_script:3: unexpected symbol near '<eof>'"},
		{"for i=1,2 do", "-ERR Error compiling script (new function): user_script:1: 'end' expected near '<eof>'"},
		{"error('foo')", scriptErr("error('foo')", "ERR user_script:1: foo", 1)},
		{"error('foo', 0)", scriptErr("error('foo', 0)", "ERR foo", 1)},
		{"error({err = 'My Error'})", scriptErr("error({err = 'My Error'})", "My Error", 1)},
		{"error(nil)", scriptErr("error(nil)", "ERR nil", 1)},
		{"error(12)", scriptErr("error(12)", "ERR user_script:1: 12", 1)},
		{"\nlocal x = nil\nreturn x + 1", scriptErr("\nlocal x = nil\nreturn x + 1", "ERR user_script:3: attempt to perform arithmetic on a nil value", 3)},
		{"return redis.call('nosuch')", scriptErr("return redis.call('nosuch')", "ERR Unknown Redis command called from script", 1)},
		{"return redis.call()", scriptErr("return redis.call()", "ERR Please specify at least one argument for this redis lib call", 1)},
		{"return redis.call('get')", scriptErr("return redis.call('get')", "ERR Wrong number of args calling Redis command from script", 1)},
		{"return redis.call('eval', 'return 1', '0')", scriptErr("return redis.call('eval', 'return 1', '0')", "ERR This Redis command is not allowed from script", 1)},
		{"return redis.call('multi')", scriptErr("return redis.call('multi')", "ERR This Redis command is not allowed from script", 1)},
		{"return redis.call('get', {})", scriptErr("return redis.call('get', {})", "ERR Lua redis lib command arguments must be strings or integers", 1)},
		{"\nreturn redis.call('incr',\n 'str')", scriptErr("\nreturn redis.call('incr',\n 'str')", "ERR value is not an integer or out of range", 2)},
		{"return redis.call('hget', 'str', 'f')", scriptErr("return redis.call('hget', 'str', 'f')", "WRONGTYPE Operation against a key holding the wrong kind of value", 1)},
		{"return redis.pcall('hget', 'str', 'f')", "-WRONGTYPE Operation against a key holding the wrong kind of value"},
		{"x = 1", scriptErr("x = 1", "ERR user_script:1: Attempt to modify a readonly table", 1)},
		{"return y", scriptErr("return y", "ERR user_script:1: Script attempted to access nonexistent global variable 'y'", 1)},
		{"local function f(n) return 1 + f(n + 1) end return f(1)", scriptErr("local function f(n) return 1 + f(n + 1) end return f(1)", "ERR user_script:1: stack overflow", 1)},
	})
}

func TestEvalCommandErrors(t *testing.T) {
	h := newHarness(t, Options{})
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"EVAL", "return 1", "2", "a"}, "-ERR Number of keys can't be greater than number of args"},
		{[]string{"EVAL", "return 1", "-1"}, "-ERR Number of keys can't be negative"},
		{[]string{"EVAL", "return 1", "x"}, "-ERR value is not an integer or out of range"},
		{[]string{"EVAL", "return 1", "1.5", "a"}, "-ERR value is not an integer or out of range"},
		{[]string{"EVAL", "x x", "x"}, "-ERR value is not an integer or out of range"}, // numkeys before compiling
		{[]string{"EVAL", "return 1"}, "-ERR wrong number of arguments for 'eval' command"},
		{[]string{"EVALSHA", "abc", "0"}, "-NOSCRIPT No matching script. Please use EVAL."},
		{[]string{"EVALSHA", "abc", "x"}, "-NOSCRIPT No matching script. Please use EVAL."}, // length first
		{[]string{"EVALSHA", strings.Repeat("0", 40), "0"}, "-NOSCRIPT No matching script. Please use EVAL."},
		{[]string{"EVALSHA", strings.Repeat("0", 40), "x"}, "-ERR value is not an integer or out of range"},
		{[]string{"EVALSHA", strings.Repeat("0", 40), "5"}, "-ERR Number of keys can't be greater than number of args"},
		{[]string{"EVAL", "#!lua flags=bad\nreturn 1", "0"}, "-ERR Unexpected flag in script shebang: bad"},
		{[]string{"EVAL", "#!lua xx=1\nreturn 1", "0"}, "-ERR Unknown lua shebang option: xx=1"},
		{[]string{"EVAL", "#!luajit\nreturn 1", "0"}, "-ERR Unexpected engine in script shebang: #!luajit"},
		{[]string{"EVAL", "#!lua", "0"}, "-ERR Invalid script shebang"},
		{[]string{"EVAL", "#!lua \"unbalanced\nreturn 1", "0"}, "-ERR Invalid engine in script shebang"},
		{[]string{"EVAL", "#!lua flags=no-writes,allow-oom\nreturn 1", "0"}, ":1"},
		{[]string{"EVAL", "#!lua flags=\nreturn 1", "0"}, ":1"},
		{[]string{"EVAL", "#!lua\nerror('x')", "0"}, scriptErr("#!lua\nerror('x')", "ERR user_script:2: x", 2)},
		{[]string{"EVAL", "#!lua flags=no-writes\nreturn redis.call('set', 'a', 'b')", "0"}, scriptErr("#!lua flags=no-writes\nreturn redis.call('set', 'a', 'b')", "ERR Write commands are not allowed from read-only scripts.", 2)},
		{[]string{"EVAL_RO", "return redis.call('set', 'a', 'b')", "0"}, scriptErr("return redis.call('set', 'a', 'b')", "ERR Write commands are not allowed from read-only scripts.", 1)},
		{[]string{"EVAL_RO", "return redis.call('publish', 'c', 'm')", "0"}, scriptErr("return redis.call('publish', 'c', 'm')", "ERR Write commands are not allowed from read-only scripts.", 1)},
		{[]string{"EVAL_RO", "return redis.pcall('set', 'a', 'b')", "0"}, "-ERR Write commands are not allowed from read-only scripts."},
		{[]string{"EVAL_RO", "return redis.call('get', 'a')", "0"}, "nil"},
		{[]string{"EVAL_RO", "#!lua\nreturn 1", "0"}, "-ERR Can not execute a script with write flag using *_ro command."},
		{[]string{"EVAL_RO", "#!lua flags=no-writes\nreturn 1", "0"}, ":1"},
		{[]string{"EVAL", "return {KEYS, ARGV}", "2", "k1", "k2", "a1"}, `[["k1", "k2"], ["a1"]]`},
	} {
		if got := show(h.do(c.args...)); got != c.want {
			t.Errorf("%q\n got: %s\nwant: %s", c.args, got, c.want)
		}
	}
}

func TestScriptCommand(t *testing.T) {
	h := newHarness(t, Options{})
	const body = "return 1"
	const sha = "e0e1f9fabfc9d4800c877a703b823ac0578ff8db" // SHA1 of "return 1", from redis-server
	steps := []struct {
		args []string
		want string
	}{
		{[]string{"EVALSHA", sha, "0"}, "-NOSCRIPT No matching script. Please use EVAL."},
		{[]string{"SCRIPT", "LOAD", body}, `"` + sha + `"`},
		{[]string{"EVALSHA", sha, "0"}, ":1"},
		{[]string{"EVALSHA", strings.ToUpper(sha), "0"}, ":1"},
		{[]string{"EVALSHA_RO", sha, "0"}, ":1"},
		{[]string{"SCRIPT", "EXISTS", sha, strings.ToUpper(sha), "abc"}, "[:1, :1, :0]"},
		{[]string{"SCRIPT", "FLUSH"}, "+OK"},
		{[]string{"SCRIPT", "EXISTS", sha}, "[:0]"},
		{[]string{"EVAL", body, "0"}, ":1"}, // EVAL caches the body
		{[]string{"SCRIPT", "EXISTS", sha}, "[:1]"},
		{[]string{"SCRIPT", "FLUSH", "async"}, "+OK"},
		{[]string{"SCRIPT", "FLUSH", "SYNC"}, "+OK"},
		{[]string{"SCRIPT", "FLUSH", "x"}, "-ERR SCRIPT FLUSH only support SYNC|ASYNC option"},
		{[]string{"SCRIPT", "FLUSH", "SYNC", "x"}, "-ERR SCRIPT FLUSH only support SYNC|ASYNC option"},
		{[]string{"SCRIPT", "LOAD", "x x"}, "-ERR Error compiling script (new function): user_script:1: '=' expected near 'x'"},
		{[]string{"SCRIPT", "LOAD"}, "-ERR wrong number of arguments for 'script|load' command"},
		{[]string{"SCRIPT", "LOAD", "a", "b"}, "-ERR wrong number of arguments for 'script|load' command"},
		{[]string{"SCRIPT", "EXISTS"}, "-ERR wrong number of arguments for 'script|exists' command"},
		{[]string{"SCRIPT", "KILL"}, "-NOTBUSY No scripts in execution right now."},
		{[]string{"SCRIPT", "KILL", "x"}, "-ERR wrong number of arguments for 'script|kill' command"},
		{[]string{"SCRIPT", "FOO"}, "-ERR unknown subcommand 'FOO'. Try SCRIPT HELP."},
		{[]string{"SCRIPT"}, "-ERR wrong number of arguments for 'script' command"},
		{[]string{"SCRIPT", "DEBUG", "NO"}, "+OK"},
		{[]string{"SCRIPT", "DEBUG", "MAYBE"}, "-ERR Use SCRIPT DEBUG YES/SYNC/NO"},
	}
	for _, s := range steps {
		if got := show(h.do(s.args...)); got != s.want {
			t.Errorf("%q\n got: %s\nwant: %s", s.args, got, s.want)
		}
	}
	if help := h.do("SCRIPT", "HELP"); len(help.Elems) != 17 || help.Elems[0].Str != "SCRIPT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:" {
		t.Errorf("SCRIPT HELP: %s", show(help))
	}
}

// Prepare says what must go through the log: everything that changes the
// keyspace or the script cache; and what may or may not write, as it finds
// the keyspace: a cached script, SET NX or XX, SETNX.
func TestPrepare(t *testing.T) {
	h := newHarness(t, Options{})
	h.do("SCRIPT", "LOAD", "return 1")
	h.do("SCRIPT", "LOAD", "#!lua flags=no-writes\nreturn 2")
	sha1, sha2 := sha1hex("return 1"), sha1hex("#!lua flags=no-writes\nreturn 2")
	for _, c := range []struct {
		args   []string
		effect keyspace.Effect
		err    string
	}{
		{[]string{"EVAL", "return 1", "0"}, keyspace.MayWrite, ""},
		{[]string{"EVAL_RO", "return 1", "0"}, keyspace.Reads, ""},                     // cached: a read
		{[]string{"EVAL_RO", "return 3", "0"}, keyspace.Writes, ""},                    // first sight: logged so every node caches it
		{[]string{"EVAL", "#!lua flags=no-writes\nreturn 2", "0"}, keyspace.Reads, ""}, // cached no-writes
		{[]string{"EVALSHA", sha1, "0"}, keyspace.MayWrite, ""},
		{[]string{"EVALSHA_RO", sha1, "0"}, keyspace.Reads, ""},
		{[]string{"EVALSHA", sha2, "0"}, keyspace.Reads, ""},
		{[]string{"EVALSHA_RO", sha1hex("#!lua\nreturn 9"), "0"}, keyspace.Reads, "NOSCRIPT No matching script. Please use EVAL."},
		{[]string{"EVAL_RO", "#!lua\nreturn 9", "0"}, keyspace.Writes, ""}, // refused when run, after the OOM check
		{[]string{"EVALSHA", strings.Repeat("1", 40), "0"}, keyspace.Reads, "NOSCRIPT No matching script. Please use EVAL."},
		{[]string{"EVAL", "x x", "0"}, keyspace.Reads, "ERR Error compiling script (new function): user_script:1: '=' expected near 'x'"},
		{[]string{"EVAL", "return 1", "5"}, keyspace.Reads, "ERR Number of keys can't be greater than number of args"},
		{[]string{"SCRIPT", "LOAD", "return 4"}, keyspace.Writes, ""},
		{[]string{"SCRIPT", "FLUSH"}, keyspace.Writes, ""},
		{[]string{"SCRIPT", "EXISTS", sha1}, keyspace.Reads, ""},
		{[]string{"SCRIPT", "KILL"}, keyspace.Reads, ""},
		{[]string{"SCRIPT", "NOPE"}, keyspace.Reads, "ERR unknown subcommand 'NOPE'. Try SCRIPT HELP."},
		{[]string{"SET", "k", "v"}, keyspace.Writes, ""},
		{[]string{"SET", "k", "v", "NX"}, keyspace.MayWrite, ""},
		{[]string{"SET", "k", "v", "XX", "PX", "10"}, keyspace.MayWrite, ""},
		{[]string{"SET", "k", "v", "GET"}, keyspace.Writes, ""},
		{[]string{"SETNX", "k", "v"}, keyspace.MayWrite, ""},
		{[]string{"GET", "k"}, keyspace.Reads, ""},
		{[]string{"PUBLISH", "c", "m"}, keyspace.Writes, ""},
	} {
		args := make([][]byte, len(c.args))
		for i, a := range c.args {
			args[i] = []byte(a)
		}
		effect, errReply := h.e.Prepare(keyspace.Lookup(args[0]), args)
		gotErr := ""
		if errReply != nil {
			gotErr = errReply.Str
		}
		if effect != c.effect || gotErr != c.err {
			t.Errorf("%q: effect %v err %q, want %v %q", c.args, effect, gotErr, c.effect, c.err)
		}
	}
}

// A read never changes the script cache, which is replicated state.
func TestExecReadLeavesCacheAlone(t *testing.T) {
	h := newHarness(t, Options{})
	if got := show(h.read("EVAL_RO", "return 5", "0")); got != ":5" {
		t.Fatalf("EVAL_RO as a read: %s", got)
	}
	if got := show(h.do("SCRIPT", "EXISTS", sha1hex("return 5"))); got != "[:0]" {
		t.Fatalf("a read cached the script: %s", got)
	}
	if got := show(h.do("EVAL_RO", "return 5", "0")); got != ":5" {
		t.Fatalf("EVAL_RO applied: %s", got)
	}
	if got := show(h.do("SCRIPT", "EXISTS", sha1hex("return 5"))); got != "[:1]" {
		t.Fatalf("an applied EVAL_RO did not cache the script: %s", got)
	}
}

// SELECT inside a script changes the script's database only.
func TestSelectInScript(t *testing.T) {
	h := newHarness(t, Options{})
	h.expect([][2]string{
		{"redis.call('select', 3) redis.call('set', 'k', 'in3') return redis.call('get', 'k')", `"in3"`},
		{"return redis.call('get', 'k')", "nil"},
		{"redis.call('select', 3) return redis.call('get', 'k')", `"in3"`},
		{"return redis.pcall('select', 16)", "-ERR DB index is out of range"},
	})
	c := h.call([]string{"EVAL", "redis.call('select', 5) return 1", "0"})
	h.e.exec(c, true)
	if c.DB != 0 {
		t.Fatalf("the caller's database became %d", c.DB)
	}
}

// Time is the entry's, frozen for the whole script.
func TestTimeFrozen(t *testing.T) {
	h := newHarness(t, Options{})
	h.now = 1_700_000_123_456
	h.expect([][2]string{
		{"return redis.call('time')", `["1700000123", "456000"]`},
		{"local a = redis.call('time') for i = 1, 1000 do end local b = redis.call('time') return a[2] == b[2]", ":1"},
		{"redis.call('set', 'k', 'v', 'px', 100) return redis.call('pttl', 'k')", ":100"},
	})
}

// Over maxmemory (decided at proposal and carried in the call), a script
// may not start growing memory, but once it has written it may go on; a
// flagged script without allow-oom is refused before it starts.
func TestDenyOOM(t *testing.T) {
	h := newHarness(t, Options{})
	h.oom = true
	const oom = "OOM command not allowed when used memory > 'maxmemory'."
	h.expect([][2]string{
		{"return redis.call('set', 'a', 'b')", scriptErr("return redis.call('set', 'a', 'b')", oom, 1)},
		{"return redis.pcall('set', 'a', 'b')", "-" + oom},
		{"return redis.call('get', 'a')", "nil"},
		{"redis.call('del', 'zz') return redis.call('set', 'a', 'b')", "+OK"},
		{"#!lua\nreturn 1", "-" + oom},
		{"#!lua flags=allow-oom\nreturn redis.call('set', 'a', 'c')", "+OK"},
		{"#!lua flags=no-writes\nreturn redis.call('get', 'a')", `"c"`},
	})
}

type recorder struct{ msgs []string }

func (r *recorder) Publish(channel, message []byte, sharded bool) int64 {
	r.msgs = append(r.msgs, string(channel)+"="+string(message))
	return 1
}

func TestPublishFromScript(t *testing.T) {
	h := newHarness(t, Options{})
	rec := &recorder{}
	h.pub = rec
	h.expect([][2]string{
		{"return redis.call('publish', 'ch', 'hello')", ":1"},
		{"#!lua flags=no-writes\nreturn redis.pcall('publish', 'ch', 'no')", "-ERR Write commands are not allowed from read-only scripts."},
	})
	if strings.Join(rec.msgs, ",") != "ch=hello" {
		t.Fatalf("published %q", rec.msgs)
	}
}

// A script starts math.random from its command's seed: seed 0 where a freshly
// started redis-server does (these are the first values redis-server 7.0.15
// gives), the same seed the same way every time, another seed elsewhere.
func TestMathRandom(t *testing.T) {
	h := newHarness(t, Options{})
	const draw = "return {tostring(math.random()), tostring(math.random()), math.random(10), math.random(5, 10), math.random(1000000)}"
	for i := 0; i < 2; i++ {
		h.expect([][2]string{
			{draw, `["0.39646477363839", "0.84048536971234", :4, :7, :318693]`},
			{"math.randomseed(42) return {tostring(math.random()), math.random(100)}", `["0.74452500033403", :35]`},
			{"return math.random(0)", scriptErr("return math.random(0)", "ERR user_script:1: bad argument #1 to 'random' (interval is empty)", 1)},
		})
	}
	seen := map[string]uint64{}
	for seed := uint64(0); seed < 64; seed++ {
		c := h.call([]string{"EVAL", draw, "0"})
		c.Seed = seed
		got := show(h.e.exec(c, true))
		if other, ok := seen[got]; ok {
			t.Fatalf("seeds %d and %d draw the same numbers %s", other, seed, got)
		}
		seen[got] = seed
		c = h.call([]string{"EVAL", draw, "0"})
		c.Seed = seed
		if again := show(h.e.exec(c, true)); again != got {
			t.Fatalf("seed %d drew %s, then %s", seed, got, again)
		}
	}
}

// The script cache is replicated state: Scripts and LoadScripts carry it
// through a snapshot.
func TestScriptsSnapshot(t *testing.T) {
	h := newHarness(t, Options{})
	bodies := []string{"return 1", "return 2", "return redis.call('get', KEYS[1])"}
	for _, b := range bodies {
		h.do("SCRIPT", "LOAD", b)
	}
	got := h.e.Scripts()
	if len(got) != 3 {
		t.Fatalf("Scripts: %q", got)
	}
	for i := 1; i < len(got); i++ {
		if sha1hex(got[i-1]) >= sha1hex(got[i]) {
			t.Fatalf("Scripts are not ordered by SHA1: %q", got)
		}
	}
	restored := newHarness(t, Options{})
	if err := restored.e.LoadScripts(got); err != nil {
		t.Fatal(err)
	}
	for _, b := range bodies {
		if r := show(restored.do("SCRIPT", "EXISTS", sha1hex(b))); r != "[:1]" {
			t.Fatalf("%q not restored: %s", b, r)
		}
	}
	if err := restored.e.LoadScripts([]string{"x x"}); err == nil || !strings.Contains(err.Error(), "'=' expected") {
		t.Fatalf("LoadScripts of a bad body: %v", err)
	}
	if r := show(restored.do("SCRIPT", "EXISTS", sha1hex("return 1"))); r != "[:0]" {
		t.Fatalf("LoadScripts did not replace the cache: %s", r)
	}
}

// A script larger than Options.maxScriptSize is refused.
func TestMaxScriptSize(t *testing.T) {
	h := newHarness(t, Options{maxScriptSize: 100})
	big := "return '" + strings.Repeat("x", 200) + "'"
	want := "-ERR script of 209 bytes is larger than the limit of 100 bytes"
	if got := show(h.do("EVAL", big, "0")); got != want {
		t.Fatalf("EVAL: %s", got)
	}
	if got := show(h.do("SCRIPT", "LOAD", big)); got != want {
		t.Fatalf("SCRIPT LOAD: %s", got)
	}
}

// A failing script keeps the effects of the commands it ran, as in Redis.
func TestErrorKeepsEarlierWrites(t *testing.T) {
	h := newHarness(t, Options{})
	h.eval("redis.call('set', 'a', '1') error('stop') redis.call('set', 'b', '2')")
	if got := show(h.do("GET", "a")) + show(h.do("GET", "b")); got != `"1"nil` {
		t.Fatalf("after the error: %s", got)
	}
}

// Only a bounded number of compiled scripts is kept; evicted ones compile
// again with the same result.
func TestCompiledCacheBound(t *testing.T) {
	h := newHarness(t, Options{compiledScripts: 2})
	for round := 0; round < 2; round++ {
		for i := 0; i < 5; i++ {
			script := "return " + strings.Repeat("1+", i) + "1"
			if got := show(h.eval(script)); got != ":"+string(rune('1'+i)) {
				t.Fatalf("%s: %s", script, got)
			}
		}
	}
	if n := len(h.e.cache.compiled); n != 2 {
		t.Fatalf("%d compiled scripts kept, want 2", n)
	}
}

// A full cache evicts the compiled script used least recently, counting the
// uses between two compiles as one moment.
func TestCompiledCacheEvictsTheLeastRecent(t *testing.T) {
	h := newHarness(t, Options{compiledScripts: 2})
	a, b, c, d := "return 'a'", "return 'b'", "return 'c'", "return 'd'"
	kept := func() string {
		var names []string
		for _, s := range []string{a, b, c, d} {
			if h.e.cache.compiled[sha1hex(s)] != nil {
				names = append(names, s[len(s)-2:len(s)-1])
			}
		}
		return strings.Join(names, "")
	}
	h.eval(a)
	h.eval(b)
	h.eval(a) // a used after b was compiled
	h.eval(c) // evicts b
	if got := kept(); got != "ac" {
		t.Fatalf("after a, b, a, c: kept %q, want \"ac\"", got)
	}
	h.eval(d) // a was last used before c was compiled: evicts a
	if got := kept(); got != "cd" {
		t.Fatalf("after d: kept %q, want \"cd\"", got)
	}
	// EVALSHA of a cached script counts as a use, as EVAL does.
	h.do("EVALSHA", sha1hex(c), "0")
	h.eval(a) // evicts d
	if got := kept(); got != "ac" {
		t.Fatalf("after EVALSHA c, a: kept %q, want \"ac\"", got)
	}
}

// The scripts lookups find without a lock (ready) are exactly some that are
// loaded and compiled: a compile alone (an EVAL prepared, not yet applied)
// does not put one there, SCRIPT FLUSH empties it, and an eviction takes its
// script out. Otherwise EVALSHA would find a script the replicated state
// does not hold, on some nodes and not others.
func TestLockFreeLookupsFollowTheCache(t *testing.T) {
	h := newHarness(t, Options{compiledScripts: 2})
	ready := func() string {
		var names []string
		for _, s := range *h.e.cache.ready.Load() {
			names = append(names, s.body[len(s.body)-2:len(s.body)-1])
		}
		slices.Sort(names)
		return strings.Join(names, "")
	}
	evalsha := func(body string) string { return show(h.do("EVALSHA", sha1hex(body), "0")) }
	a, b, c := "return 'a'", "return 'b'", "return 'c'"

	// Compiled by an EVAL's Prepare, not loaded: not there, and NOSCRIPT.
	prepared := [][]byte{[]byte("EVAL"), []byte(a), []byte("0")}
	h.e.Prepare(keyspace.Lookup(prepared[0]), prepared)
	if got := ready(); got != "" {
		t.Fatalf("after a Prepare of EVAL a: ready %q, want none", got)
	}
	if got := evalsha(a); !strings.Contains(got, "NOSCRIPT") {
		t.Fatalf("EVALSHA of a script only prepared: %s, want NOSCRIPT", got)
	}

	// Loaded and then found: there, and the lock-free path answers.
	h.eval(a)
	evalsha(a)
	h.eval(b) // a compile: later uses are more recent than a's
	evalsha(b)
	if got := ready(); got != "ab" {
		t.Fatalf("after EVAL and EVALSHA of a and b: ready %q, want \"ab\"", got)
	}
	if got := evalsha(b); got != show(keyspace.Bulk("b")) {
		t.Fatalf("EVALSHA b: %s", got)
	}

	// A third compile evicts the least recent, a, from ready too.
	h.eval(c)
	if got := ready(); got != "b" {
		t.Fatalf("after c evicted a: ready %q, want \"b\"", got)
	}

	// SCRIPT FLUSH: nothing is found, by either path.
	h.do("SCRIPT", "FLUSH")
	if got := ready(); got != "" {
		t.Fatalf("after SCRIPT FLUSH: ready %q, want none", got)
	}
	if got := evalsha(b); !strings.Contains(got, "NOSCRIPT") {
		t.Fatalf("EVALSHA after SCRIPT FLUSH: %s, want NOSCRIPT", got)
	}
}

// Prepare may run beside ExecAs (a Raft leader prepares while its state
// machine applies): run under -race, this finds unguarded shared state.
func TestPrepareBesideExec(t *testing.T) {
	h := newHarness(t, Options{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; i < 200; i++ {
			body := "return " + strings.Repeat("1+", i%7) + "1"
			args := [][]byte{[]byte("EVAL"), []byte(body), []byte("0")}
			h.e.Prepare(keyspace.Lookup(args[0]), args)
			sha := []byte(sha1hex(body))
			h.e.Prepare(keyspace.Lookup([]byte("EVALSHA")), [][]byte{[]byte("EVALSHA"), sha, []byte("0")})
		}
	}()
	for i := 0; i < 200; i++ {
		h.eval("return " + strings.Repeat("1+", i%7) + "1")
		if i%50 == 0 {
			h.do("SCRIPT", "FLUSH")
		}
	}
	<-done
}

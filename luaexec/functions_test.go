package luaexec

import (
	"testing"

	"github.com/lockserver/lockserver/keyspace"
)

// Every FCALL sees its library as just loaded: what one call leaves in the
// library's locals is gone at the next, as it would be on a node that
// restarted between the two, so every node answers alike. (Redis keeps it
// until the server restarts: 1, then 2.)
func TestFunctionSeesItsLibraryAsJustLoaded(t *testing.T) {
	h := newHarness(t, Options{})
	lib := "#!lua name=counter\nlocal n = 0\nlocal seen = {}\n" +
		"redis.register_function('count', function(keys) n = n + 1 seen[#seen + 1] = keys[1] return {n, #seen} end)"
	if got := show(h.do("FUNCTION", "LOAD", lib)); got != `"counter"` {
		t.Fatalf("FUNCTION LOAD = %s", got)
	}
	for i := range 3 {
		if got := show(h.do("FCALL", "count", "1", "k")); got != "[:1, :1]" {
			t.Fatalf("call %d: FCALL count = %s, want [:1, :1] (the library as loaded)", i+1, got)
		}
	}
}

// The libraries a snapshot carries load into another engine whole: the same
// functions, flags and descriptions, called with the same results.
func TestLibrariesCarriedBySnapshot(t *testing.T) {
	h := newHarness(t, Options{})
	for _, lib := range []string{
		"#!lua name=b\nredis.register_function{function_name='rd', callback=function(keys) return redis.call('GET', keys[1]) end, flags={'no-writes'}, description='reads'}",
		"#!lua name=a\nredis.register_function('wr', function(keys, args) return redis.call('SET', keys[1], args[1]) end)",
	} {
		if r := h.do("FUNCTION", "LOAD", lib); r.IsError() {
			t.Fatal(r.Str)
		}
	}
	codes := h.e.Libraries()
	if len(codes) != 2 || codes[0][:13] != "#!lua name=a\n" {
		t.Fatalf("Libraries() = %q, want a's then b's code", codes)
	}
	other := newHarness(t, Options{})
	if err := other.e.LoadLibraries(codes); err != nil {
		t.Fatal(err)
	}
	for _, x := range []*harness{h, other} {
		if got := show(x.do("FCALL", "wr", "1", "k", "v")); got != "+OK" {
			t.Fatalf("FCALL wr = %s", got)
		}
		if got := show(x.read("FCALL_RO", "rd", "1", "k")); got != `"v"` {
			t.Fatalf("FCALL_RO rd = %s", got)
		}
	}
	if a, b := show(h.read("FUNCTION", "LIST", "WITHCODE")), show(other.read("FUNCTION", "LIST", "WITHCODE")); a != b {
		t.Fatalf("FUNCTION LIST differs after the snapshot:\n%s\n%s", a, b)
	}
	if err := other.e.LoadLibraries([]string{"#!lua name=c\nreturn 1"}); err == nil {
		t.Fatal("LoadLibraries took a library that registers nothing")
	}
}

// A read never changes the libraries: FUNCTION LOAD, DELETE, FLUSH and
// RESTORE change them only as entries apply (Prepare sends them to the log).
func TestFunctionChangesOnlyApply(t *testing.T) {
	h := newHarness(t, Options{})
	lib := "#!lua name=l\nredis.register_function('f', function() return 1 end)"
	for _, args := range [][]string{{"FUNCTION", "LOAD", lib}, {"FUNCTION", "FLUSH"}, {"FUNCTION", "DELETE", "l"}} {
		cmd := keyspace.Lookup([]byte(args[0]))
		b := make([][]byte, len(args))
		for i, a := range args {
			b[i] = []byte(a)
		}
		if effect, r := h.e.Prepare(cmd, b); r == nil && effect != keyspace.Writes {
			t.Errorf("Prepare(%q) = %v, want Writes", args, effect)
		}
		if r := h.read(args...); !r.IsWouldWrite() && !r.IsError() {
			t.Errorf("read %q = %s, want nothing done", args, show(r))
		}
		if libs, _ := h.e.NumFunctions(); libs != 0 {
			t.Fatalf("read %q loaded a library", args)
		}
	}
}

// A function is called by name, and a library loaded again may have made a
// function that read into one that writes, after Prepare classified the
// call as a read: run as a read, it stops at its write, having changed
// nothing, so that the engine sends it to the log.
func TestFunctionReplacedByAWriterNeverWritesAsARead(t *testing.T) {
	h := newHarness(t, Options{})
	if r := h.do("FUNCTION", "LOAD", "#!lua name=l\nredis.register_function{function_name='f', callback=function(keys) return redis.call('GET', keys[1]) end, flags={'no-writes'}}"); r.IsError() {
		t.Fatal(r.Str)
	}
	args := [][]byte{[]byte("FCALL"), []byte("f"), []byte("1"), []byte("k")}
	if effect, r := h.e.Prepare(keyspace.Lookup(args[0]), args); r != nil || effect != keyspace.Reads {
		t.Fatalf("Prepare(FCALL f) = %v, %v; want a read", effect, r)
	}
	if r := h.do("FUNCTION", "LOAD", "REPLACE", "#!lua name=l\nredis.register_function('f', function(keys) return redis.call('SET', keys[1], 'written') end)"); r.IsError() {
		t.Fatal(r.Str)
	}
	if r := h.read("FCALL", "f", "1", "k"); !r.IsWouldWrite() {
		t.Fatalf("the replaced function run as a read: %s, want it stopped at its write", show(r))
	}
	if got := show(h.read("GET", "k")); got != "nil" {
		t.Fatalf("GET k = %s after the read: it wrote", got)
	}
}

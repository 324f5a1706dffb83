package luaexec

import (
	"fmt"
	"strings"
	"testing"

	"github.com/lockserver/lockserver/keyspace"
)

// harness is an engine over a fresh keyspace, run as the state machine runs
// it: one command at a time, at a fixed time.
type harness struct {
	t     testing.TB
	store *keyspace.Store
	e     *Engine
	now   int64
	db    int
	oom   bool
	pub   keyspace.Publisher
}

func newHarness(t testing.TB, opts Options) *harness {
	store := keyspace.New()
	return &harness{t: t, store: store, e: New(store, opts), now: 1_700_000_000_000}
}

func (h *harness) call(args []string) *keyspace.Call {
	b := make([][]byte, len(args))
	for i, a := range args {
		b[i] = []byte(a)
	}
	return &keyspace.Call{Store: h.store, DB: h.db, Now: h.now, Args: b, DenyOOM: h.oom, Pub: h.pub}
}

// do runs one command as part of an applied entry.
func (h *harness) do(args ...string) keyspace.Reply { return h.e.exec(h.call(args), true) }

// read runs one command as a read.
func (h *harness) read(args ...string) keyspace.Reply { return h.e.exec(h.call(args), false) }

// eval runs EVAL script with no keys or arguments.
func (h *harness) eval(script string) keyspace.Reply { return h.do("EVAL", script, "0") }

// show renders a reply compactly, with its kind, so that tests compare
// replies against hand-written forms.
func show(r keyspace.Reply) string {
	elems := func() string {
		parts := make([]string, len(r.Elems))
		for i, e := range r.Elems {
			parts[i] = show(e)
		}
		return strings.Join(parts, ", ")
	}
	switch r.Kind {
	case keyspace.KindNull:
		return "nil"
	case keyspace.KindNullArray:
		return "nil-array"
	case keyspace.KindStatus:
		return "+" + r.Str
	case keyspace.KindError:
		return "-" + r.Str
	case keyspace.KindInt:
		return fmt.Sprintf(":%d", r.Int)
	case keyspace.KindBulk:
		return fmt.Sprintf("%q", r.Str)
	case keyspace.KindArray:
		return "[" + elems() + "]"
	case keyspace.KindMap:
		return "%{" + elems() + "}"
	case keyspace.KindSet:
		return "~[" + elems() + "]"
	case keyspace.KindDouble:
		return "," + keyspace.FormatDouble(r.Float)
	case keyspace.KindBool:
		return fmt.Sprintf("#%v", r.Int != 0)
	case keyspace.KindVerbatim:
		return "=" + r.Str
	case keyspace.KindPush:
		return ">[" + elems() + "]"
	}
	return fmt.Sprintf("?%d", r.Kind)
}

// expect runs scripts (EVAL with no keys) and compares each reply with its
// expected form.
func (h *harness) expect(cases [][2]string) {
	h.t.Helper()
	for _, c := range cases {
		if got := show(h.eval(c[0])); got != c[1] {
			h.t.Errorf("%s\n got: %s\nwant: %s", c[0], got, c[1])
		}
	}
}

// scriptError is the error reply of a runtime error in a script, as Redis
// formats it.
func scriptErr(script, msg string, line int) string {
	return fmt.Sprintf("-%s script: %s, on @user_script:%d.", msg, sha1hex(script), line)
}

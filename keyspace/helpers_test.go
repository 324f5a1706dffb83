package keyspace

import (
	"strings"
	"testing"
)

// fixture runs commands against a fresh Store at a settable time.
type fixture struct {
	t      *testing.T
	s      *Store
	now    int64
	db     int
	script bool
}

func newFixture(t *testing.T) *fixture {
	return &fixture{t: t, s: New(), now: 1_700_000_000_000}
}

// do runs a command given as space-separated words and renders its reply.
func (f *fixture) do(line string) string {
	return f.doArgs(strings.Fields(line)...)
}

// doArgs runs a command given word by word and renders its reply.
func (f *fixture) doArgs(args ...string) string {
	bargs := make([][]byte, len(args))
	for i, a := range args {
		bargs[i] = []byte(a)
	}
	c := &Call{Store: f.s, DB: f.db, Now: f.now, Args: bargs, Script: f.script}
	r := f.s.Exec(c)
	f.db = c.DB
	return render(r)
}

// expect runs each command and compares its rendered reply.
func (f *fixture) expect(pairs ...string) {
	f.t.Helper()
	for i := 0; i+1 < len(pairs); i += 2 {
		if got := f.do(pairs[i]); got != pairs[i+1] {
			f.t.Errorf("%s: got %s, want %s", pairs[i], got, pairs[i+1])
		}
	}
}

// render writes a reply compactly: (nil), +OK, -ERR ..., :1, "bulk", ,1.5,
// [a b], {k v}, ~[a b], pairs[m s].
func render(r Reply) string {
	switch r.Kind {
	case KindNull:
		return "(nil)"
	case KindNullArray:
		return "(nil-array)"
	case KindStatus:
		return "+" + r.Str
	case KindError:
		return "-" + r.Str
	case KindInt:
		return ":" + formatInt(r.Int)
	case KindBulk:
		return `"` + r.Str + `"`
	case KindDouble:
		return "," + FormatDouble(r.Float)
	}
	parts := make([]string, len(r.Elems))
	for i, e := range r.Elems {
		parts[i] = render(e)
	}
	inner := strings.Join(parts, " ")
	switch r.Kind {
	case KindMap:
		return "{" + inner + "}"
	case KindSet:
		return "~[" + inner + "]"
	case KindPairs:
		return "pairs[" + inner + "]"
	}
	return "[" + inner + "]"
}

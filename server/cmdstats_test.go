package server

import (
	"testing"
	"time"

	"github.com/lockserver/lockserver/keyspace"
)

// What counting a command costs the command path, with the latency
// histogram (latency-tracking yes) and without; the clock is read once per
// batch, outside it. A lock cycle's command costs the server about 11 us of
// CPU (bench/, CPU/op at 50 clients).
func BenchmarkCountCall(b *testing.B) {
	for _, tracking := range []bool{false, true} {
		name := "untracked"
		if tracking {
			name = "tracked"
		}
		b.Run(name, func(b *testing.B) {
			s := &Server{cmdStats: make([]commandStats, keyspace.NumIDs())}
			s.latencyTracking.Store(tracking)
			cmd := keyspace.Lookup([]byte("evalsha"))
			d := 7 * time.Microsecond
			for b.Loop() {
				s.countCall(cmd, d, false)
			}
		})
	}
}

// Each call counts once, with its time; a failed one also as failed; the
// histogram only while latency-tracking is on; RESETSTAT clears them.
func TestCountCall(t *testing.T) {
	s := &Server{cmdStats: make([]commandStats, keyspace.NumIDs())}
	get, set := keyspace.Lookup([]byte("get")), keyspace.Lookup([]byte("set"))
	s.countCall(get, 3*time.Microsecond, false)
	s.latencyTracking.Store(true)
	s.countCall(get, 5*time.Microsecond, true)
	s.countRejected(set)
	figs := s.commandFiguresAll()
	if len(figs) != 2 {
		t.Fatalf("figures of %d commands, want get and set", len(figs))
	}
	byName := map[string]commandFigures{}
	for _, f := range figs {
		byName[f.cmd.Name] = f
	}
	g := byName["get"]
	if g.calls != 2 || g.failed != 1 || g.nanos != 8000 || g.latency == nil || g.latency.Count != 1 {
		t.Errorf("get: %+v", g)
	}
	if st := byName["set"]; st.calls != 0 || st.rejected != 1 || st.latency != nil {
		t.Errorf("set: %+v", st)
	}
	s.resetCommandStats()
	if figs := s.commandFiguresAll(); len(figs) != 0 {
		t.Errorf("after RESETSTAT: %+v", figs)
	}
}

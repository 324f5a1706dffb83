package luaexec

import (
	"time"

	"github.com/lockserver/lockserver/keyspace"
)

// ScriptCall is a command a script called, as Redis counts it in INFO
// commandstats, latencystats and errorstats: a call that ran (its time, and
// its error reply if it failed), or one refused before it ran (arity, ACL,
// a write from a read-only script, OOM, a command scripts may not call; an
// unknown command has no Cmd). Scripts run in the state machine on every
// node; their calls are counted by the node that answers the script's
// client (see Engine.Record).
type ScriptCall struct {
	Cmd      *keyspace.Command // nil for an unknown command
	Nanos    int64             // how long it ran; 0 if refused
	Rejected bool
	Err      string // the error reply it was given, "" for none
}

// clockBase is what script calls are timed against: time.Since on a time
// with a monotonic reading reads one clock, half the cost of time.Now.
var clockBase = time.Now()

// Record makes the engine keep the commands scripts call, from now on,
// until the next Record, or stop keeping them. Timing a call costs two
// clock readings, which only the node that counts the calls pays.
func (e *Engine) Record(on bool) {
	e.recording = on
	if cap(e.calls) > maxKeptCalls {
		e.calls = nil // a script that made many calls does not keep their room
	}
	clear(e.calls)
	e.calls = e.calls[:0]
}

// maxKeptCalls is the most calls whose room the engine keeps between
// scripts.
const maxKeptCalls = 1024

// Calls returns the commands scripts called since the last Record, valid
// until the next one: callers copy what they keep.
func (e *Engine) Calls() []ScriptCall { return e.calls }

// refuse is the reply to a command a script may not call, counted as
// rejected while the engine records.
func (v *vm) refuse(cmd *keyspace.Command, text string) (keyspace.Reply, int64) {
	reply := keyspace.Error(text)
	if v.e.recording {
		v.e.calls = append(v.e.calls, ScriptCall{Cmd: cmd, Rejected: true, Err: reply.Str})
	}
	return reply, 0
}

// execCall runs a command a script called, timed while the engine records.
func (v *vm) execCall(cmd *keyspace.Command, c *keyspace.Call) keyspace.Reply {
	if !v.e.recording {
		return cmd.Exec(c)
	}
	start := time.Since(clockBase)
	reply := cmd.Exec(c)
	cl := ScriptCall{Cmd: cmd, Nanos: int64(time.Since(clockBase) - start)}
	if reply.Kind == keyspace.KindError {
		cl.Err = reply.Str
	}
	v.e.calls = append(v.e.calls, cl)
	return reply
}

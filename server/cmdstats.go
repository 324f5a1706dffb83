package server

import (
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lockserver/lockserver/internal/histogram"
	"github.com/lockserver/lockserver/keyspace"
	"github.com/lockserver/lockserver/replication"
)

// commandStats are one command's figures, for INFO commandstats and
// latencystats and for the metrics. They sit in a slice indexed by the
// command's ID, so that counting a call is a few atomic adds.
type commandStats struct {
	calls, failed, rejected atomic.Int64
	nanos                   atomic.Int64 // the calls' durations, added up
	// latency is allocated at the command's first call while latency
	// tracking is on (latency-tracking yes, the default).
	latency atomic.Pointer[histogram.Histogram]
}

// histogram returns the command's latency histogram, allocating it once.
func (st *commandStats) histogram() *histogram.Histogram {
	if h := st.latency.Load(); h != nil {
		return h
	}
	st.latency.CompareAndSwap(nil, new(histogram.Histogram))
	return st.latency.Load()
}

// call is a command being served: what the slow log, MONITOR and the
// statistics need of it once it is done.
type call struct {
	cmd  *keyspace.Command // nil once counted, or for a command not counted
	args [][]byte
	// start is when its batch began (see runBuffered), and blockedAt the
	// connection's blockedTotal then: the time a command waited for
	// something other than work (WAIT) is left out, as Redis leaves it out.
	start     time.Time
	blockedAt time.Duration
	failed    bool // an error reply was given
	fed       bool // shown to MONITOR as it started
}

// record shows a call whose reply is ready to MONITOR, and keeps it to be
// counted when its batch ends (see counted).
func (c *conn) record(cl *call, failed bool) {
	if m := &c.srv.hub.monitors; m.n.Load() > 0 && !cl.fed && monitored(cl.cmd) {
		m.feed(c.db, c.addr, cl.cmd, cl.args)
	}
	cl.failed = failed
	c.finished = append(c.finished, *cl)
}

// counted counts the calls of a batch whose replies were all ready at now.
// A call's duration runs from when the server read its batch to then: one
// clock reading per batch rather than two per command (on a virtual machine
// a reading of the clock costs a noticeable share of a lock command's
// work). The n commands of a pipeline share its time, each counted a
// n-th of it: their durations add up to the batch's, as the commands'
// own times do in Redis's statistics, and a pipeline of 10,000 fast
// commands that took 20 ms does not fill the slow log.
func (c *conn) counted(now time.Time) {
	n := time.Duration(len(c.finished))
	for i := range c.finished {
		cl := &c.finished[i]
		d := (now.Sub(cl.start) - (c.blockedTotal - cl.blockedAt)) / n
		c.srv.countCall(cl.cmd, d, cl.failed)
		if t := c.srv.slowlogSlower.Load(); t >= 0 && d.Microseconds() >= t || c.srv.latencyThreshold.Load() > 0 {
			c.info.Lock()
			name := c.info.name
			c.info.Unlock()
			c.srv.checkSlow(cl.cmd, cl.args, d, c.addr, name)
		}
	}
	clear(c.finished)
	c.finished = c.finished[:0]
}

// countCall adds one call of cmd that took d.
func (s *Server) countCall(cmd *keyspace.Command, d time.Duration, failed bool) {
	st := &s.cmdStats[cmd.ID]
	st.calls.Add(1)
	st.nanos.Add(int64(d))
	if failed {
		st.failed.Add(1)
	}
	if s.latencyTracking.Load() {
		st.histogram().Observe(int64(d))
	}
}

// countInner counts a call of cmd made inside another command (EXEC), whose
// own duration is not known: it adds no time and no latency.
func (s *Server) countInner(cmd *keyspace.Command, failed bool) {
	st := &s.cmdStats[cmd.ID]
	st.calls.Add(1)
	if failed {
		st.failed.Add(1)
	}
}

// countScriptCalls counts the commands that req's scripts called, for
// client addr, as Redis counts a script's calls: each one that ran as a
// command processed, with its time and whether it failed; each refused one
// as rejected; every error reply they were given in the error statistics.
// The state machine ran them, on this node or on the leader (see
// replication.Request.Calls); a request whose wait ended before its reply
// was ready has none to count.
func (s *Server) countScriptCalls(req *replication.Request, addr string) {
	if !req.Ready() {
		return
	}
	ran := int64(0)
	for _, cl := range req.Calls {
		if cl.Err != "" {
			s.countError(cl.Cmd, cl.Err, addr)
		}
		switch {
		case cl.Rejected:
			s.countRejected(cl.Cmd)
		case cl.Cmd != nil:
			ran++
			s.countCall(cl.Cmd, time.Duration(cl.Nanos), cl.Err != "")
		}
	}
	if ran > 0 {
		s.stats.commands.Add(ran)
	}
}

// countRejected counts a command refused before it ran (Redis's rejected_calls).
func (s *Server) countRejected(cmd *keyspace.Command) {
	if cmd != nil {
		s.cmdStats[cmd.ID].rejected.Add(1)
	}
}

// resetCommandStats is CONFIG RESETSTAT's part.
func (s *Server) resetCommandStats() {
	for i := range s.cmdStats {
		st := &s.cmdStats[i]
		st.calls.Store(0)
		st.failed.Store(0)
		st.rejected.Store(0)
		st.nanos.Store(0)
		if h := st.latency.Load(); h != nil {
			h.Reset()
		}
	}
}

// commandFigures is one command's statistics at one moment.
type commandFigures struct {
	cmd                     *keyspace.Command
	calls, failed, rejected int64
	nanos                   int64
	latency                 *histogram.Snapshot // nil when never tracked
}

// commandFiguresAll returns the figures of every command that was called or
// rejected, in the order of the command table.
func (s *Server) commandFiguresAll() []commandFigures {
	var out []commandFigures
	for _, cmd := range allNames() {
		st := &s.cmdStats[cmd.ID]
		f := commandFigures{cmd: cmd, calls: st.calls.Load(), failed: st.failed.Load(), rejected: st.rejected.Load(), nanos: st.nanos.Load()}
		if f.calls == 0 && f.rejected == 0 {
			continue
		}
		if h := st.latency.Load(); h != nil {
			f.latency = h.Snapshot()
		}
		out = append(out, f)
	}
	return out
}

// maxErrorCodes bounds the error codes counted one by one, as Redis's
// errorstats does: scripts can make up any number of codes
// (redis.error_reply), and each would be a line of INFO and a series of the
// metrics. Further codes count in total_error_replies only.
const maxErrorCodes = 128

// errorStats count error replies by their code (the first word), for INFO's
// errorstats section, and by code and command for the metrics.
type errorStats struct {
	mu     sync.Mutex
	all    int64
	byCode map[string]int64
	byCmd  map[errorKey]int64
}

type errorKey struct {
	cmd  string // "" for an error no command gave (a protocol error)
	code string
}

// count records an error reply to cmd (nil when there was none).
func (e *errorStats) count(cmd *keyspace.Command, msg string) {
	code, _, _ := strings.Cut(msg, " ")
	name := ""
	if cmd != nil {
		name = cmd.Name
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.all++
	if e.byCode == nil {
		e.byCode = make(map[string]int64)
		e.byCmd = make(map[errorKey]int64)
	}
	if _, ok := e.byCode[code]; !ok && len(e.byCode) >= maxErrorCodes {
		return
	}
	e.byCode[code]++
	e.byCmd[errorKey{name, code}]++
}

type errorCount struct {
	errorKey
	count int64
}

// snapshot returns the counts by code, sorted.
func (e *errorStats) snapshot() []errorCount {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make([]errorCount, 0, len(e.byCode))
	for code, n := range e.byCode {
		out = append(out, errorCount{errorKey{code: code}, n})
	}
	slices.SortFunc(out, func(a, b errorCount) int { return strings.Compare(a.code, b.code) })
	return out
}

// byCommand returns the counts by command and code.
func (e *errorStats) byCommand() []errorCount {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make([]errorCount, 0, len(e.byCmd))
	for k, n := range e.byCmd {
		out = append(out, errorCount{k, n})
	}
	return out
}

func (e *errorStats) total() int64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.all
}

func (e *errorStats) reset() {
	e.mu.Lock()
	e.all, e.byCode, e.byCmd = 0, nil, nil
	e.mu.Unlock()
}

// countErrorReply counts error reply r to cmd, unless it was counted where
// it arose (keyspace.CountedError).
func (s *Server) countErrorReply(cmd *keyspace.Command, r keyspace.Reply, addr string) {
	if !r.Counted() {
		s.countError(cmd, r.Str, addr)
	}
}

// countError counts an error reply to a command (nil for a protocol error)
// of client addr, and logs a refusal for maxmemory, at most once a second:
// each refused command would be a line otherwise.
func (s *Server) countError(cmd *keyspace.Command, msg, addr string) {
	s.stats.errors.count(cmd, msg)
	if !strings.HasPrefix(msg, "OOM ") {
		return
	}
	now, last := time.Now().UnixNano(), s.oomLogged.Load()
	if now-last < int64(time.Second) || !s.oomLogged.CompareAndSwap(last, now) {
		return
	}
	name := ""
	if cmd != nil {
		name = cmd.Name
	}
	s.log.Warn("refused a command: used memory is over maxmemory", "event", "command_refused", "reason", "oom",
		"command", name, "client", addr, "used_memory", s.mem.current(), "maxmemory", s.mem.limit.Load())
}

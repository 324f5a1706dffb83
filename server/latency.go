package server

import (
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/lockserver/lockserver/internal/histogram"
	"github.com/lockserver/lockserver/keyspace"
)

// latencySamples is how many samples Redis's latency monitor keeps of an
// event: one per second at most.
const latencySamples = 160

// latencyMonitor is Redis's latency monitor: for each event ("command",
// "fast-command") the samples at or above latency-monitor-threshold, one per
// second (the largest), and the largest ever.
type latencyMonitor struct {
	mu     sync.Mutex
	events map[string]*latencyEvent
}

type latencyEvent struct {
	samples []latencySample // oldest first, at most latencySamples
	max     int64
}

type latencySample struct{ at, ms int64 }

func (m *latencyMonitor) add(event string, at, ms int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.events == nil {
		m.events = map[string]*latencyEvent{}
	}
	e := m.events[event]
	if e == nil {
		e = &latencyEvent{}
		m.events[event] = e
	}
	e.max = max(e.max, ms)
	if n := len(e.samples); n > 0 && e.samples[n-1].at == at {
		e.samples[n-1].ms = max(e.samples[n-1].ms, ms)
		return
	}
	e.samples = append(e.samples, latencySample{at, ms})
	if len(e.samples) > latencySamples {
		e.samples = e.samples[1:]
	}
}

// The server runs LATENCY.
func init() {
	registerHandlers(map[string]handler{
		"latency|latest":    cmdLatencyLatest,
		"latency|history":   cmdLatencyHistory,
		"latency|reset":     cmdLatencyReset,
		"latency|histogram": cmdLatencyHistogram,
		"latency|help": help("LATENCY",
			"DOCTOR", "    Return a human readable latency analysis report.",
			"HISTORY <event>", "    Return time-latency samples for the <event> class.",
			"LATEST", "    Return the latest latency samples for all events.",
			"RESET [<event> ...]", "    Reset latency data of one or more <event> classes.",
			"    (default: reset all data for all event classes)",
			"HISTOGRAM [COMMAND ...]", "    Return a cumulative distribution of latencies in the format of a histogram for the specified command names.",
			"    If no commands are specified then all histograms are replied."),
	})
}

// LATENCY LATEST: [event, time of the latest sample, its latency, the
// largest] for each event.
func cmdLatencyLatest(c *conn, args [][]byte) {
	m := &c.srv.latency
	m.mu.Lock()
	var out []keyspace.Reply
	for _, name := range slices.Sorted(maps.Keys(m.events)) {
		e := m.events[name]
		last := e.samples[len(e.samples)-1]
		out = append(out, keyspace.Array(keyspace.Bulk(name), keyspace.Int(last.at), keyspace.Int(last.ms), keyspace.Int(e.max)))
	}
	m.mu.Unlock()
	c.reply(keyspace.Array(out...))
}

// LATENCY HISTORY event: [time, latency] for each sample of the event.
func cmdLatencyHistory(c *conn, args [][]byte) {
	m := &c.srv.latency
	m.mu.Lock()
	var out []keyspace.Reply
	if e := m.events[string(args[2])]; e != nil {
		for _, s := range e.samples {
			out = append(out, keyspace.Array(keyspace.Int(s.at), keyspace.Int(s.ms)))
		}
	}
	m.mu.Unlock()
	c.reply(keyspace.Array(out...))
}

// LATENCY RESET [event ...]: forgets the events named (all of them without
// a name) and replies how many it forgot.
func cmdLatencyReset(c *conn, args [][]byte) {
	m := &c.srv.latency
	m.mu.Lock()
	n := 0
	if len(args) == 2 {
		n = len(m.events)
		m.events = nil
	} else {
		for _, a := range args[2:] {
			if _, ok := m.events[string(a)]; ok {
				delete(m.events, string(a))
				n++
			}
		}
	}
	m.mu.Unlock()
	c.reply(keyspace.Int(int64(n)))
}

// LATENCY HISTOGRAM [command ...]: for each command named (a name given twice
// twice, as in Redis; all that have run without a name) its calls and the cumulative counts of its latencies below
// each power of two microseconds, as Redis 7 gives them: a bucket appears only
// where the count grows, keyed by its largest value in microseconds.
func cmdLatencyHistogram(c *conn, args [][]byte) {
	var cmds []*keyspace.Command
	if len(args) == 2 {
		cmds = allNames()
	} else {
		// A command with subcommands stands for them too, as in Redis.
		for _, a := range args[2:] {
			if cmd := lookupFull([]byte(strings.ToLower(string(a)))); cmd != nil {
				cmds = append(cmds, cmd)
				for _, name := range sortedKeys(cmd.Subcommands) {
					cmds = append(cmds, cmd.Subcommands[name])
				}
			}
		}
	}
	var out []keyspace.Reply
	for _, cmd := range cmds {
		h := c.srv.cmdStats[cmd.ID].latency.Load()
		if h == nil {
			continue
		}
		snap := h.Snapshot()
		if snap.Count == 0 {
			continue
		}
		cum := snap.Cumulative(latencyHistogramBounds)
		var buckets []keyspace.Reply
		var prev uint64
		for i, n := range cum {
			if n > prev {
				buckets = append(buckets, keyspace.Int((latencyHistogramBounds[i]-1)/1000), keyspace.Int(int64(n)))
			}
			prev = n
			if n == snap.Count {
				break
			}
		}
		out = append(out, keyspace.Bulk(cmd.Name), keyspace.Map(
			keyspace.Bulk("calls"), keyspace.Int(int64(snap.Count)),
			keyspace.Bulk("histogram_usec"), keyspace.Map(buckets...)))
	}
	c.reply(keyspace.Map(out...))
}

// latencyHistogramBounds are Redis's LATENCY HISTOGRAM buckets: powers of
// two nanoseconds from 1024.
var latencyHistogramBounds = histogram.PowersOfTwo(10, 45)

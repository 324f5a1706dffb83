package server

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/lockserver/lockserver/keyspace"
)

// LATENCY DOCTOR and MEMORY DOCTOR: Redis's human-readable reports. Where
// there is nothing to report they answer Redis's own texts; otherwise they
// give the figures Redis gives, with advice about lockserver.

func init() {
	registerHandlers(map[string]handler{
		"latency|doctor": func(c *conn, args [][]byte) {
			c.reply(keyspace.Reply{Kind: keyspace.KindVerbatim, Str: c.srv.latency.report(time.Now().Unix(), c.srv.latencyThreshold.Load(), c.srv.slowlogSlower.Load())})
		},
		"memory|doctor": func(c *conn, args [][]byte) {
			c.reply(keyspace.Reply{Kind: keyspace.KindVerbatim, Str: c.srv.memoryReport()})
		},
	})
}

// latencyStats are Redis's figures of one event (analyzeLatencyForEvent):
// the samples, their average and mean absolute deviation in milliseconds
// (integer division, as Redis's), and the seconds since the oldest (at
// least 1).
type latencyStats struct {
	samples, avg, mad, period int64
}

func (e *latencyEvent) stats(now int64) latencyStats {
	st := latencyStats{samples: int64(len(e.samples))}
	if st.samples == 0 {
		return st
	}
	var sum int64
	oldest := e.samples[0].at
	for _, s := range e.samples {
		sum += s.ms
		oldest = min(oldest, s.at)
	}
	st.avg = sum / st.samples
	st.period = max(now-oldest, 1)
	var dev int64
	for _, s := range e.samples {
		d := st.avg - s.ms
		if d < 0 {
			d = -d
		}
		dev += d
	}
	st.mad = dev / st.samples
	return st
}

// report is LATENCY DOCTOR's reply at now (Unix seconds), with the latency
// monitor's threshold and the slow log's, in milliseconds and microseconds.
func (m *latencyMonitor) report(now, threshold, slowlog int64) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.events) == 0 && threshold == 0 {
		return "I'm sorry, Dave, I can't do that. Latency monitoring is disabled in this Redis instance. You may use \"CONFIG SET latency-monitor-threshold <milliseconds>.\" in order to enable it. If we weren't in a deep space mission I'd suggest to take a look at https://redis.io/topics/latency-monitor.\n"
	}
	if len(m.events) == 0 {
		return "Dave, no latency spike was observed during the lifetime of this Redis instance, not in the slightest bit. I honestly think you ought to sit down calmly, take a stress pill, and think things over.\n"
	}
	var b strings.Builder
	b.WriteString("Dave, I have observed latency spikes in this Redis instance. You don't mind talking about it, do you Dave?\n\n")
	var advice []string
	for i, name := range slices.Sorted(maps.Keys(m.events)) {
		e := m.events[name]
		st := e.stats(now)
		fmt.Fprintf(&b, "%d. %s: %d latency spikes (average %dms, mean deviation %dms, period %.2f sec). Worst all time event %dms.\n",
			i+1, name, st.samples, st.avg, st.mad, float64(st.period)/float64(st.samples), e.max)
		switch name {
		case "command":
			switch {
			case slowlog < 0:
				advice = append(advice, fmt.Sprintf("- Commands were slow and the slow log is off: 'CONFIG SET slowlog-log-slower-than %d' records those slower than the latency monitor's threshold.", threshold*1000))
			case slowlog/1000 > threshold:
				advice = append(advice, fmt.Sprintf("- The slow log records only commands slower than the latency monitor's threshold and more: 'CONFIG SET slowlog-log-slower-than %d' records these too.", threshold*1000))
			}
			advice = append(advice, "- SLOWLOG GET names the slow commands. The usual ones are scripts that loop long or build large strings (the log names each slow script's SHA1), and commands on keys holding large values: keep values small, and a lock's state in a key of its own.")
		case "fast-command":
			advice = append(advice, "- Commands that take microseconds took milliseconds: the process got no CPU for that long. Its host may be loaded or overcommitted (another process, a container's CPU quota), or the process paused for its own garbage collection under a large heap. Give lockserver CPU of its own (--procs) and compare with the host's intrinsic latency (redis-cli --intrinsic-latency 100).")
		}
	}
	b.WriteString("\nI have a few advices for you:\n\n")
	for _, a := range advice {
		b.WriteString(a + "\n")
	}
	return b.String()
}

// memoryReport is MEMORY DOCTOR's reply: Redis's verdicts, on the figures
// INFO memory gives (the Go heap in use for used_memory).
func (s *Server) memoryReport() string {
	const empty = 5 << 20
	used, rss, peak := s.mem.current(), s.mem.resident.Load(), s.mem.peak.Load()
	if used < empty {
		return "Hi Sam, this instance is empty or is using very little memory, my issues detector can't be used in these conditions. Please, leave for your mission on Earth and fill it with some data. The new Sam and I will be back to our programming as soon as I finished rebooting.\n"
	}
	var issues []string
	if float64(peak)/float64(used) > 1.5 {
		issues = append(issues, " * Peak memory: In the past this instance used more than 150% the memory that it uses now. The Go runtime returns freed memory to the system over a few minutes; MEMORY PURGE returns it at once.")
	}
	// A Go heap takes up to twice its live data between collections (GOGC's
	// 100), so Redis's 1.4 would be said of every busy server.
	if float64(rss)/float64(used) > 2.5 && rss-used > 10<<20 {
		issues = append(issues, fmt.Sprintf(" * High total RSS: The memory the process holds from the system (%s) is more than 2.5 times its data (%s): the Go runtime keeps what it freed for a few minutes, and a heap that grew (check the peak above) leaves room behind. MEMORY PURGE returns what is free now.", humanBytes(rss), humanBytes(used)))
	}
	var clients int64
	var output uint64
	s.each(func(c *conn) {
		clients++
		c.omu.Lock()
		output += c.outputUsed()
		c.omu.Unlock()
	})
	if clients > 0 && output/uint64(clients) > 200<<10 {
		issues = append(issues, " * Big client buffers: The clients' output buffers hold more than 200K each on average: subscribers that do not read their messages fast enough, or clients asking for large replies or long pipelines. CLIENT LIST shows each one's (omem).")
	}
	if n := s.engine.Info().Scripts; n > 1000 {
		issues = append(issues, fmt.Sprintf(" * Many scripts: %d scripts are cached. Scripts built per call (with their values in the body rather than in KEYS and ARGV) each stay in the cache, on every member, until SCRIPT FLUSH.", n))
	}
	if len(issues) == 0 {
		return "Hi Sam, I can't find any memory issue in your instance. I can only account for what occurs on this base.\n"
	}
	return "Sam, I detected a few issues in this lockserver instance memory implants:\n\n" + strings.Join(issues, "\n\n") + "\n\nI'm here to keep you safe, Sam. I want to help you.\n"
}

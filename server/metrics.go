package server

import (
	"runtime"
	"strconv"

	"github.com/lockserver/lockserver/internal/buildinfo"
	"github.com/lockserver/lockserver/internal/histogram"
	"github.com/prometheus/client_golang/prometheus"
)

// The server's metrics. They are read from the counters INFO reads when a
// registry collects them, so that serving commands costs nothing more with
// metrics on; CONFIG RESETSTAT resets the counters as it resets INFO's.
var (
	descCommands = prometheus.NewDesc("lockserver_commands_total",
		"Commands run, by command (INFO commandstats calls).", []string{"command"}, nil)
	descRejected = prometheus.NewDesc("lockserver_commands_rejected_total",
		"Commands refused before they ran (arity, NOAUTH, OOM inside MULTI, ...), by command.", []string{"command"}, nil)
	descFailed = prometheus.NewDesc("lockserver_commands_failed_total",
		"Commands that ran and replied with an error, by command.", []string{"command"}, nil)
	descErrors = prometheus.NewDesc("lockserver_error_replies_total",
		"Error replies, by command and error code (its first word); command is empty for protocol errors.", []string{"command", "code"}, nil)
	descDuration = prometheus.NewDesc("lockserver_command_duration_seconds",
		"Time from reading a command to its reply being ready to write (a write's includes its commit; the n commands of a pipeline count a n-th of its time each), by command; kept while latency-tracking is yes.", []string{"command"}, nil)
	descConnected = prometheus.NewDesc("lockserver_connected_clients",
		"Client connections open now.", nil, nil)
	descAccepted = prometheus.NewDesc("lockserver_connections_received_total",
		"Client connections accepted, refused ones included.", nil, nil)
	descRefused = prometheus.NewDesc("lockserver_connections_rejected_total",
		"Client connections refused at maxclients.", nil, nil)
	descChannels = prometheus.NewDesc("lockserver_pubsub_channels",
		"Channels with subscribers on this node, by kind (channel, pattern, shard).", []string{"kind"}, nil)
	descKeys = prometheus.NewDesc("lockserver_keys",
		"Keys, by database (expired ones not yet reclaimed included).", []string{"db"}, nil)
	descExpires = prometheus.NewDesc("lockserver_keys_with_expiry",
		"Keys with a deadline, by database.", []string{"db"}, nil)
	descExpired = prometheus.NewDesc("lockserver_expired_keys_total",
		"Keys reclaimed after their deadline since the node started or restored a snapshot.", nil, nil)
	descHeap = prometheus.NewDesc("lockserver_heap_live_bytes",
		"Live heap at the last garbage collection: what maxmemory is compared with (INFO used_memory).", nil, nil)
	descMaxMemory = prometheus.NewDesc("lockserver_maxmemory_bytes",
		"The maxmemory setting; 0 for no limit.", nil, nil)
	descOOM = prometheus.NewDesc("lockserver_oom_rejections_total",
		"Commands refused with OOM because the live heap was above maxmemory.", nil, nil)
	descScripts = prometheus.NewDesc("lockserver_scripts_cached",
		"Scripts in the script cache.", nil, nil)
	descStopped = prometheus.NewDesc("lockserver_scripts_budget_stopped_total",
		"Scripts stopped by the script budget on this node.", nil, nil)
	descNetIn = prometheus.NewDesc("lockserver_net_input_bytes_total",
		"Bytes read from clients.", nil, nil)
	descNetOut = prometheus.NewDesc("lockserver_net_output_bytes_total",
		"Bytes written to clients.", nil, nil)
	descSlowlog = prometheus.NewDesc("lockserver_slowlog_entries_total",
		"Commands slower than slowlog-log-slower-than (each one logged to the slow log).", nil, nil)
	descBuild = prometheus.NewDesc("lockserver_build_info",
		"1, labelled with the release this server runs and the Go it was built with.", nil,
		prometheus.Labels{"version": buildinfo.Version, "goversion": runtime.Version()})
)

// durationBounds are the upper bounds of the command duration histogram's
// buckets, in nanoseconds: powers of two from about 1 us to about 34 s,
// edges of the histogram's own buckets.
var durationBounds = histogram.PowersOfTwo(10, 35)

// durationBoundsSeconds are durationBounds in seconds, for the exposition.
var durationBoundsSeconds = func() []float64 {
	out := make([]float64, len(durationBounds))
	for i, b := range durationBounds {
		out[i] = float64(b) / 1e9
	}
	return out
}()

// Collector returns the server's metrics as a Prometheus collector, to
// register in a registry of the caller's. Each Server has its own: to put two
// in one registry, wrap one with prometheus.WrapRegistererWith and a label.
func (s *Server) Collector() prometheus.Collector { return collector{s} }

type collector struct{ s *Server }

func (c collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descCommands, descRejected, descFailed, descErrors, descDuration,
		descConnected, descAccepted, descRefused, descChannels, descKeys, descExpires, descExpired,
		descHeap, descMaxMemory, descOOM, descScripts, descStopped, descNetIn, descNetOut, descSlowlog, descBuild} {
		ch <- d
	}
}

func (c collector) Collect(ch chan<- prometheus.Metric) {
	s := c.s
	counter := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, labels...)
	}
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	for _, f := range s.commandFiguresAll() {
		counter(descCommands, float64(f.calls), f.cmd.Name)
		counter(descRejected, float64(f.rejected), f.cmd.Name)
		counter(descFailed, float64(f.failed), f.cmd.Name)
		if f.latency != nil {
			cum := f.latency.Cumulative(durationBounds)
			buckets := make(map[float64]uint64, len(cum))
			for i, n := range cum {
				buckets[durationBoundsSeconds[i]] = n
			}
			ch <- prometheus.MustNewConstHistogram(descDuration, f.latency.Count, float64(f.latency.Sum)/1e9, buckets, f.cmd.Name)
		}
	}
	var oom int64
	for _, e := range s.stats.errors.byCommand() {
		counter(descErrors, float64(e.count), e.cmd, e.code)
		if e.code == "OOM" {
			oom += e.count
		}
	}
	counter(descOOM, float64(oom))
	gauge(descBuild, 1)

	t := s.totals()
	gauge(descConnected, float64(t.clients))
	counter(descAccepted, float64(s.stats.connections.Load()))
	counter(descRefused, float64(s.stats.rejected.Load()))
	counter(descNetIn, float64(t.netIn))
	counter(descNetOut, float64(t.netOut))
	channels, patterns, shards := s.hub.counts()
	gauge(descChannels, float64(channels), "channel")
	gauge(descChannels, float64(patterns), "pattern")
	gauge(descChannels, float64(shards), "shard")

	info := s.engine.Info()
	for db, n := range info.Keys {
		if n > 0 || db == 0 {
			gauge(descKeys, float64(n), strconv.Itoa(db))
			gauge(descExpires, float64(info.Expires[db]), strconv.Itoa(db))
		}
	}
	counter(descExpired, float64(info.ExpiredKeys))
	gauge(descScripts, float64(info.Scripts))
	counter(descStopped, float64(info.ScriptsStopped))
	gauge(descHeap, float64(s.mem.current()))
	gauge(descMaxMemory, float64(s.mem.limit.Load()))
	counter(descSlowlog, float64(s.slowlog.total()))
}

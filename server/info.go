package server

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/lockserver/lockserver/internal/acl"
	"github.com/lockserver/lockserver/internal/buildinfo"
	"github.com/lockserver/lockserver/keyspace"
	"github.com/lockserver/lockserver/replication"
)

// infoSections are INFO's sections in Redis's order. Sections lockserver has
// no figures for (modules) are not listed: asking for them returns nothing,
// as asking Redis for an unknown section does.
var infoSections = []struct {
	name  string
	write func(s *Server, b *infoBuilder)
	// notDefault leaves the section out of INFO and INFO DEFAULT, as Redis
	// does; INFO ALL and EVERYTHING have it.
	notDefault bool
}{
	{name: "server", write: (*Server).infoServer},
	{name: "clients", write: (*Server).infoClients},
	{name: "memory", write: (*Server).infoMemory},
	{name: "persistence", write: (*Server).infoPersistence},
	{name: "stats", write: (*Server).infoStats},
	{name: "replication", write: (*Server).infoReplication},
	{name: "cpu", write: (*Server).infoCPU},
	{name: "commandstats", write: (*Server).infoCommandStats, notDefault: true},
	{name: "errorstats", write: (*Server).infoErrorStats},
	{name: "latencystats", write: (*Server).infoLatencyStats, notDefault: true},
	{name: "cluster", write: (*Server).infoCluster},
	{name: "keyspace", write: (*Server).infoKeyspace},
}

// INFO [section ...]: no section and "default" give the default sections,
// "all" and "everything" every section.
func cmdInfo(c *conn, args [][]byte) {
	want := map[string]bool{}
	for _, a := range args[1:] {
		want[strings.ToLower(string(a))] = true
	}
	def := len(want) == 0 || want["default"]
	all := want["all"] || want["everything"]
	b := &infoBuilder{engine: c.srv.engine.Info}
	for _, sec := range infoSections {
		if all || def && !sec.notDefault || want[sec.name] {
			b.section(sec.name)
			sec.write(c.srv, b)
		}
	}
	c.reply(keyspace.Reply{Kind: keyspace.KindVerbatim, Str: b.String()})
}

// infoBuilder writes INFO's "key:value" lines, sections separated by a blank
// line, as Redis's genRedisInfoString does.
type infoBuilder struct {
	strings.Builder
	engine func() replication.Info
	info   *replication.Info // asked of the engine once, when a section needs it
}

func (b *infoBuilder) section(name string) {
	if b.Len() > 0 {
		b.WriteString("\r\n")
	}
	b.WriteString("# " + strings.ToUpper(name[:1]) + name[1:] + "\r\n")
}

func (b *infoBuilder) line(key string, value any) {
	fmt.Fprintf(&b.Builder, "%s:%v\r\n", key, value)
}

func (b *infoBuilder) engineInfo() *replication.Info {
	if b.info == nil {
		i := b.engine()
		b.info = &i
	}
	return b.info
}

func (s *Server) infoServer(b *infoBuilder) {
	now := time.Now()
	uptime := int64(now.Sub(s.started) / time.Second)
	exe, _ := os.Executable()
	b.line("redis_version", redisVersion)
	b.line("lockserver_version", buildinfo.Version)
	b.line("redis_mode", "standalone")
	b.line("os", runtime.GOOS+" "+runtime.GOARCH)
	b.line("arch_bits", strconv.IntSize)
	b.line("go_version", runtime.Version())
	b.line("process_id", os.Getpid())
	b.line("run_id", s.runID)
	b.line("tcp_port", s.port())
	b.line("server_time_usec", now.UnixMicro())
	b.line("uptime_in_seconds", uptime)
	b.line("uptime_in_days", uptime/86400)
	b.line("hz", int(time.Second/(100*time.Millisecond)))
	b.line("executable", exe)
	b.line("config_file", "")
}

func (s *Server) infoClients(b *infoBuilder) {
	s.mu.Lock()
	n := len(s.conns)
	s.mu.Unlock()
	b.line("connected_clients", n)
	b.line("cluster_connections", 0)
	b.line("maxclients", s.maxClients.Load())
	b.line("blocked_clients", 0)
	b.line("tracking_clients", 0)
}

func (s *Server) infoMemory(b *infoBuilder) {
	used := s.mem.current()
	rss := s.mem.resident.Load()
	limit := s.mem.limit.Load()
	b.line("used_memory", used)
	b.line("used_memory_human", humanBytes(used))
	b.line("used_memory_rss", rss)
	b.line("used_memory_rss_human", humanBytes(rss))
	b.line("used_memory_peak", s.mem.peak.Load())
	b.line("used_memory_peak_human", humanBytes(s.mem.peak.Load()))
	b.line("number_of_cached_scripts", b.engineInfo().Scripts)
	b.line("number_of_functions", b.engineInfo().Functions)
	b.line("number_of_libraries", b.engineInfo().Libraries)
	b.line("maxmemory", limit)
	b.line("maxmemory_human", humanBytes(limit))
	b.line("maxmemory_policy", "noeviction")
	b.line("mem_allocator", "go-"+runtime.Version())
}

// humanBytes formats n as Redis's bytesToHuman does.
func humanBytes(n int64) string {
	f := float64(n)
	switch {
	case n < 1<<10:
		return strconv.FormatInt(n, 10) + "B"
	case n < 1<<20:
		return strconv.FormatFloat(f/(1<<10), 'f', 2, 64) + "K"
	case n < 1<<30:
		return strconv.FormatFloat(f/(1<<20), 'f', 2, 64) + "M"
	case n < 1<<40:
		return strconv.FormatFloat(f/(1<<30), 'f', 2, 64) + "G"
	case n < 1<<50:
		return strconv.FormatFloat(f/(1<<40), 'f', 2, 64) + "T"
	}
	return strconv.FormatFloat(f/(1<<50), 'f', 2, 64) + "P"
}

func (s *Server) infoPersistence(b *infoBuilder) {
	b.line("loading", 0)
	b.line("async_loading", 0)
	b.line("rdb_bgsave_in_progress", 0)
	b.line("rdb_last_bgsave_status", "ok")
	b.line("aof_enabled", 0)
	b.line("aof_rewrite_in_progress", 0)
	b.line("aof_last_write_status", "ok")
}

// totals are the server's counts with those of the open connections.
type totals struct {
	clients                 int
	commands, netIn, netOut int64
	reads, writes           int64
}

func (s *Server) totals() totals {
	var t totals
	s.each(func(c *conn) {
		t.clients++
		t.commands += c.commands.Load()
		t.netIn += c.rd.Total.Load()
		t.netOut += c.written.Load()
		t.reads += c.rd.Reads.Load()
		t.writes += c.writes.Load()
	})
	t.commands += s.stats.commands.Load()
	t.netIn += s.stats.netIn.Load()
	t.netOut += s.stats.netOut.Load()
	t.reads += s.stats.reads.Load()
	t.writes += s.stats.writes.Load()
	return t
}

func (s *Server) infoStats(b *infoBuilder) {
	t := s.totals()
	channels, patterns, shards := s.hub.counts()
	b.line("total_connections_received", s.stats.connections.Load())
	b.line("total_commands_processed", t.commands)
	b.line("total_net_input_bytes", t.netIn)
	b.line("total_net_output_bytes", t.netOut)
	b.line("rejected_connections", s.stats.rejected.Load())
	b.line("expired_keys", b.engineInfo().ExpiredKeys)
	b.line("evicted_keys", 0)
	b.line("evicted_clients", 0)
	b.line("pubsub_channels", channels)
	b.line("pubsub_patterns", patterns)
	b.line("pubsubshard_channels", shards)
	b.line("total_error_replies", s.stats.errors.total())
	// Each read of a client's connection into its query buffer, and each
	// write of its replies: one each for a command a client sends and then
	// waits for, as redis-server counts its read and write events.
	b.line("total_reads_processed", t.reads)
	b.line("total_writes_processed", t.writes)
	b.line("client_output_buffer_limit_disconnections", s.stats.outputLimited.Load())
	// Redis 7.2's counts of the ACL's refusals.
	b.line("acl_access_denied_auth", s.stats.aclDenied[acl.DeniedAuth].Load())
	b.line("acl_access_denied_cmd", s.stats.aclDenied[acl.DeniedCommand].Load())
	b.line("acl_access_denied_key", s.stats.aclDenied[acl.DeniedKey].Load())
	b.line("acl_access_denied_channel", s.stats.aclDenied[acl.DeniedChannel].Load())
}

func (s *Server) infoReplication(b *infoBuilder) {
	info := b.engineInfo()
	b.line("role", info.Role)
	b.line("connected_slaves", info.Replicas)
	b.line("master_failover_state", "no-failover")
	b.line("master_replid", s.runID)
	b.line("master_replid2", strings.Repeat("0", 40))
	b.line("master_repl_offset", 0)
	b.line("second_repl_offset", -1)
	b.line("repl_backlog_active", 0)
}

func (s *Server) infoCPU(b *infoBuilder) {
	var self, children syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &self)
	syscall.Getrusage(syscall.RUSAGE_CHILDREN, &children)
	b.line("used_cpu_sys", seconds(self.Stime))
	b.line("used_cpu_user", seconds(self.Utime))
	b.line("used_cpu_sys_children", seconds(children.Stime))
	b.line("used_cpu_user_children", seconds(children.Utime))
}

func seconds(t syscall.Timeval) string {
	return fmt.Sprintf("%d.%06d", t.Sec, t.Usec)
}

// infoCommandStats has a line for each command called or rejected since the
// start or CONFIG RESETSTAT, as Redis's commandstats.
func (s *Server) infoCommandStats(b *infoBuilder) {
	for _, f := range s.commandFiguresAll() {
		usec := f.nanos / 1e3
		perCall := 0.0
		if f.calls > 0 {
			perCall = float64(f.nanos) / 1e3 / float64(f.calls)
		}
		fmt.Fprintf(&b.Builder, "cmdstat_%s:calls=%d,usec=%d,usec_per_call=%.2f,rejected_calls=%d,failed_calls=%d\r\n",
			f.cmd.Name, f.calls, usec, perCall, f.rejected, f.failed)
	}
}

// infoLatencyStats gives the latency-tracking-info-percentiles of each
// command's latency in microseconds, as Redis 7's latencystats.
func (s *Server) infoLatencyStats(b *infoBuilder) {
	if !s.latencyTracking.Load() {
		return // as Redis: nothing while latency-tracking is off
	}
	percentiles := *s.latencyPercentiles.Load()
	for _, f := range s.commandFiguresAll() {
		if f.latency == nil || f.latency.Count == 0 {
			continue
		}
		b.WriteString("latency_percentiles_usec_" + f.cmd.Name + ":")
		for i, p := range percentiles {
			if i > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b.Builder, "p%s=%.3f", strconv.FormatFloat(p, 'f', -1, 64), float64(f.latency.Percentile(p/100))/1e3)
		}
		b.WriteString("\r\n")
	}
}

func (s *Server) infoErrorStats(b *infoBuilder) {
	for _, e := range s.stats.errors.snapshot() {
		b.line("errorstat_"+e.code, "count="+strconv.FormatInt(e.count, 10))
	}
}

func (s *Server) infoCluster(b *infoBuilder) { b.line("cluster_enabled", 0) }

// infoKeyspace lists the databases holding keys. avg_ttl is 0: lockserver does
// not estimate it.
func (s *Server) infoKeyspace(b *infoBuilder) {
	info := b.engineInfo()
	for db, keys := range info.Keys {
		if keys > 0 {
			fmt.Fprintf(&b.Builder, "db%d:keys=%d,expires=%d,avg_ttl=0\r\n", db, keys, info.Expires[db])
		}
	}
}

// resetStats is CONFIG RESETSTAT.
func (s *Server) resetStats() {
	s.stats.connections.Store(0)
	s.stats.rejected.Store(0)
	s.stats.commands.Store(0)
	s.stats.netIn.Store(0)
	s.stats.netOut.Store(0)
	s.stats.reads.Store(0)
	s.stats.writes.Store(0)
	s.stats.outputLimited.Store(0)
	for i := range s.stats.aclDenied {
		s.stats.aclDenied[i].Store(0)
	}
	s.stats.errors.reset()
	s.resetCommandStats()
	s.each(func(c *conn) {
		c.commands.Store(0)
		c.rd.Total.Store(0)
		c.written.Store(0)
		c.rd.Reads.Store(0)
		c.writes.Store(0)
	})
	s.mem.peak.Store(s.mem.current())
}

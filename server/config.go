package server

import (
	"errors"
	"math"
	"net"
	"slices"
	"strconv"
	"strings"

	"github.com/lockserver/lockserver/keyspace"
)

// setting is one CONFIG parameter. Settings lockserver honours can be changed
// with CONFIG SET; the others report what lockserver really does, so that
// tools that read them (redis-benchmark reads save and appendonly) get true
// answers, and accept only that value.
type setting struct {
	name string
	get  func(s *Server) string
	set  func(s *Server, v string) error // nil: immutable
}

// settings are the CONFIG parameters, by name.
var settings = map[string]*setting{}

func init() {
	for _, st := range []*setting{
		{name: "maxmemory",
			get: func(s *Server) string { return strconv.FormatInt(s.mem.limit.Load(), 10) },
			set: func(s *Server, v string) error {
				n, err := parseMemory(v)
				if err != nil {
					return err
				}
				s.mem.setLimit(n)
				return nil
			}},
		{name: "maxmemory-policy",
			get: func(*Server) string { return "noeviction" },
			set: func(s *Server, v string) error {
				switch strings.ToLower(v) {
				case "noeviction":
					return nil
				case "volatile-lru", "volatile-lfu", "volatile-random", "volatile-ttl", "allkeys-lru", "allkeys-lfu", "allkeys-random":
					return errors.New("lockserver never evicts keys: only noeviction is supported")
				}
				return errors.New("argument(s) must be one of the following: volatile-lru, volatile-lfu, volatile-random, volatile-ttl, allkeys-lru, allkeys-lfu, allkeys-random, noeviction")
			}},
		{name: "requirepass",
			get: func(s *Server) string { return *s.password.Load() },
			set: (*Server).setRequirePass},
		{name: "protected-mode",
			get: func(s *Server) string { return yesNo(s.protected.Load()) },
			set: func(s *Server, v string) error { return setYesNo(&s.protected, v) }},
		{name: "maxclients",
			get: func(s *Server) string { return strconv.FormatInt(s.maxClients.Load(), 10) },
			set: func(s *Server, v string) error {
				n, err := parseBounded(v, 1, math.MaxUint32)
				if err != nil {
					return err
				}
				s.maxClients.Store(n)
				return nil
			}},
		{name: "proto-max-bulk-len",
			get: func(s *Server) string { return strconv.FormatInt(s.limits.MaxBulk.Load(), 10) },
			set: func(s *Server, v string) error { return setMemoryAtLeast(&s.limits.MaxBulk, v, 1<<20) }},
		{name: "client-query-buffer-limit",
			get: func(s *Server) string { return strconv.FormatInt(s.limits.MaxQuery.Load(), 10) },
			set: func(s *Server, v string) error { return setMemoryAtLeast(&s.limits.MaxQuery, v, 1<<20) }},
		{name: "client-output-buffer-limit",
			get: func(s *Server) string { return s.outputLimits.Load().String() },
			set: func(s *Server, v string) error {
				l, err := parseOutputLimits(v, *s.outputLimits.Load())
				if err != nil {
					return err
				}
				s.outputLimits.Store(&l)
				return nil
			}},
		{name: "latency-tracking",
			get: func(s *Server) string { return yesNo(s.latencyTracking.Load()) },
			set: func(s *Server, v string) error { return setYesNo(&s.latencyTracking, v) }},
		{name: "latency-tracking-info-percentiles",
			get: func(s *Server) string {
				var b []byte
				for i, p := range *s.latencyPercentiles.Load() {
					if i > 0 {
						b = append(b, ' ')
					}
					b = strconv.AppendFloat(b, p, 'f', -1, 64)
				}
				return string(b)
			},
			set: func(s *Server, v string) error {
				ps := []float64{}
				for _, f := range strings.Fields(v) {
					p, err := strconv.ParseFloat(f, 64)
					if err != nil {
						return errInvalidPercentiles
					}
					if p < 0 || p > 100 {
						return errors.New("latency-tracking-info-percentiles parameters should sit between [0.0,100.0]")
					}
					ps = append(ps, p)
				}
				s.latencyPercentiles.Store(&ps)
				return nil
			}},
		{name: "slowlog-log-slower-than",
			get: func(s *Server) string { return strconv.FormatInt(s.slowlogSlower.Load(), 10) },
			set: func(s *Server, v string) error { return setBounded(&s.slowlogSlower, v, -1, math.MaxInt64) }},
		{name: "slowlog-max-len",
			get: func(s *Server) string { return strconv.FormatInt(s.slowlogMax.Load(), 10) },
			set: func(s *Server, v string) error {
				if err := setBounded(&s.slowlogMax, v, 0, math.MaxInt64); err != nil {
					return err
				}
				s.slowlog.trim(s.slowlogMax.Load())
				return nil
			}},
		{name: "latency-monitor-threshold",
			get: func(s *Server) string { return strconv.FormatInt(s.latencyThreshold.Load(), 10) },
			set: func(s *Server, v string) error { return setBounded(&s.latencyThreshold, v, 0, math.MaxInt64) }},
		{name: "save", get: func(*Server) string { return "" }, set: onlyValue("save", "")},
		{name: "appendonly", get: func(*Server) string { return "no" }, set: func(s *Server, v string) error {
			if !strings.EqualFold(v, "yes") && !strings.EqualFold(v, "no") {
				return errors.New("argument must be 'yes' or 'no'")
			}
			return onlyValue("appendonly", "no")(s, strings.ToLower(v))
		}},
		{name: "notify-keyspace-events", get: func(*Server) string { return "" }, set: onlyValue("notify-keyspace-events", "")},
		{name: "databases", get: func(*Server) string { return strconv.Itoa(keyspace.NumDBs) }},
		{name: "cluster-enabled", get: func(*Server) string { return "no" }},
		{name: "port", get: (*Server).port},
		{name: "timeout", get: func(*Server) string { return "0" }},
	} {
		settings[st.name] = st
	}
	for _, st := range aclConfig {
		settings[st.name] = st
	}
}

// errInvalidPercentiles is Redis's text, capitalised as Redis writes it.
var errInvalidPercentiles = errors.New("Invalid latency-tracking-info-percentiles parameters") //lint:ignore ST1005 Redis's text

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// setYesNo parses a boolean setting as Redis does.
func setYesNo(dst interface{ Store(bool) }, v string) error {
	switch strings.ToLower(v) {
	case "yes":
		dst.Store(true)
	case "no":
		dst.Store(false)
	default:
		return errors.New("argument must be 'yes' or 'no'")
	}
	return nil
}

// onlyValue accepts the one value that describes what lockserver does.
func onlyValue(name, value string) func(*Server, string) error {
	return func(_ *Server, v string) error {
		if v != value {
			return errors.New("lockserver supports only " + name + " " + strconv.Quote(value))
		}
		return nil
	}
}

func setMemoryAtLeast(dst interface{ Store(int64) }, v string, least int64) error {
	n, err := parseMemory(v)
	if err != nil {
		return err
	}
	if n < least {
		return errors.New("argument must be between " + strconv.FormatInt(least, 10) + " and 9223372036854775807 inclusive")
	}
	dst.Store(n)
	return nil
}

func setBounded(dst interface{ Store(int64) }, v string, lo, hi int64) error {
	n, err := parseBounded(v, lo, hi)
	if err != nil {
		return err
	}
	dst.Store(n)
	return nil
}

func parseBounded(v string, lo, hi int64) (int64, error) {
	n, ok := keyspace.ParseInt([]byte(v))
	if !ok {
		return 0, errors.New("argument couldn't be parsed into an integer")
	}
	if n < lo || n > hi {
		return 0, errors.New("argument must be between " + strconv.FormatInt(lo, 10) + " and " + strconv.FormatInt(hi, 10) + " inclusive")
	}
	return n, nil
}

// parseMemory parses a memory value as Redis's memtoull does: digits with an
// optional unit, k/m/g powers of 1000 and kb/mb/gb powers of 1024, any case.
func parseMemory(v string) (int64, error) {
	errMem := errors.New("argument must be a memory value")
	lower := strings.ToLower(v)
	mul := int64(1)
	for _, u := range []struct {
		suffix string
		mul    int64
	}{{"kb", 1 << 10}, {"mb", 1 << 20}, {"gb", 1 << 30}, {"k", 1e3}, {"m", 1e6}, {"g", 1e9}, {"b", 1}} {
		if strings.HasSuffix(lower, u.suffix) {
			lower, mul = strings.TrimSuffix(lower, u.suffix), u.mul
			break
		}
	}
	n, err := strconv.ParseUint(lower, 10, 63)
	if err != nil || (n != 0 && int64(n) > math.MaxInt64/mul) {
		return 0, errMem
	}
	return int64(n) * mul, nil
}

// port returns the TCP port of the server's first listener, 0 without one.
func (s *Server) port() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	for ln := range s.listeners {
		if a, ok := ln.Addr().(*net.TCPAddr); ok {
			return strconv.Itoa(a.Port)
		}
	}
	return "0"
}

// The server runs the CONFIG subcommands.
func init() {
	registerHandlers(map[string]handler{
		"config|get":       cmdConfigGet,
		"config|set":       cmdConfigSet,
		"config|resetstat": func(c *conn, args [][]byte) { c.srv.resetStats(); c.reply(keyspace.OK) },
		"config|rewrite": func(c *conn, args [][]byte) {
			c.reply(keyspace.Error("ERR The server is running without a config file"))
		},
		"config|help": help("CONFIG",
			"GET <pattern>", "    Return parameters matching the glob-like <pattern> and their values.",
			"SET <directive> <value>", "    Set the configuration <directive> to <value>.",
			"RESETSTAT", "    Reset statistics reported by the INFO command.",
			"REWRITE", "    Refused: lockserver has no config file."),
	})
}

// CONFIG GET pattern [pattern ...]: a map in RESP3. A name without glob
// characters is echoed as it was asked, as Redis does.
func cmdConfigGet(c *conn, args [][]byte) {
	var elems []keyspace.Reply
	seen := map[string]bool{}
	for _, p := range args[2:] {
		if !strings.ContainsAny(string(p), "[*?") {
			st := settings[strings.ToLower(string(p))]
			if st != nil && !seen[st.name] {
				seen[st.name] = true
				elems = append(elems, keyspace.BulkBytes(p), keyspace.Bulk(st.get(c.srv)))
			}
			continue
		}
		for _, name := range sortedSettings() {
			if !seen[name] && keyspace.FoldGlobMatch(p, name) {
				seen[name] = true
				elems = append(elems, keyspace.Bulk(name), keyspace.Bulk(settings[name].get(c.srv)))
			}
		}
	}
	c.reply(keyspace.Map(elems...))
}

func sortedSettings() []string {
	names := make([]string, 0, len(settings))
	for n := range settings {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// CONFIG SET parameter value [parameter value ...]: all or nothing, as in Redis.
func cmdConfigSet(c *conn, args [][]byte) {
	if len(args)%2 != 0 {
		c.reply(keyspace.ErrSyntax)
		return
	}
	type change struct {
		st    *setting
		value string
	}
	var changes []change
	for i := 2; i < len(args); i += 2 {
		name := string(args[i])
		st := settings[strings.ToLower(name)]
		if st == nil {
			c.reply(keyspace.Error("ERR Unknown option or number of arguments for CONFIG SET - '" + name + "'"))
			return
		}
		for _, ch := range changes {
			if ch.st == st {
				c.reply(configError(name, "duplicate parameter"))
				return
			}
		}
		if st.set == nil {
			c.reply(configError(name, "can't set immutable config"))
			return
		}
		changes = append(changes, change{st, string(args[i+1])})
	}
	// Apply in order; if a value is refused, restore the ones applied, so that
	// CONFIG SET changes all or nothing.
	var applied []change
	for _, ch := range changes {
		old := ch.st.get(c.srv)
		if err := ch.st.set(c.srv, ch.value); err != nil {
			for _, a := range applied {
				a.st.set(c.srv, a.value)
			}
			c.reply(configError(ch.st.name, err.Error()))
			return
		}
		applied = append(applied, change{ch.st, old})
	}
	c.reply(keyspace.OK)
}

func configError(name, why string) keyspace.Reply {
	return keyspace.Error("ERR CONFIG SET failed (possibly related to argument '" + name + "') - " + why)
}

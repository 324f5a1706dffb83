package server

import (
	"crypto/sha1"
	"encoding/hex"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/lockserver/lockserver/keyspace"
)

// Redis's bounds of a slow log entry: its arguments and each argument's bytes.
const (
	slowlogMaxArgs  = 32
	slowlogMaxBytes = 128
)

// slowEntry is one entry of the slow log.
type slowEntry struct {
	id     int64
	at     int64 // unix seconds
	micros int64
	args   []string
	addr   string
	name   string
}

// slowlog is the slow log: the oldest entries first, at most max of them.
type slowlog struct {
	mu      sync.Mutex
	entries []slowEntry
	nextID  int64
	logged  int64 // entries ever added, for the metrics
}

func (l *slowlog) add(e slowEntry, max int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	e.id = l.nextID
	l.nextID++
	l.logged++
	l.entries = append(l.entries, e)
	l.trimLocked(max)
}

// trim drops the oldest entries past max (CONFIG SET slowlog-max-len).
func (l *slowlog) trim(max int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.trimLocked(max)
}

// trimLocked drops the oldest entries past max, moving the rest to the
// front once the dropped ones outnumber them, so that adding stays O(1)
// amortised and the array does not grow without bound.
func (l *slowlog) trimLocked(max int64) {
	if over := int64(len(l.entries)) - max; over > 0 {
		l.entries = l.entries[over:]
	}
	if cap(l.entries) > 2*len(l.entries)+64 {
		l.entries = append([]slowEntry(nil), l.entries...)
	}
}

func (l *slowlog) total() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.logged
}

// checkSlow adds a finished call to the slow log and to the latency monitor
// when it took long enough, and logs a slow script. addr and name are its
// client's ("" for Do).
func (s *Server) checkSlow(cmd *keyspace.Command, args [][]byte, d time.Duration, addr, name string) {
	micros := d.Microseconds()
	if threshold := s.slowlogSlower.Load(); threshold >= 0 && micros >= threshold && !skipSlowlog(cmd) {
		e := slowEntry{at: time.Now().Unix(), micros: micros, args: slowArgs(cmd, args), addr: addr, name: name}
		if script(cmd) {
			named, id := "sha1", ""
			switch {
			case strings.HasPrefix(cmd.Name, "fcall"):
				named, id = "function", string(args[1])
			case strings.HasPrefix(cmd.Name, "evalsha"):
				id = strings.ToLower(string(args[1]))
			default:
				sum := sha1.Sum(args[1])
				id = hex.EncodeToString(sum[:])
				// EVAL's body says little once cut: its SHA1 names it.
				e.args[1] += " (sha1 " + id + ")"
			}
			s.log.Warn("slow script", "event", "slow_script", named, id, "command", cmd.Name, "duration_us", micros, "client", addr, "client_name", name)
		}
		s.slowlog.add(e, s.slowlogMax.Load())
	}
	if threshold := s.latencyThreshold.Load(); threshold > 0 && d.Milliseconds() >= threshold {
		event := "command"
		if cmd.Has(keyspace.Fast) {
			event = "fast-command"
		}
		s.latency.add(event, time.Now().Unix(), d.Milliseconds())
	}
}

// skipSlowlog reports whether Redis leaves cmd out of the slow log: EXEC,
// whose commands Redis logs one by one (lockserver does not time them apart).
func skipSlowlog(cmd *keyspace.Command) bool { return cmd.Name == "exec" }

// script reports whether cmd runs a script: EVAL, EVALSHA, FCALL and their
// _RO variants.
func script(cmd *keyspace.Command) bool {
	return cmd.Has(keyspace.Scripting) && (strings.HasPrefix(cmd.Name, "eval") || strings.HasPrefix(cmd.Name, "fcall"))
}

// slowArgs copies a command's arguments as Redis's slow log keeps them: at
// most 32, each cut to 128 bytes, passwords redacted.
func slowArgs(cmd *keyspace.Command, args [][]byte) []string {
	n := min(len(args), slowlogMaxArgs)
	out := make([]string, n)
	for i := range n {
		if i == slowlogMaxArgs-1 && len(args) > slowlogMaxArgs {
			out[i] = "... (" + strconv.Itoa(len(args)-slowlogMaxArgs+1) + " more arguments)"
			break
		}
		a := args[i]
		switch {
		case redacted(cmd, args, i):
			out[i] = "(redacted)"
		case len(a) > slowlogMaxBytes:
			out[i] = string(a[:slowlogMaxBytes]) + "... (" + strconv.Itoa(len(a)-slowlogMaxBytes) + " more bytes)"
		default:
			out[i] = string(a)
		}
	}
	return out
}

// redacted reports whether argument i is a secret that Redis keeps out of
// the slow log and MONITOR: AUTH's arguments, HELLO's after AUTH, and ACL
// SETUSER's after the subcommand.
func redacted(cmd *keyspace.Command, args [][]byte, i int) bool {
	switch cmd.Name {
	case "auth":
		return i > 0
	case "acl|setuser":
		return i > 1
	case "hello":
		for j := 2; j < i; j++ {
			if strings.EqualFold(string(args[j]), "auth") && i <= j+2 {
				return true
			}
		}
	}
	return false
}

// The server runs SLOWLOG.
func init() {
	registerHandlers(map[string]handler{
		"slowlog|get": cmdSlowlogGet,
		"slowlog|len": func(c *conn, args [][]byte) {
			c.srv.slowlog.mu.Lock()
			n := len(c.srv.slowlog.entries)
			c.srv.slowlog.mu.Unlock()
			c.reply(keyspace.Int(int64(n)))
		},
		"slowlog|reset": func(c *conn, args [][]byte) {
			c.srv.slowlog.mu.Lock()
			c.srv.slowlog.entries = nil
			c.srv.slowlog.mu.Unlock()
			c.reply(keyspace.OK)
		},
		"slowlog|help": help("SLOWLOG",
			"GET [<count>]", "    Return top <count> entries from the slowlog (default: 10, -1 mean all).",
			"    Entries are made of:",
			"    id, timestamp, time in microseconds, arguments array, client IP and port,",
			"    client name",
			"LEN", "    Return the length of the slowlog.",
			"RESET", "    Reset the slowlog."),
	})
}

// SLOWLOG GET [count]: the newest count entries (10; -1 for all).
func cmdSlowlogGet(c *conn, args [][]byte) {
	count := int64(10)
	if len(args) > 2 {
		n, ok := keyspace.ParseInt(args[2])
		if !ok || n < -1 {
			c.reply(keyspace.Error("ERR count should be greater than or equal to -1"))
			return
		}
		count = n
	}
	l := &c.srv.slowlog
	l.mu.Lock()
	entries := l.entries
	if count >= 0 && int64(len(entries)) > count {
		entries = entries[int64(len(entries))-count:]
	}
	out := make([]keyspace.Reply, len(entries))
	for i, e := range entries {
		// Newest first, as Redis lists them.
		out[len(entries)-1-i] = keyspace.Array(keyspace.Int(e.id), keyspace.Int(e.at), keyspace.Int(e.micros),
			keyspace.BulkArray(e.args), keyspace.Bulk(e.addr), keyspace.Bulk(e.name))
	}
	l.mu.Unlock()
	c.reply(keyspace.Array(out...))
}

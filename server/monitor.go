package server

import (
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lockserver/lockserver/keyspace"
)

// monitors are the connections in MONITOR mode. n lets the command path see
// that there are none with one atomic load.
type monitors struct {
	n     atomic.Int32
	mu    sync.Mutex
	conns map[*conn]struct{}
}

func (m *monitors) add(c *conn) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.conns == nil {
		m.conns = map[*conn]struct{}{}
	}
	m.conns[c] = struct{}{}
	m.n.Store(int32(len(m.conns)))
}

func (m *monitors) remove(c *conn) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.conns, c)
	m.n.Store(int32(len(m.conns)))
}

// feed sends a command to every monitor as redis-server formats it: the time,
// the database and the client's address, and each argument quoted.
func (m *monitors) feed(db int, addr string, cmd *keyspace.Command, args [][]byte) {
	now := time.Now()
	b := strconv.AppendInt(nil, now.Unix(), 10)
	b = append(b, '.')
	usec := now.Nanosecond() / 1000
	for d := 100000; d > 1 && usec < d; d /= 10 {
		b = append(b, '0')
	}
	b = strconv.AppendInt(b, int64(usec), 10)
	b = append(b, " ["...)
	b = strconv.AppendInt(b, int64(db), 10)
	b = append(b, ' ')
	b = append(b, addr...)
	b = append(b, ']')
	for i, a := range args {
		b = append(b, ' ')
		if cmd != nil && redacted(cmd, args, i) {
			b = append(b, `"(redacted)"`...)
			continue
		}
		b = appendRepr(b, a)
	}
	line := keyspace.Status(string(b))
	m.mu.Lock()
	defer m.mu.Unlock()
	for c := range m.conns {
		c.deliver(line)
	}
}

// appendRepr quotes s as Redis's sdscatrepr does.
func appendRepr(b, s []byte) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for _, c := range s {
		switch c {
		case '\\', '"':
			b = append(b, '\\', c)
		case '\n':
			b = append(b, '\\', 'n')
		case '\r':
			b = append(b, '\\', 'r')
		case '\t':
			b = append(b, '\\', 't')
		case '\a':
			b = append(b, '\\', 'a')
		case '\b':
			b = append(b, '\\', 'b')
		default:
			if c >= 0x20 && c <= 0x7e {
				b = append(b, c)
			} else {
				b = append(b, '\\', 'x', hex[c>>4], hex[c&15])
			}
		}
	}
	return append(b, '"')
}

// ScriptMonitor is for luaexec.Options.Monitor: while a connection
// monitors, it returns what shows a script's calls to it, as Redis shows
// them ("[0 lua]"); else nil.
func (h *Hub) ScriptMonitor() func(db int, args [][]byte) {
	if h.monitors.n.Load() == 0 {
		return nil
	}
	return func(db int, args [][]byte) {
		h.monitors.feed(db, "lua", keyspace.Lookup(args[0]), args)
	}
}

// monitored reports whether MONITOR shows cmd: Redis leaves out the
// administrative commands.
func monitored(cmd *keyspace.Command) bool { return !cmd.Has(keyspace.Admin) }

// feedsFirst reports whether cmd is shown as it starts rather than once it
// has run: a script, before the commands it calls (EXEC, as in Redis 7.0,
// comes after the commands it ran).
func feedsFirst(cmd *keyspace.Command) bool { return script(cmd) }

// touchesData reports whether a monitoring connection is refused cmd, as
// Redis refuses a replica commands that read or write the keyspace.
func touchesData(cmd *keyspace.Command) bool {
	return cmd.Has(keyspace.ReadOnly) || cmd.Has(keyspace.Write) || script(cmd) ||
		cmd.Name == "publish" || cmd.Name == "spublish"
}

// MONITOR: the connection receives every command this node runs from then
// on, until RESET or its end. A second MONITOR is ignored, with no reply,
// as Redis ignores it.
func cmdMonitor(c *conn, args [][]byte) {
	if c.monitoring {
		c.cur.cmd = nil // not counted either
		return
	}
	c.drain()
	if c.wake == nil {
		c.wake = make(chan struct{}, 1)
		go c.pushWriter()
	}
	c.monitoring = true
	c.reply(keyspace.OK) // queued before any command the monitor is sent
	c.srv.hub.monitors.add(c)
}

package compat_test

import (
	"errors"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lockserver/lockserver"
	"github.com/lockserver/lockserver/internal/testenv"
)

// another returns a second pair of connections to the same two servers.
func (p *pair) another() *pair {
	p.t.Helper()
	return p.dial(p.t)
}

// DoNorm is Do for replies that differ by nature (client ids, addresses):
// norm rewrites both replies before they are compared.
func (p *pair) DoNorm(norm func(string) string, args ...string) string {
	p.t.Helper()
	want := norm(p.redis.Do(args...))
	got := norm(p.ls.Do(args...))
	if got != want {
		p.t.Errorf("%q (normalised):\n redis-server: %q\n   lockserver: %q", args, want, got)
	}
	return got
}

// Read reads one reply from both servers and compares them.
func (p *pair) Read() string {
	p.t.Helper()
	want, got := p.redis.Read(), p.ls.Read()
	if got != want {
		p.t.Errorf("read:\n redis-server: %q\n   lockserver: %q", want, got)
	}
	return got
}

// Send sends a command to both servers without reading.
func (p *pair) Send(args ...string) {
	p.t.Helper()
	p.redis.Send(args...)
	p.ls.Send(args...)
}

// SendRaw sends the same bytes to both servers and compares everything they
// answer until they close the connection.
func (p *pair) SendRawUntilClose(raw string) string {
	p.t.Helper()
	p.redis.SendRaw([]byte(raw))
	p.ls.SendRaw([]byte(raw))
	want, got := p.redis.ReadAll(), p.ls.ReadAll()
	if got != want {
		p.t.Errorf("%q:\n redis-server: %q\n   lockserver: %q", raw, want, got)
	}
	return got
}

// ReadAll reads until the server closes the connection.
func (c *rawClient) ReadAll() string {
	c.t.Helper()
	// A server that never closes fails the test instead of hanging it.
	c.conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	var b strings.Builder
	for {
		line, err := c.rd.ReadString('\n')
		b.WriteString(line)
		if errors.Is(err, os.ErrDeadlineExceeded) {
			c.t.Errorf("the server did not close the connection (read so far %q)", b.String())
		}
		if err != nil {
			return b.String()
		}
	}
}

// ids replaces client ids in HELLO maps and CLIENT ID replies.
var idPattern = regexp.MustCompile(`(\$2\r\nid\r\n):\d+`)

func normID(s string) string { return idPattern.ReplaceAllString(s, "${1}:ID") }

func TestDiffHello(t *testing.T) {
	p := newPair(t)
	p.Run([][]string{
		{"HELLO", "4"},
		{"HELLO", "1"},
		{"HELLO", "x"},
		{"HELLO", "3", "FOO"},
		{"HELLO", "3", "SETNAME"},
		{"HELLO", "3", "AUTH", "default"},
		{"HELLO", "2", "AUTH", "someone", "pw"},
		{"HELLO", "3", "SETNAME", "bad name"},
		{"CLIENT", "GETNAME"},
	})
	p.DoNorm(normID, "HELLO")
	p.DoNorm(normID, "HELLO", "2", "AUTH", "default", "anything") // the default user has no password
	p.DoNorm(normID, "HELLO", "3", "SETNAME", "conn-1")
	// The connection now speaks RESP3.
	p.Run([][]string{
		{"CLIENT", "GETNAME"},
		{"GET", "missing"},
		{"HSET", "h", "f", "v"},
		{"HGETALL", "h"},
		{"CONFIG", "GET", "maxmemory"},
		{"SET", "k", "v", "NX", "GET"},
		{"CLIENT", "TRACKINGINFO"},
		{"EXISTS", "k"},
	})
	p.DoNorm(normID, "HELLO", "2")
	p.Run([][]string{{"GET", "missing"}, {"CONFIG", "GET", "maxmemory"}, {"CLIENT", "TRACKINGINFO"}})
}

func TestDiffAuth(t *testing.T) {
	p := newPair(t)
	p.Run([][]string{
		{"AUTH", "pw"},
		{"AUTH", "someone", "pw"},
		{"AUTH", "default", "pw"},
		{"AUTH", "a", "b", "c"},
		{"AUTH"},
		{"CONFIG", "SET", "requirepass", "secret"},
		{"PING"}, // a connection stays authenticated when a password is set
		{"CONFIG", "GET", "requirepass"},
	})

	q := p.another()
	q.Run([][]string{
		{"PING"},
		{"GET", "k"},
		{"NOSUCH"},      // lookup comes before authentication
		{"GET"},         // and so does arity
		{"CLIENT", "X"}, // and subcommand lookup
		{"HELLO", "3"},
		{"HELLO"},
		{"HELLO", "2", "SETNAME", "x"},
		{"AUTH", "wrong"},
		{"AUTH", "default", "wrong"},
		{"HELLO", "3", "AUTH", "default", "wrong"},
		{"PING"},
		{"AUTH", "secret"},
		{"PING"},
		{"AUTH", "default", "wrong"}, // a failed AUTH leaves the connection authenticated
		{"PING"},
		{"AUTH", "default", "secret"},
		{"RESET"}, // back to unauthenticated
		{"PING"},
	})
	q.DoNorm(normID, "HELLO", "3", "AUTH", "default", "secret")
	q.Run([][]string{{"PING"}, {"RESET"}})

	r := p.another()
	r.Run([][]string{
		// Authenticated before the name is checked, as in Redis.
		{"HELLO", "3", "AUTH", "default", "secret", "SETNAME", "bad name"},
		{"PING"},
		{"CONFIG", "SET", "requirepass", ""},
		{"QUIT", "extra"},
	})

	// Unauthenticated clients may not send big commands.
	p.Run([][]string{{"CONFIG", "SET", "requirepass", "secret"}})
	s := p.another()
	s.SendRawUntilClose("*11\r\n")
	s = p.another()
	s.SendRawUntilClose("*2\r\n$3\r\nGET\r\n$16385\r\n")
	s = p.another()
	s.Run([][]string{{"AUTH", "secret"}, {"SET", "k", strings.Repeat("v", 20000)}, {"STRLEN", "k"}})
	p.Run([][]string{{"CONFIG", "SET", "requirepass", ""}})
}

func TestDiffClient(t *testing.T) {
	p := newPair(t)
	p.Run([][]string{
		{"CLIENT"},
		{"CLIENT", "FOO"},
		{"CLIENT", "foo", "bar"},
		{"CLIENT", "ID", "x"},
		{"CLIENT", "GETNAME"},
		{"CLIENT", "GETNAME", "x"},
		{"CLIENT", "SETNAME"},
		{"CLIENT", "SETNAME", "a", "b"},
		{"CLIENT", "SETNAME", "a b"},
		{"CLIENT", "SETNAME", "a\nb"},
		{"CLIENT", "SETNAME", "conn-é"},
		{"CLIENT", "SETNAME", "worker-1"},
		{"CLIENT", "GETNAME"},
		{"CLIENT", "SETNAME", ""},
		{"CLIENT", "GETNAME"},
		{"CLIENT", "NO-EVICT", "on"},
		{"CLIENT", "NO-EVICT", "OFF"},
		{"CLIENT", "NO-EVICT", "maybe"},
		{"CLIENT", "NO-EVICT"},
		{"CLIENT", "REPLY"},
		{"CLIENT", "REPLY", "FOO"},
		{"CLIENT", "REPLY", "ON"},
		{"CLIENT", "TRACKINGINFO"},
		{"CLIENT", "GETREDIR"},
		{"CLIENT", "CACHING", "yes"},
		{"CLIENT", "UNBLOCK", "1"},
		{"CLIENT", "UNBLOCK", "x"},
		{"CLIENT", "UNBLOCK", "1", "FOO"},
		{"CLIENT", "UNBLOCK", "1", "TIMEOUT"},
		{"CLIENT", "UNPAUSE"},
		{"CLIENT", "KILL", "1.2.3.4:5"},
		{"CLIENT", "KILL", "ADDR"},
		{"CLIENT", "KILL", "ID", "999999"},
		{"CLIENT", "KILL", "ID", "x"},
		{"CLIENT", "KILL", "ID", "0"},
		{"CLIENT", "KILL", "ID", "-1"},
		{"CLIENT", "KILL", "ADDR", "1.2.3.4:5"},
		{"CLIENT", "KILL", "LADDR", "1.2.3.4:5"},
		{"CLIENT", "KILL", "TYPE", "foo"},
		{"CLIENT", "KILL", "TYPE", "pubsub"},
		{"CLIENT", "KILL", "TYPE", "master"},
		{"CLIENT", "KILL", "USER", "foo"},
		{"CLIENT", "KILL", "USER", "default", "SKIPME", "maybe"},
		{"CLIENT", "KILL", "FOO", "bar"},
		{"CLIENT", "KILL", "ID", "1", "ADDR"},
		{"CLIENT", "KILL", "SKIPME", "yes"},
		{"CLIENT", "LIST", "ID"},
		{"CLIENT", "LIST", "ID", "x"},
		{"CLIENT", "LIST", "ID", "0"},
		{"CLIENT", "LIST", "TYPE", "foo"},
		{"CLIENT", "LIST", "TYPE", "pubsub"},
		{"CLIENT", "LIST", "TYPE", "master"},
		{"CLIENT", "LIST", "FOO"},
		{"CLIENT", "LIST", "TYPE", "normal", "x"},
	})

	// CLIENT REPLY OFF and SKIP silence replies, their own included.
	p.Send("CLIENT", "REPLY", "OFF")
	p.Send("SET", "silent", "1")
	p.Send("CLIENT", "REPLY", "SKIP")
	p.Send("PING")
	p.Do("CLIENT", "REPLY", "ON")
	p.Send("CLIENT", "REPLY", "SKIP")
	p.Send("GET", "silent")
	p.Do("GET", "silent")

	// Killing another connection by id and by address.
	victim := p.another()
	victim.Run([][]string{{"CLIENT", "SETNAME", "victim"}})
	vid := map[string]string{}
	vid["redis"] = strings.TrimSpace(strings.TrimPrefix(victim.redis.Do("CLIENT", "ID"), ":"))
	vid["ls"] = strings.TrimSpace(strings.TrimPrefix(victim.ls.Do("CLIENT", "ID"), ":"))
	if got, want := p.ls.Do("CLIENT", "KILL", "ID", vid["ls"]), p.redis.Do("CLIENT", "KILL", "ID", vid["redis"]); got != want || got != ":1\r\n" {
		t.Errorf("CLIENT KILL ID: redis %q, lockserver %q", want, got)
	}
	if got, want := victim.ls.ReadAll(), victim.redis.ReadAll(); got != want {
		t.Errorf("killed connection: redis %q, lockserver %q", want, got)
	}
	victim = p.another()
	// A connection is known to the server once it has answered: a dial
	// returns before the server's accept loop has taken the connection.
	victim.Do("PING")
	addr := func(c *rawClient) string { return c.conn.LocalAddr().String() }
	if got, want := p.ls.Do("CLIENT", "KILL", addr(victim.ls)), p.redis.Do("CLIENT", "KILL", addr(victim.redis)); got != want || got != "+OK\r\n" {
		t.Errorf("CLIENT KILL addr: redis %q, lockserver %q", want, got)
	}
	if got, want := victim.ls.ReadAll(), victim.redis.ReadAll(); got != want {
		t.Errorf("killed connection: redis %q, lockserver %q", want, got)
	}
	// SKIPME no kills the caller after its reply.
	self := p.another()
	want := self.redis.Do("CLIENT", "KILL", "ADDR", addr(self.redis), "SKIPME", "no") + self.redis.ReadAll()
	got := self.ls.Do("CLIENT", "KILL", "ADDR", addr(self.ls), "SKIPME", "no") + self.ls.ReadAll()
	if got != want || got != ":1\r\n" {
		t.Errorf("CLIENT KILL SKIPME no: redis %q, lockserver %q", want, got)
	}
}

// clientFields returns the field names of a CLIENT INFO/LIST line.
func clientFields(t testing.TB, reply string) []string {
	t.Helper()
	i := strings.Index(reply, "id=")
	if i < 0 {
		t.Fatalf("no client line in %q", reply)
	}
	line, _, _ := strings.Cut(reply[i:], "\n")
	var names []string
	for _, f := range strings.Fields(line) {
		name, _, _ := strings.Cut(f, "=")
		names = append(names, name)
	}
	return names
}

// clientField returns the value of field in a CLIENT LIST line.
func clientField(t testing.TB, line, field string) int {
	t.Helper()
	for _, f := range strings.Fields(line) {
		if v, ok := strings.CutPrefix(f, field+"="); ok {
			n, err := strconv.Atoi(v)
			if err != nil {
				t.Fatalf("%s=%q in %q", field, v, line)
			}
			return n
		}
	}
	t.Fatalf("no %s in %q", field, line)
	return 0
}

// qbuf is what a connection's query buffer holds: the running command's
// bytes while it runs, the part of a command that has not yet arrived
// whole while a connection waits for the rest; qbuf-free is room left.
func TestDiffClientQueryBuffer(t *testing.T) {
	p := newPair(t)
	bulk := func(s string) string { return fmt.Sprintf("$%d\r\n%s\r\n", len(s), s) }
	for _, srv := range []struct {
		name string
		c    *rawClient
	}{{"redis-server", p.redis}, {"lockserver", p.ls}} {
		self := srv.c.Do("CLIENT", "INFO")
		if got, want := clientField(t, self, "qbuf"), len("*2\r\n"+bulk("CLIENT")+bulk("INFO")); got != want {
			t.Errorf("%s: the running CLIENT INFO's qbuf=%d, want its %d bytes", srv.name, got, want)
		}
		if clientField(t, self, "qbuf-free") <= 0 {
			t.Errorf("%s: qbuf-free in %q", srv.name, self)
		}
	}
	// A command that arrives in parts: its whole arguments are parsed out of
	// the buffer, the part of one still arriving waits in it.
	other := p.another()
	parts := []string{"*3\r\n" + bulk("SET") + bulk("k") + "$5\r\nab", "c", "de\r\n"}
	for _, srv := range []struct {
		name string
		c, o *rawClient
	}{{"redis-server", p.redis, other.redis}, {"lockserver", p.ls, other.ls}} {
		id := strings.TrimSpace(strings.TrimPrefix(srv.o.Do("CLIENT", "ID"), ":"))
		qbuf := func() int { return clientField(t, srv.c.Do("CLIENT", "LIST", "ID", id), "qbuf") }
		for i, want := range []int{len("ab"), len("abc")} {
			srv.o.SendRaw([]byte(parts[i]))
			deadline := time.Now().Add(10 * time.Second)
			for qbuf() != want && time.Now().Before(deadline) {
				time.Sleep(10 * time.Millisecond)
			}
			if got := qbuf(); got != want {
				t.Errorf("%s: a connection holding %q of an argument shows qbuf=%d", srv.name, parts[i], got)
			}
		}
		srv.o.SendRaw([]byte(parts[2]))
		if r := srv.o.Read(); r != "+OK\r\n" {
			t.Errorf("%s: the completed SET answered %q", srv.name, r)
		}
	}
}

// A client idle for 2 s has no query buffer (qbuf and qbuf-free 0), as
// Redis's clientsCron frees it; the client's next command, small or large,
// is read as ever. (Both start from a 16 kB buffer. After a large command,
// Redis keeps its large buffer until its cron sees the peak fall; lockserver
// lets it go as soon as the command is parsed.)
func TestDiffClientIdleQueryBufferGoes(t *testing.T) {
	testenv.Long(t)
	p := newPair(t)
	idle := p.another()
	p.Run([][]string{{"PING"}})
	for _, srv := range []struct {
		name        string
		watch, idle *rawClient
	}{{"redis-server", p.redis, idle.redis}, {"lockserver", p.ls, idle.ls}} {
		id := strings.TrimSpace(strings.TrimPrefix(srv.idle.Do("CLIENT", "ID"), ":"))
		waitFor(t, func() string {
			line := srv.watch.Do("CLIENT", "LIST", "ID", id)
			if clientField(t, line, "qbuf") != 0 || clientField(t, line, "qbuf-free") != 0 {
				return srv.name + ": the idle client's query buffer is still there: " + line
			}
			return ""
		})
	}
	big := strings.Repeat("A", 400000)
	idle.Run([][]string{{"PING"}, {"SET", "x", big}, {"STRLEN", "x"}, {"GET", "nosuch"}})
}

func TestDiffClientInfo(t *testing.T) {
	p := newPair(t)
	p.Run([][]string{{"CLIENT", "SETNAME", "me"}, {"SELECT", "3"}})
	for _, args := range [][]string{{"CLIENT", "INFO"}, {"CLIENT", "LIST"}, {"CLIENT", "LIST", "TYPE", "normal"}} {
		want, got := p.redis.Do(args...), p.ls.Do(args...)
		// Redis 7.0's fields, in order; lockserver adds Redis 7.2's lib-name and lib-ver.
		wf, gf := clientFields(t, want), clientFields(t, got)
		if len(gf) < len(wf) || !slices.Equal(gf[:len(wf)], wf) || !slices.Equal(gf[len(wf):], []string{"lib-name", "lib-ver"}) {
			t.Errorf("%q fields:\n redis-server: %q\n   lockserver: %q", args, wf, gf)
		}
		for _, field := range []string{" name=me ", " db=3 ", " flags=N ", " sub=0 ", " multi=-1 ", " resp=2", " user=default "} {
			if !strings.Contains(got, field) {
				t.Errorf("%q: %q lacks %q", args, got, field)
			}
		}
		if !strings.Contains(got, " cmd=client|"+strings.ToLower(args[1])+" ") {
			t.Errorf("%q: %q does not show the running command", args, got)
		}
	}
	// CLIENT SETINFO is Redis 7.2's; compare with the texts of its source.
	ls := p.ls
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"CLIENT", "SETINFO", "lib-name", "go-redis(,go1.26)"}, "+OK\r\n"},
		{[]string{"CLIENT", "SETINFO", "LIB-VER", "9.23.0"}, "+OK\r\n"},
		{[]string{"CLIENT", "SETINFO", "lib-ver", "a b"}, "-ERR lib-ver cannot contain spaces, newlines or special characters.\r\n"},
		{[]string{"CLIENT", "SETINFO", "foo", "x"}, "-ERR Unrecognized option 'foo'\r\n"},
		{[]string{"CLIENT", "SETINFO", "lib-name"}, "-ERR wrong number of arguments for 'client|setinfo' command\r\n"},
		{[]string{"CLIENT", "NO-TOUCH", "on"}, "+OK\r\n"},
		{[]string{"CLIENT", "NO-TOUCH", "x"}, "-ERR syntax error\r\n"},
	} {
		if got := ls.Do(c.args...); got != c.want {
			t.Errorf("%q = %q, want %q", c.args, got, c.want)
		}
	}
	info := ls.Do("CLIENT", "INFO")
	if !strings.Contains(info, " lib-name=go-redis(,go1.26) lib-ver=9.23.0\n") || !strings.Contains(info, " flags=T ") {
		t.Errorf("CLIENT INFO after SETINFO and NO-TOUCH: %q", info)
	}
}

func TestDiffSelectPingEchoQuit(t *testing.T) {
	p := newPair(t)
	p.Run([][]string{
		{"SELECT", "16"},
		{"SELECT", "-1"},
		{"SELECT", "x"},
		{"SELECT", "1"},
		{"SET", "k", "in-1"},
		{"SELECT", "0"},
		{"GET", "k"},
		{"SELECT", "1"},
		{"GET", "k"},
		{"PING"},
		{"PING", "hello"},
		{"PING", "a", "b"},
		{"ECHO"},
		{"ECHO", "x\r\ny"},
		{"TIME", "x"},
		{"RESET"},
		{"GET", "k"}, // RESET selects database 0
		{"RESET", "x"},
	})
	for _, c := range []*rawClient{p.redis, p.ls} {
		tm := c.Do("TIME")
		if !regexp.MustCompile(`^\*2\r\n\$10\r\n\d{10}\r\n\$\d\r\n\d{1,6}\r\n$`).MatchString(tm) {
			t.Errorf("TIME = %q", tm)
		}
	}
	p.Do("QUIT")
	if got, want := p.ls.ReadAll(), p.redis.ReadAll(); got != want || got != "" {
		t.Errorf("after QUIT: redis %q, lockserver %q", want, got)
	}
}

func TestDiffWait(t *testing.T) {
	p := newPair(t)
	p.Run([][]string{
		{"SET", "k", "v"},
		{"WAIT", "0", "0"},
		{"WAIT", "x", "0"},
		{"WAIT", "0", "x"},
		{"WAIT", "0", "-1"},
		{"WAIT"},
	})
}

func TestWaitAOF(t *testing.T) {
	// Redis 7.0 has no WAITAOF (clients accept "unknown command" or a reply);
	// lockserver answers as Redis 7.2 does without an append-only file.
	s := startLockserver(t, lockserver.Options{})
	c := dialRaw(t, s.Addr())
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"WAITAOF", "0", "0", "0"}, "*2\r\n:0\r\n:0\r\n"},
		{[]string{"WAITAOF", "1", "0", "0"}, "-ERR WAITAOF cannot be used when numlocal is set but appendonly is disabled.\r\n"},
		{[]string{"WAITAOF", "-1", "0", "0"}, "-ERR value is out of range, must be positive\r\n"},
		{[]string{"WAITAOF", "0", "0", "-1"}, "-ERR timeout is negative\r\n"},
		{[]string{"WAITAOF", "0", "0"}, "-ERR wrong number of arguments for 'waitaof' command\r\n"},
	} {
		if got := c.Do(tc.args...); got != tc.want {
			t.Errorf("%q = %q, want %q", tc.args, got, tc.want)
		}
	}
}

func TestDiffConfig(t *testing.T) {
	p := newPair(t)
	p.Run([][]string{
		{"CONFIG"},
		{"CONFIG", "FOO"},
		{"CONFIG", "GET"},
		{"CONFIG", "GET", "maxmemory"},
		{"CONFIG", "GET", "MAXMEMORY"},
		{"CONFIG", "GET", "maxmemory", "maxmemory"},
		{"CONFIG", "GET", "nosuch"},
		{"CONFIG", "GET", "save"},
		{"CONFIG", "GET", "appendonly"},
		{"CONFIG", "GET", "maxmemory-policy"},
		{"CONFIG", "GET", "databases"},
		{"CONFIG", "GET", "maxclients"},
		{"CONFIG", "GET", "proto-max-bulk-len"},
		{"CONFIG", "GET", "client-query-buffer-limit"},
		{"CONFIG", "GET", "notify-keyspace-events"},
		{"CONFIG", "SET", "foo", "1"},
		{"CONFIG", "SET", "maxmemory"},
		{"CONFIG", "SET", "maxmemory", "1", "foo"},
		{"CONFIG", "SET", "maxmemory", "1", "maxmemory", "2"},
		{"CONFIG", "SET", "databases", "4"},
		{"CONFIG", "SET", "maxmemory", "abc"},
		{"CONFIG", "SET", "maxmemory", "-1"},
		{"CONFIG", "SET", "maxclients", "0"},
		{"CONFIG", "SET", "maxclients", "abc"},
		{"CONFIG", "SET", "maxmemory-policy", "foo"},
		{"CONFIG", "SET", "maxmemory-policy", "noeviction"},
		{"CONFIG", "SET", "proto-max-bulk-len", "10"},
		{"CONFIG", "SET", "appendonly", "maybe"},
		{"CONFIG", "SET", "appendonly", "no"},
		{"CONFIG", "SET", "save", ""},
		{"CONFIG", "SET", "maxmemory", "1gb"},
		{"CONFIG", "GET", "maxmemory"},
		{"CONFIG", "SET", "maxmemory", "3mb", "maxclients", "abc"}, // all or nothing
		{"CONFIG", "GET", "maxmemory"},
		{"CONFIG", "SET", "maxmemory", "5k"},
		{"CONFIG", "GET", "maxmemory"},
		{"CONFIG", "SET", "maxmemory", "0", "maxclients", "500"},
		{"CONFIG", "GET", "maxclients"},
		{"CONFIG", "SET", "maxclients", "10000"},
		{"CONFIG", "REWRITE"},
		{"CONFIG", "RESETSTAT"},
		{"CONFIG", "RESETSTAT", "x"},
	})
	// Patterns: every parameter lockserver reports matches Redis's value, and
	// each pattern selects the same names among them.
	for _, pattern := range []string{"maxmemory*", "*max*", "?ave", "[as]*", "*"} {
		want := pairsOf(t, p.redis.Do("CONFIG", "GET", pattern))
		got := pairsOf(t, p.ls.Do("CONFIG", "GET", pattern))
		for name, v := range got {
			if name == "client-output-buffer-limit" || name == "port" {
				continue // lockserver enforces only the pub/sub hard limit; the ports differ
			}
			if rv, ok := want[name]; !ok || rv != v {
				t.Errorf("CONFIG GET %s: lockserver %s=%q, redis-server %q (present: %v)", pattern, name, v, rv, ok)
			}
		}
	}
	// RESP3: a map.
	p.DoNorm(normID, "HELLO", "3")
	p.Do("CONFIG", "GET", "maxmemory")
}

// pairsOf parses a flat array of bulk strings into a map.
func pairsOf(t testing.TB, reply string) map[string]string {
	t.Helper()
	lines := strings.Split(strings.TrimSuffix(reply, "\r\n"), "\r\n")
	var vals []string
	for i := 1; i < len(lines); i += 2 {
		vals = append(vals, lines[i+1])
	}
	m := map[string]string{}
	for i := 0; i+1 < len(vals); i += 2 {
		m[vals[i]] = vals[i+1]
	}
	return m
}

func TestDiffInfo(t *testing.T) {
	p := newPair(t)
	p.Run([][]string{
		{"SET", "a", "1"},
		{"SET", "b", "2", "EX", "1000"},
		{"SELECT", "2"},
		{"SET", "c", "3"},
		{"INFO", "nosuch"},
	})
	sections := func(info string) map[string]map[string]string {
		out := map[string]map[string]string{}
		var cur map[string]string
		for _, line := range strings.Split(info, "\r\n") {
			if strings.HasPrefix(line, "# ") {
				cur = map[string]string{}
				out[strings.ToLower(line[2:])] = cur
			} else if k, v, ok := strings.Cut(line, ":"); ok && cur != nil {
				cur[k] = v
			}
		}
		return out
	}
	for _, args := range [][]string{{"INFO"}, {"INFO", "ALL"}, {"INFO", "everything"}, {"INFO", "default"},
		{"INFO", "server", "clients"}, {"INFO", "Replication"}, {"INFO", "keyspace"}} {
		want, got := sections(p.redis.Do(args...)), sections(p.ls.Do(args...))
		if len(got) == 0 {
			t.Errorf("%q: no sections", args)
		}
		for name, fields := range got {
			rf, ok := want[name]
			if !ok {
				t.Errorf("%q: section %q is not Redis's", args, name)
				continue
			}
			for k := range fields {
				// go_version and lockserver_version are lockserver's own;
				// the output buffer limit disconnections are counted as
				// Redis 7.4 names them, the ACL's refusals as Redis 7.2 does.
				own := k == "go_version" || k == "lockserver_version"
				if _, ok := rf[k]; !ok && !own && k != "client_output_buffer_limit_disconnections" && !strings.HasPrefix(k, "acl_access_denied_") {
					t.Errorf("%q: field %s:%s is not in Redis's %s section", args, k, fields[k], name)
				}
			}
		}
		for name := range want {
			if _, ok := got[name]; !ok && name != "modules" && name != "commandstats" && name != "latencystats" {
				t.Errorf("%q: section %q missing", args, name)
			}
		}
	}
	got := sections(p.ls.Do("INFO"))
	for sec, kv := range map[string][2]string{
		"persistence": {"loading", "0"}, "replication": {"role", "master"},
		"clients": {"connected_clients", "1"}, "cluster": {"cluster_enabled", "0"},
	} {
		if v := got[sec][kv[0]]; v != kv[1] {
			t.Errorf("INFO %s %s = %q, want %q", sec, kv[0], v, kv[1])
		}
	}
	if got["replication"]["connected_slaves"] != "0" || got["persistence"]["aof_enabled"] != "0" {
		t.Errorf("INFO replication/persistence: %v %v", got["replication"], got["persistence"])
	}
	used, err1 := strconv.ParseInt(got["memory"]["used_memory"], 10, 64)
	rss, err2 := strconv.ParseInt(got["memory"]["used_memory_rss"], 10, 64)
	if err1 != nil || err2 != nil || used <= 0 || rss < used {
		t.Errorf("INFO memory: used_memory %q, used_memory_rss %q", got["memory"]["used_memory"], got["memory"]["used_memory_rss"])
	}
	if got["keyspace"]["db0"] != "keys=2,expires=1,avg_ttl=0" || got["keyspace"]["db2"] != "keys=1,expires=0,avg_ttl=0" {
		t.Errorf("INFO keyspace: %v", got["keyspace"])
	}
	// The same keys and expires as Redis, whose avg_ttl is an estimate, made
	// by its expire cycle: wait until it has one, as the bulk string's length
	// differs then too.
	waitFor(t, func() string {
		if r := p.redis.Do("INFO", "keyspace"); !regexp.MustCompile(`avg_ttl=[1-9]`).MatchString(r) {
			return "redis-server to estimate avg_ttl: " + r
		}
		return ""
	})
	p.DoNorm(withoutAvgTTL, "INFO", "keyspace")
}

// withoutAvgTTL takes the avg_ttl fields out of a raw INFO reply, a bulk
// string (a verbatim one in RESP3) whose length it sets to what is left.
func withoutAvgTTL(raw string) string {
	head, body, ok := strings.Cut(raw, "\r\n")
	if !ok || len(head) < 2 || (head[0] != '$' && head[0] != '=') {
		return raw
	}
	body = strings.TrimSuffix(body, "\r\n")
	body = regexp.MustCompile(`,avg_ttl=\d+`).ReplaceAllString(body, "")
	return fmt.Sprintf("%c%d\r\n%s\r\n", head[0], len(body), body)
}

// INFO memory counts the scripts cached by SCRIPT LOAD and EVAL, and none
// after SCRIPT FLUSH, and the function libraries and their functions.
func TestDiffInfoCachedScripts(t *testing.T) {
	p := newPair(t)
	cached := func() {
		t.Helper()
		field := regexp.MustCompile(`(number_of_cached_scripts|number_of_functions|number_of_libraries):\d+`)
		want, got := field.FindAllString(p.redis.Do("INFO", "memory"), -1), field.FindAllString(p.ls.Do("INFO", "memory"), -1)
		if !slices.Equal(got, want) || len(want) != 3 {
			t.Errorf("INFO memory: redis-server %q, lockserver %q", want, got)
		}
	}
	cached()
	p.Run([][]string{{"SCRIPT", "LOAD", "return 1"}, {"SCRIPT", "LOAD", "return 2"}, {"SCRIPT", "LOAD", "return 1"}, {"EVAL", "return 3", "0"}})
	cached()
	p.Do("SCRIPT", "FLUSH")
	cached()
	p.Run([][]string{
		{"FUNCTION", "LOAD", "#!lua name=a\nredis.register_function('a1', function() return 1 end)\nredis.register_function('a2', function() return 1 end)"},
		{"FUNCTION", "LOAD", "#!lua name=b\nredis.register_function('b1', function() return 1 end)"},
	})
	cached()
	p.Do("FUNCTION", "DELETE", "a")
	cached()
}

func TestDiffCommand(t *testing.T) {
	p := newPair(t)
	p.Run([][]string{
		{"COMMAND", "FOO"},
		{"COMMAND", "COUNT", "x"},
		{"COMMAND", "INFO", "nosuchcommand"},
		{"COMMAND", "GETKEYS"},
		{"COMMAND", "GETKEYS", "get"},
		{"COMMAND", "GETKEYS", "get", "k"},
		{"COMMAND", "GETKEYS", "GET", "k"},
		{"COMMAND", "GETKEYS", "set", "k"},
		{"COMMAND", "GETKEYS", "set", "k", "v", "EX", "10"},
		{"COMMAND", "GETKEYS", "mget", "a", "b", "c"},
		{"COMMAND", "GETKEYS", "del", "a", "b"},
		{"COMMAND", "GETKEYS", "nosuch", "a"},
		{"COMMAND", "GETKEYS", "ping"},
		{"COMMAND", "GETKEYS", "eval", "return 1", "2", "k1", "k2", "a1"},
		{"COMMAND", "GETKEYS", "eval", "return 1", "0"},
		{"COMMAND", "GETKEYS", "evalsha", "abc", "3", "k1"},
		{"COMMAND", "LIST", "FILTERBY"},
		{"COMMAND", "LIST", "FILTERBY", "FOO", "x"},
		{"COMMAND", "LIST", "FILTERBY", "MODULE", "x"},
		{"COMMAND", "LIST", "FILTERBY", "PATTERN", "sel*"},
		{"COMMAND", "INFO", "nosuch", "nosuch2"},
	})
	// Every command and subcommand in lockserver's table has Redis's arity and
	// key positions, and only flags Redis gives it.
	for _, name := range strings.Split(listOf(p.ls.Do("COMMAND", "LIST")), "\n") {
		if name == "" {
			continue
		}
		want := p.redis.Do("COMMAND", "INFO", name)
		if want == "*1\r\n$-1\r\n" {
			continue // not in Redis 7.0 (WAITAOF, CLIENT SETINFO, ...)
		}
		got := p.ls.Do("COMMAND", "INFO", name)
		wl, gl := strings.Split(want, "\r\n"), strings.Split(got, "\r\n")
		if len(gl) < 10 {
			t.Errorf("COMMAND INFO %s = %q", name, got)
			continue
		}
		// Lines: *1, *10, $n, name, :arity, *k, flags..., :first, :last, :step
		if gl[4] != wl[4] {
			t.Errorf("%s arity: redis-server %s, lockserver %s", name, wl[4], gl[4])
		}
		wFlags, wRest := statusRun(wl[5:])
		gFlags, gRest := statusRun(gl[5:])
		for _, f := range gFlags {
			if !slices.Contains(wFlags, f) {
				t.Errorf("%s: flag %q, Redis's are %q", name, f, wFlags)
			}
		}
		if !slices.Equal(gRest[:3], wRest[:3]) {
			t.Errorf("%s key positions: redis-server %q, lockserver %q", name, wRest[:3], gRest[:3])
		}
	}
}

// listOf turns an array of bulk strings into newline-separated items.
func listOf(reply string) string {
	lines := strings.Split(reply, "\r\n")
	var items []string
	for i := 2; i < len(lines); i += 2 {
		items = append(items, lines[i])
	}
	return strings.Join(items, "\n")
}

// statusRun reads a "*k" header and k status lines, returning the statuses and
// the lines after them.
func statusRun(lines []string) ([]string, []string) {
	var n int
	for _, c := range lines[0][1:] {
		n = n*10 + int(c-'0')
	}
	var out []string
	for _, l := range lines[1 : 1+n] {
		out = append(out, strings.TrimPrefix(l, "+"))
	}
	return out, lines[1+n:]
}

package server

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lockserver/lockserver/keyspace"
	"github.com/lockserver/lockserver/replication"
	"github.com/lockserver/lockserver/server/internal/resp"
)

// newTestServer starts a server over a standalone engine on a loopback port.
func newTestServer(t testing.TB, cfg Config) (*Server, string) {
	t.Helper()
	hub := NewHub()
	engine := replication.NewStandalone(replication.StandaloneOptions{Hub: hub})
	cfg.Engine, cfg.Hub = engine, hub
	s := New(cfg)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go s.Serve(ln)
	t.Cleanup(func() {
		s.Close()
		engine.Close()
	})
	return s, ln.Addr().String()
}

// panicLog records the panics the server recovers.
type panicLog struct {
	mu     sync.Mutex
	panics []string
}

func (p *panicLog) Enabled(context.Context, slog.Level) bool { return true }
func (p *panicLog) WithAttrs([]slog.Attr) slog.Handler       { return p }
func (p *panicLog) WithGroup(string) slog.Handler            { return p }
func (p *panicLog) Handle(_ context.Context, r slog.Record) error {
	if r.Message == "connection failed" {
		p.mu.Lock()
		p.panics = append(p.panics, r.Message)
		p.mu.Unlock()
	}
	return nil
}

func (p *panicLog) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.panics)
}

type client struct {
	nc net.Conn
	rd *bufio.Reader
}

func dial(t testing.TB, addr string) *client {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	nc.SetDeadline(time.Now().Add(10 * time.Second))
	return &client{nc: nc, rd: bufio.NewReader(nc)}
}

// do sends an inline command and returns the first line of the reply.
func (c *client) do(t testing.TB, line string) string {
	t.Helper()
	if _, err := c.nc.Write([]byte(line + "\r\n")); err != nil {
		t.Fatal(err)
	}
	reply, err := c.rd.ReadString('\n')
	if err != nil {
		return "error: " + err.Error()
	}
	return reply
}

// TestPanicEndsOneConnection makes a command panic: its connection closes,
// every other connection goes on, and the server logs the panic.
func TestPanicEndsOneConnection(t *testing.T) {
	log := &panicLog{}
	s, addr := newTestServer(t, Config{Logger: slog.New(log)})
	a, b := dial(t, addr), dial(t, addr)
	if got := a.do(t, "PING"); got != "+PONG\r\n" {
		t.Fatalf("PING = %q", got)
	}
	// The server runs ECHO with the row's Run (runLocal).
	row := keyspace.Lookup([]byte("echo"))
	echo := row.Run
	row.Run = func(*keyspace.Call) keyspace.Reply { panic("a bug in a command") }
	defer func() { row.Run = echo }()

	if got := a.do(t, "ECHO boom"); !strings.HasPrefix(got, "error: ") {
		t.Errorf("the panicking connection answered %q", got)
	}
	if got := b.do(t, "PING"); got != "+PONG\r\n" {
		t.Errorf("another connection: PING = %q", got)
	}
	if got := dial(t, addr).do(t, "PING"); got != "+PONG\r\n" {
		t.Errorf("a new connection: PING = %q", got)
	}
	if log.count() != 1 {
		t.Errorf("%d panics logged, want 1", log.count())
	}

	// The same on a connection served in its client's goroutine: the feed
	// returns, the connection has ended, the panic is logged.
	in := s.ServeInline(&fakeConn{r: strings.NewReader("")})
	if err := in.Feed([]byte("ECHO boom\r\n"), time.Time{}); err != nil {
		t.Fatalf("the feed that panicked: %v", err)
	}
	if err := in.Feed([]byte("PING\r\n"), time.Time{}); !errors.Is(err, net.ErrClosed) {
		t.Errorf("a feed after the panic: %v, want net.ErrClosed", err)
	}
	if got := b.do(t, "PING"); got != "+PONG\r\n" {
		t.Errorf("another connection after the inline panic: PING = %q", got)
	}
	if log.count() != 2 {
		t.Errorf("%d panics logged, want 2", log.count())
	}
}

// TestSlowSubscriber: a subscriber that never reads does not hold up
// publishers, and is disconnected once its queued output passes the limit.
func TestSlowSubscriber(t *testing.T) {
	s, addr := newTestServer(t, Config{})
	s.outputLimits.Store(&outputLimits{classPubSub: {hard: 64 << 10}})
	sub := dial(t, addr)
	sub.do(t, "SUBSCRIBE slow")
	// The subscriber stops reading; its socket buffers fill, then its queue.
	msg := strings.Repeat("m", 1000)
	ctx := context.Background()
	delivered := 0
	for i := 0; i < 100000 && s.hub.numSub("slow") > 0; i++ {
		r := s.Do(ctx, 0, [][]byte{[]byte("PUBLISH"), []byte("slow"), []byte(msg)})
		delivered += int(r.Int)
	}
	if n := s.hub.numSub("slow"); n != 0 {
		t.Fatalf("the slow subscriber is still subscribed after %d messages", delivered)
	}
	if got := dial(t, addr).do(t, "PING"); got != "+PONG\r\n" {
		t.Errorf("PING = %q", got)
	}
}

// numSub returns the number of subscribers of channel.
func (h *Hub) numSub(channel string) int {
	h.mu.RLock()
	defer h.mu.RUnlock()
	return len(h.channels[channel])
}

// TestDoRefusesConnectionCommands: the in-process Do runs data commands only.
func TestDoRefusesConnectionCommands(t *testing.T) {
	s, _ := newTestServer(t, Config{})
	ctx := context.Background()
	for _, c := range []struct {
		args []string
		want keyspace.Reply
	}{
		{[]string{"SET", "k", "v"}, keyspace.OK},
		{[]string{"GET", "k"}, keyspace.Bulk("v")},
		{[]string{"SELECT", "1"}, keyspace.Error("ERR 'select' needs a connection; use Dialer or Addr")},
		{[]string{"MULTI"}, keyspace.Error("ERR 'multi' needs a connection; use Dialer or Addr")},
		{[]string{"CLIENT", "ID"}, keyspace.Error("ERR 'client|id' needs a connection; use Dialer or Addr")},
		{[]string{"CLIENT", "NOPE"}, keyspace.Error("ERR unknown subcommand 'NOPE'. Try CLIENT HELP.")},
		{[]string{"GET"}, keyspace.Error("ERR wrong number of arguments for 'get' command")},
	} {
		args := make([][]byte, len(c.args))
		for i, a := range c.args {
			args[i] = []byte(a)
		}
		got := s.Do(ctx, 0, args)
		if got.Kind != c.want.Kind || got.Str != c.want.Str {
			t.Errorf("Do %q = %+v, want %+v", c.args, got, c.want)
		}
	}
}

// fakeConn is a connection whose client sends data and reads nothing.
type fakeConn struct {
	net.Conn // nil: only the methods below are used
	r        io.Reader
}

func (f *fakeConn) Read(p []byte) (int, error)       { return f.r.Read(p) }
func (f *fakeConn) Write(p []byte) (int, error)      { return len(p), nil }
func (f *fakeConn) Close() error                     { return nil }
func (f *fakeConn) RemoteAddr() net.Addr             { return &net.TCPAddr{IP: net.IPv6loopback} }
func (f *fakeConn) LocalAddr() net.Addr              { return &net.TCPAddr{} }
func (f *fakeConn) SetReadDeadline(time.Time) error  { return nil }
func (f *fakeConn) SetWriteDeadline(time.Time) error { return nil }
func (f *fakeConn) SetDeadline(t time.Time) error    { return nil }

// FuzzServe runs arbitrary bytes through a whole connection: framing, limits,
// dispatch to every command and the engine. No input may panic (the
// connection's recover would hide it, so the log is watched) or grow the read
// buffer past the limits.
func FuzzServe(f *testing.F) {
	for _, s := range []string{
		"*1\r\n$4\r\nPING\r\n", "MULTI\r\nSET a 1\r\nEXEC\r\n", "SUBSCRIBE a\r\nPING\r\nUNSUBSCRIBE\r\n",
		"HELLO 3\r\nCLIENT LIST\r\nINFO\r\n", "WATCH k\r\nMULTI\r\nINCR k\r\nEXEC\r\n", "CONFIG GET *\r\nCOMMAND INFO get\r\n",
		"*1\r\n$9223372036854775802\r\nabcdefgh\r\n", "CLIENT REPLY SKIP\r\nPING\r\nRESET\r\n",
	} {
		f.Add([]byte(s))
	}
	lim := Limits{MaxBulk: 1 << 10, MaxMultibulk: 64, MaxInline: 256, MaxQuery: 4 << 10}
	f.Fuzz(func(t *testing.T, data []byte) {
		log := &panicLog{}
		hub := NewHub()
		engine := replication.NewStandalone(replication.StandaloneOptions{Hub: hub})
		defer engine.Close()
		s := New(Config{Engine: engine, Hub: hub, Limits: lim, Logger: slog.New(log)})
		c := newConn(s, &fakeConn{r: bytes.NewReader(data)})
		c.serve()
		if log.count() > 0 {
			t.Fatalf("input %q panicked", data)
		}
		if c.rd.BufferSize() > 2*(4<<10)+resp.ReadBufSize {
			t.Fatalf("read buffer of %d bytes", c.rd.BufferSize())
		}
	})
}

package server

import (
	"bufio"
	"net"
	"strings"
	"testing"
	"time"
)

// remoteListener hands out connections that report a non-loopback remote
// address, as clients from another host would.
type remoteListener struct{ net.Listener }

func (l remoteListener) Accept() (net.Conn, error) {
	nc, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return remoteConn{nc}, nil
}

type remoteConn struct{ net.Conn }

func (remoteConn) RemoteAddr() net.Addr {
	return &net.TCPAddr{IP: net.IPv4(192, 0, 2, 99), Port: 50000}
}

// serveRemote starts a server on two ports: one whose clients appear to
// come from another host, and a loopback one.
func serveRemote(t *testing.T, cfg Config) (*Server, string, string) {
	t.Helper()
	s, lo := newTestServer(t, cfg)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go s.Serve(remoteListener{ln})
	return s, ln.Addr().String(), lo
}

// ask sends one inline command and returns everything the server writes
// until it closes the connection or goes quiet for a moment.
func ask(t *testing.T, addr, line string) string {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	nc.Write([]byte(line + "\r\n"))
	nc.SetReadDeadline(time.Now().Add(2 * time.Second))
	var b strings.Builder
	rd := bufio.NewReader(nc)
	for {
		l, err := rd.ReadString('\n')
		b.WriteString(l)
		if err != nil {
			return b.String()
		}
		if !strings.HasPrefix(l, "-DENIED") && strings.HasSuffix(l, "\r\n") {
			return b.String() // an ordinary one-line reply: the connection stays
		}
	}
}

// Protected mode: with no password, a client from another host gets DENIED
// and its connection is closed; a password, protected-mode no (configured or
// set at run time) or a loopback client lets it in.
func TestProtectedMode(t *testing.T) {
	denied := "-" + errProtected + "\r\n"
	s, addr, local := serveRemote(t, Config{})
	if got := ask(t, addr, "PING"); got != denied {
		t.Fatalf("a remote client of an unprotected server got %q", got)
	}
	if n := s.stats.rejected.Load(); n != 1 {
		t.Errorf("rejected_connections = %d, want 1", n)
	}
	if got := ask(t, local, "PING"); got != "+PONG\r\n" {
		t.Errorf("a loopback client got %q", got)
	}
	_, withPass, _ := serveRemote(t, Config{Password: "s3cret"})
	if got := ask(t, withPass, "PING"); got != "-NOAUTH Authentication required.\r\n" {
		t.Errorf("a remote client of a server with a password got %q", got)
	}
	_, off, _ := serveRemote(t, Config{DisableProtectedMode: true})
	if got := ask(t, off, "PING"); got != "+PONG\r\n" {
		t.Errorf("with protected mode off a remote client got %q", got)
	}
	if got := ask(t, local, "CONFIG SET protected-mode no"); got != "+OK\r\n" {
		t.Fatalf("CONFIG SET protected-mode no: %q", got)
	}
	if got := ask(t, addr, "PING"); got != "+PONG\r\n" {
		t.Errorf("after protected-mode no a remote client got %q", got)
	}
}

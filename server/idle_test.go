package server

import (
	"bufio"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lockserver/lockserver/internal/testcerts"
	"github.com/lockserver/lockserver/internal/testenv"
)

// An idle client's read buffer goes (releaseIdle), over TLS too, where the
// wait it ends is inside the TLS record layer; the client's next commands,
// small and large, are read whole.
func TestIdleTLSClientLosesItsBufferAndReadsOn(t *testing.T) {
	testenv.Long(t)
	ca := testcerts.NewCA(t, "idle")
	leaf := ca.Issue(t, testcerts.Options{})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s, _ := newTestServer(t, Config{})
	go s.Serve(tls.NewListener(ln, &tls.Config{Certificates: []tls.Certificate{leaf.TLS}}))
	dial := func() (net.Conn, *bufio.Reader) {
		nc, err := tls.Dial("tcp", ln.Addr().String(), &tls.Config{RootCAs: ca.Pool()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { nc.Close() })
		nc.SetDeadline(time.Now().Add(time.Minute))
		return nc, bufio.NewReader(nc)
	}
	send := func(nc net.Conn, rd *bufio.Reader, args ...string) string {
		t.Helper()
		var b strings.Builder
		fmt.Fprintf(&b, "*%d\r\n", len(args))
		for _, a := range args {
			fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
		}
		if _, err := nc.Write([]byte(b.String())); err != nil {
			t.Fatal(err)
		}
		line, err := rd.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		if n, err := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(line, "$"))); strings.HasPrefix(line, "$") && err == nil && n >= 0 {
			body := make([]byte, n+2)
			if _, err := io.ReadFull(rd, body); err != nil {
				t.Fatal(err)
			}
			return string(body[:n])
		}
		return strings.TrimSpace(line)
	}
	idle, idleRd := dial()
	watch, watchRd := dial()
	id := strings.TrimPrefix(send(idle, idleRd, "CLIENT", "ID"), ":")
	field := regexp.MustCompile(` qbuf=(\d+) qbuf-free=(\d+) `)
	deadline := time.Now().Add(30 * time.Second)
	for {
		m := field.FindStringSubmatch(send(watch, watchRd, "CLIENT", "LIST", "ID", id))
		if m != nil && m[1] == "0" && m[2] == "0" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the idle TLS client kept its read buffer: %q", m)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if got := send(idle, idleRd, "PING"); got != "+PONG" {
		t.Fatalf("PING after the buffer went: %q", got)
	}
	big := strings.Repeat("v", 300_000)
	if got := send(idle, idleRd, "SET", "k", big); got != "+OK" {
		t.Fatalf("SET of 300 kB after the buffer went: %q", got)
	}
	if got := send(idle, idleRd, "GET", "k"); got != big {
		t.Fatalf("GET returned %d bytes, want %d", len(got), len(big))
	}
}

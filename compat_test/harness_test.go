// Package compat_test checks lockserver against real clients and, differentially,
// against a real redis-server: the same commands go to both and the replies must
// be equal byte for byte.
//
// Tests that need redis-server, redis-cli or python skip with a message when the
// program is missing, and fail instead when the CI environment variable is set.
package compat_test

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lockserver/lockserver"
	"github.com/lockserver/lockserver/internal/freeport"
	"github.com/lockserver/lockserver/internal/testenv"
)

// startRedis starts a redis-server without persistence on a free port and
// returns its address. Extra arguments are passed as configuration ("--maxmemory", "1mb").
func startRedis(t testing.TB, extra ...string) string {
	t.Helper()
	port := freeport.MustPort(t)
	args := append([]string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "",
		"--appendonly", "no", "--dir", t.TempDir()}, extra...)
	return runRedis(t, port, args...)
}

// runRedis runs redis-server with args until the test ends, and returns its
// address once it accepts connections on port.
func runRedis(t testing.TB, port int, args ...string) string {
	t.Helper()
	bin := testenv.Need(t, "redis-server")
	cmd := exec.Command(bin, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	addr := "127.0.0.1:" + strconv.Itoa(port)
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
			return addr
		}
		if time.Now().After(deadline) {
			t.Fatalf("redis-server did not start: %v\n%s", err, out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// startLockserver starts an embedded lockserver on a free loopback port.
func startLockserver(t testing.TB, opts lockserver.Options) *lockserver.Server {
	t.Helper()
	s, err := lockserver.Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// rawClient sends commands and returns each reply as the exact RESP bytes the
// server wrote, so that differential tests compare types as well as values.
type rawClient struct {
	t    testing.TB
	conn net.Conn
	rd   *bufio.Reader
}

func dialRaw(t testing.TB, addr string) *rawClient { return dialRawTLS(t, addr, nil) }

// dialRawTLS is dialRaw over TLS with cfg; with a nil cfg, over plain TCP.
func dialRawTLS(t testing.TB, addr string, cfg *tls.Config) *rawClient {
	t.Helper()
	var c net.Conn
	var err error
	if cfg != nil {
		c, err = tls.Dial("tcp", addr, cfg)
	} else {
		c, err = net.Dial("tcp", addr)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &rawClient{t: t, conn: c, rd: bufio.NewReader(c)}
}

// Do sends one command and returns its raw reply.
func (c *rawClient) Do(args ...string) string {
	c.t.Helper()
	c.Send(args...)
	return c.Read()
}

// Write sends a write that may be applied twice with the same result (SET or
// HSET of a fixed value, DEL) as a client of a cluster would: again while the
// reply is TRYAGAIN or CLUSTERDOWN (nothing was written) or UNKNOWN (it may
// have been; sending it again leaves the same state). redis-server never
// answers so.
func (c *rawClient) Write(args ...string) string {
	c.t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		r := c.Do(args...)
		if !strings.HasPrefix(r, "-TRYAGAIN ") && !strings.HasPrefix(r, "-CLUSTERDOWN ") && !strings.HasPrefix(r, "-UNKNOWN ") {
			return r
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("%q: still %q after 30 s", args, r)
		}
	}
}

// Send writes one command without reading the reply.
func (c *rawClient) Send(args ...string) {
	c.t.Helper()
	var b bytes.Buffer
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	c.SendRaw(b.Bytes())
}

// SendRaw writes bytes as they are.
func (c *rawClient) SendRaw(b []byte) {
	c.t.Helper()
	c.conn.SetWriteDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.conn.Write(b); err != nil {
		c.t.Fatal(err)
	}
}

// Read reads one whole reply (RESP2 or RESP3) and returns its bytes.
func (c *rawClient) Read() string {
	c.t.Helper()
	c.conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	var b strings.Builder
	if err := readReply(c.rd, &b); err != nil {
		c.t.Fatalf("reading reply: %v (so far %q)", err, b.String())
	}
	return b.String()
}

// readReply copies one RESP reply from rd to out.
func readReply(rd *bufio.Reader, out *strings.Builder) error {
	line, err := rd.ReadString('\n')
	if err != nil {
		return err
	}
	out.WriteString(line)
	if len(line) < 3 {
		return fmt.Errorf("short line %q", line)
	}
	body := strings.TrimSuffix(line[1:], "\r\n")
	switch line[0] {
	case '+', '-', ':', '_', '#', ',', '(':
		return nil
	case '$', '=', '!':
		n, err := strconv.Atoi(body)
		if err != nil || n < 0 {
			return err
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(rd, buf); err != nil {
			return err
		}
		out.Write(buf)
		return nil
	case '*', '~', '>', '%', '|':
		n, err := strconv.Atoi(body)
		if err != nil {
			return err
		}
		if line[0] == '%' || line[0] == '|' {
			n *= 2
		}
		for i := 0; i < n; i++ {
			if err := readReply(rd, out); err != nil {
				return err
			}
		}
		return nil
	}
	return fmt.Errorf("unknown reply type in %q", line)
}

// pair is a redis-server and a lockserver given the same commands.
type pair struct {
	t          testing.TB
	redis, ls  *rawClient
	redisAddr  string
	lockserver *lockserver.Server
	// tls, when set, is how connect reaches both: over TLS, to redisAddr and
	// to the lockserver's TLS address.
	tls *tls.Config
	// auth, when set, is the AUTH command that every connection the pair
	// opens anew sends first (see dial).
	auth []string
}

// dial opens new connections to the pair's two servers for test t, over
// TLS if p.tls is set, authenticated with p.auth if it is set.
func (p *pair) dial(t testing.TB) *pair {
	t.Helper()
	lsAddr := p.lockserver.Addr()
	if p.tls != nil {
		lsAddr = p.lockserver.TLSAddr()
	}
	q := &pair{t: t, redis: dialRawTLS(t, p.redisAddr, p.tls), ls: dialRawTLS(t, lsAddr, p.tls), redisAddr: p.redisAddr, lockserver: p.lockserver, tls: p.tls, auth: p.auth}
	if p.auth != nil {
		for _, c := range []*rawClient{q.redis, q.ls} {
			if r := c.Do(p.auth...); r != "+OK\r\n" {
				t.Fatalf("%q: %q", p.auth, r)
			}
		}
	}
	return q
}

// newPair starts a redis-server and a lockserver and connects to both.
func newPair(t testing.TB) *pair {
	t.Helper()
	raddr := startRedis(t)
	s := startLockserver(t, lockserver.Options{})
	return &pair{t: t, redis: dialRaw(t, raddr), ls: dialRaw(t, s.Addr()), redisAddr: raddr, lockserver: s}
}

// Do sends one command to both servers and fails the test unless the replies are equal.
func (p *pair) Do(args ...string) string {
	p.t.Helper()
	want := p.redis.Do(args...)
	got := p.ls.Do(args...)
	if got != want {
		p.t.Errorf("%q:\n redis-server: %q\n   lockserver: %q", args, want, got)
	}
	return got
}

// Run sends each command of a sequence to both servers, comparing replies.
func (p *pair) Run(cmds [][]string) {
	p.t.Helper()
	for _, c := range cmds {
		p.Do(c...)
	}
}

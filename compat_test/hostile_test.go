package compat_test

import (
	"math/rand/v2"
	"net"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lockserver/lockserver"
)

// sendAndHangUp writes raw bytes, closes the writing side and returns all the
// server answers before it closes the connection.
func sendAndHangUp(t testing.TB, c *rawClient, raw string) string {
	t.Helper()
	c.SendRaw([]byte(raw))
	c.conn.(*net.TCPConn).CloseWrite()
	c.conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	return c.ReadAll()
}

// stillServing checks that a fresh connection is answered.
func stillServing(t testing.TB, addr string) {
	t.Helper()
	if got := dialRaw(t, addr).Do("PING"); got != "+PONG\r\n" {
		t.Fatalf("PING on a fresh connection = %q", got)
	}
}

// TestDiffHostileInput sends malformed and oversized requests to Redis and to
// lockserver: both must answer the same bytes, and lockserver must go on
// serving.
func TestDiffHostileInput(t *testing.T) {
	p := newPair(t)
	cases := map[string]string{
		"redcon crash packet":         "*1\r\n$9223372036854775802\r\nabcdefgh\r\n",
		"bulk length overflow":        "*1\r\n$99999999999999999999\r\nx\r\n",
		"negative bulk length":        "*1\r\n$-5\r\n",
		"null bulk in a request":      "*1\r\n$-1\r\n",
		"bulk length not a number":    "*1\r\n$abc\r\n",
		"bulk over proto-max-bulk":    "*1\r\n$536870913\r\n",
		"multibulk overflow":          "*99999999999999999999\r\n",
		"multibulk not a number":      "*x\r\n",
		"multibulk with plus sign":    "*+1\r\n$4\r\nPING\r\n",
		"negative multibulk ignored":  "*-1\r\nPING\r\n",
		"empty multibulk ignored":     "*0\r\n*1\r\n$4\r\nPING\r\n",
		"expected dollar":             "*1\r\nX\r\n",
		"expected dollar, got CR":     "*1\r\n\r\n",
		"unbalanced double quote":     "SET \"a b\r\n",
		"unbalanced single quote":     "SET 'a b\r\n",
		"text after closing quote":    "SET \"a\"b c\r\n",
		"inline quoting":              "SET \"a\\x41\\n\" 'it\\'s'\r\nGET \"a\\x41\\n\"\r\nGET a\"b c\"\r\n",
		"inline NUL ends the line":    "ECHO ab\x00cd\r\nPING\r\n",
		"inline empty lines":          "\r\n\n   \r\nPING\r\n",
		"inline bare LF":              "PING\nPING\n",
		"no CRLF after the bulk body": "*1\r\n$4\r\nPINGxx*1\r\n$4\r\nPING\r\n",
		"half-sent command":           "*3\r\n$3\r\nSET\r\n$4\r\nhalf\r\n$5\r\nab",
		"huge declared bulk, no data": "*2\r\n$3\r\nGET\r\n$536870912\r\n",
		"too long inline line":        strings.Repeat("a", 70000),
		"too long inline line, LF":    strings.Repeat("a", 70000) + "\r\n",
		"too long mbulk count":        "*" + strings.Repeat("1", 70000),
		"too long bulk count":         "*1\r\n$" + strings.Repeat("1", 70000),
		"binary garbage":              "\xff\xfe\x00\x01*\r\n$\r\n\x80\x81\x82\r\n",
		"garbage after a command":     "*1\r\n$4\r\nPING\r\n*1\r\n$4\r\nPIN",
		"pipelined then error":        "PING\r\n*1\r\n$4\r\nPING\r\n*1\r\n$x\r\n*1\r\n$4\r\nPING\r\n",
	}
	for name, raw := range cases {
		t.Run(name, func(t *testing.T) {
			q := p.another()
			want, got := sendAndHangUp(t, q.redis, raw), sendAndHangUp(t, q.ls, raw)
			if got != want {
				t.Errorf("%q:\n redis-server: %q\n   lockserver: %q", raw, want, got)
			}
			stillServing(t, p.lockserver.Addr())
		})
	}
	// The half-sent SET did nothing.
	p.Do("GET", "half")
}

func TestDiffHugeCommands(t *testing.T) {
	p := newPair(t)
	args := []string{"DEL"}
	for i := range 10000 {
		args = append(args, "k"+strconv.Itoa(i))
	}
	p.Do(args...)
	mset := []string{"MSET"}
	for i := range 5000 {
		mset = append(mset, "k"+strconv.Itoa(i), strings.Repeat("v", i%50))
	}
	p.Do(mset...)
	p.Do(args...)
	// A big value, sent in one command.
	p.Do("SET", "big", strings.Repeat("x", 8<<20))
	p.Do("STRLEN", "big")
	// Past the query buffer limit, both servers close the connection silently.
	p.Do("CONFIG", "SET", "client-query-buffer-limit", "1mb")
	q := p.another()
	big := "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$2000000\r\n" + strings.Repeat("x", 2000000) + "\r\n"
	flood := func(c *rawClient) string {
		c.conn.SetWriteDeadline(time.Now().Add(10 * time.Second))
		c.conn.Write([]byte(big)) // fails once the server has closed the connection
		c.conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		return c.ReadAll()
	}
	if want, got := flood(q.redis), flood(q.ls); got != want || got != "" {
		t.Errorf("over client-query-buffer-limit:\n redis-server: %q\n   lockserver: %q", want, got)
	}
	stillServing(t, p.lockserver.Addr())
}

// TestMaxClients: past maxclients, a connection gets Redis's error and is
// closed; the others go on.
func TestDiffMaxClients(t *testing.T) {
	raddr := startRedis(t, "--maxclients", "10")
	s := startLockserver(t, lockserver.Options{MaxClients: 10})
	// A connection closed before (the servers' readiness checks) counts
	// until its server has seen it end, which on a busy machine can be a
	// while: a connection refused meanwhile is tried again.
	var held []*rawClient
	hold := func(addr string) {
		t.Helper()
		waitFor(t, func() string {
			c := dialRaw(t, addr)
			if got := c.Do("PING"); got != "+PONG\r\n" {
				c.conn.Close()
				return "a connection to " + addr + " to be served: PING = " + got
			}
			held = append(held, c)
			return ""
		})
	}
	for range 10 {
		hold(s.Addr())
		hold(raddr)
	}
	for range 3 {
		want, got := dialRaw(t, raddr).ReadAll(), dialRaw(t, s.Addr()).ReadAll()
		if got != want || got != "-ERR max number of clients reached\r\n" {
			t.Errorf("over maxclients:\n redis-server: %q\n   lockserver: %q", want, got)
		}
	}
	held[0].conn.Close()
	// The freed slot is usable once the server has seen the close.
	for deadline := time.Now().Add(10 * time.Second); ; {
		c := dialRaw(t, s.Addr())
		c.Send("PING")
		c.conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		line, _ := c.rd.ReadString('\n')
		if line == "+PONG\r\n" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no slot after a client left: %q", line)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestHostileMemory: many connections declaring the largest bulk and sending a
// byte of it must not make the server allocate what they declared.
func TestHostileMemory(t *testing.T) {
	s := startLockserver(t, lockserver.Options{})
	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	var conns []*rawClient
	for range 200 {
		c := dialRaw(t, s.Addr())
		c.SendRaw([]byte("*2\r\n$3\r\nGET\r\n$536870912\r\nx"))
		conns = append(conns, c)
	}
	// Make sure the server has read every header: a command on each
	// connection would wait, so ask on a fresh one after a round trip per
	// connection's worth of traffic.
	stillServing(t, s.Addr())
	time.Sleep(200 * time.Millisecond) // let the server read what was sent
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	if grown := int64(after.HeapAlloc) - int64(before.HeapAlloc); grown > 256<<20 {
		t.Fatalf("heap grew by %d MB for 200 connections that sent ~30 bytes each", grown>>20)
	}
	for _, c := range conns {
		c.conn.Close()
	}
	stillServing(t, s.Addr())
}

// TestHostileRandom throws random byte strings at the server; whatever it
// answers, it must go on serving.
func TestHostileRandom(t *testing.T) {
	s := startLockserver(t, lockserver.Options{})
	rng := rand.New(rand.NewPCG(1, 2))
	alphabet := []byte("*$\r\n0123456789-+ \"'\\xPINGSET\x00\xff")
	for range 300 {
		b := make([]byte, rng.IntN(200))
		for i := range b {
			if rng.IntN(4) == 0 {
				b[i] = byte(rng.IntN(256))
			} else {
				b[i] = alphabet[rng.IntN(len(alphabet))]
			}
		}
		c := dialRaw(t, s.Addr())
		sendAndHangUp(t, c, string(b))
		c.conn.Close()
	}
	stillServing(t, s.Addr())
}

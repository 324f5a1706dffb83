package lockserver_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/lockserver/lockserver"
	"github.com/redis/go-redis/v9"
)

// The in-memory Dialer's connections are served in the client's goroutine
// (server.Inline). These tests follow such a connection through what a
// served one does on its own: commands split across writes and batches
// bigger than the read buffer, its end by the client and by CLIENT KILL
// (by Close: TestCloseDrainsIdleConnections), and a command that waits
// longer than its client does.

// resp encodes a command as a RESP multibulk.
func resp(args ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	return b.String()
}

// dial opens a raw in-memory connection.
func dial(t *testing.T, s *lockserver.Server) net.Conn {
	t.Helper()
	c, err := s.Dialer()(context.Background(), "", "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// expectReply reads exactly len(want) bytes and compares them with want.
func expectReply(t *testing.T, c net.Conn, want, what string) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	got := make([]byte, len(want))
	if _, err := io.ReadFull(c, got); err != nil || string(got) != want {
		t.Fatalf("%s: read %q, %v; want %q", what, got, err, want)
	}
}

// clientNames lists the names CLIENT LIST shows.
func clientNames(t *testing.T, admin *redis.Client) []string {
	t.Helper()
	list, err := admin.ClientList(context.Background()).Result()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, line := range strings.Split(strings.TrimSpace(list), "\n") {
		for _, f := range strings.Fields(line) {
			if name, ok := strings.CutPrefix(f, "name="); ok && name != "" {
				names = append(names, name)
			}
		}
	}
	return names
}

// waitGone waits until CLIENT LIST no longer shows name.
func waitGone(t *testing.T, admin *redis.Client, name string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		names := clientNames(t, admin)
		if !strings.Contains(" "+strings.Join(names, " ")+" ", " "+name+" ") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("CLIENT LIST still shows %s: %v", name, names)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestDialerCommandsAcrossWritesAndBatches(t *testing.T) {
	s := open(t, lockserver.Options{Addr: "-"})
	c := dial(t, s)

	// One command in three writes, cut inside a header and inside a body.
	cmd := resp("INCR", "split")
	for _, part := range []string{cmd[:5], cmd[5:14], cmd[14:]} {
		if _, err := c.Write([]byte(part)); err != nil {
			t.Fatal(err)
		}
	}
	expectReply(t, c, ":1\r\n", "INCR written in three parts")

	// 3,000 commands in one write, 60 kB, past the 16 kB read buffer:
	// the replies come back in order, 1 to 3000.
	const n = 3000
	var batch, want strings.Builder
	for i := 1; i <= n; i++ {
		batch.WriteString(resp("INCR", "batch"))
		fmt.Fprintf(&want, ":%d\r\n", i)
	}
	if _, err := c.Write([]byte(batch.String())); err != nil {
		t.Fatal(err)
	}
	expectReply(t, c, want.String(), "a 3000-command batch")
}

func TestDialerConnectionsEnd(t *testing.T) {
	s := open(t, lockserver.Options{Addr: "-"})
	admin := redis.NewClient(&redis.Options{Dialer: s.Dialer(), PoolSize: 1})
	defer admin.Close()
	ctx := context.Background()

	named := func(name string) net.Conn {
		c := dial(t, s)
		c.Write([]byte(resp("CLIENT", "SETNAME", name)))
		expectReply(t, c, "+OK\r\n", "CLIENT SETNAME "+name)
		return c
	}

	// The client closes: the server forgets the connection at once.
	closed := named("closed")
	if names := clientNames(t, admin); !strings.Contains(strings.Join(names, " "), "closed") {
		t.Fatalf("CLIENT LIST before the close: %v, want closed in it", names)
	}
	closed.Close()
	if names := clientNames(t, admin); strings.Contains(strings.Join(names, " "), "closed") {
		t.Fatalf("CLIENT LIST right after the client closed: %v", names)
	}

	// CLIENT KILL: the client reads EOF, the server forgets the connection
	// without waiting for the client to write again, and its next command fails.
	killed := named("killed")
	if n, err := admin.ClientKillByFilter(ctx, "SKIPME", "yes", "ADDR", "client").Result(); err != nil || n != 1 {
		t.Fatalf("CLIENT KILL: %d, %v; want 1 (only killed: admin skips itself)", n, err)
	}
	killed.SetReadDeadline(time.Now().Add(10 * time.Second))
	if n, err := killed.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("read of a killed connection: %d, %v; want io.EOF", n, err)
	}
	waitGone(t, admin, "killed")
	if _, err := killed.Write([]byte(resp("PING"))); err == nil {
		t.Fatal("a killed connection took a command")
	}

}

// A command runs in its client's Write, so the client's write deadline
// bounds its wait: WAIT for a replica a standalone server never has answers
// with an error at the deadline instead of holding the client, and the
// connection stays in step. A client that closes during the wait ends it too.
func TestDialerWaitEndsWithItsClient(t *testing.T) {
	s := open(t, lockserver.Options{Addr: "-"})
	c := dial(t, s)

	c.SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
	written := make(chan error, 1)
	go func() {
		_, err := c.Write([]byte(resp("WAIT", "1", "0")))
		written <- err
	}()
	select {
	case err := <-written:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("WAIT 1 0 held its client past the write deadline")
	}
	expectReply(t, c, "-ERR "+context.DeadlineExceeded.Error()+"\r\n", "WAIT 1 0 past the write deadline")
	c.SetWriteDeadline(time.Time{})
	c.Write([]byte(resp("PING")))
	expectReply(t, c, "+PONG\r\n", "PING after the WAIT")

	// No deadline: the WAIT ends when the client closes.
	go func() {
		_, err := c.Write([]byte(resp("WAIT", "1", "0")))
		written <- err
	}()
	time.Sleep(50 * time.Millisecond)
	c.Close()
	select {
	case <-written:
	case <-time.After(10 * time.Second):
		t.Fatal("WAIT 1 0 went on after its client closed")
	}
	if _, err := c.Write([]byte(resp("PING"))); !errors.Is(err, io.ErrClosedPipe) {
		t.Fatalf("write after close: %v, want io.ErrClosedPipe", err)
	}
}

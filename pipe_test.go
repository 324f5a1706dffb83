package lockserver

import (
	"errors"
	"io"
	"os"
	"testing"
	"time"
)

// readResult is what a Read started in the background returned.
type readResult struct {
	data string
	err  error
}

func readAsync(c interface{ Read([]byte) (int, error) }) <-chan readResult {
	done := make(chan readResult, 1)
	go func() {
		b := make([]byte, 16)
		n, err := c.Read(b)
		done <- readResult{string(b[:n]), err}
	}()
	return done
}

// waitRead waits for a background Read, failing the test if it never ends.
func waitRead(t *testing.T, done <-chan readResult, what string) readResult {
	t.Helper()
	select {
	case r := <-done:
		return r
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: the read never returned", what)
		return readResult{}
	}
}

// TestMemPipeReadDeadline follows a read deadline through the moves a
// net.Conn allows (net.Conn's contract is the reference): a passed deadline
// fails a Read that has nothing to read at once; moving a deadline later,
// clearing it, or setting a new one after it passed lets the Read wait for
// data; moving it into the past wakes a waiting Read with
// os.ErrDeadlineExceeded; data already there is read whatever the deadline.
func TestMemPipeReadDeadline(t *testing.T) {
	client, server := memPipe()
	defer client.Close()

	client.SetReadDeadline(time.Now().Add(-time.Second))
	if _, err := client.Read(make([]byte, 1)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read past the deadline: %v, want os.ErrDeadlineExceeded", err)
	}

	// A short deadline, then moved far ahead while the read waits: the
	// timer armed for the short one must not end the read.
	client.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
	client.SetReadDeadline(time.Now().Add(time.Hour))
	done := readAsync(client)
	time.Sleep(60 * time.Millisecond) // past the first deadline
	server.Write([]byte("late"))
	if r := waitRead(t, done, "deadline moved later"); r.err != nil || r.data != "late" {
		t.Fatalf("read after the deadline moved later = %q, %v; want \"late\"", r.data, r.err)
	}

	// A waiting read, then the deadline moved into the past: it wakes.
	done = readAsync(client)
	client.SetReadDeadline(time.Now().Add(-time.Millisecond))
	if r := waitRead(t, done, "deadline moved into the past"); !errors.Is(r.err, os.ErrDeadlineExceeded) {
		t.Fatalf("waiting read after the deadline passed = %q, %v; want os.ErrDeadlineExceeded", r.data, r.err)
	}

	// A new deadline after one passed, then cleared: the read waits for data.
	client.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
	client.SetReadDeadline(time.Time{})
	done = readAsync(client)
	time.Sleep(60 * time.Millisecond)
	server.Write([]byte("cleared"))
	if r := waitRead(t, done, "deadline cleared"); r.err != nil || r.data != "cleared" {
		t.Fatalf("read after the deadline was cleared = %q, %v; want \"cleared\"", r.data, r.err)
	}

	// A deadline that passes while the read waits ends it.
	client.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
	if r := waitRead(t, readAsync(client), "deadline passing"); !errors.Is(r.err, os.ErrDeadlineExceeded) {
		t.Fatalf("read when the deadline passed = %q, %v; want os.ErrDeadlineExceeded", r.data, r.err)
	}

	// Data already there, then EOF once the writer closed.
	server.Write([]byte("x"))
	server.Close()
	client.SetReadDeadline(time.Now().Add(time.Hour))
	if r := waitRead(t, readAsync(client), "data then close"); r.err != nil || r.data != "x" {
		t.Fatalf("read of buffered data = %q, %v; want \"x\"", r.data, r.err)
	}
	if _, err := client.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("read after the writer closed: %v, want io.EOF", err)
	}
}

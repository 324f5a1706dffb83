package freeport

import (
	"net"
	"strconv"
	"testing"
)

// The ports handed out lie below the kernel's ephemeral range, are distinct,
// and can be listened on.
func TestPort(t *testing.T) {
	low := ephemeralLow()
	seen := map[int]bool{}
	for range 200 {
		p, err := Port()
		if err != nil {
			t.Fatal(err)
		}
		if p < low-span || p >= low {
			t.Fatalf("port %d outside %d-%d", p, low-span, low-1)
		}
		if seen[p] {
			t.Fatalf("port %d handed out twice", p)
		}
		seen[p] = true
	}
	addr, err := Addr()
	if err != nil {
		t.Fatal(err)
	}
	for _, addr := range []string{addr, MustAddr(t)} {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			t.Fatalf("listen on %s: %v", addr, err)
		}
		ln.Close()
	}
}

// A port that is taken is skipped.
func TestPortSkipsTaken(t *testing.T) {
	p, err := Port()
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	taken := next
	mu.Unlock()
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(taken)))
	if err != nil {
		t.Skipf("port %d already taken by someone else: %v", taken, err)
	}
	defer ln.Close()
	q, err := Port()
	if err != nil {
		t.Fatal(err)
	}
	if q == taken || q == p {
		t.Fatalf("got port %d; %d is taken and %d was handed out", q, taken, p)
	}
}

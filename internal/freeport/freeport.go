// Package freeport picks loopback addresses for servers that must be told
// their address before they listen: redis-server, etcd, Raft transports and
// the members of a cluster that name each other.
//
// Asking the kernel for port 0 and closing the listener is not enough: the
// port comes from the ephemeral range, from which the kernel also picks the
// source port of every outgoing connection, so under a busy test run another
// connection can take it before the server binds it ("address already in
// use"). Ports here come from below that range, where the kernel puts no
// connection on its own.
package freeport

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
)

// span is how many ports below the ephemeral range are drawn from.
const span = 16384

var (
	mu   sync.Mutex
	next int // the next candidate; 0 until the first call
	low  int // the first ephemeral port
)

// Port returns a loopback TCP port that was free a moment ago and that no
// outgoing connection will take.
func Port() (int, error) {
	mu.Lock()
	defer mu.Unlock()
	if next == 0 {
		low = ephemeralLow()
		// A random start keeps concurrent test processes apart.
		next = low - span + rand.IntN(span)
	}
	for range span {
		p := next
		if next++; next >= low {
			next = low - span
		}
		ln, err := net.Listen("tcp", loopback(p))
		if err == nil {
			ln.Close()
			return p, nil
		}
	}
	return 0, fmt.Errorf("no free loopback port in %d-%d", low-span, low-1)
}

// Addr returns "127.0.0.1:<port>" for a port from Port.
func Addr() (string, error) {
	p, err := Port()
	if err != nil {
		return "", err
	}
	return loopback(p), nil
}

func loopback(port int) string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(port)) }

// Fataler is what MustPort and MustAddr need of a test; testing.TB has it.
type Fataler interface {
	Helper()
	Fatal(args ...any)
}

// MustPort is Port for a test, which fails if no port is free.
func MustPort(t Fataler) int {
	t.Helper()
	p, err := Port()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// MustAddr is Addr for a test, which fails if no port is free.
func MustAddr(t Fataler) string {
	t.Helper()
	return loopback(MustPort(t))
}

// ephemeralLow reads the first port of the kernel's ephemeral range; Linux's
// default where it cannot. A range that starts too low to leave span ports
// below it is treated as the default one.
func ephemeralLow() int {
	const linuxDefault = 32768
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return linuxDefault
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return linuxDefault
	}
	n, err := strconv.Atoi(f[0])
	if err != nil || n-span < 1024 {
		return linuxDefault
	}
	return n
}

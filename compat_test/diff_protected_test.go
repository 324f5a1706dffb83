package compat_test

import (
	"net"
	"strconv"
	"testing"

	"github.com/lockserver/lockserver"
	"github.com/lockserver/lockserver/internal/freeport"
)

// hostAddress returns an IPv4 address of this machine that is not loopback,
// so that a test can connect as a client from the network would.
func hostAddress(t testing.TB) string {
	t.Helper()
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && !n.IP.IsLoopback() && !n.IP.IsLinkLocalUnicast() {
			return n.IP.String()
		}
	}
	t.Skip("this machine has no non-loopback IPv4 address to connect from")
	return ""
}

// Protected mode, as redis-server 7.0 has it: listening on every address
// with no password, each server answers a client that connects through a
// non-loopback address with the same DENIED error and closes the
// connection; loopback clients are served, and CONFIG GET reports it.
func TestDiffProtectedMode(t *testing.T) {
	host := hostAddress(t)
	rport := freeport.MustPort(t)
	runRedis(t, rport, "--port", strconv.Itoa(rport), "--bind", "0.0.0.0", "--protected-mode", "yes",
		"--save", "", "--appendonly", "no", "--dir", t.TempDir())
	ls := startLockserver(t, lockserver.Options{Addr: "0.0.0.0:0"})
	_, lport, _ := net.SplitHostPort(ls.Addr())
	remote := &pair{t: t,
		redis: dialRaw(t, net.JoinHostPort(host, strconv.Itoa(rport))),
		ls:    dialRaw(t, net.JoinHostPort(host, lport))}
	if got := remote.SendRawUntilClose("PING\r\n"); len(got) < len("-DENIED") || got[:7] != "-DENIED" {
		t.Errorf("a client from %s got %q", host, got)
	}
	local := &pair{t: t,
		redis: dialRaw(t, "127.0.0.1:"+strconv.Itoa(rport)),
		ls:    dialRaw(t, "127.0.0.1:"+lport)}
	local.Do("PING")
	local.Do("CONFIG", "GET", "protected-mode")
	local.Do("CONFIG", "SET", "protected-mode", "maybe")
}

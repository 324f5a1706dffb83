package lockloss

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// faultNet is the network between the lockserver processes of the lock-loss
// test: a TCP proxy stands in front of each node's Raft port and client port,
// and the nodes reach each other only through the proxies (--bootstrap names
// the Raft proxies, --advertise-addr the client proxies; the test's own
// clients connect to the nodes directly). Isolating a node cuts every
// connection to it and from it. Raft's are blackholed, as a partition that
// drops packets does: the dialer's bytes vanish and nothing comes back. The
// client ports' (which carry forwarded commands) are reset, as a partition
// that rejects does: a follower whose forwarded batch hangs holds every later
// request behind it for 30 s (replication's forwardTimeout), which
// TestFailoverFromHungLeader shows; resetting keeps that out of the lock-loss
// runs, which are about safety.
//
// A proxy knows which node is behind it; it learns which node dialed it from
// the kernel: the socket's inode in /proc/net/tcp, found among the file
// descriptors of the node processes. So this works on Linux only.
type faultNet struct {
	mu       sync.Mutex
	isolated map[string]bool // node ids cut off from every other node
	pids     map[int]string  // running node process -> node id
	proxies  []*faultProxy
}

func newFaultNet() *faultNet {
	return &faultNet{isolated: map[string]bool{}, pids: map[int]string{}}
}

// faultNetSupported reports whether the proxies can tell nodes apart here.
func faultNetSupported() bool {
	_, err := os.Stat("/proc/net/tcp")
	return err == nil
}

func (n *faultNet) setPID(pid int, id string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for p, i := range n.pids {
		if i == id {
			delete(n.pids, p)
		}
	}
	if pid != 0 {
		n.pids[pid] = id
	}
}

// cut reports whether traffic between src and dst is dropped; an unknown
// source ("") is cut only if dst is.
func (n *faultNet) cut(src, dst string) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.isolated[src] || n.isolated[dst]
}

// isolate cuts node id off from the others, both ways, including the
// connections already open.
func (n *faultNet) isolate(id string) {
	n.mu.Lock()
	n.isolated[id] = true
	proxies := append([]*faultProxy(nil), n.proxies...)
	n.mu.Unlock()
	for _, p := range proxies {
		for _, l := range p.linkList() {
			switch {
			case l.src != id && p.dst != id:
			case p.reject:
				l.close()
			default:
				l.blackhole()
			}
		}
	}
}

// heal reconnects everyone. Blackholed connections are closed, as TCP
// connections that timed out during a partition would be, and their dialers
// connect again.
func (n *faultNet) heal() {
	n.mu.Lock()
	n.isolated = map[string]bool{}
	proxies := append([]*faultProxy(nil), n.proxies...)
	n.mu.Unlock()
	for _, p := range proxies {
		for _, l := range p.linkList() {
			if l.isHoled() {
				l.close()
			}
		}
	}
}

func (n *faultNet) close() {
	n.mu.Lock()
	proxies := n.proxies
	n.proxies = nil
	n.mu.Unlock()
	for _, p := range proxies {
		p.close()
	}
}

// sourceOf returns the id of the node process that holds the other end of c,
// a connection accepted on loopback, or "" if no node does.
func (n *faultNet) sourceOf(c net.Conn) string {
	peer, ok1 := c.RemoteAddr().(*net.TCPAddr)
	local, ok2 := c.LocalAddr().(*net.TCPAddr)
	if !ok1 || !ok2 {
		return ""
	}
	inode := socketInode(peer.Port, local.Port)
	if inode == "" {
		return ""
	}
	n.mu.Lock()
	pids := maps.Clone(n.pids)
	n.mu.Unlock()
	want := "socket:[" + inode + "]"
	for pid, id := range pids {
		dir := fmt.Sprintf("/proc/%d/fd", pid)
		fds, err := os.ReadDir(dir)
		if err != nil {
			continue
		}
		for _, fd := range fds {
			if link, err := os.Readlink(dir + "/" + fd.Name()); err == nil && link == want {
				return id
			}
		}
	}
	return ""
}

// socketInode returns the inode of the IPv4 TCP socket whose local port is
// localPort and whose peer's port is peerPort, from /proc/net/tcp.
func socketInode(localPort, peerPort int) string {
	data, err := os.ReadFile("/proc/net/tcp")
	if err != nil {
		return ""
	}
	port := func(hostPort string) int {
		_, hex, _ := strings.Cut(hostPort, ":")
		p, _ := strconv.ParseInt(hex, 16, 32)
		return int(p)
	}
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) >= 10 && f[0] != "sl" && port(f[1]) == localPort && port(f[2]) == peerPort {
			return f[9]
		}
	}
	return ""
}

// faultProxy forwards connections to one port of node dst.
type faultProxy struct {
	net    *faultNet
	dst    string
	target string
	ln     net.Listener
	// reject resets cut connections instead of blackholing them.
	reject bool

	mu     sync.Mutex
	links  map[*proxyLink]bool
	wg     sync.WaitGroup // the links' goroutines
	served chan struct{}  // closed when serve returns
}

// proxy starts a proxy on a free loopback port in front of target, the port
// of node dst; reject says how it cuts connections.
func (n *faultNet) proxy(t testing.TB, dst, target string, reject bool) *faultProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &faultProxy{net: n, dst: dst, target: target, ln: ln, reject: reject, links: map[*proxyLink]bool{}, served: make(chan struct{})}
	n.mu.Lock()
	n.proxies = append(n.proxies, p)
	n.mu.Unlock()
	go p.serve()
	return p
}

func (p *faultProxy) addr() string { return p.ln.Addr().String() }

func (p *faultProxy) serve() {
	defer close(p.served)
	for {
		in, err := p.ln.Accept()
		if err != nil {
			return
		}
		l := &proxyLink{src: p.net.sourceOf(in), in: in}
		if p.net.cut(l.src, p.dst) {
			if p.reject {
				in.Close()
				continue
			}
			l.holed = true
		} else if l.out, err = net.Dial("tcp", p.target); err != nil {
			in.Close() // the node is down: refuse, as its own port would
			continue
		}
		p.mu.Lock()
		p.links[l] = true
		p.mu.Unlock()
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			l.forward()
			p.mu.Lock()
			delete(p.links, l)
			p.mu.Unlock()
		}()
		if l.out != nil {
			p.wg.Add(1)
			go func() {
				defer p.wg.Done()
				l.backward()
			}()
		}
	}
}

func (p *faultProxy) linkList() []*proxyLink {
	p.mu.Lock()
	defer p.mu.Unlock()
	var ls []*proxyLink
	for l := range p.links {
		ls = append(ls, l)
	}
	return ls
}

// close stops the proxy and closes its links. It waits for serve to return
// first: a connection accepted before the listener closed may still be on
// its way to the links (finding its source reads /proc, slow on a busy
// machine), and a link left out would keep its goroutine, and close, waiting
// until its dialer hangs up.
func (p *faultProxy) close() {
	p.ln.Close()
	<-p.served
	for _, l := range p.linkList() {
		l.close()
	}
	p.wg.Wait()
}

// proxyLink is one proxied connection: in from the dialer, out to the node.
// A blackholed link has no out: what the dialer sends is read and dropped.
type proxyLink struct {
	src string
	in  net.Conn
	out net.Conn

	mu    sync.Mutex
	holed bool
}

func (l *proxyLink) isHoled() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.holed
}

// blackhole stops the link forwarding anything, either way. The node behind
// the proxy sees its side closed; the dialer sees silence.
func (l *proxyLink) blackhole() {
	l.mu.Lock()
	l.holed = true
	l.mu.Unlock()
	if l.out != nil {
		l.out.Close()
	}
}

func (l *proxyLink) close() {
	l.blackhole()
	l.in.Close()
}

// forward copies the dialer's bytes to the node, or drops them while the link
// is blackholed, until the dialer's side closes.
func (l *proxyLink) forward() {
	defer l.close()
	buf := make([]byte, 32<<10)
	for {
		n, err := l.in.Read(buf)
		if n > 0 && !l.isHoled() {
			if _, werr := l.out.Write(buf[:n]); werr != nil && !l.isHoled() {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// backward copies the node's bytes to the dialer until the node's side
// closes; then it closes the dialer's side too, unless the link is
// blackholed, when the dialer must hear nothing.
func (l *proxyLink) backward() {
	buf := make([]byte, 32<<10)
	for {
		n, err := l.out.Read(buf)
		if n > 0 {
			if l.isHoled() {
				return
			}
			if _, werr := l.in.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			if !l.isHoled() {
				l.in.Close()
			}
			return
		}
	}
}

// The proxy tells which process dialed it, forwards, and blackholes both new
// and open connections of an isolated node until healed. This process plays
// the node that dials.
func TestFaultNetProxy(t *testing.T) {
	if !faultNetSupported() {
		t.Skip("needs /proc/net/tcp")
	}
	echo, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer echo.Close()
	go func() {
		for {
			c, err := echo.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				io.Copy(c, c)
			}()
		}
	}()
	n := newFaultNet()
	defer n.close()
	n.setPID(os.Getpid(), "a")
	p := n.proxy(t, "b", echo.Addr().String(), false)
	rejecting := n.proxy(t, "b", echo.Addr().String(), true)
	dialTo := func(p *faultProxy) (net.Conn, *bufio.Reader) {
		c, err := net.Dial("tcp", p.addr())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c, bufio.NewReader(c)
	}
	dial := func() (net.Conn, *bufio.Reader) { return dialTo(p) }
	// A round trip that should be answered (or refused) waits as long as a
	// busy machine under -race may need; one that should meet silence gives
	// up after silence.
	const answered, silence = 20 * time.Second, 300 * time.Millisecond
	roundTrip := func(c net.Conn, rd *bufio.Reader, msg string, wait time.Duration) error {
		c.SetDeadline(time.Now().Add(wait))
		if _, err := c.Write([]byte(msg + "\n")); err != nil {
			return err
		}
		got, err := rd.ReadString('\n')
		if err == nil && got != msg+"\n" {
			err = fmt.Errorf("echo of %q came back as %q", msg, got)
		}
		return err
	}

	open, openRd := dial()
	if err := roundTrip(open, openRd, "hello", answered); err != nil {
		t.Fatalf("through the proxy: %v", err)
	}
	if links := p.linkList(); len(links) != 1 || links[0].src != "a" {
		t.Fatalf("the proxy's links = %+v, want one from node a", links)
	}

	n.isolate("a")
	if err := roundTrip(open, openRd, "lost", silence); err == nil {
		t.Fatal("an open connection of an isolated node still carries data")
	}
	fresh, freshRd := dial()
	var nerr net.Error
	if err := roundTrip(fresh, freshRd, "lost too", silence); !errors.As(err, &nerr) || !nerr.Timeout() {
		t.Fatalf("a new connection from an isolated node = %v, want silence (a timeout)", err)
	}
	// Silence alone may only mean that the proxy has not got to the
	// connection yet: it must have taken it, from node a, and blackholed it.
	for deadline := time.Now().Add(answered); ; time.Sleep(10 * time.Millisecond) {
		links := p.linkList()
		holed := 0
		for _, l := range links {
			if l.src == "a" && l.isHoled() {
				holed++
			}
		}
		if len(links) == 2 && holed == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the proxy's links = %+v, want the open one and the new one from node a, both blackholed", links)
		}
	}
	refused, refusedRd := dialTo(rejecting)
	if err := roundTrip(refused, refusedRd, "refused", answered); err == nil || errors.As(err, &nerr) && nerr.Timeout() {
		t.Fatalf("a new connection from an isolated node through a rejecting proxy = %v, want it closed", err)
	}

	n.heal()
	again, againRd := dial()
	if err := roundTrip(again, againRd, "back", answered); err != nil {
		t.Fatalf("after healing: %v", err)
	}
}

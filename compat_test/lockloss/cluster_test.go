//go:build unix

package lockloss

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/lockserver/lockserver/internal/freeport"
	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
)

// procCluster is three lockserver processes on loopback ports, each with its
// Raft log in a data directory (fsync on) that survives its restarts. They
// reach each other through a faultNet; the test's clients reach them directly.
type procCluster struct {
	t     *testing.T
	bin   string
	net   *faultNet
	nodes []*procNode
}

// procNode is one lockserver process and what it needs to restart.
type procNode struct {
	id       string
	addr     string // client port
	raftAddr string // Raft port
	// raftProxy is the faultNet proxy in front of raftAddr, where the
	// others reach it.
	raftProxy string
	dir       string
	logPath   string
	args      []string
	admin     *redis.Client // for LOCKSERVER STATUS: short timeouts

	mu     sync.Mutex
	cmd    *exec.Cmd
	paused bool
}

// buildLockserver builds cmd/lockserver into a temporary directory.
func buildLockserver(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "lockserver")
	out, err := exec.Command("go", "build", "-o", bin, "github.com/lockserver/lockserver/cmd/lockserver").CombinedOutput()
	if err != nil {
		t.Fatalf("build lockserver: %v\n%s", err, out)
	}
	return bin
}

// startProcCluster starts three nodes bootstrapped as one cluster. Each
// node's --bootstrap names the nodes' Raft proxies (its own its
// --raft-advertise-addr) and its --advertise-addr its own client proxy, so
// all traffic between nodes crosses the faultNet.
func startProcCluster(t *testing.T, bin string, fnet *faultNet) *procCluster {
	t.Helper()
	c := &procCluster{t: t, bin: bin, net: fnet}
	logs := t.TempDir()
	var voters []string
	clientProxy := map[string]string{}
	for i := range 3 {
		n := &procNode{id: fmt.Sprint("n", i+1), addr: freeport.MustAddr(t), raftAddr: freeport.MustAddr(t), dir: t.TempDir()}
		n.logPath = filepath.Join(logs, n.id+".log")
		n.admin = redis.NewClient(&redis.Options{
			Addr: n.addr, MaxRetries: -1, DialerRetries: 1, DialTimeout: 300 * time.Millisecond,
			ReadTimeout: 700 * time.Millisecond, WriteTimeout: 700 * time.Millisecond, PoolSize: 2,
			DisableIdentity: true, MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled},
		})
		t.Cleanup(func() { n.admin.Close() })
		n.raftProxy = fnet.proxy(t, n.id, n.raftAddr, false).addr()
		voters = append(voters, n.id+"="+n.raftProxy)
		clientProxy[n.id] = fnet.proxy(t, n.id, n.addr, true).addr()
		c.nodes = append(c.nodes, n)
	}
	for _, n := range c.nodes {
		n.args = []string{"--addr", n.addr, "--node-id", n.id, "--raft-addr", n.raftAddr, "--raft-advertise-addr", n.raftProxy,
			"--advertise-addr", clientProxy[n.id], "--data-dir", n.dir, "--bootstrap", strings.Join(voters, ",")}
		c.start(n)
	}
	t.Cleanup(func() {
		for _, n := range c.nodes {
			c.kill(n)
		}
		if t.Failed() {
			c.logTails(60)
		}
	})
	return c
}

// start runs n's process from its data directory and waits until it answers.
func (c *procCluster) start(n *procNode) {
	c.t.Helper()
	log, err := os.OpenFile(n.logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		c.t.Fatal(err)
	}
	defer log.Close()
	fmt.Fprintf(log, "---- start %s\n", time.Now().Format(time.RFC3339Nano))
	cmd := exec.Command(c.bin, n.args...)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		c.t.Fatalf("start %s: %v", n.id, err)
	}
	n.mu.Lock()
	n.cmd, n.paused = cmd, false
	n.mu.Unlock()
	c.net.setPID(cmd.Process.Pid, n.id)
	deadline := time.Now().Add(20 * time.Second)
	for n.admin.Ping(context.Background()).Err() != nil {
		if time.Now().After(deadline) {
			c.t.Fatalf("%s did not answer PING after starting", n.id)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// kill sends SIGKILL to n, if it runs, and reaps it.
func (c *procCluster) kill(n *procNode) {
	n.mu.Lock()
	cmd := n.cmd
	n.cmd, n.paused = nil, false
	n.mu.Unlock()
	if cmd == nil {
		return
	}
	cmd.Process.Kill()
	cmd.Wait()
	c.net.setPID(0, n.id)
}

// pause stops n with SIGSTOP (resume continues it): a process frozen by a
// long GC, a VM migration or a swap storm, whose sockets stay open. A nil n
// is no node.
func (c *procCluster) pause(n *procNode) {
	if n == nil {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd != nil && !n.paused {
		n.cmd.Process.Signal(syscall.SIGSTOP)
		n.paused = true
	}
}

func (c *procCluster) resume(n *procNode) {
	if n == nil {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd != nil && n.paused {
		n.cmd.Process.Signal(syscall.SIGCONT)
		n.paused = false
	}
}

// up reports whether n runs and is not paused.
func (n *procNode) up() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.cmd != nil && !n.paused
}

// nodeStatus is what LOCKSERVER STATUS says of a node.
type nodeStatus struct {
	state, leader   string
	term            int64
	commit, applied int64
}

func (c *procCluster) status(n *procNode) (nodeStatus, error) {
	v, err := n.admin.Do(context.Background(), "LOCKSERVER", "STATUS").Result()
	if err != nil {
		return nodeStatus{}, err
	}
	m, ok := v.(map[any]any)
	if !ok {
		return nodeStatus{}, fmt.Errorf("LOCKSERVER STATUS = %#v, want a map", v)
	}
	num := func(k string) int64 { n, _ := m[k].(int64); return n }
	str := func(k string) string { s, _ := m[k].(string); return s }
	return nodeStatus{state: str("state"), leader: str("leader"), term: num("term"),
		commit: num("commit_index"), applied: num("applied_index")}, nil
}

// leader waits until one of among leads and the others of among that answer
// agree, and returns it. Nodes that are down or paused are not asked.
func (c *procCluster) leader(among ...*procNode) *procNode {
	c.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		sts := map[*procNode]nodeStatus{}
		var leader *procNode
		for _, n := range among {
			if !n.up() {
				continue
			}
			if st, err := c.status(n); err == nil {
				sts[n] = st
				if st.state == "leader" && (leader == nil || st.term > sts[leader].term) {
					leader = n
				}
			}
		}
		agreed := leader != nil
		for n, st := range sts {
			if leader != nil && n != leader && st.leader != leader.id {
				agreed = false
			}
		}
		if agreed {
			return leader
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("no leader among %s within 30 s: %+v", nodeIDs(among), sts)
		}
		time.Sleep(30 * time.Millisecond)
	}
}

// waitHealthy waits until every node runs, one leads, and every node has
// applied what the leader had committed when the wait began.
func (c *procCluster) waitHealthy() *procNode {
	c.t.Helper()
	l := c.leader(c.nodes...)
	st, err := c.status(l)
	deadline := time.Now().Add(30 * time.Second)
	for _, n := range c.nodes {
		for {
			s, serr := c.status(n)
			if err == nil && serr == nil && s.applied >= st.commit && s.leader == l.id {
				break
			}
			if err != nil {
				st, err = c.status(l)
			}
			if time.Now().After(deadline) {
				c.t.Fatalf("%s did not catch up with leader %s (commit %d) within 30 s: %+v, %v", n.id, l.id, st.commit, s, serr)
			}
			time.Sleep(30 * time.Millisecond)
		}
	}
	return l
}

// others returns the nodes other than n.
func (c *procCluster) others(n *procNode) []*procNode {
	var rest []*procNode
	for _, m := range c.nodes {
		if m != n {
			rest = append(rest, m)
		}
	}
	return rest
}

func (c *procCluster) addrs() []string {
	var as []string
	for _, n := range c.nodes {
		as = append(as, n.addr)
	}
	return as
}

func nodeIDs(ns []*procNode) []string {
	var ids []string
	for _, n := range ns {
		ids = append(ids, n.id)
	}
	return ids
}

// logTails prints the end of each node's log.
func (c *procCluster) logTails(lines int) {
	for _, n := range c.nodes {
		f, err := os.Open(n.logPath)
		if err != nil {
			continue
		}
		var tail []string
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			tail = append(tail, sc.Text())
			if len(tail) > lines {
				tail = tail[1:]
			}
		}
		f.Close()
		c.t.Logf("%s: last %d lines of %s:\n%s", n.id, len(tail), n.logPath, strings.Join(tail, "\n"))
	}
}

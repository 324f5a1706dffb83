package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/lockserver/lockserver"
	"github.com/lockserver/lockserver/internal/freeport"
	"github.com/redis/go-redis/v9"
)

// system is one lock store the bench compares.
type system struct {
	name  string
	about string
	// install says how to get the system when it is missing; RESULTS.md
	// quotes it.
	install string
	start   func(ctx context.Context, b *bench) (*instance, error)
}

// instance is a started system: how to reach it, measure it and stop it.
type instance struct {
	// client returns a Redis-protocol client for a run with this many
	// workers; nil for a system that does not speak RESP.
	client func(poolSize int) respClient
	// subscriber returns a go-redis client for pub/sub connections.
	subscriber func() *redis.Client
	// addr is the loopback address redis-benchmark can reach; "" if none.
	addr string
	// etcd holds the client endpoints of an etcd cluster.
	etcd []string
	// cpu returns the CPU time used so far by the system's processes, or by
	// the whole bench process for a system that runs inside it.
	cpu       func() (time.Duration, error)
	inProcess bool
	// memory returns the memory the system holds now and how it was measured;
	// nil when the system is measured through another row.
	memory func(ctx context.Context) (int64, string, error)
	// sameServerAs names the row that already measures this server for
	// workloads that do not depend on how clients reach it.
	sameServerAs string
	// only names the workloads the system can run, when not all.
	only []string
	// members are the server processes, which the held-growth workload
	// stops and starts again; nil for a system that runs in the bench.
	members []*member
	stop    func()
}

// member is a server process that can be stopped and started again with
// the same arguments and the same data.
type member struct {
	name, dir, bin string
	args, env      []string
	addr           string // its client address
	// data is where the server keeps what it persists: a directory, or the
	// directory of a file (redis-server's dump.rdb).
	data string

	mu   sync.Mutex
	proc *process
}

// start starts the member's process.
func (m *member) start() error {
	p, err := startProcessEnv(m.dir, m.name, m.bin, m.env, m.args...)
	if err != nil {
		return err
	}
	m.mu.Lock()
	m.proc = p
	m.mu.Unlock()
	return nil
}

// process returns the member's current process.
func (m *member) process() *process {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.proc
}

// stop stops the member's process: SIGTERM, then SIGKILL after five seconds,
// or two minutes for a cluster member, which takes a snapshot as it closes
// when much log was written since its last.
func (m *member) stop() {
	grace := 5 * time.Second
	if strings.HasPrefix(m.name, "lockserver-") {
		grace = 2 * time.Minute
	}
	m.process().stopWithin(grace)
}

// processes returns the current process of each member.
func processes(members []*member) func() []*process {
	return func() []*process {
		ps := make([]*process, len(members))
		for i, m := range members {
			ps[i] = m.process()
		}
		return ps
	}
}

// skipError means a system cannot run here; its text says why and how to fix it.
type skipError struct{ reason string }

func (e skipError) Error() string { return e.reason }

const (
	redisInstall     = "Debian/Ubuntu: apt-get install redis-server redis-tools (redis-server 7.0, with redis-benchmark)"
	etcdInstall      = "Debian/Ubuntu: apt-get install etcd-server (etcd 3.4; the Go client comes with go.mod)"
	lockserverBuilt  = "built from ./cmd/lockserver by the bench itself (needs only the Go toolchain)"
	inProcessInstall = "in process, nothing to install"
)

// systems lists every system in the order the table shows them.
func systems() []system {
	return []system{
		{name: "embedded", about: "lockserver in process; go-redis over the in-memory Dialer (redis-benchmark: its loopback listener)", install: inProcessInstall, start: startEmbedded},
		{name: "go-redis-alone", about: "go-redis over an in-memory connection that answers at once with no server behind it: the client's own cost, the most the embedded row could reach", install: inProcessInstall, start: startGoRedisAlone},
		{name: "embedded-do", about: "lockserver in process; direct Server.Do calls, no RESP", install: inProcessInstall, start: startEmbeddedDo},
		{name: "lockserver", about: "lockserver single node, its own process over loopback TCP", install: lockserverBuilt, start: startLockserver(nil)},
		{name: "lockserver-allcpus", about: "lockserver single node with --procs set to every CPU: the same as lockserver on a machine of more than two CPUs; on two, lockserver runs on one and leaves the clients the other", install: lockserverBuilt, start: startLockserver([]string{"LOCKSERVER_PROCS=" + strconv.Itoa(runtime.NumCPU())})},
		{name: "lockserver-metrics", about: "lockserver single node with --metrics-addr, its /metrics scraped every second during the run: the cost of metrics, against lockserver-untracked", install: lockserverBuilt, start: startLockserverMetrics},
		{name: "lockserver-untracked", about: "lockserver single node with latency-tracking no and no metrics address: no latency histograms, only Redis's own command counts", install: lockserverBuilt, start: startLockserverUntracked},
		{name: "lockserver-raft3", about: "lockserver 3-node Raft cluster with fsync, clients on the leader", install: lockserverBuilt + "; needs the Raft flags (--node-id, --raft-addr, --data-dir, --bootstrap, --join)", start: startLockserverCluster},
		{name: "lockserver-tls", about: "lockserver single node, its clients over TLS only (--addr \"\" --tls-port, client certificates required): against lockserver, what TLS costs it", install: lockserverBuilt, start: startLockserverTLS},
		{name: "lockserver-raft3-tls", about: "lockserver-raft3 with its clients over TLS only and its member links in mutual TLS (--tls-cluster)", install: lockserverBuilt, start: startLockserverClusterTLS},
		{name: "redis", about: "redis-server without persistence (--save \"\" --appendonly no): the baseline", install: redisInstall, start: startRedis(false)},
		{name: "redis-aof", about: "redis-server --appendonly yes --appendfsync always", install: redisInstall, start: startRedis(true)},
		{name: "redis-tls", about: "redis-server as redis, its clients over TLS only (--port 0 --tls-port, client certificates required): against redis, what TLS costs it", install: redisInstall + " (Debian's is built with TLS)", start: startRedisTLS},
		{name: "miniredis", about: "miniredis v2, in process over loopback TCP", install: inProcessInstall, start: startMiniredis},
		{name: "etcd3", about: "etcd 3-node cluster, concurrency.Mutex, clients on the leader", install: etcdInstall, start: startEtcd},
	}
}

// baseline is the system every ratio is taken against.
const baseline = "redis"

func tcpClient(addr string) func(int) respClient {
	return func(pool int) respClient { return newGoRedis(&redis.Options{Addr: addr}, pool) }
}

func tcpSubscriber(addr string) func() *redis.Client {
	return func() *redis.Client { return newGoRedis(&redis.Options{Addr: addr}, 1).c }
}

func startEmbedded(ctx context.Context, b *bench) (*instance, error) {
	srv, err := lockserver.Open(lockserver.Options{})
	if err != nil {
		return nil, fmt.Errorf("open embedded lockserver: %w", err)
	}
	mem := &redis.Options{Dialer: srv.Dialer()}
	inst := &instance{
		client:     func(pool int) respClient { return newGoRedis(mem, pool) },
		subscriber: func() *redis.Client { return newGoRedis(mem, 1).c },
		addr:       srv.Addr(),
		cpu:        selfCPU,
		inProcess:  true,
		stop:       func() { srv.Close() },
	}
	inst.memory = func(ctx context.Context) (int64, string, error) {
		return usedMemory(ctx, inst.client(1), func() (int64, error) { return heapInUse(), nil }, "Go heap delta")
	}
	return inst, nil
}

func startEmbeddedDo(ctx context.Context, b *bench) (*instance, error) {
	srv, err := lockserver.Open(lockserver.Options{Addr: "-"})
	if err != nil {
		return nil, fmt.Errorf("open embedded lockserver: %w", err)
	}
	// Do cannot subscribe: waiters listen for unlock messages through
	// the in-memory Dialer, as an embedding application would.
	mem := &redis.Options{Dialer: srv.Dialer()}
	return &instance{
		client:       func(int) respClient { return directCalls{srv} },
		subscriber:   func() *redis.Client { return newGoRedis(mem, 1).c },
		cpu:          selfCPU,
		inProcess:    true,
		sameServerAs: "embedded",
		stop:         func() { srv.Close() },
	}, nil
}

func startMiniredis(ctx context.Context, b *bench) (*instance, error) {
	m := miniredis.NewMiniRedis()
	if err := m.StartAddr("127.0.0.1:0"); err != nil {
		return nil, fmt.Errorf("start miniredis: %w", err)
	}
	inst := &instance{
		client:     tcpClient(m.Addr()),
		subscriber: tcpSubscriber(m.Addr()),
		addr:       m.Addr(),
		cpu:        selfCPU,
		inProcess:  true,
		stop:       m.Close,
	}
	inst.memory = func(ctx context.Context) (int64, string, error) { return heapInUse(), "Go heap delta", nil }
	return inst, nil
}

func startRedis(durable bool) func(ctx context.Context, b *bench) (*instance, error) {
	return func(ctx context.Context, b *bench) (*instance, error) {
		bin, err := exec.LookPath("redis-server")
		if err != nil {
			return nil, skipError{"redis-server is not installed; " + redisInstall}
		}
		name := "redis"
		args := []string{"--save", "", "--appendonly", "no"}
		if durable {
			name = "redis-aof"
			args = []string{"--save", "", "--appendonly", "yes", "--appendfsync", "always"}
		}
		dir, err := b.tempDir(name)
		if err != nil {
			return nil, err
		}
		addr, err := freeport.Addr()
		if err != nil {
			return nil, err
		}
		_, port, _ := strings.Cut(addr, ":")
		args = append([]string{"--port", port, "--bind", "127.0.0.1", "--dir", dir, "--daemonize", "no"}, args...)
		m := &member{name: name, dir: dir, bin: bin, args: args, addr: addr, data: dir}
		if err := m.start(); err != nil {
			return nil, err
		}
		if err := m.process().waitReady(ctx, pingReady(addr)); err != nil {
			m.stop()
			return nil, err
		}
		inst := serverInstance(addr, []*member{m})
		inst.memory = func(ctx context.Context) (int64, string, error) {
			return usedMemory(ctx, inst.client(1), nil, "")
		}
		return inst, nil
	}
}

// serverInstance describes RESP servers running as processes, reached at addr.
func serverInstance(addr string, members []*member) *instance {
	return &instance{
		client:     tcpClient(addr),
		subscriber: tcpSubscriber(addr),
		addr:       addr,
		cpu:        processesCPU(processes(members)),
		members:    members,
		stop: func() {
			for _, m := range members {
				m.stop()
			}
		},
	}
}

// processesCPU returns the CPU time used by the processes current returns.
func processesCPU(current func() []*process) func() (time.Duration, error) {
	return func() (time.Duration, error) {
		var total time.Duration
		for _, p := range current() {
			d, err := procCPU(p.pid())
			if err != nil {
				return 0, err
			}
			total += d
		}
		return total, nil
	}
}

// pingReady succeeds once a RESP server at addr answers PING.
func pingReady(addr string) func(context.Context) error {
	return func(ctx context.Context) error {
		c := newGoRedis(&redis.Options{Addr: addr, DialTimeout: time.Second}, 1)
		defer c.close()
		_, err := c.do(ctx, "PING")
		return err
	}
}

// usedMemory reads used_memory from INFO memory, as Redis reports it, after
// MEMORY PURGE: lockserver's used_memory is the live heap at the end of the
// last garbage collection, which PURGE makes now (redis-server's is its
// allocator's count, which PURGE leaves). When the server does not report
// it, fallback measures instead (fallbackHow says how); with no fallback the
// missing field is an error.
func usedMemory(ctx context.Context, c respClient, fallback func() (int64, error), fallbackHow string) (int64, string, error) {
	defer c.close()
	c.do(ctx, "MEMORY", "PURGE") // an error is for INFO to show: miniredis has neither
	v, err := c.do(ctx, "INFO", "memory")
	if err == nil {
		s, _ := v.(string)
		if text, ok := infoValue(s, "used_memory"); ok {
			n, err := strconv.ParseInt(text, 10, 64)
			if err == nil {
				return n, "INFO used_memory delta", nil
			}
		}
		err = errors.New("INFO memory has no used_memory")
	}
	if fallback == nil {
		return 0, "", fmt.Errorf("read used_memory: %w", err)
	}
	n, ferr := fallback()
	return n, fallbackHow, ferr
}

// lockserverBinary builds ./cmd/lockserver once per run into the bench's
// temporary directory, so the server runs as its own process with its own GC.
func (b *bench) lockserverBinary(ctx context.Context) (string, error) {
	b.buildOnce.Do(func() {
		// The bench is a module of its own that replaces lockserver's with
		// the directory above it: build the server there.
		out, err := exec.CommandContext(ctx, "go", "list", "-m", "-f", "{{.Dir}}", "github.com/lockserver/lockserver").Output()
		dir := strings.TrimSpace(string(out))
		if err != nil || dir == "" {
			b.buildErr = fmt.Errorf("build lockserver: run the bench inside its module, bench/ (go list -m lockserver: %q, %v)", dir, err)
			return
		}
		bin := filepath.Join(b.tmp, "lockserver")
		cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/lockserver")
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			b.buildErr = fmt.Errorf("build lockserver: %w\n%s", err, out)
			return
		}
		b.binary = bin
	})
	return b.binary, b.buildErr
}

// startLockserver starts a single node with env added to its environment.
func startLockserver(env []string) func(context.Context, *bench) (*instance, error) {
	return func(ctx context.Context, b *bench) (*instance, error) {
		return startLockserverEnv(ctx, b, env)
	}
}

func startLockserverEnv(ctx context.Context, b *bench, env []string) (*instance, error) {
	return startLockserverWith(ctx, b, env, func(addr string) []string { return []string{"--addr", addr} })
}

// startLockserverWith starts a single node with env added to its
// environment, serving clients at an address as listen's flags say.
func startLockserverWith(ctx context.Context, b *bench, env []string, listen func(addr string) []string) (*instance, error) {
	bin, err := b.lockserverBinary(ctx)
	if err != nil {
		return nil, err
	}
	dir, err := b.tempDir("lockserver")
	if err != nil {
		return nil, err
	}
	addr, err := freeport.Addr()
	if err != nil {
		return nil, err
	}
	m := &member{name: "lockserver", dir: dir, bin: bin, env: env, args: append(listen(addr), "--log-level", "warn"), addr: addr}
	if err := m.start(); err != nil {
		return nil, err
	}
	if err := m.process().waitReady(ctx, pingReady(addr)); err != nil {
		m.stop()
		return nil, err
	}
	return lockserverInstance(addr, []*member{m}), nil
}

// startLockserverMetrics starts a single node that serves metrics, and
// scrapes them every second until it stops, as Prometheus would.
func startLockserverMetrics(ctx context.Context, b *bench) (*instance, error) {
	maddr, err := freeport.Addr()
	if err != nil {
		return nil, err
	}
	inst, err := startLockserverEnv(ctx, b, []string{"LOCKSERVER_METRICS_ADDR=" + maddr})
	if err != nil {
		return nil, err
	}
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				if resp, err := http.Get("http://" + maddr + "/metrics"); err == nil {
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
			}
		}
	}()
	stop := inst.stop
	inst.stop = func() { close(done); stop() }
	return inst, nil
}

// startLockserverUntracked starts a single node that keeps no latency
// histograms (CONFIG SET latency-tracking no).
func startLockserverUntracked(ctx context.Context, b *bench) (*instance, error) {
	inst, err := startLockserverEnv(ctx, b, nil)
	if err != nil {
		return nil, err
	}
	c := inst.client(1)
	defer c.close()
	if _, err := c.do(ctx, "CONFIG", "SET", "latency-tracking", "no"); err != nil {
		inst.stop()
		return nil, fmt.Errorf("CONFIG SET latency-tracking no: %w", err)
	}
	return inst, nil
}

// lockserverInstance is serverInstance with memory read from INFO, or from the
// first member's resident set size while the server does not report
// used_memory.
func lockserverInstance(addr string, members []*member) *instance {
	inst := serverInstance(addr, members)
	inst.memory = func(ctx context.Context) (int64, string, error) {
		return usedMemory(ctx, inst.client(1), func() (int64, error) { return procRSS(members[0].process().pid()) }, "RSS delta")
	}
	return inst
}

// clusterFlags are the flags of the Raft issue that the binary must show in
// its --help before the bench starts a cluster with it.
var clusterFlags = []string{"node-id", "raft-addr", "data-dir", "bootstrap", "join"}

func startLockserverCluster(ctx context.Context, b *bench) (*instance, error) {
	return startLockserverClusterWith(ctx, b, func(addr string) []string { return []string{"--addr", addr} })
}

// startLockserverClusterWith starts the three members, each serving clients
// at an address as listen's flags say.
func startLockserverClusterWith(ctx context.Context, b *bench, listen func(addr string) []string) (*instance, error) {
	bin, err := b.lockserverBinary(ctx)
	if err != nil {
		return nil, err
	}
	return startLockserverClusterBin(ctx, b, bin, listen)
}

// startLockserverClusterBin starts three members running bin.
func startLockserverClusterBin(ctx context.Context, b *bench, bin string, listen func(addr string) []string) (*instance, error) {
	help, _ := exec.CommandContext(ctx, bin, "--help").CombinedOutput()
	var missing []string
	for _, f := range clusterFlags {
		if !strings.Contains(string(help), "-"+f+" ") && !strings.Contains(string(help), "-"+f+"\n") {
			missing = append(missing, "--"+f)
		}
	}
	if len(missing) > 0 {
		return nil, skipError{"this lockserver binary has no cluster flags yet (" + strings.Join(missing, ", ") + " missing from its --help)"}
	}
	const nodes = 3
	var addrs, raftAddrs, ids []string
	for i := range nodes {
		a, err := freeport.Addr()
		if err != nil {
			return nil, err
		}
		r, err := freeport.Addr()
		if err != nil {
			return nil, err
		}
		addrs, raftAddrs, ids = append(addrs, a), append(raftAddrs, r), append(ids, fmt.Sprintf("n%d", i+1))
	}
	// --bootstrap takes the initial voters, id=raft-addr,... (every node
	// bootstraps the same configuration), unless --help shows it as a bool
	// flag, with no argument: then the first node bootstraps alone and the
	// others join it.
	bootstrapList := !strings.Contains(string(help), "-bootstrap\n")
	var voters []string
	for i := range nodes {
		voters = append(voters, ids[i]+"="+raftAddrs[i])
	}
	var members []*member
	stopAll := func() {
		for _, m := range members {
			m.stop()
		}
	}
	for i := range nodes {
		dir, err := b.tempDir("raft-" + ids[i])
		if err != nil {
			stopAll()
			return nil, err
		}
		data := filepath.Join(dir, "data")
		args := append(listen(addrs[i]), "--node-id", ids[i], "--raft-addr", raftAddrs[i],
			"--data-dir", data, "--log-level", "warn")
		switch {
		case bootstrapList:
			args = append(args, "--bootstrap", strings.Join(voters, ","))
		case i == 0:
			args = append(args, "--bootstrap")
		default:
			args = append(args, "--join", raftAddrs[0])
		}
		m := &member{name: "lockserver-" + ids[i], dir: dir, bin: bin, args: args, addr: addrs[i], data: data}
		if err := m.start(); err != nil {
			stopAll()
			return nil, err
		}
		members = append(members, m)
		if i == 0 || bootstrapList {
			continue
		}
		// A joining node needs the first one serving.
		if err := members[0].process().waitReady(ctx, writeReady(addrs[0])); err != nil {
			stopAll()
			return nil, fmt.Errorf("cluster: first node: %w", err)
		}
	}
	for i, m := range members {
		if err := m.process().waitReady(ctx, writeReady(addrs[i])); err != nil {
			stopAll()
			return nil, fmt.Errorf("cluster: %w", err)
		}
	}
	leader := 0
	for i, a := range addrs {
		if role, _ := infoField(ctx, a, "replication", "role"); role == "master" {
			leader = i
			break
		}
	}
	// Measure a whole cluster: a joining member counts once the leader lists
	// it as a replica (INFO replication, as Redisson reads it).
	err := members[leader].process().waitReady(ctx, func(ctx context.Context) error {
		v, err := infoField(ctx, addrs[leader], "replication", "connected_slaves")
		if err != nil {
			return nil // a server that does not say cannot be waited for
		}
		if n, _ := strconv.Atoi(v); n < nodes-1 {
			return fmt.Errorf("the leader lists %s of %d replicas", v, nodes-1)
		}
		return nil
	})
	if err != nil {
		stopAll()
		return nil, fmt.Errorf("cluster: %w", err)
	}
	// The leader first, so that memory and RSS are read where the writes land.
	members[0], members[leader] = members[leader], members[0]
	return lockserverInstance(addrs[leader], members), nil
}

// writeReady succeeds once a node accepts a write, which in a cluster means a
// leader has been elected and the write committed.
func writeReady(addr string) func(context.Context) error {
	return func(ctx context.Context) error {
		c := newGoRedis(&redis.Options{Addr: addr, DialTimeout: time.Second}, 1)
		defer c.close()
		_, err := c.do(ctx, "SET", "bench:ready", "1")
		return err
	}
}

// infoField reads one field of one INFO section.
func infoField(ctx context.Context, addr, section, field string) (string, error) {
	c := newGoRedis(&redis.Options{Addr: addr}, 1)
	defer c.close()
	v, err := c.do(ctx, "INFO", section)
	if err != nil {
		return "", err
	}
	s, _ := v.(string)
	if text, ok := infoValue(s, field); ok {
		return text, nil
	}
	return "", fmt.Errorf("INFO %s has no %s", section, field)
}

// infoValue finds "field:value" in an INFO reply.
func infoValue(info, field string) (string, bool) {
	for _, line := range strings.Split(info, "\n") {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			return strings.TrimSpace(rest), true
		}
	}
	return "", false
}

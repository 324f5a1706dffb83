package clustertest

import (
	"context"
	"crypto/tls"
	"errors"
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
	"github.com/lockserver/lockserver/internal/testenv"
	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
)

// Binary builds cmd/lockserver into a directory of t's and returns its path;
// after a test's first build, the build cache makes it quick. With -short the
// test is skipped: it starts processes.
func Binary(t testing.TB) string {
	t.Helper()
	testenv.Long(t)
	bin := filepath.Join(t.TempDir(), "lockserver")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/lockserver/lockserver/cmd/lockserver").CombinedOutput(); err != nil {
		t.Fatalf("build lockserver: %v\n%s", err, out)
	}
	return bin
}

// ProcOptions are what a Proc runs with beyond its flags.
type ProcOptions struct {
	// Dir is the member's data directory; a new one of the test's when
	// empty.
	Dir string
	// Password is the clients' password, given to the process as
	// LOCKSERVER_PASSWORD.
	Password string
	// TLS, when set, is how the test's clients reach the member: over TLS.
	TLS *tls.Config
	// ShippedTimeouts runs the member with the binary's own failure
	// detection, as an operator would, rather than Heartbeat and Election.
	ShippedTimeouts bool
	// PIDs, when set, is told the process's pid and the member's id each
	// time it starts, before it answers, and 0 once it has ended.
	PIDs func(pid int, id string)
}

// Proc is one lockserver process of a cluster, and what it needs to run
// again: its addresses, data directory and flags, and a log file whose end a
// failed test prints. The process is killed when the test ends.
type Proc struct {
	// Bin is the binary the process runs, and Args its flags (see
	// MemberArgs); a test may change either while it is stopped, to run
	// another release on the same data.
	Bin  string
	Args []string

	id, addr, raftAddr, logPath string
	// reachRaft and reachClient are where the other members reach it, when
	// not at its own addresses (see ProcClusterOptions.Reach).
	reachRaft, reachClient string
	opts                   ProcOptions
	admin                  *redis.Client // for LOCKSERVER STATUS: short timeouts

	mu     sync.Mutex
	last   *procRun // the process last started
	client *redis.Client
}

// procRun is one run of a Proc's process.
type procRun struct {
	cmd    *exec.Cmd
	paused bool          // guarded by the Proc's mu
	ended  chan struct{} // closed once the process has ended
	err    error         // how it ended, once it has
}

// tailLines is how much of a process's log a failed test prints.
const tailLines = 100

// NewProc prepares member id of a cluster, to run bin: free loopback ports
// and a log file. It starts nothing; set Args and call Start.
func NewProc(t testing.TB, bin, id string, opts ProcOptions) *Proc {
	t.Helper()
	if opts.Dir == "" {
		opts.Dir = t.TempDir()
	}
	p := &Proc{Bin: bin, id: id, addr: freeport.MustAddr(t), raftAddr: freeport.MustAddr(t),
		logPath: filepath.Join(t.TempDir(), id+".log"), opts: opts}
	p.admin = redis.NewClient(&redis.Options{
		Addr: p.addr, Password: opts.Password, TLSConfig: opts.TLS,
		MaxRetries: -1, DialerRetries: 1, DialTimeout: 300 * time.Millisecond,
		ReadTimeout: 700 * time.Millisecond, WriteTimeout: 700 * time.Millisecond, PoolSize: 2,
		DisableIdentity: true, MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled},
	})
	t.Cleanup(func() {
		p.Kill()
		p.admin.Close()
		if c := p.Client(); c != nil {
			c.Close()
		}
		if t.Failed() {
			p.logTail(t)
		}
	})
	return p
}

func (p *Proc) ID() string { return p.id }

// Addr is the member's client address.
func (p *Proc) Addr() string { return p.addr }

// RaftAddr is the address its Raft transport listens on.
func (p *Proc) RaftAddr() string { return p.raftAddr }

// Dir is its data directory.
func (p *Proc) Dir() string { return p.opts.Dir }

// LogPath is the file its output goes to, run after run.
func (p *Proc) LogPath() string { return p.logPath }

// MemberArgs returns the flags of a cluster member: its addresses, data
// directory and failure detection, then how, which says how it finds the
// cluster (--bootstrap or --join, and its value).
func (p *Proc) MemberArgs(how ...string) []string {
	args := []string{"--addr", p.addr, "--node-id", p.id, "--raft-addr", p.raftAddr, "--data-dir", p.opts.Dir}
	if p.reachRaft != "" {
		args = append(args, "--raft-advertise-addr", p.reachRaft, "--advertise-addr", p.reachClient)
	}
	if !p.opts.ShippedTimeouts {
		args = append(args, "--heartbeat-timeout", Heartbeat.String(), "--election-timeout", Election.String())
	}
	return append(args, how...)
}

// Client returns a go-redis client of the process last started (nil before
// the first start), with the password and TLS of its options.
func (p *Proc) Client() *redis.Client {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.client
}

// Spawn starts the process with Args and returns at once. Start waits until
// it answers.
func (p *Proc) Spawn(t testing.TB) {
	t.Helper()
	if p.running() != nil {
		t.Fatalf("%s already runs", p.id)
	}
	log, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	fmt.Fprintf(log, "---- start %s\n", time.Now().Format(time.RFC3339Nano))
	cmd := exec.Command(p.Bin, p.Args...)
	cmd.Stdout, cmd.Stderr = log, log
	if p.opts.Password != "" {
		cmd.Env = append(os.Environ(), "LOCKSERVER_PASSWORD="+p.opts.Password)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", p.id, err)
	}
	r := &procRun{cmd: cmd, ended: make(chan struct{})}
	p.mu.Lock()
	old := p.client
	p.last = r
	p.client = redis.NewClient(&redis.Options{Addr: p.addr, Password: p.opts.Password, TLSConfig: p.opts.TLS})
	p.mu.Unlock()
	if old != nil {
		old.Close()
	}
	if p.opts.PIDs != nil {
		p.opts.PIDs(cmd.Process.Pid, p.id)
	}
	go func() {
		err := cmd.Wait()
		if p.opts.PIDs != nil {
			p.opts.PIDs(0, p.id)
		}
		r.err = err
		close(r.ended)
	}()
}

// Start starts the process with Args and waits until it answers PING; it
// fails the test if the process ends first, or after Wait.
func (p *Proc) Start(t testing.TB) {
	t.Helper()
	p.Spawn(t)
	p.answer(t)
}

// answer waits until the process started last answers PING.
func (p *Proc) answer(t testing.TB) {
	t.Helper()
	p.mu.Lock()
	r := p.last
	p.mu.Unlock()
	deadline := time.Now().Add(Wait)
	for {
		err := p.admin.Ping(context.Background()).Err()
		if err == nil {
			return
		}
		select {
		case <-r.ended:
			t.Fatalf("%s ended before it answered PING: %v", p.id, r.err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not answer PING within %v of its start: %v", p.id, Wait, err)
		}
		time.Sleep(poll)
	}
}

// running returns the run of the process if it has not ended.
func (p *Proc) running() *procRun {
	p.mu.Lock()
	r := p.last
	p.mu.Unlock()
	if r == nil {
		return nil
	}
	select {
	case <-r.ended:
		return nil
	default:
		return r
	}
}

// Status asks the process for LOCKSERVER STATUS, with short timeouts; a
// process that has ended, or is paused, is not asked.
func (p *Proc) Status(ctx context.Context) (Status, error) {
	r := p.running()
	if r == nil {
		return Status{}, fmt.Errorf("%s does not run", p.id)
	}
	p.mu.Lock()
	paused := r.paused
	p.mu.Unlock()
	if paused {
		return Status{}, fmt.Errorf("%s is paused", p.id)
	}
	v, err := p.admin.Do(ctx, "LOCKSERVER", "STATUS").Result()
	if err != nil {
		return Status{}, err
	}
	return ParseStatus(v)
}

// Wait waits up to timeout for the process to end by itself, and returns how
// it ended: nil for exit status 0, an *exec.ExitError for another.
func (p *Proc) Wait(timeout time.Duration) error {
	p.mu.Lock()
	r := p.last
	p.mu.Unlock()
	if r == nil {
		return fmt.Errorf("%s never started", p.id)
	}
	select {
	case <-r.ended:
		return r.err
	case <-time.After(timeout):
		return fmt.Errorf("%s still runs after %v", p.id, timeout)
	}
}

// Stop sends SIGTERM to the process and waits until it exits; it fails the
// test unless it exits with status 0 within Wait.
func (p *Proc) Stop(t testing.TB) {
	t.Helper()
	r := p.running()
	if r == nil {
		t.Fatalf("%s does not run", p.id)
	}
	if err := r.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := p.Wait(Wait); err != nil {
		t.Fatalf("%s after SIGTERM: %v", p.id, err)
	}
}

// Kill sends SIGKILL to the process, if it runs, and waits until it has
// ended.
func (p *Proc) Kill() {
	if r := p.running(); r != nil {
		r.cmd.Process.Kill()
		<-r.ended
	}
}

// Wipe removes the data directory of the process, which must not run, as a
// new disk would.
func (p *Proc) Wipe(t testing.TB) {
	t.Helper()
	if p.running() != nil {
		t.Fatalf("wipe %s while it runs", p.id)
	}
	if err := os.RemoveAll(p.opts.Dir); err != nil {
		t.Fatal(err)
	}
}

// logTail prints the end of the process's log.
func (p *Proc) logTail(t testing.TB) {
	b, err := os.ReadFile(p.logPath)
	if errors.Is(err, os.ErrNotExist) {
		return
	}
	if err != nil {
		t.Logf("%s: %v", p.id, err)
		return
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	lines = lines[max(0, len(lines)-tailLines):]
	t.Logf("%s: last %d lines of %s:\n%s", p.id, len(lines), p.logPath, strings.Join(lines, "\n"))
}

// ProcClusterOptions are how StartProcs starts its members.
type ProcClusterOptions struct {
	// Proc is every member's options; Member, when set, changes member i's.
	Proc   ProcOptions
	Member func(i int, o *ProcOptions)
	// Reach, when set, returns the addresses at which the other members
	// reach p's Raft transport and its clients' port (a proxy in front of
	// each): p advertises them, and the cluster is bootstrapped with them.
	Reach func(p *Proc) (raftAddr, clientAddr string)
	// Args, when set, returns flags that follow a member's own.
	Args func(p *Proc) []string
}

// StartProcs starts three processes of bin, n1, n2 and n3, bootstrapped as
// one new cluster, and waits until each answers and one leads. In an attempt
// (package attempt), the attempt watches their term.
func StartProcs(t testing.TB, bin string, opts ProcClusterOptions) *Cluster[*Proc] {
	t.Helper()
	c := &Cluster[*Proc]{}
	var voters []string
	for i := range 3 {
		o := opts.Proc
		if opts.Member != nil {
			opts.Member(i, &o)
		}
		p := NewProc(t, bin, fmt.Sprint("n", i+1), o)
		reach := p.raftAddr
		if opts.Reach != nil {
			p.reachRaft, p.reachClient = opts.Reach(p)
			reach = p.reachRaft
		}
		voters = append(voters, p.id+"="+reach)
		c.Nodes = append(c.Nodes, p)
	}
	for _, p := range c.Nodes {
		p.Args = p.MemberArgs("--bootstrap", strings.Join(voters, ","))
		if opts.Args != nil {
			p.Args = append(p.Args, opts.Args(p)...)
		}
		p.Spawn(t)
	}
	for _, p := range c.Nodes {
		p.answer(t)
	}
	c.Leader(t)
	c.Watch(t, "the processes")
	return c
}

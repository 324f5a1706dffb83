//go:build unix

package lockloss

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockserver/lockserver/internal/freeport"
	"github.com/lockserver/lockserver/internal/testenv"
	"github.com/redis/go-redis/v9"
)

// The Redis side of the lock-loss test: the same workload against a master
// and one replica (asynchronous replication, Redis's only kind), failed over
// as Sentinel does it: the replica is promoted with REPLICAOF NO ONE, the old
// master is killed, and clients follow the new one. A lock the master
// acknowledged but had not yet sent to the replica is gone.
//
// Every other failover is a plain SIGKILL of the master, promptly followed by
// the promotion. On one host that loses little or nothing: the replica is a
// fraction of a millisecond behind, and what the master wrote to its socket
// before dying still reaches the replica through the kernel (a crash of the
// master's host would lose that too).
//
// The others first partition the master from the replica (a faultNet proxy
// carries the replication link) while clients still reach it, for
// partitionFor, as they do while Sentinel decides that the master is down
// (30 s by default, down-after-milliseconds): every lock acknowledged in that
// time is lost at the promotion. lockserver's partition fault does the same
// to its leader and loses nothing, because a lock is acknowledged only once a
// majority holds it.
const partitionFor = 300 * time.Millisecond

// redisProc is a redis-server process that the test can stop and kill.
type redisProc struct {
	addr  string
	admin *redis.Client

	mu  sync.Mutex
	cmd *exec.Cmd
}

// startRedisProc starts a redis-server without persistence on a free port.
func startRedisProc(t *testing.T, extra ...string) *redisProc {
	t.Helper()
	bin := testenv.Need(t, "redis-server")
	addr := freeport.MustAddr(t)
	_, port, _ := net.SplitHostPort(addr)
	dir := t.TempDir()
	log, err := os.Create(filepath.Join(dir, "redis.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	// A master starts a full sync at once rather than waiting 5 s for more replicas.
	args := append([]string{"--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", dir,
		"--repl-diskless-sync-delay", "0"}, extra...)
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &redisProc{addr: addr, cmd: cmd, admin: redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})}
	t.Cleanup(func() {
		p.kill()
		p.admin.Close()
	})
	deadline := time.Now().Add(10 * time.Second)
	for p.admin.Ping(context.Background()).Err() != nil {
		if time.Now().After(deadline) {
			out, _ := os.ReadFile(log.Name())
			t.Fatalf("redis-server on %s did not start:\n%s", addr, out)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return p
}

func (p *redisProc) kill() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return
	}
	p.cmd.Process.Kill()
	p.cmd.Wait()
	p.cmd = nil
}

// startReplica starts a replica of master, reaching it through a proxy of
// fnet named id, and waits until it has synced and receives the stream of
// writes (after a full sync, a Redis 7 master may hold the stream back until
// the replica's first acknowledgement, up to a second later).
func startReplica(t *testing.T, fnet *faultNet, master *redisProc, id string) *redisProc {
	t.Helper()
	host, port, _ := net.SplitHostPort(fnet.proxy(t, id, master.addr, false).addr())
	r := startRedisProc(t, "--replicaof", host, port)
	ctx := context.Background()
	if err := master.admin.Set(ctx, "lockloss:replica", id, 0).Err(); err != nil {
		t.Fatalf("write on the master: %v", err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		v, err := r.admin.Get(ctx, "lockloss:replica").Result()
		if err == nil && v == id {
			return r
		}
		if time.Now().After(deadline) {
			t.Fatalf("the replica of %s did not receive a write within 20 s: %q, %v", master.addr, v, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func lockLossRedis(t *testing.T, cfg lockLossConfig) *lossFigures {
	fnet := newFaultNet()
	t.Cleanup(fnet.close)
	masterID := func(i int) string { return fmt.Sprint("redis-master-", i) }
	master := startRedisProc(t)
	replica := startReplica(t, fnet, master, masterID(0))
	var current atomic.Pointer[string]
	current.Store(&master.addr)
	run := newLockRun(t, "redis", cfg.keysPerStyle, cfg.lease, func() []string { return []string{*current.Load()} })
	rng := rand.New(rand.NewPCG(cfg.seed, 1))
	run.startWorkers(cfg.redisWorkers, cfg.seed+1)
	fig := &lossFigures{}
	lost := map[heldLock]bool{} // each lost lock counts once

	count := func(what string, on string, locks []heldLock) {
		fig.checked += len(locks)
		gone := map[string]bool{}
		n := 0
		for _, p := range run.checkHeld(on, locks, 5*time.Second) {
			if !p.lost {
				t.Logf("%s: %s: %s", what, p.lock.key, p.what)
				continue
			}
			gone[p.lock.key] = true
			if !lost[p.lock] {
				lost[p.lock] = true
				n++
				if len(lost) <= 5 {
					t.Logf("%s: lost %s: %s", what, p.lock.key, p.what)
				}
			}
		}
		run.held.unpin(gone)
		fig.lost += n
		t.Logf("%s: %d of %d acknowledged locks lost", what, n, len(locks))
	}
	for i := range cfg.redisFaults {
		time.Sleep(cfg.gap/2 + time.Duration(rng.Int64N(int64(cfg.gap))))
		partition := i%2 == 1
		if partition {
			fnet.isolate(masterID(i))
			time.Sleep(partitionFor)
		}
		run.pinLocks(cfg.pins, rng, []string{master.addr})
		snap := run.held.freeze()
		if !partition {
			master.kill()
			// Sentinel takes seconds to agree that the master is down; by
			// then the replica has applied whatever reached it.
			time.Sleep(100 * time.Millisecond)
		}
		if err := replica.admin.Do(context.Background(), "REPLICAOF", "NO", "ONE").Err(); err != nil {
			t.Fatalf("promote the replica: %v", err)
		}
		current.Store(&replica.addr)
		master.kill()
		what := fmt.Sprintf("failover %d (SIGKILL the master)", i+1)
		if partition {
			what = fmt.Sprintf("failover %d (master partitioned from its replica for %v)", i+1, partitionFor)
		}
		count(what, replica.addr, snap)
		run.held.thaw()
		fig.faults++
		master, replica = replica, startReplica(t, fnet, replica, masterID(i+1))
	}
	run.stopWorkers()
	count("at the end", master.addr, run.held.snapshot())
	fig.verdict = run.verdict(20*time.Second, false)
	reportVerdict(t, t.Logf, run.name, fig.verdict)
	return fig
}

//go:build unix

package lockloss

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lockserver/lockserver/internal/buildinfo"
	"github.com/lockserver/lockserver/internal/clustertest"
	"github.com/lockserver/lockserver/lock"
	"github.com/redis/go-redis/v9"
)

// A cluster under the lock workload is upgraded from the previous release to
// this build a member at a time, rolled back the same way after a
// downgrade of its cluster version, and upgraded again; with the leader on
// either side of each mix, and a snapshot installed from an old leader on a
// new member and from a new leader on an old one. No acknowledged lock is
// lost, no lock is granted twice, the history is linearizable, fencing
// tokens only grow, and the members' states agree at the end.
func TestRollingUpgrade(t *testing.T) {
	prev, prevVersion := clustertest.PreviousRelease(t)
	cur := clustertest.Binary(t)
	c := clustertest.StartProcs(t, prev, clustertest.ProcClusterOptions{Proc: clustertest.ProcOptions{ShippedTimeouts: true}})
	c.WaitHealthy(t)
	var addrs []string
	for _, p := range c.Nodes {
		addrs = append(addrs, p.Addr())
	}
	run := newLockRun(t, "upgrade", 4, time.Hour, func() []string { return addrs })
	run.startWorkers(len(c.Nodes)*3, 1)
	fencer := startFencer(t, addrs)

	// check reads back, through the leader, every lock held now.
	check := func(when string) {
		t.Helper()
		l := c.WaitHealthy(t)
		for _, p := range run.checkHeld(l.Addr(), run.held.freeze(), 20*time.Second) {
			t.Errorf("%s: %s: %s\n%s", when, p.lock.key, p.what, run.keyHistory(p.lock.key, 30))
		}
		run.held.thaw()
	}
	// restartAs stops p (SIGTERM) and starts it again running bin.
	restartAs := func(p *clustertest.Proc, bin string) {
		t.Helper()
		p.Stop(t)
		p.Bin = bin
		p.Start(t)
		c.WaitHealthy(t)
	}
	release := map[string]string{prev: prevVersion, cur: buildinfo.Version}

	// Up: the followers first, under the old leader.
	l := c.WaitHealthy(t)
	a, b := c.Others(l)[0], c.Others(l)[1]
	restartAs(a, cur)
	check("one follower on " + buildinfo.Version + ", the leader on " + prevVersion)
	installSnapshot(t, c, a, cur) // from the old leader onto a new member
	restartAs(b, cur)
	// Now a new member leads the old one.
	transferTo(t, c, a)
	check("the leader on " + buildinfo.Version + ", a follower on " + prevVersion)
	installSnapshot(t, c, l, prev) // from a new leader onto the old member
	wantClusterVersion(t, c, release, buildinfo.Oldest.String())
	restartAs(l, cur)
	check("every member on " + buildinfo.Version)
	wantClusterVersion(t, c, release, buildinfo.Current.String())
	wantDigestsAgree(t, c)

	// Back: the cluster version first, then the members.
	if err := c.WaitHealthy(t).Client().Do(context.Background(), "LOCKSERVER", "DOWNGRADE", buildinfo.Oldest.String()).Err(); err != nil {
		t.Fatalf("LOCKSERVER DOWNGRADE: %v", err)
	}
	wantClusterVersion(t, c, release, buildinfo.Oldest.String())
	for i, p := range c.Nodes {
		restartAs(p, prev)
		check(fmt.Sprintf("%d members back on %s", i+1, prevVersion))
	}

	// Up again; the downgrade, if a member still holds it, is cancelled.
	for _, p := range c.Nodes {
		restartAs(p, cur)
	}
	if err := c.WaitHealthy(t).Client().Do(context.Background(), "LOCKSERVER", "DOWNGRADE", "CANCEL").Err(); err != nil && !strings.Contains(err.Error(), "no downgrade to cancel") {
		t.Fatalf("LOCKSERVER DOWNGRADE CANCEL: %v", err)
	}
	wantClusterVersion(t, c, release, buildinfo.Current.String())

	run.stopWorkers()
	fencer.stop(t)
	check("at the end")
	wantDigestsAgree(t, c)
	v := run.verdict(2*time.Minute, true)
	reportVerdict(t, t.Errorf, run.name, v)
	t.Logf("%d lock operations (%d of unknown outcome) over the upgrades; %d fencing tokens, each above the one before", v.ops, v.unknown, fencer.taken())
}

// transferTo makes p the leader, by SENTINEL FAILOVER until it leads.
func transferTo(t *testing.T, c *clustertest.Cluster[*clustertest.Proc], p *clustertest.Proc) {
	t.Helper()
	clustertest.Eventually(t, p.ID()+" leads", func() error {
		l := c.Leader(t)
		if l == p {
			return nil
		}
		l.Client().Do(context.Background(), "SENTINEL", "FAILOVER", "mymaster")
		return fmt.Errorf("%s leads", l.ID())
	})
}

// trailingLogs is how many log entries a member keeps past its snapshot
// (raft's TrailingLogs, which the binary does not change): a member further
// behind than that catches up from a snapshot.
const trailingLogs = 10240

// installSnapshot has p, a follower, catch up from a snapshot of the
// leader's: it stops p, writes past the leader's trailing log, has the
// others snapshot twice (a snapshot keeps the log since the one before),
// and starts p again running bin, which reads the snapshot the leader sends.
func installSnapshot(t *testing.T, c *clustertest.Cluster[*clustertest.Proc], p *clustertest.Proc, bin string) {
	t.Helper()
	p.Stop(t)
	l := c.Leader(t, c.Others(p)...)
	ctx := context.Background()
	for i := range trailingLogs + 500 {
		clustertest.Eventually(t, "SET through the leader", func() error {
			return l.Client().Set(ctx, "upgrade:filler", i, 0).Err()
		})
	}
	for range 2 {
		for _, o := range c.Others(p) {
			if err := o.Client().Do(ctx, "LOCKSERVER", "SNAPSHOT").Err(); err != nil {
				t.Fatalf("LOCKSERVER SNAPSHOT on %s: %v", o.ID(), err)
			}
		}
		clustertest.Eventually(t, "SET after the snapshots", func() error {
			return l.Client().Set(ctx, "upgrade:after", "1", 0).Err()
		})
	}
	before := logSize(t, p)
	p.Bin = bin
	p.Start(t)
	c.WaitHealthy(t)
	clustertest.Eventually(t, p.ID()+" restored the leader's snapshot", func() error {
		b, err := os.ReadFile(p.LogPath())
		if err != nil {
			return err
		}
		for _, line := range strings.Split(string(b[before:]), "\n") {
			if strings.Contains(line, `msg="snapshot restored"`) && strings.Contains(line, "source=leader") {
				return nil
			}
		}
		return fmt.Errorf("%s's log does not say it restored a snapshot from the leader since it started", p.ID())
	})
}

// logSize is how much p has logged so far.
func logSize(t *testing.T, p *clustertest.Proc) int {
	st, err := os.Stat(p.LogPath())
	if err != nil {
		t.Fatal(err)
	}
	return int(st.Size())
}

// wantClusterVersion waits until every member that reports a cluster
// version (a member of 0.1 reports none) reports v.
func wantClusterVersion(t *testing.T, c *clustertest.Cluster[*clustertest.Proc], release map[string]string, v string) {
	t.Helper()
	clustertest.Eventually(t, "cluster version "+v, func() error {
		for _, p := range c.Nodes {
			st, err := p.Client().Do(context.Background(), "LOCKSERVER", "STATUS").Result()
			if err != nil {
				return err
			}
			got, _ := st.(map[any]any)["cluster_version"].(string)
			if release[p.Bin] != buildinfo.Version {
				continue
			}
			if got != v {
				return fmt.Errorf("%s reports cluster version %q", p.ID(), got)
			}
		}
		return nil
	})
}

// wantDigestsAgree waits until every member has applied the same entries,
// and checks that their states are the same then.
func wantDigestsAgree(t *testing.T, c *clustertest.Cluster[*clustertest.Proc]) {
	t.Helper()
	clustertest.Eventually(t, "every member's digest at one applied index", func() error {
		var first map[any]any
		for _, p := range c.Nodes {
			v, err := p.Client().Do(context.Background(), "LOCKSERVER", "DIGEST").Result()
			if err != nil {
				return err
			}
			d := v.(map[any]any)
			if first == nil {
				first = d
				continue
			}
			if d["applied_index"] != first["applied_index"] {
				return fmt.Errorf("%s applied to %v, %s to %v", c.Nodes[0].ID(), first["applied_index"], p.ID(), d["applied_index"])
			}
			if d["digest"] != first["digest"] {
				t.Fatalf("at applied index %v, %s's state has digest %v and %s's %v", d["applied_index"], c.Nodes[0].ID(), first["digest"], p.ID(), d["digest"])
			}
		}
		return nil
	})
}

// fencer takes one lock of package lock again and again, through every
// member in turn, and checks that each fencing token it is given is above
// every one before.
type fencer struct {
	done   chan struct{}
	wg     sync.WaitGroup
	mu     sync.Mutex
	tokens int
	err    error
}

func startFencer(t *testing.T, addrs []string) *fencer {
	f := &fencer{done: make(chan struct{})}
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		var last uint64
		for i := 0; ; i++ {
			select {
			case <-f.done:
				return
			default:
			}
			rdb := redis.NewClient(&redis.Options{Addr: addrs[i%len(addrs)], MaxRetries: 20})
			b := lock.Redis(rdb)
			m := lock.NewMutex(b, "upgrade:fenced", nil)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			if err := m.Lock(ctx); err == nil {
				tok := m.Token()
				f.mu.Lock()
				if tok <= last && f.err == nil {
					f.err = fmt.Errorf("fencing token %d after %d", tok, last)
				}
				last = tok
				f.tokens++
				f.mu.Unlock()
				m.Unlock(ctx)
			}
			cancel()
			b.Close()
			rdb.Close()
			time.Sleep(20 * time.Millisecond)
		}
	}()
	return f
}

// taken returns how many locks the fencer took.
func (f *fencer) taken() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.tokens
}

// stop ends the fencer and fails t if a token did not grow.
func (f *fencer) stop(t *testing.T) {
	t.Helper()
	close(f.done)
	f.wg.Wait()
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		t.Error(f.err)
	}
	if f.tokens == 0 {
		t.Error("the fencer took no lock")
	}
}

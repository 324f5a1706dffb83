package lockserver_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/lockserver/lockserver"
	"github.com/lockserver/lockserver/internal/clustertest"
	"github.com/lockserver/lockserver/internal/clustertest/embedded"
	"github.com/lockserver/lockserver/internal/freeport"
	"github.com/lockserver/lockserver/internal/testenv"
	"github.com/redis/go-redis/v9"
)

// startMembers starts the root tests' cluster (package
// clustertest/embedded): three members embedded in this process, with
// password for their clients, proving memberSecret to each other.
func startMembers(t testing.TB, password string) *embedded.Cluster {
	return embedded.Start(t, embedded.Options{Password: password, Member: func(_ int, o *lockserver.Options) {
		o.Cluster.Secret = memberSecret
	}})
}

// Three copies of a service, each embedding a member, form a cluster: go-redis
// clients on any member lock and unlock, a pipeline through a follower keeps
// its order, the lock survives the loss of the leader, and the old leader
// restarts from its data directory and catches up.
func TestEmbeddedCluster(t *testing.T) {
	c := startMembers(t, "s3cret")
	ctx := context.Background()
	f := c.Followers(c.Leader(t))[0]

	taken := time.Now()
	// After an error the lock may be ours already: GET tells.
	clustertest.Eventually(t, "SET NX PX through a follower", func() error {
		err := f.Client().SetArgs(ctx, "lock", "token-1", redis.SetArgs{Mode: "NX", TTL: time.Minute}).Err()
		if err != nil {
			if got, _ := f.Client().Get(ctx, "lock").Result(); got == "token-1" {
				return nil
			}
		}
		return err
	})
	leader := c.Leader(t)
	clustertest.Eventually(t, "GET lock on the leader", func() error {
		if got, err := leader.Client().Get(ctx, "lock").Result(); err != nil || got != "token-1" {
			return fmt.Errorf("GET lock = %q, %v; want token-1", got, err)
		}
		return nil
	})
	clustertest.Eventually(t, "a second SET NX on the held lock", func() error {
		err := leader.Client().SetArgs(ctx, "lock", "token-2", redis.SetArgs{Mode: "NX", TTL: time.Minute}).Err()
		switch {
		case errors.Is(err, redis.Nil):
			return nil
		case clustertest.WriteErr(err):
			return err
		}
		t.Fatalf("a second SET NX on the held lock = %v, want nil", err)
		return nil
	})

	// The pipeline's replies must be in order up to the first that a leader
	// change explains; then it is sent again, on a key of its own.
	for try := 1; ; try++ {
		key := fmt.Sprint("n", try)
		pipe := f.Client().Pipeline()
		incrs, gets := make([]*redis.IntCmd, 100), make([]*redis.StringCmd, 100)
		for i := range 100 {
			incrs[i], gets[i] = pipe.Incr(ctx, key), pipe.Get(ctx, key)
		}
		_, err := pipe.Exec(ctx)
		for i := range 100 {
			if clustertest.WriteErr(incrs[i].Err()) || clustertest.WriteErr(gets[i].Err()) {
				break
			}
			if incrs[i].Val() != int64(i+1) || gets[i].Val() != fmt.Sprint(i+1) {
				t.Fatalf("INCR %d = %d, %v and the GET after it = %q, %v; want %d both", i, incrs[i].Val(), incrs[i].Err(), gets[i].Val(), gets[i].Err(), i+1)
			}
		}
		if err == nil {
			break
		}
		if !clustertest.WriteErr(err) || try == 5 {
			t.Fatalf("pipeline through a follower: %v", err)
		}
		t.Logf("pipeline through a follower, attempt %d: %v", try, err)
	}

	leader = c.Leader(t)
	leader.Stop()
	newLeader := c.Leader(t)
	clustertest.Eventually(t, "GET lock on the new leader", func() error {
		got, err := newLeader.Client().Get(ctx, "lock").Result()
		if err == nil && got != "token-1" {
			return fmt.Errorf("the lock is %q, want token-1", got)
		}
		return err
	})
	// The lease runs on from the SET, no faster than real time and the 1%
	// by which the log clock may run fast (logclock.SlewRate).
	ttl, err := newLeader.Client().PTTL(ctx, "lock").Result()
	elapsed := time.Since(taken)
	if floor := time.Minute - elapsed - elapsed/100 - 250*time.Millisecond; err != nil || ttl < floor || ttl > time.Minute {
		t.Fatalf("PTTL lock after the failover = %v, %v; want between %v and a minute", ttl, err, floor)
	}
	clustertest.Eventually(t, "DEL lock", func() error { return newLeader.Client().Del(ctx, "lock").Err() })

	leader.Start(t)
	clustertest.Eventually(t, "the restarted member catches up", func() error {
		n, err := leader.Client().Exists(ctx, "lock").Result()
		if err == nil && n != 0 {
			return errors.New("the lock is still there")
		}
		return err
	})
}

// A pipeline of lock attempts on the leader keeps its order. An attempt on
// a key that nothing holds runs dry behind the writes before it, reaches its
// write and goes to the log after them: the GET after it must wait for it.
// One on a held key writes nothing and is answered as a read.
func TestPipelinedLockAttemptsKeepTheirOrder(t *testing.T) {
	c := startMembers(t, "")
	ctx := context.Background()
	for try := 1; ; try++ {
		l := c.Leader(t)
		pipe := l.Client().Pipeline()
		const rounds = 100
		type round struct {
			take, again *redis.BoolCmd
			get, after  *redis.StringCmd
		}
		rs := make([]round, rounds)
		for i := range rounds {
			key := fmt.Sprint("lock-", try, "-", i)
			pipe.Set(ctx, fmt.Sprint("other-", i), i, 0)
			rs[i].take = pipe.SetNX(ctx, key, "first", time.Minute)
			rs[i].get = pipe.Get(ctx, key)
			rs[i].again = pipe.SetNX(ctx, key, "second", time.Minute)
			rs[i].after = pipe.Get(ctx, key)
		}
		_, err := pipe.Exec(ctx)
		for i, r := range rs {
			if clustertest.WriteErr(r.take.Err()) || clustertest.WriteErr(r.after.Err()) {
				break
			}
			if !r.take.Val() || r.get.Val() != "first" || r.again.Val() || r.after.Val() != "first" {
				t.Fatalf("round %d: SET NX = %v, %v; GET = %q, %v; SET NX again = %v, %v; GET = %q, %v; want true, first, false, first",
					i, r.take.Val(), r.take.Err(), r.get.Val(), r.get.Err(), r.again.Val(), r.again.Err(), r.after.Val(), r.after.Err())
			}
		}
		if err == nil {
			return
		}
		if !clustertest.WriteErr(err) || try == 5 {
			t.Fatalf("pipeline on the leader: %v", err)
		}
		t.Logf("pipeline on the leader, attempt %d: %v", try, err)
	}
}

// The secret the members of startMembers prove to each other.
const memberSecret = "members-only-secret-0123456789"

// The calls members make to each other answer members only: a client that
// knows the password gets Redis's NOPERM for each, as does Do, while the
// administrative subcommands answer it. Every member reports the same
// cluster identity.
func TestInternalCommandsRefuseClients(t *testing.T) {
	c := startMembers(t, "s3cret")
	ctx := context.Background()
	leader := c.Leader(t)
	for _, args := range [][]any{
		// codec.go's encoding of one request, SET pwned 1
		{"LOCKSERVER", "FORWARD", "\x01\x00\x00\x01\x03\x03SET\x05pwned\x011\x00"},
		{"LOCKSERVER", "JOIN", "x", "127.0.0.1:1", "127.0.0.1:2"},
		{"LOCKSERVER", "REGISTER", "m1", "127.0.0.1:2"},
		{"LOCKSERVER", "APPLIED"},
		{"lockserver", "acked"},
	} {
		want := fmt.Sprintf("NOPERM this user has no permissions to run the 'lockserver|%s' command", strings.ToLower(args[1].(string)))
		for _, m := range c.Nodes {
			if err := m.Client().Do(ctx, args...).Err(); err == nil || err.Error() != want {
				t.Errorf("%s on %s = %v, want %q", args[:2], m.ID(), err, want)
			}
		}
		if _, err := leader.Server().Do(ctx, args...); err == nil || err.Error() != want {
			t.Errorf("%s through Do = %v, want %q", args[:2], err, want)
		}
	}
	if n, err := leader.Client().Exists(ctx, "pwned").Result(); err != nil || n != 0 {
		t.Fatalf("EXISTS pwned = %d, %v", n, err)
	}
	var clusters []string
	for _, m := range c.Nodes {
		st, err := m.Client().Do(ctx, "LOCKSERVER", "STATUS").Result()
		if err != nil {
			t.Fatalf("LOCKSERVER STATUS: %v", err)
		}
		clusters = append(clusters, fmt.Sprint(st.(map[any]any)["cluster"]))
	}
	if len(clusters[0]) != 32 || clusters[0] != clusters[1] || clusters[0] != clusters[2] {
		t.Fatalf("the members' cluster identities: %q", clusters)
	}
}

// A client without the password gets NOAUTH before anything else, for the
// members' own commands too.
func TestClusterCommandNeedsAuth(t *testing.T) {
	c := startMembers(t, "s3cret")
	rdb := redis.NewClient(&redis.Options{Addr: c.Nodes[0].Options.Addr})
	defer rdb.Close()
	err := rdb.Do(context.Background(), "LOCKSERVER", "FORWARD", "x").Err()
	if err == nil || !strings.HasPrefix(err.Error(), "NOAUTH") {
		t.Fatalf("LOCKSERVER FORWARD without AUTH = %v, want NOAUTH", err)
	}
}

// A member needs a client address the others can reach.
func TestClusterMemberNeedsClientAddress(t *testing.T) {
	_, err := lockserver.Open(lockserver.Options{Addr: "-", Cluster: lockserver.ClusterOptions{NodeID: "a", RaftAddr: freeport.MustAddr(t)}})
	if err == nil || !strings.Contains(err.Error(), "AdvertiseAddr") {
		t.Fatalf("Open of a member without a listener = %v, want an error about AdvertiseAddr", err)
	}
}

// A member whose Options.Logger is nil writes nothing on the process's
// stderr, even through go-redis, which logs every failed dial there; and the
// application's own go-redis clients still log there as go-redis does. The
// test runs itself in a child process to read that process's stderr.
func TestNilLoggerLeavesStderrToTheApplication(t *testing.T) {
	testenv.Long(t)
	const child = "LOCKSERVER_TEST_STDERR_CHILD"
	if addrs := os.Getenv(child); addrs != "" {
		nobodyJoin, nobodyApp, _ := strings.Cut(addrs, ",")
		_, err := lockserver.Open(lockserver.Options{Addr: freeport.MustAddr(t), Cluster: lockserver.ClusterOptions{
			// Long enough that a dial completes under -race on a busy
			// machine (at 1 s, none did in some runs: the error was the
			// deadline's).
			NodeID: "a", RaftAddr: freeport.MustAddr(t), Join: nobodyJoin, JoinTimeout: 5 * time.Second,
		}})
		fmt.Println("open:", err)
		app := redis.NewClient(&redis.Options{Addr: nobodyApp, MaxRetries: -1})
		defer app.Close()
		fmt.Println("app:", app.Ping(context.Background()).Err())
		return
	}
	nobodyJoin, nobodyApp := freeport.MustAddr(t), freeport.MustAddr(t)
	cmd := exec.Command(os.Args[0], "-test.run=^TestNilLoggerLeavesStderrToTheApplication$", "-test.count=1")
	cmd.Env = append(os.Environ(), child+"="+nobodyJoin+","+nobodyApp)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("child: %v\n%s%s", err, stdout.String(), stderr.String())
	}
	if !strings.Contains(stdout.String(), "open: replication: open node a: join via "+nobodyJoin+": gave up after 5s (the join timeout): not sent: member link not established: dial tcp "+nobodyJoin) {
		t.Fatalf("the child's member did not fail to join %s:\n%s\n%s", nobodyJoin, stdout.String(), stderr.String())
	}
	if strings.Contains(stderr.String(), nobodyJoin) {
		t.Errorf("a member with no Logger wrote on stderr about its join:\n%s", stderr.String())
	}
	// go-redis's own format: "redis: <date> <time> <file>:<line>: <message>".
	appLine := regexp.MustCompile(`(?m)^redis: \d{4}/\d\d/\d\d \d\d:\d\d:\d\d pool\.go:\d+: redis: connection pool: failed to dial after \d+ attempts: dial tcp ` + regexp.QuoteMeta(nobodyApp))
	if !appLine.MatchString(stderr.String()) {
		t.Errorf("the application's own client's failed dial is not on stderr as go-redis writes it:\n%s", stderr.String())
	}
}

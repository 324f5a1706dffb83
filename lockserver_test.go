package lockserver_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lockserver/lockserver"
	"github.com/lockserver/lockserver/internal/clustertest"
	"github.com/lockserver/lockserver/internal/freeport"
	"github.com/redis/go-redis/v9"
)

func open(t *testing.T, opts lockserver.Options) *lockserver.Server {
	t.Helper()
	s, err := lockserver.Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// A pipeline of 10,000 commands through the in-memory dialer must not
// deadlock: the server writes replies before it reads more, so the pipe must
// buffer without a fixed capacity.
func TestDialerLongPipeline(t *testing.T) {
	s := open(t, lockserver.Options{Addr: "-"})
	ctx := context.Background()
	for _, proto := range []int{2, 3} {
		// The commands run as the pipeline is written (see Dialer): under
		// -race on a busy machine, 20,000 of them took more than go-redis's
		// 3 s write deadline. A deadlock still ends at the minute.
		rdb := redis.NewClient(&redis.Options{Dialer: s.Dialer(), Protocol: proto, ReadTimeout: time.Minute, WriteTimeout: time.Minute})
		p := rdb.Pipeline()
		const n = 10000
		for i := 0; i < n; i++ {
			p.Set(ctx, "k"+strconv.Itoa(i), i, 0)
		}
		for i := 0; i < n; i++ {
			p.Get(ctx, "k"+strconv.Itoa(i))
		}
		cmds, err := p.Exec(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < n; i++ {
			if got := cmds[n+i].(*redis.StringCmd).Val(); got != strconv.Itoa(i) {
				t.Fatalf("RESP%d: GET k%d = %q, want %d", proto, i, got, i)
			}
		}
		rdb.Close()
	}
}

func TestDoConvertsRepliesAsGoRedis(t *testing.T) {
	s := open(t, lockserver.Options{Addr: "-"})
	ctx := context.Background()
	if v, err := s.Do(ctx, "SET", "n", 41); v != "OK" || err != nil {
		t.Fatalf("SET: %v, %v", v, err)
	}
	if v, err := s.Do(ctx, "GET", "n"); v != "41" || err != nil {
		t.Fatalf("GET: %v, %v", v, err)
	}
	if v, err := s.Do(ctx, "DEL", "n", []byte("missing")); v != int64(1) || err != nil {
		t.Fatalf("DEL: %v, %v", v, err)
	}
	if v, err := s.Do(ctx, "GET", "n"); v != nil || !errors.Is(err, lockserver.ErrNil) {
		t.Fatalf("GET of a missing key: %v, %v; want nil, ErrNil", v, err)
	}
	var rerr lockserver.ReplyError
	if _, err := s.Do(ctx, "NOPE"); !errors.As(err, &rerr) || rerr[:4] != "ERR " {
		t.Fatalf("unknown command: %v", err)
	}
	if _, err := s.Do(ctx, "SUBSCRIBE", "ch"); err == nil {
		t.Fatal("SUBSCRIBE needs a connection and must be refused by Do")
	}
	if _, err := s.Do(ctx, "SET", "k", struct{}{}); err == nil {
		t.Fatal("an unsupported argument type must be an error")
	}
	if _, err := s.Do(ctx); err == nil {
		t.Fatal("an empty command must be an error")
	}
}

// Close must return promptly with idle TCP and in-memory connections open, and
// those connections must then see the server gone.
func TestCloseDrainsIdleConnections(t *testing.T) {
	s, err := lockserver.Open(lockserver.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	tcp := redis.NewClient(&redis.Options{Addr: s.Addr(), MaxRetries: -1})
	mem := redis.NewClient(&redis.Options{Dialer: s.Dialer(), MaxRetries: -1})
	defer tcp.Close()
	defer mem.Close()
	for _, c := range []*redis.Client{tcp, mem} {
		if err := c.Ping(ctx).Err(); err != nil {
			t.Fatal(err)
		}
	}
	done := make(chan error, 1)
	go func() { done <- s.Close() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Close hung with idle connections open")
	}
	for name, c := range map[string]*redis.Client{"tcp": tcp, "memory": mem} {
		if err := c.Ping(ctx).Err(); err == nil {
			t.Errorf("%s: PING after Close succeeded", name)
		}
	}
}

func TestOpenFailsOnBusyAddress(t *testing.T) {
	s := open(t, lockserver.Options{})
	if _, err := lockserver.Open(lockserver.Options{Addr: s.Addr()}); err == nil {
		t.Fatal("a second server on the same address must fail to open")
	}
}

// Over MaxMemory, commands that add data get Redis's OOM error and reads still work.
func TestMaxMemoryRefusesWrites(t *testing.T) {
	s := open(t, lockserver.Options{Addr: "-", MaxMemory: 1})
	ctx := context.Background()
	_, err := s.Do(ctx, "SET", "k", "v")
	const want = "OOM command not allowed when used memory > 'maxmemory'."
	if err == nil || err.Error() != want {
		t.Fatalf("SET over maxmemory: got %v, want %q", err, want)
	}
	if _, err := s.Do(ctx, "GET", "k"); !errors.Is(err, lockserver.ErrNil) {
		t.Fatalf("GET over maxmemory: got %v, want ErrNil", err)
	}
	if v, err := s.Do(ctx, "DEL", "k"); v != int64(0) || err != nil {
		t.Fatalf("DEL frees memory and must run over maxmemory: %v, %v", v, err)
	}
}

// doEngines opens a standalone server and a one-member cluster, each ready
// to write.
func doEngines(t *testing.T) map[string]*lockserver.Server {
	solo := open(t, lockserver.Options{Addr: freeport.MustAddr(t), Cluster: lockserver.ClusterOptions{NodeID: "solo", RaftAddr: freeport.MustAddr(t)}})
	clustertest.Eventually(t, "the one member elects itself", func() error {
		_, err := solo.Do(context.Background(), "SET", "ready", "1")
		return err
	})
	return map[string]*lockserver.Server{"standalone": open(t, lockserver.Options{Addr: "-"}), "cluster": solo}
}

// A caller that has given up (its context done) before calling Do must not
// have its write run behind its back: go-redis does not send it either.
func TestDoWithADoneContextRunsNothing(t *testing.T) {
	for name, s := range doEngines(t) {
		cancelled, cancel := context.WithCancel(context.Background())
		cancel()
		if v, err := s.Do(cancelled, "SET", "k", "v"); !errors.Is(err, context.Canceled) {
			t.Errorf("%s: SET with a cancelled context: %v, %v; want context.Canceled", name, v, err)
		}
		expired, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
		defer cancel()
		if v, err := s.Do(expired, "INCR", "n"); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("%s: INCR past its deadline: %v, %v; want context.DeadlineExceeded", name, v, err)
		}
		if v, err := s.Do(context.Background(), "MGET", "k", "n"); err != nil || fmt.Sprint(v) != "[<nil> <nil>]" {
			t.Errorf("%s: after the refused writes MGET k n = %v, %v; want nothing written", name, v, err)
		}
	}
}

// A negative count, size or timeout is a mistake, not a way to ask for the
// default: Open says which.
func TestOpenRefusesNegativeOptions(t *testing.T) {
	for field, opts := range map[string]lockserver.Options{
		"MaxClients":               {MaxClients: -1},
		"MaxMemory":                {MaxMemory: -1},
		"ScriptBudget":             {ScriptBudget: -10},
		"Limits.MaxBulk":           {Limits: lockserver.Limits{MaxBulk: -1}},
		"Limits.MaxMultibulk":      {Limits: lockserver.Limits{MaxMultibulk: -1}},
		"Limits.MaxInline":         {Limits: lockserver.Limits{MaxInline: -1}},
		"Limits.MaxQuery":          {Limits: lockserver.Limits{MaxQuery: -1}},
		"Cluster.JoinTimeout":      {Cluster: lockserver.ClusterOptions{NodeID: "a", RaftAddr: "127.0.0.1:1", JoinTimeout: -time.Second}},
		"Cluster.HeartbeatTimeout": {Cluster: lockserver.ClusterOptions{NodeID: "a", RaftAddr: "127.0.0.1:1", HeartbeatTimeout: -time.Second}},
		"Cluster.ElectionTimeout":  {Cluster: lockserver.ClusterOptions{NodeID: "a", RaftAddr: "127.0.0.1:1", ElectionTimeout: -time.Second}},
	} {
		opts.Addr = "-"
		s, err := lockserver.Open(opts)
		if err == nil {
			s.Close()
			t.Errorf("%s negative: Open succeeded", field)
			continue
		}
		if want := "Options." + field + " is -"; !strings.Contains(err.Error(), want) {
			t.Errorf("%s negative: %v; want an error naming it (%q)", field, err, want)
		}
	}
}

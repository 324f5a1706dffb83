package lockserver_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/lockserver/lockserver"
	"github.com/lockserver/lockserver/internal/lockscripts"
	"github.com/redis/go-redis/v9"
)

// Do formats every kind of argument it accepts as go-redis does, however
// many there are and however long.
func TestDoArguments(t *testing.T) {
	s, err := lockserver.Open(lockserver.Options{Addr: "-"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	long := strings.Repeat("x", 100)
	args := []any{"RPUSH", "l", "s", []byte("b"), 7, int64(-2), int32(3), uint64(18446744073709551615), uint32(5),
		1.5, -0.25, 1e21, true, false, "", long}
	want := []any{"s", "b", "7", "-2", "3", "18446744073709551615", "5", "1.5", "-0.25", "1000000000000000000000", "1", "0", "", long}
	for i := 0; i < 20; i++ {
		args = append(args, i)
		want = append(want, strconv.Itoa(i))
	}
	if n, err := s.Do(ctx, args...); n != int64(len(want)) || err != nil {
		t.Fatalf("RPUSH: %v, %v", n, err)
	}
	got, err := s.Do(ctx, "LRANGE", "l", 0, -1)
	if fmt.Sprint(got) != fmt.Sprint(want) || err != nil {
		t.Fatalf("LRANGE:\n got: %q, %v\nwant: %q", got, err, want)
	}
}

// BenchmarkDoRedissonCycle is the embedded lock cycle through direct Do
// calls, as bench's embedded-do system runs it.
func BenchmarkDoRedissonCycle(b *testing.B) {
	benchRedissonCycles(b, func(s *lockserver.Server, lock, unlock string) cycleFunc {
		return func(ctx context.Context, key, channel, owner string) error {
			if v, err := s.Do(ctx, "EVALSHA", lock, 1, key, 30000, owner); v != nil || err != lockserver.ErrNil {
				return fmt.Errorf("lock: %v, %v", v, err)
			}
			if v, err := s.Do(ctx, "EVALSHA", unlock, 2, key, channel, "0", 30000, owner); v != int64(1) || err != nil {
				return fmt.Errorf("unlock: %v, %v", v, err)
			}
			return nil
		}
	})
}

// BenchmarkDialerRedissonCycle is the same cycle through go-redis over the
// in-memory Dialer, as bench's embedded system runs it.
func BenchmarkDialerRedissonCycle(b *testing.B) {
	benchRedissonCycles(b, func(s *lockserver.Server, lock, unlock string) cycleFunc {
		c := redis.NewClient(&redis.Options{Dialer: s.Dialer(), PoolSize: 50, Protocol: 2, DisableIdentity: true, MaxRetries: -1})
		b.Cleanup(func() { c.Close() })
		return func(ctx context.Context, key, channel, owner string) error {
			if err := c.EvalSha(ctx, lock, []string{key}, 30000, owner).Err(); err != redis.Nil {
				return fmt.Errorf("lock: %v", err)
			}
			if v, err := c.EvalSha(ctx, unlock, []string{key, channel}, "0", 30000, owner).Result(); v != int64(1) || err != nil {
				return fmt.Errorf("unlock: %v, %v", v, err)
			}
			return nil
		}
	})
}

// cycleFunc locks key for owner and unlocks it, publishing on channel.
type cycleFunc func(ctx context.Context, key, channel, owner string) error

// benchRedissonCycles runs 50 goroutines, each locking and unlocking its own
// key with Redisson's scripts through the cycle newCycle makes for an
// embedded server with both scripts loaded. One op is one cycle (an acquire
// and a release).
func benchRedissonCycles(b *testing.B, newCycle func(s *lockserver.Server, lock, unlock string) cycleFunc) {
	s, err := lockserver.Open(lockserver.Options{Addr: "-"})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	load := func(body string) string {
		sha, err := s.Do(ctx, "SCRIPT", "LOAD", body)
		if err != nil {
			b.Fatal(err)
		}
		return sha.(string)
	}
	cycle := newCycle(s, load(lockscripts.MustSource(b, "redisson_lock.lua")), load(lockscripts.MustSource(b, "redisson_unlock_v2.lua")))
	var next atomic.Int64
	b.SetParallelism(25) // 50 clients on 2 cores
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		key := "lock:" + strconv.FormatInt(next.Add(1), 10)
		channel := "redisson_lock__channel:{" + key + "}"
		const owner = "8743c9c0-0795-4907-87fd-6c719a6b4586:1"
		for pb.Next() {
			if err := cycle(ctx, key, channel, owner); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// A closed server runs nothing more through Do, as a stopped process would
// not: a lock holder must see its renewals fail.
func TestDoAfterClose(t *testing.T) {
	s, err := lockserver.Open(lockserver.Options{Addr: "-"})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := s.Do(ctx, "SET", "k", "v"); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if v, err := s.Do(ctx, "SET", "k", "w"); !errors.Is(err, lockserver.ErrClosed) {
		t.Fatalf("SET after Close = %v, %v; want ErrClosed", v, err)
	}
}

// An error reply from Do is a go-redis redis.Error, as the same reply read
// by go-redis is, and keeps the server's text; a null is not an error
// reply.
func TestDoErrorReplyIsARedisError(t *testing.T) {
	s, err := lockserver.Open(lockserver.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: s.Addr()})
	defer rdb.Close()
	if err := rdb.LPush(ctx, "list", "x").Err(); err != nil {
		t.Fatal(err)
	}
	_, err = s.Do(ctx, "GET", "list")
	overTCP := rdb.Get(ctx, "list").Err()
	var direct, remote redis.Error
	if !errors.As(err, &direct) || !errors.As(overTCP, &remote) {
		t.Fatalf("GET on a list: Do's %T %v and go-redis's %T %v; want both redis.Error", err, err, overTCP, overTCP)
	}
	if direct.Error() != remote.Error() {
		t.Fatalf("Do's reply %q, go-redis's %q", direct.Error(), remote.Error())
	}
	_, err = s.Do(ctx, "GET", "missing")
	if errors.As(err, &direct) || !errors.Is(err, lockserver.ErrNil) {
		t.Fatalf("GET of a missing key: %v; want ErrNil, no error reply", err)
	}
}

package lockserver_test

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/lockserver/lockserver"
	"github.com/lockserver/lockserver/internal/clustertest"
	"github.com/lockserver/lockserver/internal/freeport"
	"github.com/redis/go-redis/v9"
)

// Keys that expire and that no client reads again are reclaimed: DBSIZE and
// INFO keyspace (which count expired keys not yet removed, as Redis's do)
// come down to the live keys, and the memory the expired ones held is freed
// (INFO's used_memory after MEMORY PURGE). On a standalone server, and on a
// cluster member while clients keep writing through another member. An
// expired key is invisible at once, so only these figures show whether it
// is ever removed: with expiry's sweeps switched off, it never is.
func TestExpiredKeysAreReclaimed(t *testing.T) {
	t.Run("standalone", func(t *testing.T) {
		s := open(t, lockserver.Options{Addr: freeport.MustAddr(t)})
		reclaims(t, redis.NewClient(&redis.Options{Addr: s.Addr()}))
	})
	t.Run("cluster", func(t *testing.T) {
		c := startMembers(t, "")
		followers := c.Followers(c.Leader(t))
		// Writes keep flowing, in another database, through one member
		// while the other is asked.
		ticker := redis.NewClient(&redis.Options{Addr: followers[1].Options.Addr, DB: 1})
		defer ticker.Close()
		ctx, stop := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ctx.Err() == nil; i++ {
				ticker.Set(ctx, "tick", i, 0)
				time.Sleep(10 * time.Millisecond)
			}
		}()
		defer wg.Wait()
		defer stop()
		reclaims(t, followers[0].Client())
	})
}

// reclaims loads keys through rdb, lets all but a few expire, reads none of
// them again, and waits until rdb's server counts only the live ones and has
// freed the memory of the others.
func reclaims(t *testing.T, rdb *redis.Client) {
	t.Helper()
	ctx := context.Background()
	t.Cleanup(func() { rdb.Close() })
	const n, size, live = 8000, 1024, 100
	do := func(args ...any) any {
		t.Helper()
		var v any
		clustertest.Eventually(t, fmt.Sprint(args[0]), func() (err error) {
			v, err = rdb.Do(ctx, args...).Result()
			return err
		})
		return v
	}
	// The keys have no deadline yet, so that they are all counted before
	// any can expire, however slowly the machine loads them. A script makes
	// the values, so that no log entry carries them.
	const load = `for i = tonumber(ARGV[1]), tonumber(ARGV[2]) do
  redis.call('SET', 'gone:' .. i, string.rep('x', tonumber(ARGV[3])))
end
return 1`
	for from := 1; from <= n; from += 1000 {
		do("EVAL", load, 0, from, from+999, size)
	}
	for i := range live / 2 {
		do("SET", fmt.Sprint("kept:", i), "v")
		do("SET", fmt.Sprint("lease:", i), "v", "PX", 600000)
	}
	usedMemory := func() int64 {
		t.Helper()
		do("MEMORY", "PURGE")
		info := do("INFO", "memory").(string)
		m := regexp.MustCompile(`used_memory:(\d+)`).FindStringSubmatch(info)
		if m == nil {
			t.Fatalf("INFO memory has no used_memory: %q", info)
		}
		used, _ := strconv.ParseInt(m[1], 10, 64)
		return used
	}
	keyspace := func() string {
		return regexp.MustCompile(`db0:keys=\d+,expires=\d+`).FindString(do("INFO", "keyspace").(string))
	}
	if got := do("DBSIZE"); got != int64(n+live) {
		t.Fatalf("DBSIZE after the load = %v, want %d", got, n+live)
	}
	// INFO is a member's own: a follower's may lag the leader's for a moment.
	clustertest.Eventually(t, "INFO keyspace after the load", func() error {
		if got, want := keyspace(), fmt.Sprintf("db0:keys=%d,expires=%d", n+live, live/2); got != want {
			return fmt.Errorf("%q, want %q", got, want)
		}
		return nil
	})
	before := usedMemory()

	// They expire in a moment, and no one reads them again.
	const expire = `for i = tonumber(ARGV[1]), tonumber(ARGV[2]) do redis.call('PEXPIRE', 'gone:' .. i, 100) end return 1`
	for from := 1; from <= n; from += 1000 {
		do("EVAL", expire, 0, from, from+999)
	}
	wantSpace := fmt.Sprintf("db0:keys=%d,expires=%d", live, live/2)
	deadline := time.Now().Add(clustertest.Wait)
	for {
		size, space := do("DBSIZE"), keyspace()
		if size == int64(live) && space == wantSpace {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%v after the keys expired: DBSIZE %v, INFO keyspace %q; want %d and %q", clustertest.Wait, size, space, live, wantSpace)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if after := usedMemory(); before-after < n*size/2 {
		t.Errorf("used_memory %d before the %d keys of %d bytes expired, %d once they were removed: want at least half their size freed", before, n, size, after)
	}
	if got := do("EXISTS", "kept:0", "lease:0"); got != int64(2) {
		t.Errorf("EXISTS of a key without a deadline and of a long lease = %v, want 2", got)
	}
}

package compat_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lockserver/lockserver"
	"github.com/redis/go-redis/v9"
)

func TestDiffMulti(t *testing.T) {
	p := newPair(t)
	p.Run([][]string{
		{"EXEC"},
		{"DISCARD"},
		{"MULTI", "x"},
		{"MULTI"},
		{"SET", "k", "1"},
		{"INCR", "k"},
		{"INCR", "nope", "extra"}, // an arity error while queuing aborts EXEC
		{"EXEC"},
		{"GET", "k"},

		{"MULTI"},
		{"MULTI"}, // refused, but the transaction goes on
		{"WATCH", "k"},
		{"SET", "k", "1"},
		{"INCR", "k"},
		{"HSET", "k", "f", "v"}, // a run-time error stays in its slot
		{"GET", "k"},
		{"PING"},
		{"ECHO", "e"},
		{"EXEC"},

		{"MULTI"},
		{"NOSUCHCOMMAND"},
		{"EXEC"},
		{"MULTI"},
		{"CLIENT", "NOSUCH"},
		{"EXEC"},

		{"MULTI"},
		{"EXEC"}, // empty

		{"MULTI"},
		{"SET", "d", "1"},
		{"DISCARD"},
		{"GET", "d"},

		// SELECT inside MULTI changes the database of the commands after it,
		// and of the connection once EXEC has run.
		{"MULTI"},
		{"SELECT", "5"},
		{"SET", "in5", "v"},
		{"SELECT", "99"},
		{"EXEC"},
		{"GET", "in5"},
		{"SELECT", "0"},
		{"GET", "in5"},

		// Connection commands inside MULTI.
		{"MULTI"},
		{"UNWATCH"},
		{"CLIENT", "SETNAME", "tx"},
		{"CLIENT", "GETNAME"},
		{"TIME", "x"},
		{"EXEC"},
	})
}

func TestDiffWatch(t *testing.T) {
	p := newPair(t)
	other := p.another()

	// Another client changes a watched key: EXEC replies a null array.
	p.Run([][]string{{"SET", "k", "1"}, {"WATCH", "k"}, {"WATCH", "k", "k2"}})
	other.Do("SET", "k", "2")
	p.Run([][]string{{"MULTI"}, {"INCR", "k"}, {"EXEC"}, {"GET", "k"}})

	// Unchanged: EXEC runs. WATCH ends at EXEC whatever happened.
	p.Run([][]string{{"WATCH", "k"}, {"MULTI"}, {"INCR", "k"}, {"EXEC"}})
	other.Do("SET", "k", "10")
	p.Run([][]string{{"MULTI"}, {"INCR", "k"}, {"EXEC"}})

	// Own change, rewrites with the same value, deletion, expiry set: all count.
	for _, change := range [][]string{{"SET", "k", "same"}, {"SET", "k", "same"}, {"DEL", "k"}, {"SET", "k", "v"}, {"EXPIRE", "k", "100"}, {"PERSIST", "k"}} {
		p.Run([][]string{{"WATCH", "k"}, change, {"MULTI"}, {"GET", "k"}, {"EXEC"}})
	}
	// A command that changes nothing does not.
	p.Run([][]string{{"WATCH", "k"}, {"PERSIST", "k"}, {"GET", "k"}, {"MULTI"}, {"GET", "k"}, {"EXEC"}})

	// UNWATCH and DISCARD forget the keys.
	p.Run([][]string{{"WATCH", "k"}, {"UNWATCH"}})
	other.Do("SET", "k", "3")
	p.Run([][]string{{"MULTI"}, {"GET", "k"}, {"EXEC"}})
	p.Run([][]string{{"WATCH", "k"}, {"MULTI"}, {"DISCARD"}})
	other.Do("SET", "k", "4")
	p.Run([][]string{{"MULTI"}, {"GET", "k"}, {"EXEC"}})

	// A missing key that another client creates.
	p.Run([][]string{{"WATCH", "fresh"}})
	other.Do("SET", "fresh", "1")
	p.Run([][]string{{"MULTI"}, {"GET", "fresh"}, {"EXEC"}})

	// Keys are watched per database.
	p.Run([][]string{{"SELECT", "1"}, {"WATCH", "k"}, {"SELECT", "0"}})
	other.Do("SET", "k", "in db 0")
	p.Run([][]string{{"MULTI"}, {"GET", "k"}, {"EXEC"}})

	// FLUSHALL and FLUSHDB touch the watched keys that existed, and only those.
	p.Run([][]string{{"SET", "k", "1"}, {"WATCH", "k"}})
	other.Do("FLUSHALL")
	p.Run([][]string{{"MULTI"}, {"PING"}, {"EXEC"}})
	p.Run([][]string{{"WATCH", "absent"}})
	other.Do("FLUSHDB")
	p.Run([][]string{{"MULTI"}, {"PING"}, {"EXEC"}})

	// WATCH inside MULTI is refused without aborting.
	p.Run([][]string{{"MULTI"}, {"WATCH", "k"}, {"PING"}, {"EXEC"}})

	// RESP3: the aborted EXEC is a null.
	p.DoNorm(normID, "HELLO", "3")
	p.Run([][]string{{"WATCH", "k"}})
	other.Do("SET", "k", "5")
	p.Run([][]string{{"MULTI"}, {"GET", "k"}, {"EXEC"}})
}

// A WATCHed key that expires before EXEC counts as changed in Redis 7; one
// that had already expired when WATCHed does not.
// live reports whether key has a lease left on c's server.
func live(c *rawClient, key string) bool {
	r := c.Do("PTTL", key)
	return strings.HasPrefix(r, ":") && !strings.HasPrefix(r, ":-")
}

func TestDiffWatchExpiry(t *testing.T) {
	p := newPair(t)
	// A key that expires after WATCH: the key must be live when WATCH reaches
	// each server, however busy the machine. PTTL after WATCH says it was;
	// if the lease ran out first, the case is tried again with a longer one.
	for lease := 100; ; lease *= 4 {
		p.Run([][]string{{"SET", "k", "v", "PX", strconv.Itoa(lease)}, {"WATCH", "k"}})
		if live(p.redis, "k") && live(p.ls, "k") {
			break
		}
		if lease > 10000 {
			t.Fatalf("a key with a lease of %d ms was gone by the WATCH after its SET", lease)
		}
		p.Run([][]string{{"UNWATCH"}})
	}
	for _, c := range []*rawClient{p.redis, p.ls} {
		waitFor(t, func() string {
			if r := c.Do("PTTL", "k"); r != ":-2\r\n" {
				return "the watched key to expire: PTTL " + r
			}
			return ""
		})
	}
	p.Run([][]string{{"MULTI"}, {"PING"}, {"EXEC"}})

	p.Run([][]string{{"SET", "k", "v", "PX", "10"}})
	time.Sleep(100 * time.Millisecond)
	p.Run([][]string{{"WATCH", "k"}, {"MULTI"}, {"PING"}, {"EXEC"}})

	p.Run([][]string{{"SET", "k", "v", "PX", "10000"}, {"WATCH", "k"}, {"MULTI"}, {"PING"}, {"EXEC"}})
}

func TestDiffOOM(t *testing.T) {
	p := newPair(t)
	other := p.another()
	p.Run([][]string{
		{"SET", "k", "v"},
		{"MULTI"},
		{"SET", "queued", "before the limit"},
		{"GET", "k"},
	})
	other.Do("CONFIG", "SET", "maxmemory", "1")
	p.Do("EXEC") // a DenyOOM command in it: the whole transaction is discarded
	p.Run([][]string{
		{"SET", "k", "v2"},
		{"SETNX", "n", "v"},
		{"GET", "k"},
		{"DEL", "n"}, // freeing memory is allowed
		{"EXISTS", "k"},
		{"PUBLISH", "c", "m"},
		{"MULTI"},
		{"GET", "k"}, // anything queued is refused
		{"EXEC"},
		{"MULTI"},
		{"DISCARD"},
	})
	other.Do("CONFIG", "SET", "maxmemory", "0")
	p.Run([][]string{{"SET", "k", "v3"}, {"GET", "k"}})
}

// TestGoRedisTransactions runs go-redis's TxPipeline and the optimistic Watch
// loop, over RESP2 and RESP3, with contention: every increment must land once.
func TestGoRedisTransactions(t *testing.T) {
	for _, proto := range []int{2, 3} {
		t.Run("RESP"+strconv.Itoa(proto), func(t *testing.T) {
			s := startLockserver(t, lockserver.Options{})
			ctx := context.Background()
			rdb := redis.NewClient(&redis.Options{Addr: s.Addr(), Protocol: proto, PoolSize: 16})
			defer rdb.Close()

			cmds, err := rdb.TxPipelined(ctx, func(pipe redis.Pipeliner) error {
				pipe.Set(ctx, "a", "1", 0)
				pipe.Incr(ctx, "a")
				pipe.Get(ctx, "missing")
				pipe.Select(ctx, 2)
				pipe.Set(ctx, "in2", "x", 0)
				return nil
			})
			if !errors.Is(err, redis.Nil) || len(cmds) != 5 {
				t.Fatalf("TxPipelined: %v, %d commands", err, len(cmds))
			}
			if v := cmds[1].(*redis.IntCmd).Val(); v != 2 {
				t.Errorf("INCR in the transaction = %d, want 2", v)
			}

			// A plain pipeline of many commands.
			pipe := rdb.Pipeline()
			for i := range 1000 {
				pipe.Set(ctx, "p"+strconv.Itoa(i), i, 0)
			}
			if _, err := pipe.Exec(ctx); err != nil {
				t.Fatal(err)
			}

			const workers, each = 8, 25
			var wg sync.WaitGroup
			var retries sync.Map
			for w := range workers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for range each {
						for attempt := 0; ; attempt++ {
							err := rdb.Watch(ctx, func(tx *redis.Tx) error {
								n, err := tx.Get(ctx, "counter").Int()
								if err != nil && !errors.Is(err, redis.Nil) {
									return err
								}
								_, err = tx.TxPipelined(ctx, func(pipe redis.Pipeliner) error {
									pipe.Set(ctx, "counter", n+1, 0)
									return nil
								})
								return err
							}, "counter")
							if err == nil {
								break
							}
							if !errors.Is(err, redis.TxFailedErr) {
								t.Error(err)
								return
							}
							retries.Store(w, attempt+1)
						}
					}
				}()
			}
			wg.Wait()
			if n, err := rdb.Get(ctx, "counter").Int(); err != nil || n != workers*each {
				t.Fatalf("counter = %d, %v; want %d", n, err, workers*each)
			}
		})
	}
}

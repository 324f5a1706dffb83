package compat_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockserver/lockserver/internal/clustertest"
	"github.com/redis/go-redis/v9"
)

// go-redis v9 is driven by a scenario that records what the client library
// reports (values, their Go types, errors). The scenario runs against a
// redis-server and against lockserver over the same protocol, and the two
// records must be equal line by line; a few lines are also checked against
// worked examples so that a scenario failing the same way on both servers
// cannot pass.

// clientLog records what a client library returned.
type clientLog []string

func (l *clientLog) add(label string, v any, err error) {
	if err != nil {
		*l = append(*l, fmt.Sprintf("%s: error %q", label, err.Error()))
		return
	}
	*l = append(*l, fmt.Sprintf("%s: %T %v", label, v, v))
}

func (l *clientLog) addf(format string, args ...any) { *l = append(*l, fmt.Sprintf(format, args...)) }

// has reports whether the log holds exactly line.
func (l clientLog) has(line string) bool {
	for _, x := range l {
		if x == line {
			return true
		}
	}
	return false
}

// compareLogs fails the test where two records of the same scenario differ.
func compareLogs(t testing.TB, wantName string, want clientLog, gotName string, got clientLog) {
	t.Helper()
	for i := 0; i < len(want) || i < len(got); i++ {
		var w, g string
		if i < len(want) {
			w = want[i]
		}
		if i < len(got) {
			g = got[i]
		}
		if w != g {
			t.Errorf("step %d:\n %s: %s\n %s: %s", i, wantName, w, gotName, g)
		}
	}
}

// clientInfoFields picks fields of a CLIENT INFO line.
func clientInfoFields(info string, names ...string) string {
	var out []string
	for _, f := range strings.Fields(info) {
		for _, n := range names {
			if strings.HasPrefix(f, n+"=") {
				out = append(out, f)
			}
		}
	}
	return strings.Join(out, " ")
}

// goRedisSession runs the go-redis scenario on one target with protocol proto.
// The target must require password (when non-empty) and start empty.
func goRedisSession(t testing.TB, tg clientTarget, proto int) clientLog {
	ctx := context.Background()
	var log clientLog

	// Connection setup: HELLO proto AUTH default pw SETNAME, then SELECT.
	rdb := tg.goRedis(t, redis.Options{Protocol: proto, ClientName: "compat-client", DB: 2})
	v, err := rdb.Ping(ctx).Result()
	log.add("PING", v, err)
	v, err = rdb.ClientGetName(ctx).Result()
	log.add("CLIENT GETNAME", v, err)
	info, err := rdb.Do(ctx, "CLIENT", "INFO").Text()
	log.add("CLIENT INFO", clientInfoFields(info, "name", "db", "resp"), err)
	log.add("SET in db 2", rdb.Set(ctx, "db2key", "x", 0).Val(), nil)
	db0 := tg.goRedis(t, redis.Options{Protocol: proto})
	log.add("EXISTS from db 0", db0.Exists(ctx, "db2key").Val(), nil)
	if tg.password != "" {
		wrong := tg.goRedis(t, redis.Options{Protocol: proto, Password: "wrong-" + tg.password})
		log.add("PING with a wrong password", nil, wrong.Ping(ctx).Err())
		user := tg.goRedis(t, redis.Options{Protocol: proto, Username: "default"})
		log.add("PING as user default", user.Ping(ctx).Val(), user.Ping(ctx).Err())
		none := redis.NewClient(&redis.Options{Addr: tg.addr, Dialer: tg.dialer, Protocol: proto})
		log.add("PING without a password", nil, none.Ping(ctx).Err())
		none.Close()
		// The AUTH command, as go-redis sends it to a server that refuses HELLO.
		log.add("AUTH password", rdb.Do(ctx, "AUTH", tg.password).Val(), nil)
		log.add("AUTH default password", rdb.Do(ctx, "AUTH", "default", tg.password).Val(), nil)
		log.add("AUTH wrong password", nil, rdb.Do(ctx, "AUTH", "wrong").Err())
	}

	// Plain commands and the reply types go-redis maps them to.
	log.add("SET", rdb.Set(ctx, "k", "v", 0).Val(), nil)
	got, err := rdb.SetArgs(ctx, "lock", "token", redis.SetArgs{Mode: "NX", TTL: 30 * time.Second}).Result()
	log.add("SET NX PX", got, err)
	got, err = rdb.SetArgs(ctx, "lock", "other", redis.SetArgs{Mode: "NX", TTL: 30 * time.Second}).Result()
	log.add("SET NX PX on a held lock", got, err)
	ttl := rdb.PTTL(ctx, "lock").Val()
	log.addf("PTTL within the lease: %v", ttl > 29*time.Second && ttl <= 30*time.Second)
	v, err = rdb.Get(ctx, "missing").Result()
	log.add("GET missing", v, err)
	log.add("INCR", rdb.Incr(ctx, "n").Val(), nil)
	log.add("INCR a string", nil, rdb.Incr(ctx, "k").Err())
	log.add("HSET", rdb.HSet(ctx, "h", "f1", "a", "f2", "b").Val(), nil)
	log.add("HGETALL", rdb.HGetAll(ctx, "h").Val(), nil)
	r, err := rdb.Do(ctx, "HGETALL", "h").Result()
	log.add("Do HGETALL", r, err)
	r, err = rdb.Do(ctx, "GET", "missing").Result()
	log.add("Do GET missing", r, err)
	log.add("ZADD", rdb.ZAdd(ctx, "z", redis.Z{Score: 1.5, Member: "a"}, redis.Z{Score: 2, Member: "b"}).Val(), nil)
	log.add("ZRANGE WITHSCORES", rdb.ZRangeWithScores(ctx, "z", 0, -1).Val(), nil)
	r, err = rdb.Do(ctx, "ZSCORE", "z", "a").Result()
	log.add("Do ZSCORE", r, err)
	r, err = rdb.Do(ctx, "SMEMBERS", "missing").Result()
	log.add("Do SMEMBERS missing", r, err)

	// A pipeline of many commands keeps their order, errors included.
	cmds, err := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i := range 300 {
			p.Incr(ctx, "pipe")
			if i%100 == 0 {
				p.HGet(ctx, "k", "f") // WRONGTYPE inside the pipeline
			}
		}
		p.Get(ctx, "pipe")
		return nil
	})
	log.add("pipeline", len(cmds), err)
	for _, i := range []int{0, 1, 2, 150, len(cmds) - 1} {
		log.addf("pipeline[%d]: %v", i, cmds[i])
	}

	// MULTI/EXEC through TxPipelined: results, a runtime error inside, and a
	// queueing error that discards the transaction.
	cmds, err = rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Set(ctx, "tx", "1", 0)
		p.Incr(ctx, "tx")
		p.LPush(ctx, "tx", "x")
		p.Get(ctx, "tx")
		return nil
	})
	log.add("TxPipelined", len(cmds), err)
	for _, c := range cmds {
		log.addf("  %v", c)
	}
	_, err = rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Incr(ctx, "tx")
		p.Do(ctx, "SET", "tx") // wrong arity: EXECABORT
		return nil
	})
	log.add("TxPipelined with a bad command", nil, err)
	log.add("GET tx after EXECABORT", rdb.Get(ctx, "tx").Val(), nil)

	// WATCH: a key changed by another client between WATCH and EXEC aborts.
	other := tg.goRedis(t, redis.Options{Protocol: proto, DB: 2})
	err = rdb.Watch(ctx, func(tx *redis.Tx) error {
		n, _ := tx.Get(ctx, "w").Int()
		other.Set(ctx, "w", "changed", 0)
		_, err := tx.TxPipelined(ctx, func(p redis.Pipeliner) error {
			p.Set(ctx, "w", n+1, 0)
			return nil
		})
		return err
	}, "w")
	log.add("WATCH with a concurrent change", nil, err)
	if !errors.Is(err, redis.TxFailedErr) {
		t.Errorf("%s: WATCH with a concurrent change returned %v, want redis.TxFailedErr", tg.name, err)
	}
	log.add("GET w", rdb.Get(ctx, "w").Val(), nil)
	log.add("counter after WATCH retries", watchCounter(t, tg, proto), nil)

	// Script.Run: EVALSHA, NOSCRIPT, then EVAL; later runs hit the cache.
	log.add("SCRIPT FLUSH", rdb.ScriptFlush(ctx).Val(), nil)
	script := redis.NewScript(`return {KEYS[1], ARGV[1], redis.call('INCR', KEYS[1]), redis.call('GET', 'missing')}`)
	log.add("SCRIPT EXISTS before", rdb.ScriptExists(ctx, script.Hash()).Val(), nil)
	r, err = script.Run(ctx, rdb, []string{"sn"}, "arg").Result()
	log.add("Script.Run", r, err)
	log.add("SCRIPT EXISTS after", rdb.ScriptExists(ctx, script.Hash()).Val(), nil)
	r, err = script.Run(ctx, rdb, []string{"sn"}, "arg").Result()
	log.add("Script.Run again", r, err)
	r, err = redis.NewScript(`return redis.call('INCR', KEYS[1])`).Run(ctx, rdb, []string{"k"}).Result()
	log.add("Script.Run raising", r, err)
	r, err = rdb.EvalRO(ctx, `return redis.call('GET', KEYS[1])`, []string{"k"}).Result()
	log.add("EVAL_RO", r, err)

	pubSubSession(ctx, t, tg, proto, rdb, &log)
	return log
}

// pubSubSession subscribes with go-redis's PubSub and records what it delivers.
func pubSubSession(ctx context.Context, t testing.TB, tg clientTarget, proto int, pub *redis.Client, log *clientLog) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	subClient := tg.goRedis(t, redis.Options{Protocol: proto})
	sub := subClient.Subscribe(ctx, "news")
	defer sub.Close()
	v, err := sub.Receive(ctx)
	log.add("SUBSCRIBE", v, err)
	log.add("PING while subscribed", nil, sub.Ping(ctx))
	v, err = sub.Receive(ctx)
	log.add("PING's reply", v, err)
	log.add("PUBLISH", pub.Publish(ctx, "news", "hello").Val(), nil)
	logMessage(log, sub)
	// go-redis sends (P)(UN)SUBSCRIBE without waiting; a user who needs the
	// subscription in place before publishing waits for its confirmation.
	log.add("PSUBSCRIBE", nil, sub.PSubscribe(ctx, "n*"))
	v, err = sub.Receive(ctx)
	log.add("PSUBSCRIBE confirmed", v, err)
	log.add("PUBSUB NUMSUB", pub.PubSubNumSub(ctx, "news").Val(), nil)
	log.add("PUBSUB NUMPAT", pub.PubSubNumPat(ctx).Val(), nil)
	log.add("PUBLISH to channel and pattern", pub.Publish(ctx, "news", "both").Val(), nil)
	for range 2 {
		logMessage(log, sub)
	}
	log.add("UNSUBSCRIBE", nil, sub.Unsubscribe(ctx, "news"))
	v, err = sub.Receive(ctx)
	log.add("UNSUBSCRIBE confirmed", v, err)
	log.add("PUBLISH to the pattern only", pub.Publish(ctx, "news", "pattern").Val(), nil)
	logMessage(log, sub)

	ssub := subClient.SSubscribe(ctx, "shard")
	defer ssub.Close()
	v, err = ssub.Receive(ctx)
	log.add("SSUBSCRIBE", v, err)
	log.add("PUBSUB SHARDNUMSUB", pub.PubSubShardNumSub(ctx, "shard").Val(), nil)
	log.add("SPUBLISH", pub.SPublish(ctx, "shard", "sharded").Val(), nil)
	logMessage(log, ssub)
}

// logMessage records the next message a subscription delivers.
func logMessage(log *clientLog, sub *redis.PubSub) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	msg, err := sub.ReceiveMessage(ctx)
	if err != nil {
		log.add("message", nil, err)
		return
	}
	log.addf("message: channel %q pattern %q payload %q", msg.Channel, msg.Pattern, msg.Payload)
}

// watchCounter has goroutines increment one counter with WATCH/MULTI/EXEC,
// retrying aborted transactions as go-redis users do. Every increment must
// land exactly once. On a cluster, an EXEC that a leader change cuts short is
// met as a client would: sent again after TRYAGAIN and CLUSTERDOWN (nothing
// was written); after UNKNOWN, the marker key that each transaction also
// sets says whether it took effect.
func watchCounter(t testing.TB, tg clientTarget, proto int) int64 {
	const workers, each = 6, 25
	ctx := context.Background()
	rdb := tg.goRedis(t, redis.Options{Protocol: proto, PoolSize: workers})
	rdb.Del(ctx, "counter")
	var wg sync.WaitGroup
	var aborted, failed atomic.Int64
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				marker := fmt.Sprintf("counter:%d:%d", w, i)
				for attempt := 0; ; attempt++ {
					err := rdb.Watch(ctx, func(tx *redis.Tx) error {
						n, err := tx.Get(ctx, "counter").Int64()
						if err != nil && err != redis.Nil {
							return err
						}
						_, err = tx.TxPipelined(ctx, func(p redis.Pipeliner) error {
							p.Set(ctx, "counter", n+1, 0)
							p.Set(ctx, marker, 1, 0)
							return nil
						})
						return err
					}, "counter")
					if err == nil {
						break
					}
					if strings.HasPrefix(err.Error(), "UNKNOWN ") && markerSet(t, rdb, marker) {
						break
					}
					retry := errors.Is(err, redis.TxFailedErr) || clustertest.WriteErr(err)
					if !retry || attempt > 10000 {
						failed.Add(1)
						t.Errorf("%s: WATCH increment: %v", tg.name, err)
						return
					}
					aborted.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	n, err := rdb.Get(ctx, "counter").Int64()
	if err != nil || n != workers*each {
		t.Errorf("%s: counter = %d, %v after %d WATCH increments (%d aborted and retried); want %d", tg.name, n, err, workers*each, aborted.Load(), workers*each)
	}
	return n
}

// markerSet reads back whether marker exists, asking until it gets an answer.
func markerSet(t testing.TB, rdb *redis.Client, marker string) bool {
	var err error
	for range 100 {
		var n int64
		if n, err = rdb.Exists(context.Background(), marker).Result(); err == nil {
			return n == 1
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Errorf("EXISTS %s: %v", marker, err)
	return true // not known: do not count it twice
}

func TestClientGoRedis(t *testing.T) {
	redisT := redisTarget(t, "s3cret")
	ls := lockserverTarget(t, "s3cret")
	for _, proto := range []int{2, 3} {
		t.Run(fmt.Sprintf("RESP%d", proto), func(t *testing.T) {
			want := goRedisSession(t, redisT, proto)
			for _, line := range []string{
				"PING: string PONG",
				"CLIENT GETNAME: string compat-client",
				fmt.Sprintf("CLIENT INFO: string name=compat-client db=2 resp=%d", proto),
				"EXISTS from db 0: int64 0",
				`SET NX PX on a held lock: error "redis: nil"`,
				"counter after WATCH retries: int64 150",
			} {
				if !want.has(line) {
					t.Errorf("redis-server's record lacks %q: the scenario is wrong", line)
				}
			}
			for _, tg := range []clientTarget{ls, ls.dialerTarget()} {
				tg.server.Do(context.Background(), "FLUSHALL")
				compareLogs(t, "redis-server", want, tg.name, goRedisSession(t, tg, proto))
			}
			redisT.goRedis(t, redis.Options{}).FlushAll(context.Background())
		})
	}
}

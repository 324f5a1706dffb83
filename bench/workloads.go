package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// leaseMs is the lease every lock is taken with: Redisson's default (its
// watchdog's 30 s), long enough that no lock expires during a run.
const leaseMs = 30000

// unlockMessage is what Redisson publishes on a lock's channel at unlock.
const unlockMessage = "0"

// redissonChannel is the channel Redisson's waiters subscribe to for a lock.
func redissonChannel(key string) string { return "redisson_lock__channel:{" + key + "}" }

// workload is one of the measurements the bench makes on every system.
type workload struct {
	name  string
	about string
	// skip says why the workload cannot run on a system, or "" if it can.
	skip func(inst *instance) string
	// points are the settings it measures. Each is measured on every system
	// in turn, so that a ratio compares figures taken moments apart on a
	// machine whose load may drift.
	points func(b *bench) []point
	// sequence replaces points for a workload whose points build on each
	// other (held locks only grow): it runs them all on one system, which
	// then stops.
	sequence func(ctx context.Context, b *bench, sys system, inst *instance) []row
	// steps is how many progress steps it takes on one system.
	steps func(b *bench) int
}

// skipOn says why w cannot run on inst, or "" if it can.
func (w workload) skipOn(inst *instance) string {
	if inst.only != nil && !slices.Contains(inst.only, w.name) {
		return "runs only " + strings.Join(inst.only, " and ")
	}
	return w.skip(inst)
}

// point measures one setting of a workload on one system.
type point func(ctx context.Context, b *bench, sys system, inst *instance) row

func workloads() []workload {
	return []workload{
		{name: "lock", about: "(a) Redisson lock + unlock cycles (redisson_lock.lua, redisson_unlock_v2.lua), one key per client; ops/s counts acquires and releases, latency is per operation",
			skip: lockSkip, points: lockPoints},
		{name: "lock-hot", about: "(a) Redisson locks on a few hot keys (clients/4, at most 4): waiters subscribe to the unlock channel and retry as Redisson does; acquisitions/s, latency is the wait to acquire",
			skip: lockSkip, points: hotPoints},
		{name: "setnx", about: "(b) SET key token NX PX + compare_and_delete.lua (redsync's pattern), one key per client; ops/s counts acquires and releases",
			skip: respSkip, points: setnxPoints},
		{name: "redis-benchmark", about: "(c) redis-benchmark -c 50 SET, GET and EVALSHA of redisson_lock.lua, at -P 1 and -P 16; latency as it reports (p50, p99; no p999)",
			skip: redisBenchmarkSkip, points: redisBenchmarkPoints},
		{name: "mutex", about: "(e) the Go lock package's Mutex (lock.Mutex: fencing token, lease watchdog, wait queue) lock + unlock cycles, one key per client; etcd3: its concurrency.Mutex; ops/s counts acquires and releases",
			skip: mutexSkip, points: mutexPoints},
		{name: "handoff-mutex", about: "(f) hot-lock hand-off: every client contends for one lock, taking it, releasing it at once, and asking again; latency is from the holder starting its release to another client's acquisition returning (a releaser that takes the lock straight back, ahead of the waiters, hands nothing off: the hand-off is timed from its first release, and the row notes how often that happened). The Go lock package's Mutex; etcd3: its concurrency.Mutex. hand-offs/s",
			skip: mutexSkip, points: handoffPoints("handoff-mutex", (*bench).mutexHandoff)},
		{name: "handoff-redsync", about: "(f) as handoff-mutex, with redsync v4 (SET NX PX, its default retry delay of 50-250 ms)",
			skip: goRedisSkip, points: handoffPoints("handoff-redsync", (*bench).redsyncHandoff)},
		{name: "handoff-redislock", about: "(f) as handoff-mutex, with bsm/redislock (SET NX PX, retrying every 10 ms)",
			skip: goRedisSkip, points: handoffPoints("handoff-redislock", (*bench).redislockHandoff)},
		{name: "handoff-redisson", about: "(f) as handoff-mutex, with Redisson's scripts through go-redis as in lock-hot (waiters woken by the unlock message)",
			skip: respSkip, points: handoffPoints("handoff-redisson", func(b *bench, ctx context.Context, inst *instance, clients int, h *handoff) ([]stepFunc, func(), error) {
				return b.redissonHot(ctx, inst, b.prefix(), clients, 1, h)
			})},
		{name: "large-value", about: "(i) one client writing one byte into a 64 MB string, over and over: SETRANGE at a random offset within it, and APPEND; ops/s, latency is per command",
			skip: respSkip, points: largeValuePoints},
		{name: "held", about: "(d) memory per held Redisson lock (hash, 1 h lease; used_memory from INFO before and after loading them, each read after MEMORY PURGE), and lock-cycle throughput at 50 clients as held locks grow",
			skip: heldSkip, sequence: runHeld, steps: func(b *bench) int { return 2 * len(heldSteps(b.cfg.held)) }},
		{name: "rolling-restart", about: "(h) the cost of a rolling restart to its clients: 16 clients write (INCR) through the members of a 3-member cluster other than the one restarting, sending a write again through the next member after an error until it is acknowledged, while each member in turn is stopped (SIGTERM) and started again 3 s later; per restart, the longest time a write took and the replies that refused it or left it unknown; with this build, whose leader hands leadership over as it stops, and with the previous release, whose leader just stops",
			skip: rollingSkip, sequence: runRollingRestart, steps: func(*bench) int { return 2 }},
		{name: "failover", about: "(h) how soon a cluster takes writes after its leader crashes: the rolling-restart workload's clients write while the leader is killed (SIGKILL) five times, the killed member started again after each; per kill, the time to the first acknowledged write sent after it, the longest time a write took, and the replies that refused it or left it unknown",
			skip: rollingSkip, sequence: runFailover, steps: failoverKills},
		{name: "held-growth", about: "(g) 16 Redisson lock clients through what millions of held locks cost (--growth counts, 1 h leases): a snapshot on the leader (redis-server: BGSAVE) and on a follower, a follower restart, a backup to a file (lockserver backup, which the note says how long lockserver restore then takes of; redis-server: redis-cli --rdb), a whole-cluster restart (redis-server: a restart from its RDB), and a mass expiry of --expire locks at one moment; for each, how long it took, the clients' throughput against the seconds before, p99 and longest request, errors and leader changes; memory per lock, RSS and disk at each count",
			skip: growthSkip, sequence: runGrowth, steps: growthSteps},
	}
}

// stepsOn is how many progress steps w takes on one system.
func (w workload) stepsOn(b *bench) int {
	if w.points != nil {
		return len(w.points(b)) * b.cfg.repeat
	}
	return w.steps(b)
}

func lockSkip(inst *instance) string {
	if inst.client == nil && inst.etcd == nil {
		return "no lock client for this system"
	}
	return ""
}

func respSkip(inst *instance) string {
	if inst.client == nil {
		return "not a Redis-protocol system"
	}
	return ""
}

// hotClients are the client counts the hot-key workload runs at: contention
// needs at least two clients.
func (b *bench) hotClients() []int {
	var out []int
	for _, c := range b.cfg.clients {
		if c >= 2 {
			out = append(out, c)
		}
	}
	return out
}

// hotKeys is how many hot keys the clients share: a few, each wanted by
// several clients at once.
func hotKeys(clients int) int { return min(4, max(1, clients/4)) }

func lockPoints(b *bench) []point {
	var out []point
	for _, c := range b.cfg.clients {
		out = append(out, func(ctx context.Context, b *bench, sys system, inst *instance) row {
			return b.lockPoint(ctx, sys, inst, c, 0)
		})
	}
	return out
}

// lockPoint measures Redisson lock cycles (or etcd's mutex) at one client
// count; held is the number of other locks held meanwhile, for the scale rows.
func (b *bench) lockPoint(ctx context.Context, sys system, inst *instance, clients, held int) row {
	name := "lock"
	if held > 0 {
		name = "held"
	}
	b.progress.step(fmt.Sprintf("%s %s c=%d", sys.name, name, clients))
	r := row{Workload: name, System: sys.name, Clients: clients, Held: held}
	prepare := func(ctx context.Context) ([]stepFunc, func(), error) {
		return etcdCycles(ctx, inst.etcd, b.prefix(), clients, 0, nil)
	}
	if inst.client != nil {
		prepare = func(ctx context.Context) ([]stepFunc, func(), error) {
			c := inst.client(clients)
			return b.redissonCycles(c, b.prefix(), clients), func() { c.close() }, nil
		}
	}
	return r.fill(b.measure(ctx, inst, prepare), "ops/s", inst)
}

// redissonCycles returns one worker per client, each locking and unlocking
// its own key with Redisson's scripts.
func (b *bench) redissonCycles(c respClient, prefix string, clients int) []stepFunc {
	steps := make([]stepFunc, clients)
	for i := range steps {
		key := fmt.Sprintf("%s:lock:%d", prefix, i)
		keys := []string{key, redissonChannel(key)}
		owner := b.owner(i)
		steps[i] = func(ctx context.Context, m *meter) error {
			start := time.Now()
			acquired, ttl, err := b.redissonTryLock(ctx, c, keys[0], owner)
			if err != nil {
				return err
			}
			if !acquired {
				return fmt.Errorf("redisson_lock.lua on a free key replied %d, want nil (acquired)", ttl)
			}
			m.observe(start)
			start = time.Now()
			if err := b.redissonUnlock(ctx, c, keys, owner); err != nil {
				return err
			}
			m.observe(start)
			return nil
		}
	}
	return steps
}

func hotPoints(b *bench) []point {
	var out []point
	for _, clients := range b.hotClients() {
		out = append(out, func(ctx context.Context, b *bench, sys system, inst *instance) row {
			b.progress.step(fmt.Sprintf("%s lock-hot c=%d", sys.name, clients))
			prepare := func(ctx context.Context) ([]stepFunc, func(), error) {
				return etcdCycles(ctx, inst.etcd, b.prefix(), clients, hotKeys(clients), nil)
			}
			if inst.client != nil {
				prepare = func(ctx context.Context) ([]stepFunc, func(), error) {
					return b.redissonHot(ctx, inst, b.prefix(), clients, hotKeys(clients), nil)
				}
			}
			return row{Workload: "lock-hot", System: sys.name, Clients: clients}.fill(b.measure(ctx, inst, prepare), "acq/s", inst)
		})
	}
	return out
}

// redissonHot returns workers that contend for a few keys the way Redisson's
// RLock.lock() does: try the lock script; when it answers the holder's
// remaining lease, wait for an unlock message on the lock's channel (or for
// that lease to run out) and try again. As in Redisson, one subscription per
// lock is shared by every waiter, and each message wakes one waiter. The
// latency recorded is the wait to acquire, or with h the hand-off.
func (b *bench) redissonHot(ctx context.Context, inst *instance, prefix string, clients, n int, h *handoff) ([]stepFunc, func(), error) {
	keys := make([]string, n)
	wake := make(map[string]chan struct{}, n)
	var channels []string
	for i := range keys {
		keys[i] = fmt.Sprintf("%s:hot:%d", prefix, i)
		ch := redissonChannel(keys[i])
		channels = append(channels, ch)
		// A permit per message, as Redisson's semaphore counts them.
		wake[ch] = make(chan struct{}, clients)
	}
	sub := inst.subscriber()
	ps := sub.Subscribe(ctx, channels...)
	for range channels {
		msg, err := ps.ReceiveTimeout(ctx, 10*time.Second)
		if err == nil {
			if _, ok := msg.(*redis.Subscription); !ok {
				err = fmt.Errorf("got %T before the subscription was confirmed", msg)
			}
		}
		if err != nil {
			ps.Close()
			sub.Close()
			return nil, nil, fmt.Errorf("subscribe to the unlock channel: %w", err)
		}
	}
	var dispatch sync.WaitGroup
	dispatch.Add(1)
	go func() {
		defer dispatch.Done()
		for msg := range ps.Channel(redis.WithChannelSize(4 * clients)) {
			select {
			case wake[msg.Channel] <- struct{}{}:
			default:
			}
		}
	}()
	release := func() {
		ps.Close()
		dispatch.Wait()
		sub.Close()
	}

	c := inst.client(clients)
	steps := make([]stepFunc, clients)
	for i := range steps {
		key := keys[i%n]
		lockKeys := []string{key, redissonChannel(key)}
		permits := wake[lockKeys[1]]
		owner := b.owner(i)
		timer := time.NewTimer(time.Hour)
		timer.Stop()
		steps[i] = func(ctx context.Context, m *meter) error {
			start := time.Now()
			for {
				acquired, ttl, err := b.redissonTryLock(ctx, c, key, owner)
				if err != nil {
					return err
				}
				if acquired {
					break
				}
				if ttl < 0 { // held with no expiry: wait for the message alone
					ttl = int64(time.Hour / time.Millisecond)
				}
				timer.Reset(time.Duration(ttl) * time.Millisecond)
				select {
				case <-permits:
				case <-timer.C:
				case <-ctx.Done():
					return nil
				}
			}
			if h != nil {
				h.acquired(m, i)
				h.releasing(i)
			} else {
				m.observe(start)
			}
			return b.redissonUnlock(ctx, c, lockKeys, owner)
		}
	}
	return steps, func() { c.close(); release() }, nil
}

// redissonTryLock runs Redisson's lock script once: it acquires (or re-enters)
// the lock, or answers the holder's remaining lease in milliseconds.
func (b *bench) redissonTryLock(ctx context.Context, c respClient, key, owner string) (acquired bool, ttl int64, err error) {
	v, err := c.run(ctx, b.scripts.lock, []string{key}, leaseMs, owner)
	if err != nil {
		return false, 0, fmt.Errorf("redisson_lock.lua: %w", err)
	}
	if v == nil {
		return true, 0, nil
	}
	ttl, ok := v.(int64)
	if !ok {
		return false, 0, fmt.Errorf("redisson_lock.lua replied %T %v, want nil or the remaining lease", v, v)
	}
	return false, ttl, nil
}

// redissonUnlock releases a lock its owner holds once, publishing the unlock
// message on the lock's channel (keys: the lock and its channel).
func (b *bench) redissonUnlock(ctx context.Context, c respClient, keys []string, owner string) error {
	v, err := c.run(ctx, b.scripts.unlock, keys, unlockMessage, leaseMs, owner)
	if err != nil {
		return fmt.Errorf("redisson_unlock_v2.lua: %w", err)
	}
	if v != int64(1) {
		return fmt.Errorf("redisson_unlock_v2.lua by the holder replied %v, want 1 (released)", v)
	}
	return nil
}

func setnxPoints(b *bench) []point {
	var out []point
	for _, clients := range b.cfg.clients {
		out = append(out, func(ctx context.Context, b *bench, sys system, inst *instance) row {
			b.progress.step(fmt.Sprintf("%s setnx c=%d", sys.name, clients))
			m := b.measure(ctx, inst, func(ctx context.Context) ([]stepFunc, func(), error) {
				c := inst.client(clients)
				return b.setnxCycles(c, b.prefix(), clients), func() { c.close() }, nil
			})
			return row{Workload: "setnx", System: sys.name, Clients: clients}.fill(m, "ops/s", inst)
		})
	}
	return out
}

// setnxCycles returns workers that take a lock with SET NX PX and a fresh
// random-looking token, and release it with compare-and-delete, as redsync does.
func (b *bench) setnxCycles(c respClient, prefix string, clients int) []stepFunc {
	steps := make([]stepFunc, clients)
	for i := range steps {
		key := fmt.Sprintf("%s:setnx:%d", prefix, i)
		keys := []string{key}
		owner := b.owner(i)
		var n int
		steps[i] = func(ctx context.Context, m *meter) error {
			n++
			token := fmt.Sprintf("%s:%d", owner, n)
			start := time.Now()
			v, err := c.do(ctx, "SET", key, token, "NX", "PX", leaseMs)
			if err != nil {
				return fmt.Errorf("SET NX PX: %w", err)
			}
			if v != "OK" {
				return fmt.Errorf("SET NX PX on a free key replied %v, want OK", v)
			}
			m.observe(start)
			start = time.Now()
			v, err = c.run(ctx, b.scripts.compareAndDelete, keys, token)
			if err != nil {
				return fmt.Errorf("compare_and_delete.lua: %w", err)
			}
			if v != int64(1) {
				return fmt.Errorf("compare_and_delete.lua by the holder replied %v, want 1", v)
			}
			m.observe(start)
			return nil
		}
	}
	return steps
}

// largeValueSize is the size of the string the large-value workload writes
// into: what a careless client might keep under one key.
const largeValueSize = 64 << 20

// largeValuePoints measure a one-byte write into a large string, which Redis
// makes in place: SETRANGE within it and APPEND at its end.
func largeValuePoints(*bench) []point {
	var out []point
	for _, op := range []string{"SETRANGE", "APPEND"} {
		out = append(out, func(ctx context.Context, b *bench, sys system, inst *instance) row {
			name := "large-" + strings.ToLower(op)
			b.progress.step(fmt.Sprintf("%s %s c=1", sys.name, name))
			m := b.measure(ctx, inst, func(ctx context.Context) ([]stepFunc, func(), error) {
				c := inst.client(1)
				key := b.prefix() + ":large"
				if _, err := c.do(ctx, "SETRANGE", key, largeValueSize-1, "x"); err != nil {
					c.close()
					return nil, nil, fmt.Errorf("SETRANGE to make a %d-byte string: %w", largeValueSize, err)
				}
				rng := rand.New(rand.NewPCG(1, 2))
				step := func(ctx context.Context, m *meter) error {
					args := []any{op, key, "y"}
					if op == "SETRANGE" {
						args = []any{op, key, rng.IntN(largeValueSize), "y"}
					}
					start := time.Now()
					n, err := c.do(ctx, args...)
					if err != nil {
						return fmt.Errorf("%s: %w", op, err)
					}
					if l, ok := n.(int64); !ok || l < largeValueSize {
						return fmt.Errorf("%s on a %d-byte string replied %v", op, largeValueSize, n)
					}
					m.observe(start)
					return nil
				}
				return []stepFunc{step}, func() { c.do(context.Background(), "DEL", key); c.close() }, nil
			})
			return row{Workload: name, System: sys.name, Clients: 1}.fill(m, "ops/s", inst)
		})
	}
	return out
}

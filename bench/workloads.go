package main

import (
	"context"
	"fmt"
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
	// steps is how many progress steps the workload takes on one system.
	steps func(b *bench) int
	run   func(ctx context.Context, b *bench, sys system, inst *instance) []row
}

func workloads() []workload {
	return []workload{
		{name: "lock", about: "(a) Redisson lock + unlock cycles (redisson_lock.lua, redisson_unlock_v2.lua), one key per client; ops/s counts acquires and releases, latency is per operation",
			steps: func(b *bench) int { return len(b.cfg.clients) }, run: runLock},
		{name: "lock-hot", about: "(a) Redisson locks on a few hot keys (clients/4, at most 4): waiters subscribe to the unlock channel and retry as Redisson does; acquisitions/s, latency is the wait to acquire",
			steps: func(b *bench) int { return len(b.hotClients()) }, run: runLockHot},
		{name: "setnx", about: "(b) SET key token NX PX + compare_and_delete.lua (redsync's pattern), one key per client; ops/s counts acquires and releases",
			steps: func(b *bench) int { return len(b.cfg.clients) }, run: runSetNX},
		{name: "redis-benchmark", about: "(c) redis-benchmark -c 50 SET, GET and EVALSHA of redisson_lock.lua, at -P 1 and -P 16; latency as it reports (p50, p99; no p999)",
			steps: func(b *bench) int { return 2 * len(rbTests) }, run: runRedisBenchmark},
		{name: "held", about: "(d) memory per held Redisson lock (hash, 1 h lease), and lock-cycle throughput at 50 clients as held locks grow",
			steps: func(b *bench) int { return 2 * len(heldSteps(b.cfg.held)) }, run: runHeld},
	}
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

func runLock(ctx context.Context, b *bench, sys system, inst *instance) []row {
	var rows []row
	for _, c := range b.cfg.clients {
		rows = append(rows, b.lockPoint(ctx, sys, inst, c, 0))
	}
	return rows
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
	var m measurement
	switch {
	case inst.client != nil:
		m = b.measure(ctx, inst, func(ctx context.Context) ([]stepFunc, func(), error) {
			c := inst.client(clients)
			return b.redissonCycles(c, b.prefix(), clients), func() { c.close() }, nil
		})
	case inst.etcd != nil:
		m = b.measure(ctx, inst, func(ctx context.Context) ([]stepFunc, func(), error) {
			return etcdCycles(ctx, inst.etcd, b.prefix(), clients, 0)
		})
	default:
		return r.notApplicable("no lock client for this system")
	}
	return r.fill(m, "ops/s", inst)
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

func runLockHot(ctx context.Context, b *bench, sys system, inst *instance) []row {
	var rows []row
	for _, clients := range b.hotClients() {
		b.progress.step(fmt.Sprintf("%s lock-hot c=%d", sys.name, clients))
		r := row{Workload: "lock-hot", System: sys.name, Clients: clients}
		var m measurement
		switch {
		case inst.client != nil:
			m = b.measure(ctx, inst, func(ctx context.Context) ([]stepFunc, func(), error) {
				return b.redissonHot(ctx, inst, b.prefix(), clients)
			})
		case inst.etcd != nil:
			m = b.measure(ctx, inst, func(ctx context.Context) ([]stepFunc, func(), error) {
				return etcdCycles(ctx, inst.etcd, b.prefix(), clients, hotKeys(clients))
			})
		default:
			rows = append(rows, r.notApplicable("no lock client for this system"))
			continue
		}
		rows = append(rows, r.fill(m, "acq/s", inst))
	}
	return rows
}

// redissonHot returns workers that contend for a few keys the way Redisson's
// RLock.lock() does: try the lock script; when it answers the holder's
// remaining lease, wait for an unlock message on the lock's channel (or for
// that lease to run out) and try again. As in Redisson, one subscription per
// lock is shared by every waiter, and each message wakes one waiter.
func (b *bench) redissonHot(ctx context.Context, inst *instance, prefix string, clients int) ([]stepFunc, func(), error) {
	n := hotKeys(clients)
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
			m.observe(start)
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

func runSetNX(ctx context.Context, b *bench, sys system, inst *instance) []row {
	if inst.client == nil {
		return []row{row{Workload: "setnx", System: sys.name}.notApplicable("not a Redis-protocol system")}
	}
	var rows []row
	for _, clients := range b.cfg.clients {
		b.progress.step(fmt.Sprintf("%s setnx c=%d", sys.name, clients))
		m := b.measure(ctx, inst, func(ctx context.Context) ([]stepFunc, func(), error) {
			c := inst.client(clients)
			return b.setnxCycles(c, b.prefix(), clients), func() { c.close() }, nil
		})
		rows = append(rows, row{Workload: "setnx", System: sys.name, Clients: clients}.fill(m, "ops/s", inst))
	}
	return rows
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

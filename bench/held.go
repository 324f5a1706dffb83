package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// heldLease is the lease of the held locks: an hour, so none expires during
// the run.
const heldLease = time.Hour

// heldClients is the client count of the lock cycles measured beside the held
// locks, the count the targets are stated at.
const heldClients = 50

// heldSteps are the held-lock counts the throughput is measured at: 1k, then
// ten times more each step, and max.
func heldSteps(max int) []int {
	var steps []int
	for n := 1000; n < max; n *= 10 {
		steps = append(steps, n)
	}
	return append(steps, max)
}

func heldSkip(inst *instance) string {
	switch {
	case inst.memory == nil && inst.sameServerAs != "":
		return "same server as " + inst.sameServerAs + ", whose row measures its memory"
	case inst.client == nil:
		return "etcd's mutex is not a Redis hash lock"
	}
	return ""
}

func runHeld(ctx context.Context, b *bench, sys system, inst *instance) []row {
	clients := heldClients
	if b.cfg.smoke {
		clients = min(clients, b.cfg.clients[len(b.cfg.clients)-1])
	}
	prefix := b.prefix()
	mem0, how, err := settledMemory(ctx, inst)
	if err != nil {
		return []row{row{Workload: "memory", System: sys.name}.failed(err)}
	}
	var rows []row
	loaded := 0
	steps := heldSteps(b.cfg.held)
	for i, n := range steps {
		b.progress.step(fmt.Sprintf("%s holding %d locks", sys.name, n))
		if err := loadHeldLocks(ctx, inst, b.owner(0), prefix, loaded, n); err != nil {
			return append(rows, row{Workload: "held", System: sys.name, Clients: clients, Held: n}.failed(err))
		}
		loaded = n
		if i == len(steps)-1 {
			// Read memory before the cycles run, with only the held locks added.
			mem1, _, err := settledMemory(ctx, inst)
			r := row{Workload: "memory", System: sys.name, Held: n}
			if err != nil {
				rows = append(rows, r.failed(err))
			} else {
				r.Value, r.Unit, r.Note = float64(mem1-mem0)/float64(n), "B/lock", how
				rows = append(rows, r)
			}
		}
		rows = append(rows, b.lockPoint(ctx, sys, inst, clients, n))
	}
	return rows
}

// settledMemory reads a system's memory once the connections of the last
// run have closed, which the server finishes after the client has gone.
func settledMemory(ctx context.Context, inst *instance) (int64, string, error) {
	sleepCtx(ctx, 250*time.Millisecond)
	return inst.memory(ctx)
}

// loadHeldLocks creates the locks numbered [from, to) as Redisson leaves a held
// lock: a hash with the owner's hold count, with a lease. It writes them with
// HSET and PEXPIRE in pipelines, which leaves the same keys as the lock script
// and loads a million in seconds on every system.
func loadHeldLocks(ctx context.Context, inst *instance, owner, prefix string, from, to int) error {
	return inPipelines(ctx, inst, "load held locks", prefix, from, to, func(p redis.Pipeliner, key string) {
		p.HSet(ctx, key, owner, 1)
		p.PExpire(ctx, key, heldLease)
	})
}

// inPipelines sends the commands add queues for each held lock of prefix
// numbered [from, to), batch by batch, over four connections at once, retrying a
// batch that fails (see retried): the commands must bear repeating.
func inPipelines(ctx context.Context, inst *instance, what, prefix string, from, to int, add func(p redis.Pipeliner, key string)) error {
	const batch, writers = 500, 4
	c, ok := inst.client(writers).(*goRedis)
	if !ok {
		return fmt.Errorf("%s: needs a go-redis client for pipelines", what)
	}
	defer c.close()
	send := func(from, to int) error {
		p := c.c.Pipeline()
		for i := from; i < to; i++ {
			add(p, fmt.Sprintf("%s:held:%08d", prefix, i))
		}
		cmds, err := p.Exec(ctx)
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		for _, cmd := range cmds {
			if cmd.Err() != nil {
				return fmt.Errorf("%s: %s: %w", what, cmd.Name(), cmd.Err())
			}
		}
		return nil
	}
	next := make(chan int)
	errs := make(chan error, writers)
	var wg sync.WaitGroup
	for range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for start := range next {
				if err := retried(ctx, func() error { return send(start, min(start+batch, to)) }); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	var err error
feed:
	for start := from; start < to; start += batch {
		select {
		case next <- start:
		case err = <-errs:
			break feed
		}
	}
	close(next)
	wg.Wait()
	close(errs)
	return errors.Join(err, <-errs)
}

// retried runs fn until it succeeds, at most five times, a little later
// each time: the batches that load locks can be written again, and a
// cluster's leader may change while millions are loaded on a busy machine.
func retried(ctx context.Context, fn func() error) error {
	var err error
	for wait := 100 * time.Millisecond; wait < 4*time.Second; wait *= 2 {
		if err = fn(); err == nil || !sleepCtx(ctx, wait) {
			return err
		}
	}
	return err
}

package replication

import (
	"runtime/debug"
	"sync"
	"time"

	"github.com/hashicorp/raft"
	"github.com/lockserver/lockserver/keyspace"
	"github.com/lockserver/lockserver/replication/internal/logcodec"
)

// Active expiry. An expired key is invisible at once; these reclaim its
// memory as Redis's activeExpireCycle does. Every expiryTick a cycle looks at
// the keys expiryStep at a time (whole shards, so a shard's at least; twice
// as many while most of them have expired) and
// sweeps those it found expired, step after step while a step finds at
// least one key in expiryStale expired, for at most expiryBusy of work. A
// keyspace of live locks then costs one look of expiryStep keys a tick, and
// a mass expiry is reclaimed at up to a quarter of a CPU, in sweeps of a
// millisecond or two each, between which commands run. (Sweeps of up to
// 64k keys, four in flight, held the state machine for tens of
// milliseconds at a time: at 1M expiring locks, the clients' p99 rose to
// half a second on the bench's busy machine.)
//
// The standalone engine sweeps on its own timer. In a cluster the leader
// looks and proposes each sweep as a log entry, a range of shards stamped
// by the log clock, so that an idle cluster reclaims too, and every member
// removes the same keys (see keyspace.Store.Sweep).
const (
	expiryTick    = 100 * time.Millisecond
	expiryStep    = 4096
	expiryStepMax = 2 * expiryStep
	expiryStale   = 10
	expiryBusy    = expiryTick / 4
	// expiryInflight bounds the sweeps a leader has proposed and not yet
	// seen applied: it looks at the next shards while they commit.
	expiryInflight = 2
)

// expiryCursor is where a cycle looks next: the database, and in each
// database the shard; and how many keys it looks at, from expiryStep up to
// expiryStepMax while most of what it finds has expired.
type expiryCursor struct {
	db   int
	from [keyspace.NumDBs]int
	step int
}

// look looks at the next step's shards of sm at now (see Store.Expired) and
// moves past them, back to the first after the last. It returns the
// database and the shards, how many keys they hold and how many of those
// have expired; no shards when no database has a key with a deadline. Each
// step moves on to the next database.
func (c *expiryCursor) look(sm *stateMachine, now int64) (db, from, shards, examined, expired int) {
	c.step = max(c.step, expiryStep)
	for range keyspace.NumDBs {
		db, c.db = c.db, (c.db+1)%keyspace.NumDBs
		from = c.from[db]
		shards, examined, expired = sm.store.Expired(db, from, now, c.step)
		if shards > 0 {
			c.from[db] = (from + shards) % keyspace.NumShards
			if 2*expired >= examined {
				c.step = min(2*c.step, expiryStepMax)
			} else {
				c.step = expiryStep
			}
			return db, from, shards, examined, expired
		}
	}
	return 0, 0, 0, 0, 0
}

// again reports whether a cycle goes on after a step that looked at
// examined keys and found expired of them expired.
func again(examined, expired int) bool {
	return expired > 0 && expired*expiryStale >= examined
}

// expireLoop runs the cycles of active expiry (see expiryTick) while this
// node leads: the followers apply the sweeps it proposes.
func (r *Raft) expireLoop() {
	var cur expiryCursor
	every(r.stop, expiryTick, func() {
		if r.raft.State() == raft.Leader {
			r.expireCycle(&cur)
		}
	})
}

// expireCycle looks at the keys step by step while the steps find many
// expired, and proposes a sweep of the shards of each step that found any,
// with up to expiryInflight sweeps being committed while it looks further.
// The time this node spends looking and applying sweeps counts against
// expiryBusy.
func (r *Raft) expireCycle(cur *expiryCursor) {
	start, busy := time.Now(), r.sweepTime.Load()
	var inflight []*Request
	defer func() {
		for _, req := range inflight {
			req.Wait(r.ctx)
		}
	}()
	for {
		looked := time.Now()
		r.smMu.Lock()
		db, from, shards, examined, expired := cur.look(r.sm.Load(), r.clock.Now())
		r.smMu.Unlock()
		r.sweepTime.Add(int64(time.Since(looked)))
		if expired > 0 {
			req := r.proposeSweep(db, from, shards)
			if req == nil {
				return
			}
			inflight = append(inflight, req)
		}
		// Before it looks at shards again, the sweeps it proposed for them
		// are applied.
		for len(inflight) == expiryInflight || len(inflight) > 0 && from+shards == keyspace.NumShards {
			reply := inflight[0].Wait(r.ctx)
			inflight = inflight[1:]
			if reply.Kind == keyspace.KindError {
				return
			}
		}
		if !again(examined, expired) || time.Duration(r.sweepTime.Load()-busy) >= expiryBusy || time.Since(start) >= expiryTick {
			return
		}
	}
}

// proposeSweep proposes a sweep of shards shards of database db from shard
// from on, and returns its request, answered with the number of keys it
// removed once applied; nil when this node does not lead.
func (r *Raft) proposeSweep(db, from, shards int) *Request {
	req := &Request{}
	req.start()
	r.proposeMu.Lock()
	defer r.proposeMu.Unlock()
	if r.closed.Load() || !r.leadingLocked() {
		return nil
	}
	r.proposeLocked(&logcodec.LogEntry{Kind: logcodec.KindSweep, Entry: logcodec.Entry{DB: db}, Sweep: logcodec.SweepRange{From: from, Shards: shards}}, req, false)
	return req
}

// osReturn gives the memory of swept keys back to the operating system.
// Go's scavenger returns freed memory slowly (it paces itself to about 1% of
// a CPU), so after a mass expiry a process would keep its peak size for
// minutes. Once sweeps have removed nothing for returnQuiet (or have gone on
// for returnMax), if they removed at least returnMin keys and an eighth of
// those left, it returns the free memory at once: one garbage collection of
// what is left, then every free page. A mass expiry then costs one
// collection, after it, not one every few seconds while it is swept. (With a
// quarter, a fifth of the locks expiring beside the rest were never
// returned.)
type osReturn struct {
	mu      sync.Mutex
	removed int
	left    int
	since   time.Time // the first removal since the last return
	timer   *time.Timer
	stopped bool
}

const (
	returnMin   = 50_000
	returnQuiet = time.Second
	returnMax   = 10 * time.Second
)

// swept counts removed keys, with left keys in the keyspace.
func (o *osReturn) swept(removed, left int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.stopped {
		return
	}
	o.removed, o.left = o.removed+removed, left
	switch {
	case o.since.IsZero():
		o.since = time.Now()
		o.timer = time.AfterFunc(returnQuiet, o.due)
	case time.Since(o.since) < returnMax:
		o.timer.Reset(returnQuiet)
	}
}

// due returns the free memory if enough was removed.
func (o *osReturn) due() {
	o.mu.Lock()
	removed, left := o.removed, o.left
	o.removed, o.since = 0, time.Time{}
	o.mu.Unlock()
	if removed >= returnMin && 8*removed >= left {
		debug.FreeOSMemory()
	}
}

// stop cancels a return that is due, when the engine closes.
func (o *osReturn) stop() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.stopped = true
	if o.timer != nil {
		o.timer.Stop()
	}
}

// keyCount returns the number of keys in every database of sm.
func (sm *stateMachine) keyCount() int {
	n := 0
	for db := range keyspace.NumDBs {
		n += sm.store.DBSize(db)
	}
	return n
}

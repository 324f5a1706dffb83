package replication

import (
	"runtime/debug"
	"sync"
	"time"

	"github.com/lockserver/lockserver/keyspace"
)

// Active expiry. An expired key is invisible at once; these reclaim its
// memory as Redis's activeExpireCycle does. Every expiryTick a cycle looks at
// the keys of expiryStep at a time (whole shards, so a shard's at least)
// and sweeps those it found expired, step after step while a step finds at
// least one key in expiryStale expired, for at most expiryBusy of work. A
// keyspace of live locks then costs one look of expiryStep keys a tick, and
// a mass expiry is reclaimed at up to a quarter of a CPU.
//
// The standalone engine sweeps on its own timer. In a cluster the leader
// looks and proposes each sweep as a log entry, a range of shards stamped
// by the log clock, so that an idle cluster reclaims too, and every member
// removes the same keys (see keyspace.Store.Sweep).
const (
	expiryTick  = 100 * time.Millisecond
	expiryStep  = 4096
	expiryStale = 10
	expiryBusy  = expiryTick / 4
	// expiryInflight bounds the sweeps a leader has proposed and not yet
	// seen applied: it looks at the next shards while they commit.
	expiryInflight = 4
)

// expiryCursor is where a cycle looks next: the database, and in each
// database the shard.
type expiryCursor struct {
	db   int
	from [keyspace.NumDBs]int
}

// look looks at the next step's shards of sm at now (see Store.Expired) and
// moves past them, back to the first after the last. It returns the
// database and the shards, how many keys they hold and how many of those
// have expired; no shards when no database has a key with a deadline. Each
// step moves on to the next database.
func (c *expiryCursor) look(sm *StateMachine, now int64) (db, from, shards, examined, expired int) {
	for range keyspace.NumDBs {
		db, c.db = c.db, (c.db+1)%keyspace.NumDBs
		from = c.from[db]
		shards, examined, expired = sm.store.Expired(db, from, now, expiryStep)
		if shards > 0 {
			c.from[db] = (from + shards) % keyspace.NumShards
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

// osReturn gives the memory of swept keys back to the operating system.
// Go's scavenger returns freed memory slowly (it paces itself to about 1% of
// a CPU), so after a mass expiry a process would keep its peak size for
// minutes. Once the keys removed since the last return are at least
// returnMin and a quarter of those left, it returns the free memory at once
// (a garbage collection of what is left, then all free pages), at most every
// returnEvery.
type osReturn struct {
	mu      sync.Mutex
	removed int
	last    time.Time
	running bool
}

const (
	returnMin   = 50_000
	returnEvery = 2 * time.Second
)

// swept counts removed keys, with left keys in the keyspace, and starts a
// return in the background when it is due.
func (o *osReturn) swept(removed, left int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.removed += removed
	if o.running || o.removed < returnMin || 4*o.removed < left || time.Since(o.last) < returnEvery {
		return
	}
	o.removed, o.running = 0, true
	go func() {
		debug.FreeOSMemory()
		o.mu.Lock()
		o.running, o.last = false, time.Now()
		o.mu.Unlock()
	}()
}

// keyCount returns the number of keys in every database of sm.
func (sm *StateMachine) keyCount() int {
	n := 0
	for db := range keyspace.NumDBs {
		n += sm.store.DBSize(db)
	}
	return n
}

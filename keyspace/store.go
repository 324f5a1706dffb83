// Package keyspace is lockserver's data store: 16 numbered databases of strings,
// hashes, lists, sets and sorted sets with per-key expiry, and every data command.
//
// The package is pure and deterministic. Every command takes "now" (milliseconds
// since the Unix epoch) from its Call; the package reads no clock, starts no
// goroutine and does no I/O. The same calls in the same order give the same
// replies and the same state, which is what lets Raft replicate commands rather
// than their effects. A Store is not safe for concurrent use: its owner
// (replication's state machine) serialises access.
package keyspace

import "encoding/binary"

// NumDBs is the number of databases, as in Redis's default configuration.
const NumDBs = 16

// versionSlots is the number of WATCH version counters (see Store.Version).
const versionSlots = 1 << 16

// shardBits sets how many maps a database is split into, by the top bits of a
// key's hash. The split lets SCAN resume from a hash position while looking at
// one shard rather than the whole database.
const (
	shardBits  = 10
	numShards  = 1 << shardBits
	shardShift = 64 - shardBits
)

// Store is the whole keyspace.
type Store struct {
	dbs [NumDBs]db
	// versions counts modifications per hash slot of (db, key). WATCH records the
	// slot's count and EXEC fails if it moved; a collision only makes EXEC fail
	// spuriously, which clients retry. The counters are replicated state.
	versions [versionSlots]uint64
}

// db is one numbered database.
type db struct {
	shards [numShards]map[string]*object // made on first use
	// count is the number of keys, expired ones not yet swept included (Redis's
	// DBSIZE counts those too); volatile counts keys that have a deadline, so
	// that a sweep of a database without any stops at once.
	count, volatile int
	// sweepShard is where the next sweep of this database resumes.
	sweepShard int
}

// valueType is the Redis type of a key's value.
type valueType uint8

const (
	typeString valueType = iota
	typeHash
	typeList
	typeSet
	typeZSet
)

// object is the value of one key. deadline is an absolute time in
// milliseconds, 0 when the key does not expire. Its fields fit the allocator's
// 48-byte size class: a held lock costs one object, its key and its value.
type object struct {
	deadline int64
	// str is a string's value, or a small hash packed as field/value pairs
	// (see packedHash) while coll is nil.
	str string
	// coll is nil for packed hashes; otherwise map[string]string (typeHash),
	// *list, *set or *zset. For a string, it is nil or the *growable buffer
	// that str is a prefix of.
	coll any
	typ  valueType
}

// typeName returns the name TYPE replies for t.
func (t valueType) name() string {
	return [...]string{"string", "hash", "list", "set", "zset"}[t]
}

// live reports whether an object with this deadline exists at now.
func live(deadline, now int64) bool { return deadline == 0 || deadline > now }

// Publisher delivers PUBLISH and SPUBLISH messages. Publish returns the number of
// subscribers that received the message. It must not keep channel or message,
// which are the command's arguments: it copies what it delivers, so that a
// message nobody hears costs nothing.
type Publisher interface {
	Publish(channel, message []byte, sharded bool) int64
}

// Call is one command execution: the arguments, the database it addresses, and
// the time it runs at.
type Call struct {
	Store *Store
	DB    int      // the selected database; SELECT inside a script changes it for the script
	Now   int64    // milliseconds since the epoch; frozen for a whole log entry
	Args  [][]byte // Args[0] is the command name
	// Script is set for calls made by a Lua script: commands with unordered
	// replies sort them so that scripts stay deterministic.
	Script bool
	// Pub receives published messages; nil publishes to nobody.
	Pub Publisher
	// DenyOOM is set when the entry was proposed while the server was over
	// maxmemory: scripts may then not run DenyOOM commands. It travels in the
	// entry, so every node decides alike.
	DenyOOM bool
	// Seed is distinct for every command applied (the engine derives it from
	// the entry's place in the log): a script's math.random starts from it, so
	// that its numbers differ from script to script and are the same on
	// every node. 0 starts where a freshly started redis-server does.
	Seed uint64
}

// New returns an empty keyspace.
func New() *Store { return &Store{} }

// Exec runs a keyspace command. The caller has already looked the command up and
// checked its arity; Exec repeats both so that it is safe on any input.
func (s *Store) Exec(c *Call) Reply {
	cmd := Lookup(c.Args[0])
	if cmd == nil || cmd.Run == nil {
		return ErrUnknownCommand(c.Args)
	}
	if !cmd.CheckArity(len(c.Args)) {
		return ErrWrongArity(cmd.Name)
	}
	return cmd.Run(c)
}

// hashKey is the fixed 64-bit hash of a key: its top bits pick the shard, and it
// orders SCAN. It is fixed (no per-process seed) so that every node agrees on
// SCAN cursors and on the WATCH slots.
func hashKey[K string | []byte](key K) uint64 {
	const m1, m2 = 0x9E3779B97F4A7C15, 0xBF58476D1CE4E5B9
	h := uint64(len(key)) * m1
	for len(key) >= 8 {
		var w [8]byte
		copy(w[:], key[:8])
		h = (h ^ binary.LittleEndian.Uint64(w[:])) * m2
		h ^= h >> 31
		key = key[8:]
	}
	var w [8]byte
	copy(w[:], key)
	h = (h ^ binary.LittleEndian.Uint64(w[:]) ^ uint64(len(key))<<59) * m1
	// Murmur3's finaliser spreads every input bit over the top bits.
	h ^= h >> 33
	h *= 0xFF51AFD7ED558CCD
	h ^= h >> 33
	h *= 0xC4CEB9FE1A85EC53
	h ^= h >> 33
	return h
}

// Version returns the modification count of key's slot in database dbIndex. A
// WATCHed key is unchanged while its version is.
func (s *Store) Version(dbIndex int, key string) uint64 {
	return s.versions[slot(dbIndex, hashKey(key))]
}

// slot maps a key's hash in database dbIndex to its WATCH version counter.
func slot(dbIndex int, h uint64) uint32 {
	return uint32((h + uint64(dbIndex)*0x9E3779B97F4A7C15) >> (64 - 16))
}

// touch records a modification of the key with hash h, for WATCH.
func (s *Store) touch(dbIndex int, h uint64) { s.versions[slot(dbIndex, h)]++ }

// entry returns the object stored at key, live or not.
func (d *db) entry(key []byte, h uint64) *object {
	return d.shards[h>>shardShift][string(key)]
}

// db returns the call's database.
func (c *Call) db() *db { return &c.Store.dbs[c.DB] }

// lookup returns the live object at key, or nil if it is missing or expired.
// It does not allocate.
func (c *Call) lookup(key []byte) *object {
	o := c.db().entry(key, hashKey(key))
	if o == nil || !live(o.deadline, c.Now) {
		return nil
	}
	return o
}

// lookupType returns the live object at key, nil when there is none, and
// whether the key holds another type than t.
func (c *Call) lookupType(key []byte, t valueType) (o *object, wrongType bool) {
	o = c.lookup(key)
	if o != nil && o.typ != t {
		return nil, true
	}
	return o, false
}

// put stores v at key, replacing whatever was there, live or expired, and
// returns the stored object. An existing entry is overwritten in place, so that
// replacing a value allocates neither the key nor the object again.
func (c *Call) put(key []byte, v object) *object {
	d, h := c.db(), hashKey(key)
	if v.deadline != 0 {
		d.volatile++
	}
	o := d.entry(key, h)
	if o != nil {
		if o.deadline != 0 {
			d.volatile--
		}
		*o = v
	} else {
		shard := &d.shards[h>>shardShift]
		if *shard == nil {
			*shard = make(map[string]*object)
		}
		o = new(object)
		*o = v
		(*shard)[string(key)] = o
		d.count++
	}
	c.Store.touch(c.DB, h)
	return o
}

// setDeadline changes the deadline of the live object o at key.
func (c *Call) setDeadline(key []byte, o *object, deadline int64) {
	d := c.db()
	if o.deadline != 0 {
		d.volatile--
	}
	if deadline != 0 {
		d.volatile++
	}
	o.deadline = deadline
	c.modified(key)
}

// del removes key and reports whether a live key was removed.
func (c *Call) del(key []byte) bool {
	d, h := c.db(), hashKey(key)
	shard := d.shards[h>>shardShift]
	o := shard[string(key)]
	if o == nil {
		return false
	}
	d.remove(shard, key, o)
	if !live(o.deadline, c.Now) {
		return false
	}
	c.Store.touch(c.DB, h)
	return true
}

// remove deletes the entry of o at key from its shard and fixes the counts.
func (d *db) remove(shard map[string]*object, key []byte, o *object) {
	if o.deadline != 0 {
		d.volatile--
	}
	d.count--
	delete(shard, string(key))
}

// modified records an in-place change of the value at key.
func (c *Call) modified(key []byte) { c.Store.touch(c.DB, hashKey(key)) }

// sweepSample is how many keys with a deadline a sweep looks at before it
// may conclude that too few have expired to go on searching.
const sweepSample = 256

// Sweep removes up to budget keys whose deadline is at or before now and returns
// how many it removed. It visits whole shards in turn, resuming where the last
// sweep of each database stopped. It looks at no more than 8*budget keys, and,
// as Redis's active expiry does, stops once fewer than a quarter of the keys
// with a deadline it looked at (sweepSample at least) had expired: a keyspace
// of live locks then costs a few shards per sweep instead of 8*budget keys,
// and the expired keys that wait for a later sweep are invisible meanwhile.
// Call it with the time of the last applied entry: every later entry runs at a
// later time, so removing such keys changes no outcome.
func (s *Store) Sweep(now int64, budget int) int {
	removed, examined, volatile := 0, 0, 0
	for i := range s.dbs {
		d := &s.dbs[i]
		for visited := 0; d.volatile > 0 && visited < numShards; visited++ {
			if removed >= budget || examined >= 8*budget || (volatile >= sweepSample && 4*removed < volatile) {
				return removed
			}
			shard := d.shards[d.sweepShard]
			for k, o := range shard {
				examined++
				if o.deadline == 0 {
					continue
				}
				volatile++
				if !live(o.deadline, now) {
					d.remove(shard, []byte(k), o)
					removed++
					if removed >= budget {
						break
					}
				}
			}
			d.sweepShard = (d.sweepShard + 1) % numShards
		}
	}
	return removed
}

// DBSize returns the number of keys in database dbIndex, expired ones not yet swept included.
func (s *Store) DBSize(dbIndex int) int { return s.dbs[dbIndex].count }

// KeyCounts returns the number of keys in database dbIndex and how many of them
// have a deadline, expired ones not yet swept included (INFO's keyspace section).
func (s *Store) KeyCounts(dbIndex int) (keys, volatile int) {
	d := &s.dbs[dbIndex]
	return d.count, d.volatile
}

// clone returns a copy of o's value that shares nothing mutable with it (COPY).
func (o *object) clone() object {
	v := *o // strings are immutable
	switch o.typ {
	case typeHash:
		v = o.cloneHash()
		v.deadline = o.deadline
	case typeList:
		v.coll = &list{buf: append([]string(nil), o.asList().items()...)}
	case typeSet:
		v.coll = o.asSet().clone()
	case typeZSet:
		v.coll = o.asZSet().clone()
	}
	return v
}

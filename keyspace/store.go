package keyspace

import (
	"encoding/binary"
)

// NumDBs is the number of databases, as in Redis's default configuration.
const NumDBs = 16

// versionSlots is the number of WATCH version counters (see Store.Version).
const versionSlots = 1 << 16

// Store is the whole keyspace.
type Store struct {
	dbs [NumDBs]db
	// versions counts modifications per hash slot of (db, key). WATCH records the
	// slot's count and EXEC fails if it moved; a collision only makes EXEC fail
	// spuriously, which clients retry. The counters are replicated state.
	versions [versionSlots]uint64
	// gen is the generation of the maps and objects made now. A Frozen view
	// holds the maps and objects of generation frozen and older, which are
	// therefore copied before they change (see own); frozen is 0 when no view
	// is live, and nothing is copied. views counts the live views.
	gen, frozen uint32
	views       int
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
// milliseconds, 0 when the key does not expire. Its fields take 48 bytes: a
// held lock costs an object in its shard's chunks, its key and its value.
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
	// gen is the generation the object was made in (see Store.gen). It fits
	// in the padding after typ.
	gen uint32
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
	// Work is what the command did beyond reading its arguments and building
	// its reply, which a caller may account for (a script's budget does): one
	// for each element it scanned, moved or copied, and one for each 16
	// bytes it copied or cleared. Commands add to it, deterministically.
	Work int64
	// Dry asks for a run that changes nothing: a command whose Effect is
	// MayWrite answers as it would when it finds nothing to write, and
	// returns WouldWrite, having changed nothing, when it would write.
	// Other write commands must not be run dry.
	Dry bool
	// write is set by Command.Exec for a Write command: its lookups return
	// objects it may change (see Store.own).
	write bool
}

// New returns an empty keyspace.
func New() *Store { return &Store{gen: 1} }

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
	return cmd.Exec(c)
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

// db returns the call's database.
func (c *Call) db() *db { return &c.Store.dbs[c.DB] }

// lookup returns the live object at key, or nil if it is missing or expired.
// A write command gets an object it may change (see own). It does not
// allocate, but while a snapshot is being written.
func (c *Call) lookup(key []byte) *object {
	d, h := c.db(), hashKey(key)
	o := entry(d, key, h)
	if o == nil || !live(o.deadline, c.Now) {
		return nil
	}
	if c.write && o.gen <= c.Store.frozen {
		o = c.Store.own(d, h, key)
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
	s, d, h := c.Store, c.db(), hashKey(key)
	if o := entry(d, key, h); o != nil {
		if o.gen <= s.frozen {
			o = s.place(d, h, key)
		}
		c.replace(h, o, v)
		return o
	}
	v.gen = s.gen
	if v.deadline != 0 {
		d.volatile++
	}
	sh := s.writable(d, h)
	sm := s.writableMap(sh, h)
	i := s.alloc(sh)
	o := s.slot(sh, i)
	*o = v
	sm.m[string(key)] = i
	d.count++
	if uint32(len(sm.m)) > sm.peak {
		sm.peak = uint32(len(sm.m))
	}
	if len(sm.m) > maxSubLen && sh.bits < maxSubBits {
		s.split(sh)
	}
	s.touch(c.DB, h)
	return o
}

// replace stores v in o, the object of the key whose hash is h, live or
// expired, which the call may change (a write's lookup, or put): what put
// does without looking the key up again.
func (c *Call) replace(h uint64, o *object, v object) {
	d := c.db()
	if o.deadline != 0 {
		d.volatile--
	}
	if v.deadline != 0 {
		d.volatile++
	}
	v.gen = c.Store.gen
	*o = v
	c.Store.touch(c.DB, h)
}

// setDeadline changes the deadline of the live object o at key, which the
// call looked up to write.
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
	o := entry(d, key, h)
	if o == nil {
		return false
	}
	wasLive := live(o.deadline, c.Now)
	c.Store.remove(d, h, string(key), o.deadline)
	if !wasLive {
		return false
	}
	c.Store.touch(c.DB, h)
	return true
}

// modified records an in-place change of the value at key.
func (c *Call) modified(key []byte) { c.Store.touch(c.DB, hashKey(key)) }

// Expired looks at whole shards of database dbIndex, from shard from on,
// until it has examined at least limit keys or reached the last shard. It
// returns how many shards it looked at, how many keys they hold, and how
// many of those have expired at now. It changes nothing: an engine looks
// before it sweeps, and a leader before it proposes a sweep.
func (s *Store) Expired(dbIndex, from int, now int64, limit int) (shards, examined, expired int) {
	d := &s.dbs[dbIndex]
	for ; from+shards < numShards && examined < limit && d.volatile > 0; shards++ {
		sh := &d.shards[from+shards]
		for _, sm := range sh.subs {
			examined += len(sm.m)
			for _, x := range sm.m {
				if o := sh.obj(x); o.deadline != 0 && !live(o.deadline, now) {
					expired++
				}
			}
		}
	}
	return shards, examined, expired
}

// Sweep removes the keys expired at now from n shards of database dbIndex,
// from shard from on, and returns how many it removed. A sweep is made of
// whole shards, so the same sweep removes the same keys from the same state
// on every node, whatever order Go's maps iterate in.
//
// Call it with a time that no later command runs before (the time of the
// last applied entry, or of a replicated entry that sweeps): removing keys
// expired at such a time changes no outcome.
func (s *Store) Sweep(dbIndex, from, n int, now int64) (removed int) {
	d := &s.dbs[dbIndex]
	var deadlines []int64
	var keys []string
	for j := 0; j < min(n, numShards) && d.volatile > 0; j++ {
		i := (from + j) % numShards
		deadlines, keys = deadlines[:0], keys[:0]
		for k, o := range d.shardKeys(i) {
			if o.deadline != 0 && !live(o.deadline, now) {
				deadlines, keys = append(deadlines, o.deadline), append(keys, k)
			}
		}
		for x, k := range keys {
			s.remove(d, hashKey(k), k, deadlines[x])
		}
		removed += len(keys)
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

// elements is the work of visiting o's value (Call.Work): its elements, or
// for a string its bytes by 16.
func (o *object) elements() int64 {
	switch o.typ {
	case typeHash:
		if m := o.hashMap(); m != nil {
			return int64(len(m))
		}
		return int64(len(o.str)) / 16
	case typeList:
		return int64(o.asList().len())
	case typeSet:
		return int64(len(o.asSet().m))
	case typeZSet:
		return int64(len(o.asZSet().dict))
	}
	return int64(len(o.str)) / 16
}

// clone returns a copy of o's value that shares nothing mutable with it (COPY).
func (o *object) clone() object {
	v := *o
	switch o.typ {
	case typeString:
		o.lend() // the two share the bytes (see growable)
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

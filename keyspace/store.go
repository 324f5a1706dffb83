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
}

// db is one numbered database.
type db struct {
	keys map[string]*object
	// volatile counts keys that have a deadline, so that a sweep of a
	// database without any can stop at once.
	volatile int
}

// object is the value of one key. deadline is an absolute time in
// milliseconds, 0 when the key does not expire.
type object struct {
	deadline int64
	value    any // string, *hashValue, *listValue, *setValue or *zsetValue
}

// Publisher delivers PUBLISH and SPUBLISH messages. Publish returns the number of
// subscribers that received the message.
type Publisher interface {
	Publish(channel, message string, sharded bool) int64
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
}

// New returns an empty keyspace.
func New() *Store {
	s := &Store{}
	for i := range s.dbs {
		s.dbs[i].keys = make(map[string]*object)
	}
	return s
}

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

// Version returns the modification count of key's slot in database dbIndex. A
// WATCHed key is unchanged while its version is.
func (s *Store) Version(dbIndex int, key string) uint64 {
	return s.versions[slot(dbIndex, key)]
}

// slot hashes (dbIndex, key) with FNV-1a: a fixed function, so that every node
// agrees on the slots.
func slot(dbIndex int, key string) uint32 {
	const offset, prime = 2166136261, 16777619
	h := uint32(offset)
	h = (h ^ uint32(dbIndex)) * prime
	for i := 0; i < len(key); i++ {
		h = (h ^ uint32(key[i])) * prime
	}
	return h % versionSlots
}

// touch records a modification of key, for WATCH.
func (s *Store) touch(dbIndex int, key string) {
	s.versions[slot(dbIndex, key)]++
}

// get returns the live object at key, or nil if it is missing or expired at now.
func (d *db) get(key string, now int64) *object {
	o := d.keys[key]
	if o == nil || (o.deadline != 0 && o.deadline <= now) {
		return nil
	}
	return o
}

// db returns the call's database.
func (c *Call) db() *db { return &c.Store.dbs[c.DB] }

// get returns the live object at key.
func (c *Call) get(key string) *object { return c.db().get(key, c.Now) }

// set stores value at key with the given deadline (0 for none), replacing any
// previous value.
func (c *Call) set(key string, value any, deadline int64) {
	d := c.db()
	if old := d.keys[key]; old != nil && old.deadline != 0 {
		d.volatile--
	}
	if deadline != 0 {
		d.volatile++
	}
	d.keys[key] = &object{deadline: deadline, value: value}
	c.Store.touch(c.DB, key)
}

// setDeadline changes the deadline of the live object o at key.
func (c *Call) setDeadline(key string, o *object, deadline int64) {
	d := c.db()
	if o.deadline != 0 {
		d.volatile--
	}
	if deadline != 0 {
		d.volatile++
	}
	o.deadline = deadline
	c.Store.touch(c.DB, key)
}

// del removes key and reports whether a live key was removed.
func (c *Call) del(key string) bool {
	d := c.db()
	o := d.keys[key]
	if o == nil {
		return false
	}
	live := o.deadline == 0 || o.deadline > c.Now
	if o.deadline != 0 {
		d.volatile--
	}
	delete(d.keys, key)
	if live {
		c.Store.touch(c.DB, key)
	}
	return live
}

// modified records an in-place change of the value at key.
func (c *Call) modified(key string) { c.Store.touch(c.DB, key) }

// Sweep removes up to budget keys whose deadline is at or before now, sampling
// each database as Redis's active expiry does, and returns how many it removed.
// Call it with the time of the last applied entry: every later entry runs at a
// later time, so removing such keys changes no outcome.
func (s *Store) Sweep(now int64, budget int) int {
	removed := 0
	for i := range s.dbs {
		d := &s.dbs[i]
		for d.volatile > 0 && budget > 0 {
			const sample = 20
			seen, expired := 0, 0
			for k, o := range d.keys {
				if seen == sample || budget == 0 {
					break
				}
				seen++
				if o.deadline != 0 && o.deadline <= now {
					delete(d.keys, k)
					d.volatile--
					expired++
					removed++
					budget--
				}
			}
			// Keep going in this database while at least a quarter of the sample was expired.
			if expired*4 < seen || seen == 0 {
				break
			}
		}
	}
	return removed
}

// DBSize returns the number of keys in database dbIndex, expired ones not yet swept included.
func (s *Store) DBSize(dbIndex int) int { return len(s.dbs[dbIndex].keys) }

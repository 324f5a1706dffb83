package keyspace

import (
	"iter"
	"maps"
	"slices"
)

// How a database lays its keys out in memory: shards by the top bits of a
// key's hash, maps within a shard, objects in chunks; and how a change
// copies what a Frozen view holds before it changes it.

// shardBits sets how many shards a database is split into, by the top bits
// of a key's hash. The split lets SCAN resume from a hash position while
// looking at one shard rather than the whole database, and a sweep reclaim a
// shard at a time, in the same way on every node: the shards are part of
// what is replicated (a sweep's entry names them).
//
// Each shard is split again into maps by the next bits of the hash, as many
// as keep each map under maxSubLen keys (up to 1<<maxSubBits maps). That is
// how a node lays the store out in memory, not replicated state: a snapshot
// copies on write one of those maps at a time (see Freeze), so that a write
// after Freeze copies at most maxSubLen keys where it copied a whole
// shard's, and the copying spreads over the snapshot instead of coming in a
// burst at its start.
const (
	shardBits  = 10
	numShards  = 1 << shardBits
	shardShift = 64 - shardBits
	maxSubLen  = 128
	maxSubBits = 8
	// NumShards is how many shards Expired and Sweep count in.
	NumShards = numShards
)

// db is one numbered database.
type db struct {
	shards *[numShards]shard // nil until the first key
	// count is the number of keys, expired ones not yet swept included (Redis's
	// DBSIZE counts those too); volatile counts keys that have a deadline, so
	// that a sweep of a database without any stops at once.
	count, volatile int
}

// shard is the keys of one shard of a database. Their objects are kept in
// chunks of chunkLen, and 1<<bits maps, picked by the bits of the hash after
// the shard's, map each key to its object's index. An object never moves
// while its key lives, so a command may hold it across other keys' changes;
// and the collector, which spends most of a collection on the pointers to
// scattered small objects, finds a shard's objects in a few large ones
// rather than one small object per key.
//
// gen is the generation subs and chunks were made or copied in (see
// Store.gen), chunkGen the generation of each chunk: a Frozen view holds
// those of generation frozen and older, which are therefore copied, the
// slices without their maps and chunks, before they change.
type shard struct {
	subs     []subMap // nil until the first key
	chunks   []*[chunkLen]object
	chunkGen []uint32
	// used is how many indices were ever handed out; free holds those of
	// removed keys, for new keys to reuse.
	free []uint32
	used uint32
	gen  uint32
	bits uint8
}

// chunkLen objects fill a chunk, 384 bytes: one of the allocator's size
// classes, so nothing is lost to rounding, and small enough that a shard's
// last chunk leaves little unused in a small keyspace.
const (
	chunkBits = 3
	chunkLen  = 1 << chunkBits
)

// obj returns the object at index i of sh.
func (sh *shard) obj(i uint32) *object {
	return &sh.chunks[i>>chunkBits][i&(chunkLen-1)]
}

// subMap is one map of a shard's keys, to their objects' indices.
type subMap struct {
	m map[string]uint32 // nil until the first key
	// gen is the generation m was made in (see Store.gen); peak is the most
	// keys m held since, for shrinking it once most are gone: a Go map never
	// gives back its slots.
	gen, peak uint32
}

// subIndex returns which of 1<<bits maps of its shard holds a key with hash h.
// The shifts are by constants, or masked, so that they compile to shifts
// alone.
func subIndex(h uint64, bits uint8) int {
	return int(h<<shardBits>>(64-maxSubBits)) >> ((maxSubBits - bits) & 63)
}

// subBitsFor returns how many bits of the hash split a shard of n keys into
// maps of about maxSubLen*3/4 keys at most.
func subBitsFor(n int) uint8 {
	b := uint8(0)
	for b < maxSubBits && n > maxSubLen*3/4<<b {
		b++
	}
	return b
}

// entry returns the object stored at key, whose hash is h, live or not; nil
// if there is none.
func entry[K string | []byte](d *db, key K, h uint64) *object {
	if d.shards == nil {
		return nil
	}
	sh := &d.shards[h>>shardShift]
	if sh.subs == nil {
		return nil
	}
	i, ok := sh.subs[subIndex(h, sh.bits)].m[string(key)]
	if !ok {
		return nil
	}
	return sh.obj(i)
}

// shardLen returns the number of keys in shard i of d.
func (d *db) shardLen(i int) int {
	n := 0
	if d.shards != nil {
		for _, sm := range d.shards[i].subs {
			n += len(sm.m)
		}
	}
	return n
}

// shardKeys yields the keys of shard i of d with their objects. The caller
// may not change d meanwhile.
func (d *db) shardKeys(i int) iter.Seq2[string, *object] {
	return func(yield func(string, *object) bool) {
		if d.shards == nil {
			return
		}
		sh := &d.shards[i]
		for _, sm := range sh.subs {
			for k, x := range sm.m {
				if !yield(k, sh.obj(x)) {
					return
				}
			}
		}
	}
}

// all yields every key of d with its object. The caller may not change d
// meanwhile.
func (d *db) all() iter.Seq2[string, *object] {
	return func(yield func(string, *object) bool) {
		for i := range numShards {
			for k, o := range d.shardKeys(i) {
				if !yield(k, o) {
					return
				}
			}
		}
	}
}

// writable returns the shard of d's keys whose hash is h, made or copied so
// that its maps and chunks may be replaced: the slices a Frozen view holds
// are left to it.
func (s *Store) writable(d *db, h uint64) *shard {
	if d.shards == nil {
		d.shards = new([numShards]shard)
	}
	sh := &d.shards[h>>shardShift]
	switch {
	case sh.subs == nil:
		*sh = shard{subs: make([]subMap, 1), gen: s.gen}
	case sh.gen <= s.frozen:
		sh.subs, sh.gen = slices.Clone(sh.subs), s.gen
		sh.chunks, sh.chunkGen = slices.Clone(sh.chunks), slices.Clone(sh.chunkGen)
	}
	return sh
}

// writableMap returns the map of the writable shard sh that holds the keys
// whose hash is h, made or copied so that it may change.
func (s *Store) writableMap(sh *shard, h uint64) *subMap {
	sm := &sh.subs[subIndex(h, sh.bits)]
	switch {
	case sm.m == nil:
		*sm = subMap{m: make(map[string]uint32), gen: s.gen}
	case sm.gen <= s.frozen:
		sm.m, sm.gen = maps.Clone(sm.m), s.gen
	}
	return sm
}

// slot returns the object at index i of the writable shard sh, its chunk
// copied first if a Frozen view holds it.
func (s *Store) slot(sh *shard, i uint32) *object {
	c := i >> chunkBits
	if sh.chunkGen[c] <= s.frozen {
		dup := *sh.chunks[c]
		sh.chunks[c], sh.chunkGen[c] = &dup, s.gen
	}
	return &sh.chunks[c][i&(chunkLen-1)]
}

// alloc returns an index of the writable shard sh for a new key's object:
// one a removed key left, else a new one.
func (s *Store) alloc(sh *shard) uint32 {
	if n := len(sh.free); n > 0 {
		i := sh.free[n-1]
		sh.free = sh.free[:n-1]
		return i
	}
	return sh.grow(s.gen)
}

// grow returns the index after every one sh has handed out, adding a chunk
// of generation gen when the last is full.
func (sh *shard) grow(gen uint32) uint32 {
	if sh.used>>chunkBits == uint32(len(sh.chunks)) {
		sh.chunks, sh.chunkGen = append(sh.chunks, new([chunkLen]object)), append(sh.chunkGen, gen)
	}
	sh.used++
	return sh.used - 1
}

// release empties the object at index i of the writable shard sh, whose key
// is gone, so that it holds nothing the collector must keep, and keeps i for
// a new key.
func (s *Store) release(sh *shard, i uint32) {
	*s.slot(sh, i) = object{}
	sh.free = append(sh.free, i)
}

// split doubles the maps of sh, each key going to the one the next bit of
// its hash picks. The maps are new: those a Frozen view holds are left to it.
// The objects stay where they are.
func (s *Store) split(sh *shard) {
	bits := sh.bits + 1
	subs := make([]subMap, 1<<bits)
	for _, old := range sh.subs {
		for k, x := range old.m {
			sm := &subs[subIndex(hashKey(k), bits)]
			if sm.m == nil {
				sm.m, sm.gen = make(map[string]uint32), s.gen
			}
			sm.m[k] = x
			sm.peak++
		}
	}
	sh.subs, sh.gen, sh.bits = subs, s.gen, bits
}

// place returns the object of key, whose hash is h, which d holds, in a
// chunk that may change: copied first if a Frozen view holds it.
func (s *Store) place(d *db, h uint64, key []byte) *object {
	sh := s.writable(d, h)
	return s.slot(sh, sh.subs[subIndex(h, sh.bits)].m[string(key)])
}

// shrunk returns a new map with the entries of m, sized for size entries.
func shrunk(m map[string]uint32, size int) map[string]uint32 {
	n := make(map[string]uint32, size)
	for k, x := range m {
		n[k] = x
	}
	return n
}

// own replaces the object at key that a Frozen view holds by a copy that may
// change, in the same place, and returns it.
func (s *Store) own(d *db, h uint64, key []byte) *object {
	o := s.place(d, h, key)
	*o = o.clone()
	o.gen = s.gen
	return o
}

// remove deletes key, whose hash is h and whose object has this deadline,
// from d, empties its object and fixes the counts: a command may not use the
// object of a key after removing it, which may be a new key's by then. A map
// left with under a quarter of its peak is rebuilt smaller.
func (s *Store) remove(d *db, h uint64, key string, deadline int64) {
	if deadline != 0 {
		d.volatile--
	}
	d.count--
	sh := s.writable(d, h)
	sm := s.writableMap(sh, h)
	s.release(sh, sm.m[key])
	delete(sm.m, key)
	if sm.peak >= minShrink && uint32(len(sm.m)) < sm.peak/4 {
		sm.m = shrunk(sm.m, len(sm.m))
		sm.peak = uint32(len(sm.m))
	}
}

// minShrink is the smallest peak of a map that is rebuilt when it empties:
// below it, a map's slots cost little, and a key taken and dropped over and
// over must not rebuild its map each time.
const minShrink = 16

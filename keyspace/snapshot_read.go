package keyspace

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"math"
)

// decoder reads the snapshot encoding, checking each frame before it
// decodes it and every invariant as it goes.
type decoder struct {
	r     io.Reader
	frame []byte // the frame being decoded; data[off:] is what is left of it
	data  []byte
	off   int
	err   error
	// big holds a string that spans frames.
	big bytes.Buffer
}

// fail records the first error.
func (d *decoder) fail(format string, args ...any) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: %s", errCorruptSnapshot, fmt.Sprintf(format, args...))
	}
}

// next reads and checks the next frame; false at the end of the snapshot
// (an empty frame) or on an error.
func (d *decoder) next() bool {
	if d.err != nil {
		return false
	}
	var h [frameHeader]byte
	if _, err := io.ReadFull(d.r, h[:]); err != nil {
		d.fail("truncated: %v", err)
		return false
	}
	n := binary.LittleEndian.Uint32(h[:])
	if n > snapshotFrame+binary.MaxVarintLen64 {
		d.fail("frame of %d bytes", n)
		return false
	}
	if d.frame == nil {
		d.frame = make([]byte, snapshotFrame+binary.MaxVarintLen64)
	}
	d.data, d.off = d.frame[:n], 0
	if _, err := io.ReadFull(d.r, d.data); err != nil {
		d.fail("truncated: %v", err)
		return false
	}
	if crc32.Checksum(d.data, crc32c) != binary.LittleEndian.Uint32(h[4:]) {
		d.fail("checksum mismatch")
		return false
	}
	return n > 0
}

// end checks that the snapshot ends where its encoding does.
func (d *decoder) end() {
	if d.err == nil && (d.off < len(d.data) || d.next()) {
		d.fail("bytes after the end")
	}
}

// read returns the next n bytes, valid until the next read; nil after an error.
func (d *decoder) read(n int) []byte {
	if d.err != nil {
		return nil
	}
	if n <= len(d.data)-d.off {
		b := d.data[d.off : d.off+n]
		d.off += n
		return b
	}
	// Across frames: the buffer grows only as checked bytes arrive, so a
	// corrupt length fails at the end of the input rather than allocating
	// what it claims.
	d.big.Reset()
	for d.big.Len() < n {
		if d.off == len(d.data) && !d.next() {
			d.fail("truncated")
			return nil
		}
		k := min(n-d.big.Len(), len(d.data)-d.off)
		d.big.Write(d.data[d.off : d.off+k])
		d.off += k
	}
	return d.big.Bytes()
}

func (d *decoder) byte() byte {
	if d.off < len(d.data) {
		b := d.data[d.off]
		d.off++
		return b
	}
	if b := d.read(1); b != nil {
		return b[0]
	}
	return 0
}

func (d *decoder) uint64le() uint64 {
	if b := d.read(8); b != nil {
		return binary.LittleEndian.Uint64(b)
	}
	return 0
}

func (d *decoder) uvarint() uint64 {
	var v uint64
	for shift := uint(0); d.err == nil; shift += 7 {
		b := d.byte()
		if shift == 63 && b > 1 {
			d.fail("varint overflows")
			break
		}
		v |= uint64(b&0x7f) << shift
		if b < 0x80 {
			return v
		}
	}
	return 0
}

// count reads a uvarint that must not exceed max.
func (d *decoder) count(max uint64, what string) int {
	n := d.uvarint()
	if n > max {
		d.fail("%s %d out of range", what, n)
		return 0
	}
	return int(n)
}

func (d *decoder) str() string {
	n := d.count(maxSnapshotString, "string length")
	return string(d.read(n))
}

// ReadSnapshot replaces the whole keyspace with the one encoded in r by
// WriteSnapshot, and returns the meta bytes written with it. It reads r once,
// from start to end, and keeps no more of it than a frame. On any error
// (corrupt, truncated, or an unknown version) it returns an error wrapping
// errCorruptSnapshot or the reader's error, and the keyspace is left as it was.
func (s *Store) ReadSnapshot(r io.Reader) ([]byte, error) {
	d := &decoder{r: r}
	if magic := d.read(len(snapshotMagic)); d.err == nil && string(magic) != snapshotMagic {
		d.fail("bad magic %q", magic)
	}
	if v := d.byte(); d.err == nil && v != snapshotVersion {
		d.fail("unknown version %d", v)
	}
	meta := bytes.Clone(d.read(d.count(maxSnapshotMeta, "meta length")))
	// Made after every map and object of s, so that none counts as held by
	// a view of s still being written (see Release).
	next := &Store{gen: s.gen + 1}
	// The counters are kept aside: putting the keys below counts writes.
	versions := make([]uint64, versionSlots)
	slot := -1
	for n := d.count(versionSlots, "version count"); n > 0 && d.err == nil; n-- {
		delta := d.count(versionSlots, "version slot delta")
		if slot += delta; delta == 0 || slot >= versionSlots {
			d.fail("version slot %d out of range", slot)
			break
		}
		versions[slot] = d.uvarint()
	}
	lastDB := 0
	for d.err == nil {
		dbPlus1 := d.count(NumDBs, "database")
		if dbPlus1 == 0 {
			break
		}
		if dbPlus1 <= lastDB {
			d.fail("database %d out of order", dbPlus1-1)
			break
		}
		lastDB = dbPlus1
		d.readDB(&next.dbs[dbPlus1-1], next.gen)
	}
	d.end()
	if d.err != nil {
		return nil, fmt.Errorf("read keyspace snapshot: %w", d.err)
	}
	copy(next.versions[:], versions)
	next.frozen, next.views = s.frozen, s.views
	*s = *next
	return meta, nil
}

// readDB reads the shards of one database into db, making its maps and
// objects in generation gen.
func (d *decoder) readDB(db *db, gen uint32) {
	lastShard := 0
	for d.err == nil {
		shardPlus1 := d.count(numShards, "shard")
		if shardPlus1 == 0 {
			return
		}
		if shardPlus1 <= lastShard {
			d.fail("shard %d out of order", shardPlus1-1)
			return
		}
		lastShard = shardPlus1
		i := uint64(shardPlus1 - 1)
		// A key costs at least 3 bytes: the count cannot claim more keys
		// than a frame holds before the map is made that large.
		n := d.count(math.MaxInt64, "key count")
		if n == 0 {
			d.fail("empty shard %d", i)
			return
		}
		if db.shards == nil {
			db.shards = new([numShards]shard)
		}
		sh := &db.shards[i]
		sh.bits = subBitsFor(n)
		sh.subs, sh.gen = make([]subMap, 1<<sh.bits), gen
		var prevH uint64
		prev := ""
		for k := 0; k < n && d.err == nil; k++ {
			key := d.str()
			h := hashKey(key)
			switch {
			case h>>shardShift != i:
				d.fail("key %q in shard %d", key, i)
			case k > 0 && (h < prevH || h == prevH && key <= prev):
				d.fail("key %q out of order", key)
			}
			prev, prevH = key, h
			deadline := d.uvarint()
			if deadline > math.MaxInt64 {
				d.fail("deadline of %q out of range", key)
			}
			x := sh.grow(gen)
			o := sh.obj(x)
			*o = d.value(valueType(d.byte()))
			o.deadline, o.gen = int64(deadline), gen
			if d.err != nil {
				return
			}
			sm := &sh.subs[subIndex(h, sh.bits)]
			if sm.m == nil {
				// Sized for the keys the count says, within what a map
				// holds before its shard splits: the count is not trusted.
				*sm = subMap{m: make(map[string]uint32, min(n>>sh.bits, maxSubLen)), gen: gen}
			}
			sm.m[key] = x
			sm.peak++
			if o.deadline != 0 {
				db.volatile++
			}
		}
		db.count += n
	}
}

// value reads a value of type t, checking every invariant the commands rely on.
func (d *decoder) value(t valueType) object {
	v := object{typ: t}
	switch t {
	case typeString:
		v.str = d.str()
	case typeHash:
		v.str, v.coll = d.hash()
	case typeList:
		n := d.count(math.MaxInt64, "list length")
		l := &list{}
		for i := 0; i < n && d.err == nil; i++ {
			l.pushBack(d.str())
		}
		if l.len() == 0 {
			d.fail("empty list")
		}
		v.coll = l
	case typeSet:
		intset := d.byte() == 1
		st := &set{m: make(map[string]struct{}), intset: intset}
		prev := ""
		for n, i := d.count(math.MaxInt64, "set size"), 0; i < n && d.err == nil; i++ {
			m := d.str()
			if i > 0 && m <= prev {
				d.fail("set member %q out of order", m)
			}
			prev = m
			st.m[m] = struct{}{}
		}
		if len(st.m) == 0 {
			d.fail("empty set")
		}
		v.coll = st
	case typeZSet:
		z := newZSet(nil)
		z.big = d.byte() == 1
		var prevScore float64
		prev := ""
		for n, i := d.count(math.MaxInt64, "sorted set size"), 0; i < n && d.err == nil; i++ {
			m := d.str()
			score := math.Float64frombits(d.uint64le())
			if math.IsNaN(score) || (i > 0 && !before(prevScore, prev, score, m)) {
				d.fail("sorted set member %q out of order", m)
			}
			prev, prevScore = m, score
			if d.err == nil {
				z.dict[m] = score
				z.insert(score, m)
			}
		}
		if z.length == 0 {
			d.fail("empty sorted set")
		}
		v.coll = z
	default:
		d.fail("unknown type %d", t)
	}
	return v
}

// hash reads a hash's value: a packed string (checked entry by entry) or a map.
func (d *decoder) hash() (string, any) {
	switch d.byte() {
	case 0:
		p := d.str()
		n := 0
		for off := 0; off < len(p) && d.err == nil; n++ {
			for part := 0; part < 2; part++ {
				if off >= len(p) || int(p[off]) > maxPackedValue || off+1+int(p[off]) > len(p) {
					d.fail("malformed packed hash")
					return "", nil
				}
				off += 1 + int(p[off])
			}
		}
		if n == 0 || n > maxPackedEntries {
			d.fail("packed hash of %d fields", n)
		}
		return p, nil
	case 1:
		m := make(map[string]string)
		prev := ""
		for n, i := d.count(math.MaxInt64, "hash size"), 0; i < n && d.err == nil; i++ {
			f, v := d.str(), d.str()
			if i > 0 && f <= prev {
				d.fail("hash field %q out of order", f)
			}
			prev = f
			m[f] = v
		}
		if len(m) == 0 {
			d.fail("empty hash")
		}
		return "", m
	}
	d.fail("unknown hash form")
	return "", nil
}

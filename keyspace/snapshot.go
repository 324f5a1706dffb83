package keyspace

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"slices"
	"sort"
	"strings"
)

// Snapshot encoding, version 2. Everything is in a fixed order so that the same
// state always gives the same bytes:
//
//	"LSKS" version:byte meta:str
//	n:uvarint, then n times (slot-delta:uvarint count:uvarint)   non-zero WATCH versions
//	for each non-empty database: db+1:uvarint, then for each non-empty shard,
//	  in order: shard+1:uvarint keys:uvarint, then each key in the order of
//	  its hash, then of its bytes: key:str deadline:uvarint type:byte value;
//	  0:uvarint                                                  end of the database
//	0:uvarint                                                    end of databases
//
// str is a uvarint length and the bytes. Values: a string is a str; a hash is
// form:byte (0 packed: str; 1 map: n, then field:str value:str in field order);
// a list is n then str items; a set is intset:byte n then str members in byte
// order; a sorted set is big:byte n then member:str score:float64-bits in rank order.
//
// The bytes go in frames of at most snapshotFrame bytes, each after its
// length and CRC-32C (little-endian uint32s); a frame of length 0 ends the
// snapshot. A reader checks each frame before it decodes a byte of it.
const (
	snapshotMagic   = "LSKS"
	snapshotVersion = 2
	snapshotFrame   = 64 << 10
	frameHeader     = 8
	// maxSnapshotMeta bounds the caller's bytes read from a snapshot.
	maxSnapshotMeta = 1 << 30
)

// maxSnapshotString bounds one string read from a snapshot: the largest value
// a command can build.
const maxSnapshotString = maxStringLength

// errCorruptSnapshot is wrapped by every error ReadSnapshot returns for input
// that is not a snapshot this version wrote.
var errCorruptSnapshot = errors.New("corrupt keyspace snapshot")

var crc32c = crc32.MakeTable(crc32.Castagnoli)

// encoder writes the snapshot encoding in checksummed frames.
type encoder struct {
	w   io.Writer
	buf []byte // the frame being filled, after room for its header
	err error
}

func newEncoder(w io.Writer) *encoder {
	return &encoder{w: w, buf: make([]byte, frameHeader, frameHeader+snapshotFrame+binary.MaxVarintLen64)}
}

// flush writes the frame being filled, if it holds anything, and with end
// the empty frame that ends the snapshot.
func (e *encoder) flush(end bool) {
	if len(e.buf) > frameHeader {
		e.frame()
	}
	if end {
		e.frame()
	}
}

// frame writes e.buf's bytes as one frame; after a write failed, it drops
// them, so that the frame never grows past its size (str fills it to that).
func (e *encoder) frame() {
	if e.err == nil {
		body := e.buf[frameHeader:]
		binary.LittleEndian.PutUint32(e.buf, uint32(len(body)))
		binary.LittleEndian.PutUint32(e.buf[4:], crc32.Checksum(body, crc32c))
		_, e.err = e.w.Write(e.buf)
	}
	e.buf = e.buf[:frameHeader]
}

// full flushes the frame once it has reached its size.
func (e *encoder) full() {
	if len(e.buf) >= frameHeader+snapshotFrame {
		e.flush(false)
	}
}

func (e *encoder) byte(b byte) {
	e.buf = append(e.buf, b)
	e.full()
}

func (e *encoder) uvarint(v uint64) {
	e.buf = binary.AppendUvarint(e.buf, v)
	e.full()
}

func (e *encoder) str(s string) {
	e.uvarint(uint64(len(s)))
	for len(s) > 0 {
		n := min(len(s), frameHeader+snapshotFrame-len(e.buf))
		e.buf = append(e.buf, s[:n]...)
		s = s[n:]
		e.full()
	}
}

func (e *encoder) uint64le(v uint64) {
	e.buf = binary.LittleEndian.AppendUint64(e.buf, v)
	e.full()
}

func boolByte(b bool) byte {
	if b {
		return 1
	}
	return 0
}

// Frozen is a Store's state at one moment, taken by Freeze in constant time
// (a copy of the shards' headers of each non-empty database, 112 kB, and of
// the WATCH counters), to be written by WriteSnapshot beside later commands:
// they copy a shard (its map and chunk pointers), a map of its keys, a chunk
// of its objects or an object's value before changing one that Frozen holds
// (see Store.writable, Store.slot and Store.own), so that the store pays for
// a snapshot a few dozen keys and objects at a time, and only for what
// changes while it is written.
type Frozen struct {
	versions []uint64
	dbs      [NumDBs]*[numShards]shard // nil for an empty database
}

// frozenKey is a key of a shard being written, with its hash for the order.
type frozenKey struct {
	h   uint64
	key string
	obj *object
}

// Freeze returns the state as it is now. Later changes to s do not show in it.
// The owner calls Release once the view is written, under the same
// serialisation as every other call.
func (s *Store) Freeze() *Frozen {
	f := &Frozen{versions: slices.Clone(s.versions[:])}
	for i := range s.dbs {
		d := &s.dbs[i]
		if d.count == 0 {
			continue
		}
		shards := *d.shards
		f.dbs[i] = &shards
	}
	s.frozen = s.gen
	s.gen++
	s.views++
	return f
}

// Release tells s that a view Freeze returned is no longer read: once no view
// is, nothing is copied before it changes.
func (s *Store) Release(*Frozen) {
	if s.views--; s.views == 0 {
		s.frozen = 0
	}
}

// WriteSnapshot writes every database, every type, the deadlines, the WATCH
// version counters and meta, the caller's own bytes, to w, in a compact
// versioned encoding that depends only on the state, so that equal states
// give equal bytes. It sorts one map of a shard's keys at a time, never the
// whole keyspace: the maps of a shard are in the order of their keys' hashes.
func (f *Frozen) WriteSnapshot(w io.Writer, meta []byte) error {
	e := newEncoder(w)
	e.buf = append(e.buf, snapshotMagic...)
	e.byte(snapshotVersion)
	e.str(string(meta))
	nonZero := 0
	for _, v := range f.versions {
		if v != 0 {
			nonZero++
		}
	}
	e.uvarint(uint64(nonZero))
	last := -1
	for i, v := range f.versions {
		if v != 0 {
			e.uvarint(uint64(i - last))
			e.uvarint(v)
			last = i
		}
	}
	var keys []frozenKey
	for i, shards := range f.dbs {
		if shards == nil {
			continue
		}
		e.uvarint(uint64(i + 1))
		for j, sh := range shards {
			n := 0
			for _, sm := range sh.subs {
				n += len(sm.m)
			}
			if n == 0 {
				continue
			}
			e.uvarint(uint64(j + 1))
			e.uvarint(uint64(n))
			for _, sm := range sh.subs {
				keys = keys[:0]
				for k, x := range sm.m {
					keys = append(keys, frozenKey{h: hashKey(k), key: k, obj: sh.obj(x)})
				}
				slices.SortFunc(keys, func(a, b frozenKey) int {
					if a.h != b.h {
						return cmp.Compare(a.h, b.h)
					}
					return strings.Compare(a.key, b.key)
				})
				for _, k := range keys {
					e.str(k.key)
					e.uvarint(uint64(k.obj.deadline))
					e.byte(byte(k.obj.typ))
					e.value(k.obj)
				}
			}
			if e.err != nil {
				break
			}
		}
		e.uvarint(0)
	}
	e.uvarint(0)
	e.flush(true)
	if e.err != nil {
		return fmt.Errorf("write keyspace snapshot: %w", e.err)
	}
	return nil
}

// value writes the value of o.
func (e *encoder) value(o *object) {
	switch o.typ {
	case typeString:
		e.str(o.str)
	case typeHash:
		m := o.hashMap()
		if m == nil {
			e.byte(0)
			e.str(o.str)
			return
		}
		e.byte(1)
		e.uvarint(uint64(len(m)))
		o.hashEach(func(f, v string) {
			e.str(f)
			e.str(v)
		})
	case typeList:
		items := o.asList().items()
		e.uvarint(uint64(len(items)))
		for _, it := range items {
			e.str(it)
		}
	case typeSet:
		st := o.asSet()
		members := make([]string, 0, len(st.m))
		for m := range st.m {
			members = append(members, m)
		}
		sort.Strings(members)
		e.byte(boolByte(st.intset))
		e.uvarint(uint64(len(members)))
		for _, m := range members {
			e.str(m)
		}
	case typeZSet:
		z := o.asZSet()
		e.byte(boolByte(z.big))
		e.uvarint(uint64(z.length))
		for x := z.head.level[0].forward; x != nil; x = x.level[0].forward {
			e.str(x.member)
			e.uint64le(math.Float64bits(x.score))
		}
	}
}

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

package keyspace

import (
	"bufio"
	"bytes"
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

// Snapshot encoding, version 1. Everything is in a fixed order so that the same
// state always gives the same bytes:
//
//	"LSKS" version:byte
//	n:uvarint, then n times (slot-delta:uvarint count:uvarint)   non-zero WATCH versions
//	for each non-empty database: db+1:uvarint keys:uvarint, then each key in
//	  byte order: key:str deadline:uvarint type:byte value
//	0:uvarint                                                    end of databases
//	crc32(IEEE) of all the bytes before it, little-endian
//
// str is a uvarint length and the bytes. Values: a string is a str; a hash is
// form:byte (0 packed: str; 1 map: n, then field:str value:str in field order);
// a list is n then str items; a set is intset:byte n then str members in byte
// order; a sorted set is big:byte n then member:str score:float64-bits in rank order.
const (
	snapshotMagic   = "LSKS"
	snapshotVersion = 1
)

// maxSnapshotString bounds one string read from a snapshot: the largest value
// a command can build.
const maxSnapshotString = maxStringLength

// ErrCorruptSnapshot is wrapped by every error ReadSnapshot returns for input
// that is not a snapshot this version wrote.
var ErrCorruptSnapshot = errors.New("corrupt keyspace snapshot")

// encoder writes the snapshot encoding and keeps its checksum.
type encoder struct {
	w   *bufio.Writer
	crc uint32
	buf [binary.MaxVarintLen64]byte
}

func (e *encoder) write(b []byte) {
	e.crc = crc32.Update(e.crc, crc32.IEEETable, b)
	e.w.Write(b) // bufio keeps the first error; Flush reports it
}

func (e *encoder) byte(b byte) { e.write([]byte{b}) }

func (e *encoder) uvarint(v uint64) { e.write(binary.AppendUvarint(e.buf[:0], v)) }

func (e *encoder) str(s string) {
	e.uvarint(uint64(len(s)))
	e.crc = crc32.Update(e.crc, crc32.IEEETable, []byte(s))
	e.w.WriteString(s)
}

func boolByte(b bool) byte {
	if b {
		return 1
	}
	return 0
}

// Frozen is a Store's state at one moment. Freeze takes it under the owner's
// lock; WriteSnapshot writes it afterwards, outside that lock. Taking it copies
// the key table and every mutable collection but shares the strings, which are
// immutable, so that the store stalls for a copy and not for the sort and the
// encoding: at 1M keys 0.3-0.6 s instead of 1.8 s here (BenchmarkSnapshotPause).
type Frozen struct {
	versions []uint64
	dbs      [NumDBs][]frozenKey
}

type frozenKey struct {
	key string
	obj object
}

// Freeze returns the state as it is now. Later changes to s do not show in it.
func (s *Store) Freeze() *Frozen {
	f := &Frozen{versions: slices.Clone(s.versions[:])}
	for i := range s.dbs {
		d := &s.dbs[i]
		if d.count == 0 {
			continue
		}
		keys := make([]frozenKey, 0, d.count)
		for _, shard := range d.shards {
			for k, o := range shard {
				keys = append(keys, frozenKey{key: k, obj: o.clone()})
			}
		}
		f.dbs[i] = keys
	}
	return f
}

// WriteSnapshot writes every database, every type, the deadlines and the WATCH
// version counters to w, in a compact versioned encoding that depends only on
// the state (keys in byte order), so that equal states give equal bytes.
func (f *Frozen) WriteSnapshot(w io.Writer) error {
	e := &encoder{w: bufio.NewWriterSize(w, 64<<10)}
	e.write([]byte(snapshotMagic))
	e.byte(snapshotVersion)
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
	for i, keys := range f.dbs {
		if len(keys) == 0 {
			continue
		}
		slices.SortFunc(keys, func(a, b frozenKey) int { return strings.Compare(a.key, b.key) })
		e.uvarint(uint64(i + 1))
		e.uvarint(uint64(len(keys)))
		for j := range keys {
			k := &keys[j]
			e.str(k.key)
			e.uvarint(uint64(k.obj.deadline))
			e.byte(byte(k.obj.typ))
			e.value(&k.obj)
		}
	}
	e.uvarint(0)
	var sum [4]byte
	binary.LittleEndian.PutUint32(sum[:], e.crc)
	e.w.Write(sum[:])
	if err := e.w.Flush(); err != nil {
		return fmt.Errorf("write keyspace snapshot: %w", err)
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
			var b [8]byte
			binary.LittleEndian.PutUint64(b[:], math.Float64bits(x.score))
			e.write(b[:])
		}
	}
}

// decoder reads the snapshot encoding, checking it as it goes.
type decoder struct {
	r       *bufio.Reader
	crc     uint32
	err     error
	scratch [4096]byte
}

// fail records the first error.
func (d *decoder) fail(format string, args ...any) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: %s", ErrCorruptSnapshot, fmt.Sprintf(format, args...))
	}
}

// read returns the next n bytes, valid until the next read; nil after an error.
func (d *decoder) read(n int) []byte {
	if d.err != nil {
		return nil
	}
	var b []byte
	if n <= len(d.scratch) {
		b = d.scratch[:n]
		if _, err := io.ReadFull(d.r, b); err != nil {
			d.fail("truncated: %v", err)
			return nil
		}
	} else {
		// CopyN grows the buffer as bytes arrive, so a corrupt length fails at
		// the end of the input instead of allocating what it claims.
		var buf bytes.Buffer
		if _, err := io.CopyN(&buf, d.r, int64(n)); err != nil {
			d.fail("truncated: %v", err)
			return nil
		}
		b = buf.Bytes()
	}
	d.crc = crc32.Update(d.crc, crc32.IEEETable, b)
	return b
}

func (d *decoder) byte() byte {
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
// WriteSnapshot. On any error (corrupt, truncated, or an unknown version) it
// returns an error wrapping ErrCorruptSnapshot or the reader's error, and the
// keyspace is left as it was.
func (s *Store) ReadSnapshot(r io.Reader) error {
	d := &decoder{r: bufio.NewReaderSize(r, 64<<10)}
	if magic := d.read(len(snapshotMagic)); d.err == nil && string(magic) != snapshotMagic {
		d.fail("bad magic %q", magic)
	}
	if v := d.byte(); d.err == nil && v != snapshotVersion {
		d.fail("unknown version %d", v)
	}
	next := New()
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
		call := Call{Store: next, DB: dbPlus1 - 1}
		prev := ""
		for n, i := d.count(math.MaxInt64, "key count"), 0; i < n && d.err == nil; i++ {
			key := d.str()
			if i > 0 && key <= prev {
				d.fail("key %q out of order", key)
				break
			}
			prev = key
			deadline := d.uvarint()
			if deadline > math.MaxInt64 {
				d.fail("deadline of %q out of range", key)
			}
			v := d.value(valueType(d.byte()))
			v.deadline = int64(deadline)
			if d.err == nil {
				call.put([]byte(key), v)
			}
		}
	}
	var sum [4]byte
	if d.err == nil {
		want := d.crc
		if _, err := io.ReadFull(d.r, sum[:]); err != nil {
			d.fail("truncated checksum: %v", err)
		} else if binary.LittleEndian.Uint32(sum[:]) != want {
			d.fail("checksum mismatch")
		}
	}
	if d.err != nil {
		return fmt.Errorf("read keyspace snapshot: %w", d.err)
	}
	copy(next.versions[:], versions)
	*s = *next
	return nil
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

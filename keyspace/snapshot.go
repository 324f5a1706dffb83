package keyspace

import (
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

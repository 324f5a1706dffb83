package keyspace

import (
	"strings"
	"unsafe"
)

// MEMORY USAGE estimates what a key costs this server; MEMORY DOCTOR, MEMORY
// HELP and MEMORY PURGE (a full garbage collection, which returns what it
// frees to the OS) are served by the server. Redis's other subcommands
// (STATS, MALLOC-STATS) report on its allocator and have no rows: they get
// Redis's unknown-subcommand error. Arities and flags are Redis 7.0's.
func init() {
	addRows(
		&Command{Name: "memory", Arity: -2, Run: runSubcommand, Subcommands: subcommands("memory",
			&Command{Name: "doctor", Arity: 2, Layer: ServerLayer},
			&Command{Name: "help", Arity: 2, Layer: ServerLayer},
			&Command{Name: "purge", Arity: 2, Layer: ServerLayer},
			&Command{Name: "usage", Arity: -3, Flags: ReadOnly, FirstKey: 2, LastKey: 2, KeyStep: 1, Run: cmdMemoryUsage},
		)},
	)
}

// MEMORY USAGE key [SAMPLES count]: the estimated bytes of the key, or null
// when it is missing or expired. Redis estimates a collection from count of
// its elements; this estimate always counts every element, since picking
// some out of a Go map would change the reply from call to call and from
// node to node, and the values a lock server holds are small. SAMPLES is
// checked as Redis checks it, before the key is looked up.
func cmdMemoryUsage(c *Call) Reply {
	for i := 3; i < len(c.Args); i += 2 {
		if !strings.EqualFold(string(c.Args[i]), "samples") || i+1 == len(c.Args) {
			return ErrSyntax
		}
		n, ok := ParseInt(c.Args[i+1])
		if !ok {
			return ErrNotInteger
		}
		if n < 0 {
			return ErrSyntax
		}
	}
	o := c.lookup(c.Args[2])
	if o == nil {
		return Null
	}
	c.Work += o.elements()
	return Int(usage(len(c.Args[2]), o))
}

// The sizes the estimate is made of. The Go types' sizes come from the
// compiler, so that the estimate follows any change to them.
const (
	strHeader  = int64(unsafe.Sizeof(""))
	objectSize = int64(unsafe.Sizeof(object{}))
	// keySlot is a slot of a shard's maps: a key and its object's index.
	keySlot = int64(unsafe.Sizeof(struct {
		key   string
		index uint32
	}{}))
	// mapHeader is about what the runtime allocates for a Go map beside its
	// slots: the map's header, its directory and its table's header.
	mapHeader = 96
	// zslLevels is the mean number of levels of a skip list node, given
	// P(level > n) = 4^-n: 1 + 1/4 + 1/16 + ... = 4/3.
	zslLevelsNum, zslLevelsDen = 4, 3
)

// mapEntry is what one entry costs a Go map whose key and value take slot
// bytes: the slot and its control byte, over the table's mean load (a
// table doubles when 7/8 full, so it is between 7/16 and 7/8 full).
func mapEntry(slot int64) int64 { return (slot + 1) * 3 / 2 }

// usage estimates the bytes a key of keyLen bytes holding o costs: its entry
// in the database's map, its name, its object, and its value with the
// overhead of each element. It depends on the value only, not on how it was
// built (no capacity of a slice or map), so that every node, whatever its
// history, gives a script the same figure.
func usage(keyLen int, o *object) int64 {
	n := mapEntry(keySlot) + int64(keyLen) + objectSize
	switch o.typ {
	case typeString:
		n += int64(len(o.str))
	case typeHash:
		m := o.hashMap()
		if m == nil {
			return n + int64(len(o.str)) // packed: one string
		}
		n += mapHeader + int64(len(m))*mapEntry(2*strHeader)
		for f, v := range m {
			n += int64(len(f) + len(v))
		}
	case typeList:
		l := o.asList()
		n += int64(unsafe.Sizeof(*l)) + int64(l.len())*strHeader
		for _, s := range l.items() {
			n += int64(len(s))
		}
	case typeSet:
		s := o.asSet()
		n += int64(unsafe.Sizeof(*s)) + mapHeader + int64(len(s.m))*mapEntry(strHeader)
		for m := range s.m {
			n += int64(len(m))
		}
	case typeZSet:
		z := o.asZSet()
		node := int64(unsafe.Sizeof(zslNode{}))
		level := int64(unsafe.Sizeof(zslLevel{}))
		score := int64(unsafe.Sizeof(float64(0)))
		n += int64(unsafe.Sizeof(*z)) + node + zslMaxLevel*level // the head
		n += mapHeader + int64(len(z.dict))*(mapEntry(strHeader+score)+node+level*zslLevelsNum/zslLevelsDen)
		for m := range z.dict {
			n += int64(len(m)) // shared by the map and the node
		}
	}
	return n
}

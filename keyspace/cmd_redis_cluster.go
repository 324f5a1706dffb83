package keyspace

import (
	"slices"
	"strings"
)

// CLUSTER, READONLY, READWRITE and ASKING present a deployment to Redis
// Cluster clients as a cluster of one shard that owns every slot (server's
// cluster.go serves them). Arities and flags are Redis 7.0's. The
// subcommands that change a Redis Cluster's layout (ADDSLOTS, MEET,
// REPLICATE, SETSLOT, FAILOVER, ...) have no rows: the layout follows the
// Raft membership, and they get Redis's unknown-subcommand error.
// COUNTKEYSINSLOT and GETKEYSINSLOT read the keyspace, so they run here, in
// the engine; the others describe the layout and run in the server.
func init() {
	addRows(
		&Command{Name: "cluster", Arity: -2, Run: runSubcommand, Subcommands: subcommands("cluster",
			&Command{Name: "countkeysinslot", Arity: 3, Run: cmdClusterCountKeysInSlot},
			&Command{Name: "getkeysinslot", Arity: 4, Run: cmdClusterGetKeysInSlot},
			&Command{Name: "help", Arity: 2, Layer: ServerLayer},
			&Command{Name: "info", Arity: 2, Layer: ServerLayer},
			&Command{Name: "keyslot", Arity: 3, Layer: ServerLayer},
			&Command{Name: "myid", Arity: 2, Layer: ServerLayer},
			&Command{Name: "nodes", Arity: 2, Layer: ServerLayer},
			&Command{Name: "shards", Arity: 2, Layer: ServerLayer},
			&Command{Name: "slots", Arity: 2, Layer: ServerLayer},
		)},
	)
	addRows(runBy(ServerLayer,
		&Command{Name: "readonly", Arity: 1, Flags: Connection | Fast},
		&Command{Name: "readwrite", Arity: 1, Flags: Connection | Fast},
		&Command{Name: "asking", Arity: 1, Flags: Connection | Fast},
	)...)
}

// ClusterSlots is the number of hash slots of a Redis Cluster.
const ClusterSlots = 16384

// crc16Table holds the CRC-16/XMODEM remainder of each byte value, so that
// hashing a key costs one lookup per byte: COUNTKEYSINSLOT hashes every key.
var crc16Table = func() (t [256]uint16) {
	for b := range t {
		crc := uint16(b) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
		t[b] = crc
	}
	return t
}()

// crc16 is the CRC-16/XMODEM checksum (polynomial 0x1021, initial value 0)
// that Redis Cluster hashes keys with.
func crc16(b string) uint16 {
	var crc uint16
	for i := range len(b) {
		crc = crc<<8 ^ crc16Table[byte(crc>>8)^b[i]]
	}
	return crc
}

// KeySlot is the hash slot of a key as Redis's keyHashSlot computes it: if
// the key has a '{' followed later by a '}' with at least one byte between
// them, only the bytes between the first '{' and the first '}' after it are
// hashed (the hash tag); otherwise the whole key is.
func KeySlot(key string) int {
	if open := strings.IndexByte(key, '{'); open >= 0 {
		if n := strings.IndexByte(key[open+1:], '}'); n > 0 {
			key = key[open+1 : open+1+n]
		}
	}
	return int(crc16(key)) & (ClusterSlots - 1)
}

// errInvalidSlot is COUNTKEYSINSLOT's reply to a slot out of range.
var errInvalidSlot = Error("ERR Invalid slot")

// forKeysInSlot calls fn with each live key of database 0 that hashes to
// slot. A node answers as a Redis Cluster node, whose only database is 0,
// whatever database the connection selected.
//
// It looks at every key of the database. Redis keeps a list of each slot's
// keys, but an index here would cost every key memory (a key's object is 41
// bytes in the allocator's 48-byte class: one more pointer moves it to the
// 64-byte one), and the memory of a held lock is what this server is
// measured by, while no lock client asks for the keys of a slot. A count per
// slot would not do either: expired keys stay in the maps until swept, and
// must not be counted.
func forKeysInSlot(c *Call, slot int, fn func(key string)) {
	d := &c.Store.dbs[0]
	c.Work += int64(d.count)
	for k, o := range d.all() {
		if live(o.deadline, c.Now) && KeySlot(k) == slot {
			fn(k)
		}
	}
}

// CLUSTER COUNTKEYSINSLOT slot. Unlike Redis, which counts a slot's expired
// keys until they are reclaimed, it counts live keys only, as every other
// read sees them.
func cmdClusterCountKeysInSlot(c *Call) Reply {
	slot, ok := ParseInt(c.Args[2])
	if !ok {
		return ErrNotInteger
	}
	if slot < 0 || slot >= ClusterSlots {
		return errInvalidSlot
	}
	n := int64(0)
	forKeysInSlot(c, int(slot), func(string) { n++ })
	return Int(n)
}

// CLUSTER GETKEYSINSLOT slot count: up to count live keys of the slot, in
// byte order. Redis lists a slot's keys newest first, an order that only a
// per-key index could keep (see forKeysInSlot); byte order is deterministic,
// so every node and every script sees the same keys.
func cmdClusterGetKeysInSlot(c *Call) Reply {
	slot, ok := ParseInt(c.Args[2])
	if !ok {
		return ErrNotInteger
	}
	count, ok := ParseInt(c.Args[3])
	if !ok {
		return ErrNotInteger
	}
	if slot < 0 || slot >= ClusterSlots || count < 0 {
		return Error("ERR Invalid slot or number of keys")
	}
	var keys []string
	forKeysInSlot(c, int(slot), func(k string) { keys = append(keys, k) })
	slices.Sort(keys)
	keys = keys[:min(int64(len(keys)), count)]
	replies := make([]Reply, len(keys))
	for i, k := range keys {
		replies[i] = Bulk(k)
	}
	return Array(replies...)
}

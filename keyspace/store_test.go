package keyspace

import (
	"runtime"
	"strconv"
	"strings"
	"testing"
)

// A key's object stays in its shard's chunks after the key is gone, for a
// new key to reuse: it must hold nothing then, or the collector keeps the
// removed value. 16 MB of values, deleted or swept, leave the heap.
func TestRemovedKeysLeaveNothingBehind(t *testing.T) {
	const keys, size = 2000, 8 << 10
	f := newFixture(t)
	before := heapInUse()
	value := strings.Repeat("v", size)
	for i := range keys {
		if i%2 == 0 {
			f.doArgs("SET", "k"+strconv.Itoa(i), value)
		} else {
			f.doArgs("SET", "k"+strconv.Itoa(i), value, "PX", "1")
		}
	}
	if grew := heapInUse() - before; grew < keys*size {
		t.Fatalf("the heap grew by %d bytes for %d bytes of values", grew, keys*size)
	}
	for i := 0; i < keys; i += 2 {
		f.do("DEL k" + strconv.Itoa(i))
	}
	if n := f.s.Sweep(0, 0, NumShards, f.now+2); n != keys/2 {
		t.Fatalf("the sweep removed %d keys, want %d", n, keys/2)
	}
	left := int64(heapInUse()) - int64(before)
	runtime.KeepAlive(f.s)
	if left > keys*size/8 {
		t.Errorf("%d bytes are left of %d bytes of removed values", left, keys*size)
	}
}

// New keys take the places removed keys left in their shards' chunks: after
// 50,000 keys are deleted and 50,000 others made, the shards have made
// places for about 50,000 objects, not 100,000.
func TestRemovedKeysPlacesReused(t *testing.T) {
	const keys = 50_000
	f := newFixture(t)
	for i := range keys {
		f.do("SET a" + strconv.Itoa(i) + " v")
	}
	for i := range keys {
		f.do("DEL a" + strconv.Itoa(i))
	}
	for i := range keys {
		f.do("SET b" + strconv.Itoa(i) + " v")
	}
	made := 0
	for i := range f.s.dbs[0].shards {
		made += int(f.s.dbs[0].shards[i].used)
	}
	// Each shard makes as many places as the most keys it held at once,
	// which the second 50,000 exceed in some shards.
	if made < keys || made > keys*5/4 {
		t.Errorf("the shards made places for %d objects, for %d keys at most at once", made, keys)
	}
}

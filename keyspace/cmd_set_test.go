package keyspace

import (
	"strconv"
	"testing"
)

func TestSetCommands(t *testing.T) {
	f := newFixture(t)
	f.expect(
		"SADD n 10 2 -3 2", ":3",
		"SMEMBERS n", `~["-3" "2" "10"]`, // an intset: numeric order
		"SADD s b a c", ":3",
		"SMEMBERS s", `~["a" "b" "c"]`,
		"SISMEMBER s a", ":1",
		"SMISMEMBER s a z", "[:1 :0]",
		"SCARD s", ":3",
		"SADD t c d", ":2",
		"SINTER s t", `~["c"]`,
		"SUNION s t", `~["a" "b" "c" "d"]`,
		"SDIFF s t", `~["a" "b"]`,
		"SINTER s nope", "~[]",
		"SREM s a b c", ":3",
		"EXISTS s", ":0",
		"SSCAN n 0", `["0" ["-3" "2" "10"]]`,
	)
}

func TestSetIntsetForm(t *testing.T) {
	f := newFixture(t)
	for i := 512; i > 0; i-- {
		f.do("SADD s " + strconv.Itoa(i))
	}
	if !f.s.dbs[0].shards[hashKey("s")>>shardShift]["s"].asSet().intset {
		t.Fatal("512 integers left the intset form")
	}
	f.do("SADD s 513")
	if f.s.dbs[0].shards[hashKey("s")>>shardShift]["s"].asSet().intset {
		t.Fatal("513 integers kept the intset form")
	}
	f.expect("SADD u 1 x", ":2", "SMEMBERS u", `~["1" "x"]`)
}

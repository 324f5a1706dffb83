package keyspace

import (
	"math/rand"
	"sort"
	"strconv"
	"testing"
)

func TestZSetCommands(t *testing.T) {
	f := newFixture(t)
	f.expect(
		"ZADD z 1 a 2 b 3 c", ":3",
		"ZADD z XX CH 5 a 9 new", ":1",
		"ZADD z NX 0 a 4 d", ":1",
		"ZRANGE z 0 -1 WITHSCORES", `pairs["b" ,2 "c" ,3 "d" ,4 "a" ,5]`,
		"ZINCRBY z 0.1 b", ",2.1000000000000001", // %.17g of 2.1
		"ZSCORE z nope", "(nil)",
		"ZADD z INCR inf a", ",inf",
		"ZADD z INCR -inf a", "-ERR resulting score is not a number (NaN)",
		"ZRANK z c", ":1",
		"ZREVRANK z c", ":2",
		"ZCOUNT z (2.1 4", ":2",
		"ZRANGEBYSCORE z -inf +inf LIMIT 1 2", `["c" "d"]`,
		"ZREVRANGEBYSCORE z +inf (3", `["a" "d"]`,
		"ZRANGE z 0 1 REV", `["a" "d"]`,
		"ZRANGE z [a [c BYLEX", `["b" "c"]`, // members are compared whatever their scores
		"ZRANGE z 0 -1 LIMIT 0 1", "-ERR syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX",
		"ZRANGEBYSCORE z x 1", "-ERR min or max is not a float",
		"ZRANGEBYLEX z a b", "-ERR min or max not valid string range item",
		"ZPOPMIN z", `["b" ,2.1000000000000001]`,
		"ZPOPMAX z 2", `pairs["a" ,inf "d" ,4]`,
		"ZREMRANGEBYSCORE z 3 3", ":1",
		"EXISTS z", ":0",
		"ZADD z XX 1 a", ":0",
		"EXISTS z", ":0",
		"ZADD z GT LT 1 a", "-ERR GT, LT, and/or NX options at the same time are not compatible",
	)
}

// TestZSetSkipListRanks checks ranks and rank lookups against a sorted slice
// through random inserts, updates and removals.
func TestZSetSkipListRanks(t *testing.T) {
	r := rand.New(rand.NewSource(7))
	z := newZSet(nil)
	model := map[string]float64{}
	for i := 0; i < 3000; i++ {
		m := "m" + strconv.Itoa(r.Intn(500))
		if r.Intn(4) == 0 {
			if z.remove(m) != hasKey(model, m) {
				t.Fatalf("remove(%s) disagreed with the model", m)
			}
			delete(model, m)
			continue
		}
		s := float64(r.Intn(50))
		z.set(m, s)
		model[m] = s
	}
	type entry struct {
		m string
		s float64
	}
	var sorted []entry
	for m, s := range model {
		sorted = append(sorted, entry{m, s})
	}
	sort.Slice(sorted, func(i, j int) bool { return before(sorted[i].s, sorted[i].m, sorted[j].s, sorted[j].m) })
	if z.length != len(sorted) {
		t.Fatalf("length %d, want %d", z.length, len(sorted))
	}
	for i, e := range sorted {
		if got := z.rank(e.m); got != i {
			t.Fatalf("rank(%s) = %d, want %d", e.m, got, i)
		}
		if x := z.byRank(i); x.member != e.m || x.score != e.s {
			t.Fatalf("byRank(%d) = %s, want %s", i, x.member, e.m)
		}
	}
	if z.tail == nil || z.tail.member != sorted[len(sorted)-1].m {
		t.Fatal("tail is not the last member")
	}
}

func hasKey(m map[string]float64, k string) bool {
	_, ok := m[k]
	return ok
}

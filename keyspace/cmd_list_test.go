package keyspace

import (
	"strconv"
	"testing"
)

func TestListCommands(t *testing.T) {
	f := newFixture(t)
	f.expect(
		"RPUSH l b c", ":2",
		"LPUSH l a z", ":4", // z then a pushed at the head: z a b c... reversed
		"LRANGE l 0 -1", `["z" "a" "b" "c"]`,
		"LINDEX l -1", `"c"`,
		"LPOP l", `"z"`,
		"RPOP l 2", `["c" "b"]`,
		"RPUSHX nope x", ":0",
		"LPUSHX l y", ":2",
		"LINSERT l AFTER y q", ":3",
		"LINSERT l BEFORE nope q", ":-1",
		"LRANGE l 0 -1", `["y" "q" "a"]`,
		"LSET l 1 Q", "+OK",
		"LSET l 5 Q", "-ERR index out of range",
		"RPUSH l a y a", ":6",
		"LREM l -2 a", ":2",
		"LRANGE l 0 -1", `["y" "Q" "a" "y"]`,
		"LPOS l y", ":0",
		"LPOS l y RANK -1", ":3",
		"LPOS l y COUNT 0", "[:0 :3]",
		"LTRIM l 1 2", "+OK",
		"LRANGE l 0 -1", `["Q" "a"]`,
		"LMOVE l d RIGHT LEFT", `"a"`,
		"RPOPLPUSH l d", `"Q"`,
		"EXISTS l", ":0",
		"LRANGE d 0 -1", `["Q" "a"]`,
		"LPOP d -1", "-ERR value is out of range, must be positive",
		"LPOP nope 1", "(nil-array)",
	)
}

// TestListDeque pushes and pops at both ends many times, checking against a
// plain slice model.
func TestListDeque(t *testing.T) {
	l := &list{}
	var model []string
	for i := 0; i < 5000; i++ {
		s := strconv.Itoa(i)
		switch i % 7 {
		case 0, 1:
			l.pushFront(s)
			model = append([]string{s}, model...)
		case 2, 3, 4:
			l.pushBack(s)
			model = append(model, s)
		case 5:
			if len(model) > 0 {
				if got := l.popFront(); got != model[0] {
					t.Fatalf("popFront = %s, want %s", got, model[0])
				}
				model = model[1:]
			}
		case 6:
			if len(model) > 0 {
				if got := l.popBack(); got != model[len(model)-1] {
					t.Fatalf("popBack = %s, want %s", got, model[len(model)-1])
				}
				model = model[:len(model)-1]
			}
		}
	}
	items := l.items()
	if len(items) != len(model) {
		t.Fatalf("len %d, want %d", len(items), len(model))
	}
	for i := range model {
		if items[i] != model[i] {
			t.Fatalf("item %d = %s, want %s", i, items[i], model[i])
		}
	}
}

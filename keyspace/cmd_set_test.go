package keyspace

import (
	"strconv"
	"strings"
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
	if !entry(&f.s.dbs[0], "s", hashKey("s")).asSet().intset {
		t.Fatal("512 integers left the intset form")
	}
	f.do("SADD s 513")
	if entry(&f.s.dbs[0], "s", hashKey("s")).asSet().intset {
		t.Fatal("513 integers kept the intset form")
	}
	f.expect("SADD u 1 x", ":2", "SMEMBERS u", `~["1" "x"]`)
}

// TestScanCollections checks HSCAN, SSCAN and ZSCAN over collections past
// their small forms: every element exactly once, with the right values.
func TestScanCollections(t *testing.T) {
	f := newFixture(t)
	for i := 0; i < 700; i++ {
		n := strconv.Itoa(i)
		f.do("HSET h f" + n + " v" + n)
		f.do("SADD s m" + n)
		f.do("ZADD z " + n + " m" + n)
	}
	for _, c := range []struct{ cmd, prefix, valuePrefix string }{
		{"HSCAN h", "f", "v"}, {"SSCAN s", "m", ""}, {"ZSCAN z", "m", ""},
	} {
		seen := map[string]int{}
		cursor := "0"
		for {
			r := f.s.Exec(&Call{Store: f.s, Now: f.now, Args: toArgs(strings.Fields(c.cmd + " " + cursor + " COUNT 50"))})
			cursor = r.Elems[0].Str
			elems := r.Elems[1].Elems
			step := 1
			if c.cmd != "SSCAN s" {
				step = 2
			}
			for i := 0; i < len(elems); i += step {
				name := elems[i].Str
				seen[name]++
				if step == 2 {
					want := strings.TrimPrefix(name, c.prefix) // ZSCAN's score is the number
					if c.valuePrefix != "" {
						want = c.valuePrefix + want
					}
					if elems[i+1].Str != want {
						t.Errorf("%s: %s has %s, want %s", c.cmd, name, elems[i+1].Str, want)
					}
				}
			}
			if cursor == "0" {
				break
			}
		}
		if len(seen) != 700 {
			t.Errorf("%s returned %d distinct elements, want 700", c.cmd, len(seen))
		}
		for name, n := range seen {
			if n != 1 {
				t.Errorf("%s returned %s %d times", c.cmd, name, n)
			}
		}
	}
}

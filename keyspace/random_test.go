package keyspace

import (
	"bytes"
	"math/rand"
	"strconv"
	"testing"
)

// TestRandomCommands runs many random commands with random arguments (keys,
// numbers, option words, junk): none may panic, the key counts must stay
// true, and the final state must survive a snapshot round trip.
func TestRandomCommands(t *testing.T) {
	r := rand.New(rand.NewSource(42))
	words := []string{"NX", "XX", "GT", "LT", "CH", "INCR", "EX", "PX", "EXAT", "PXAT", "KEEPTTL", "GET", "PERSIST",
		"WITHSCORES", "LIMIT", "REV", "BYSCORE", "BYLEX", "MATCH", "COUNT", "TYPE", "LEFT", "RIGHT", "BEFORE", "AFTER",
		"RANK", "MAXLEN", "REPLACE", "DB", "-inf", "+inf", "(1", "[a", "-", "+", "*", "k?", "[", "\\", "nan", "inf",
		"1e400", "0.5", "-1", "0", "1", "2", "3", "100", "-100", "9223372036854775807", "-9223372036854775808", "", "x"}
	var names []string
	for _, cmd := range Commands() {
		if cmd.Run != nil && cmd.Flags&(Connection|PubSub) == 0 && cmd.Name != "flushall" {
			names = append(names, cmd.Name)
		}
	}
	s := New()
	now := int64(1_700_000_000_000)
	for i := 0; i < 40000; i++ {
		args := [][]byte{[]byte(names[r.Intn(len(names))])}
		for n := r.Intn(7); n > 0; n-- {
			switch r.Intn(3) {
			case 0:
				args = append(args, []byte("k"+strconv.Itoa(r.Intn(8))))
			case 1:
				args = append(args, []byte(words[r.Intn(len(words))]))
			default:
				args = append(args, []byte(strconv.Itoa(r.Intn(2000)-1000)))
			}
		}
		c := &Call{Store: s, DB: r.Intn(2), Now: now, Args: args}
		func() {
			defer func() {
				if p := recover(); p != nil {
					t.Fatalf("%q panicked: %v", args, p)
				}
			}()
			s.Exec(c)
		}()
		now += int64(r.Intn(3))
		if i%1000 == 0 {
			s.Sweep(now, 10)
		}
	}
	for i := range s.dbs {
		d := &s.dbs[i]
		keys, volatile := 0, 0
		for _, shard := range d.shards {
			for _, o := range shard {
				keys++
				if o.deadline != 0 {
					volatile++
				}
				if o.typ != typeString && o.typ != typeHash && o.coll == nil {
					t.Errorf("db %d: a %s without its collection", i, o.typ.name())
				}
			}
		}
		if k, v := s.KeyCounts(i); k != keys || v != volatile {
			t.Errorf("db %d: KeyCounts %d, %d; counted %d, %d", i, k, v, keys, volatile)
		}
	}
	var a, b bytes.Buffer
	if err := s.Freeze().WriteSnapshot(&a); err != nil {
		t.Fatal(err)
	}
	restored := New()
	if err := restored.ReadSnapshot(bytes.NewReader(a.Bytes())); err != nil {
		t.Fatal(err)
	}
	if err := restored.Freeze().WriteSnapshot(&b); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a.Bytes(), b.Bytes()) {
		t.Error("the random state did not survive a snapshot round trip")
	}
}

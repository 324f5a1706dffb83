package keyspace

import (
	"bytes"
	"math/rand"
	"strconv"
	"testing"
)

// randomCall is one command of a random sequence, with the database and the
// time it runs at.
type randomCall struct {
	db   int
	now  int64
	args [][]byte
}

// randomCalls returns n random commands with random arguments (keys,
// numbers, option words, junk) over 8 keys in 2 databases, at a time that
// moves on by 0 to 2 ms a command.
func randomCalls(r *rand.Rand, n int) []randomCall {
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
	now := int64(1_700_000_000_000)
	calls := make([]randomCall, n)
	for i := range calls {
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
		calls[i] = randomCall{db: r.Intn(2), now: now, args: args}
		now += int64(r.Intn(3))
	}
	return calls
}

// run runs c on s; a panic fails the test.
func (c randomCall) run(t *testing.T, s *Store) {
	defer func() {
		if p := recover(); p != nil {
			t.Fatalf("%q panicked: %v", c.args, p)
		}
	}()
	s.Exec(&Call{Store: s, DB: c.db, Now: c.now, Args: c.args})
}

// TestRandomCommands runs many random commands: none may panic, the key
// counts must stay true, and the final state must survive a snapshot round
// trip.
func TestRandomCommands(t *testing.T) {
	r := rand.New(rand.NewSource(42))
	s := New()
	for i, c := range randomCalls(r, 40000) {
		c.run(t, s)
		if i%1000 == 0 {
			s.Sweep(r.Intn(2), r.Intn(numShards), 10, c.now)
		}
	}
	for i := range s.dbs {
		d := &s.dbs[i]
		keys, volatile := 0, 0
		for _, o := range d.all() {
			keys++
			if o.deadline != 0 {
				volatile++
			}
			if o.typ != typeString && o.typ != typeHash && o.coll == nil {
				t.Errorf("db %d: a %s without its collection", i, o.typ.name())
			}
		}
		if k, v := s.KeyCounts(i); k != keys || v != volatile {
			t.Errorf("db %d: KeyCounts %d, %d; counted %d, %d", i, k, v, keys, volatile)
		}
	}
	var a, b bytes.Buffer
	a.Write(snapshot(t, s))
	restored := New()
	if _, err := restored.ReadSnapshot(bytes.NewReader(a.Bytes())); err != nil {
		t.Fatal(err)
	}
	b.Write(snapshot(t, restored))
	if !bytes.Equal(a.Bytes(), b.Bytes()) {
		t.Error("the random state did not survive a snapshot round trip")
	}
}

// TestSnapshotWhileWriting freezes a store in the middle of random commands
// and writes the frozen state while the commands (and sweeps) go on, in
// another goroutine, as a Raft node does (-race checks that the two never
// touch the same memory unsynchronised). The snapshot must hold exactly the
// state of a store that ran only the commands before the freeze, and the
// store that went on must end as one that was never frozen.
func TestSnapshotWhileWriting(t *testing.T) {
	for seed := int64(1); seed <= 4; seed++ {
		r := rand.New(rand.NewSource(seed))
		calls := randomCalls(r, 20000)
		cut := 5000 + r.Intn(10000)
		live, before, never := New(), New(), New()
		sweep := func(s *Store, i int) {
			if i%500 == 0 {
				s.Sweep(i%2, i%numShards, 50, calls[i].now)
			}
		}
		for i, c := range calls[:cut] {
			for _, s := range []*Store{live, before, never} {
				c.run(t, s)
				sweep(s, i)
			}
		}
		frozen := live.Freeze()
		written := make(chan []byte)
		go func() {
			var buf bytes.Buffer
			if err := frozen.WriteSnapshot(&buf, nil); err != nil {
				t.Error(err)
			}
			written <- buf.Bytes()
		}()
		for i := cut; i < len(calls); i++ {
			for _, s := range []*Store{live, never} {
				calls[i].run(t, s)
				sweep(s, i)
			}
			if i == cut+len(calls)/4 {
				if got := <-written; !bytes.Equal(got, snapshot(t, before)) {
					t.Fatalf("seed %d: the snapshot frozen after %d commands is not the state after them", seed, cut)
				}
				live.Release(frozen) // as the engines do, once it is written
			}
		}
		if !bytes.Equal(snapshot(t, live), snapshot(t, never)) {
			t.Fatalf("seed %d: a store that was frozen ended unlike one that was not", seed)
		}
	}
}

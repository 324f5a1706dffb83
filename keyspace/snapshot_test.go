package keyspace

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"math/rand"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// populate fills f's store with every type, in two databases, with deadlines.
func populate(f *fixture) {
	for _, line := range []string{
		"SET s v", "SET e v PX 5000", "SET bin a\x00b", "INCR n", "HSET h b 1 a 2", "PEXPIRE h 7000",
		"RPUSH l x y z", "LPUSH l w", "SADD si 3 1 2", "SADD ss b a", "ZADD z 1 a 2.5 b -inf c",
		"SELECT 5", "SET other db", "ZADD z5 3 x", "SELECT 0",
	} {
		f.doArgs(strings.Fields(line)...)
	}
	for i := 0; i < 200; i++ {
		f.do("HSET bigh f" + strconv.Itoa(i) + " " + strconv.Itoa(i))
		f.do("ZADD bigz " + strconv.Itoa(i%17) + " m" + strconv.Itoa(i))
		f.do("SADD bigs s" + strconv.Itoa(i))
	}
}

func snapshot(t *testing.T, s *Store) []byte {
	t.Helper()
	var buf bytes.Buffer
	f := s.Freeze()
	defer s.Release(f)
	if err := f.WriteSnapshot(&buf, nil); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestSnapshotRoundTrip(t *testing.T) {
	f := newFixture(t)
	populate(f)
	data := snapshot(t, f.s)
	g := newFixture(t)
	g.do("SET stale v") // replaced by the snapshot
	if _, err := g.s.ReadSnapshot(bytes.NewReader(data)); err != nil {
		t.Fatal(err)
	}
	for _, cmd := range []string{
		"GET s", "PTTL e", "GET bin", "GET n", "HGETALL h", "PTTL h", "LRANGE l 0 -1", "SMEMBERS si", "SMEMBERS ss",
		"ZRANGE z 0 -1 WITHSCORES", "HGETALL bigh", "ZRANGE bigz 0 -1 WITHSCORES", "SMEMBERS bigs", "SSCAN bigs 0",
		"HSCAN bigh 0", "ZSCAN bigz 0", "ZSCAN z 0", "DBSIZE", "GET stale", "SELECT 5", "GET other", "ZSCORE z5 x", "DBSIZE",
	} {
		if got, want := g.do(cmd), f.do(cmd); got != want {
			t.Errorf("%s after restore: %s, want %s", cmd, got, want)
		}
	}
	for _, k := range []string{"s", "h", "l", "bigz", "nope"} {
		if g.s.Version(0, k) != f.s.Version(0, k) {
			t.Errorf("version of %s not restored", k)
		}
	}
	if !bytes.Equal(snapshot(t, g.s), data) {
		t.Error("a restored store does not write the snapshot it was read from")
	}
}

// failingWriter takes ok writes, then fails every one.
type failingWriter struct {
	ok, writes int
}

var errWriteFailed = errors.New("the disk is full")

func (w *failingWriter) Write(p []byte) (int, error) {
	w.writes++
	if w.writes > w.ok {
		return 0, errWriteFailed
	}
	return len(p), nil
}

// A write that fails (a full disk, a snapshot abandoned as the node closes)
// fails WriteSnapshot with its error, and the encoder writes nothing more:
// it kept the bytes of the failed frame and grew past a frame, after which
// a string's next piece had a negative length (a panic) or none (a loop that
// never ended).
func TestSnapshotWriteError(t *testing.T) {
	f := &fixture{s: New(), now: 1_700_000_000_000}
	// One hash of about 3 MB, many frames of strings of every length from
	// 0 to 299 bytes, encoded after the failed write as before it.
	hset := []string{"HSET", "big"}
	for i := range 20000 {
		hset = append(hset, "field:"+strconv.Itoa(i), strings.Repeat("v", i%300))
	}
	f.doArgs(hset...)
	for ok := range 3 {
		w := &failingWriter{ok: ok}
		fr := f.s.Freeze()
		err := fr.WriteSnapshot(w, []byte("meta"))
		f.s.Release(fr)
		if !errors.Is(err, errWriteFailed) {
			t.Fatalf("after %d writes: WriteSnapshot returned %v, want the write's error", ok, err)
		}
		if w.writes != ok+1 {
			t.Fatalf("after %d writes and a failed one, the encoder wrote %d times in all", ok, w.writes)
		}
	}
}

// TestSnapshotFrozenIgnoresLaterWrites freezes a store, then changes every
// kind of value in place (packed and big hashes, lists, sets, sorted sets,
// strings, deadlines, deletions, a new database): the frozen state must
// still write the bytes of the state it was taken from, which a store that
// was never changed writes.
func TestSnapshotFrozenIgnoresLaterWrites(t *testing.T) {
	f, same := newFixture(t), newFixture(t)
	populate(f)
	populate(same)
	frozen := f.s.Freeze()
	for _, cmd := range []string{
		"SET s changed", "PEXPIRE s 5000", "PERSIST e", "APPEND bin more", "INCR n",
		"HSET h f9 v9", "HSET bigh f0 changed extra x", "HDEL bigh f1",
		"RPUSH l x", "LSET l 0 y", "SADD si 99", "SREM bigs s0", "SADD ss z",
		"ZADD z 100 new", "ZINCRBY bigz 5 m1", "ZREM bigz m2", "DEL h", "SELECT 7", "SET fresh v",
	} {
		f.do(cmd)
	}
	var got bytes.Buffer
	if err := frozen.WriteSnapshot(&got, nil); err != nil {
		t.Fatal(err)
	}
	f.s.Release(frozen)
	if want := snapshot(t, same.s); !bytes.Equal(got.Bytes(), want) {
		t.Error("the frozen state changed with the writes made after it was taken")
	}
	if bytes.Equal(got.Bytes(), snapshot(t, f.s)) {
		t.Error("the writes after freezing changed nothing: the test proves nothing")
	}
}

// TestSnapshotDeterministic builds the same state in two orders: the bytes
// must be equal.
func TestSnapshotDeterministic(t *testing.T) {
	a, b := newFixture(t), newFixture(t)
	var cmds []string
	for i := 0; i < 300; i++ {
		cmds = append(cmds, "SET k"+strconv.Itoa(i)+" v"+strconv.Itoa(i), "SADD set m"+strconv.Itoa(i))
	}
	for _, c := range cmds {
		a.do(c)
	}
	rand.New(rand.NewSource(3)).Shuffle(len(cmds), func(i, j int) { cmds[i], cmds[j] = cmds[j], cmds[i] })
	for _, c := range cmds {
		b.do(c)
	}
	// The WATCH counters count writes per slot, which both orders did alike.
	if !bytes.Equal(snapshot(t, a.s), snapshot(t, b.s)) {
		t.Error("equal states wrote different snapshots")
	}
}

// TestSnapshotMeta: the caller's bytes come back as they were written,
// from an empty store too.
func TestSnapshotMeta(t *testing.T) {
	for _, meta := range [][]byte{nil, []byte("applied=7"), bytes.Repeat([]byte{0, 1, 2}, 100_000)} {
		f := newFixture(t)
		if len(meta) > 0 {
			populate(f)
		}
		var buf bytes.Buffer
		frozen := f.s.Freeze()
		if err := frozen.WriteSnapshot(&buf, meta); err != nil {
			t.Fatal(err)
		}
		f.s.Release(frozen)
		got, err := New().ReadSnapshot(&buf)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, meta) {
			t.Errorf("meta of %d bytes came back as %d bytes", len(meta), len(got))
		}
	}
}

// frames encodes body as the frames of a snapshot, as the format's comment
// describes them, ending with the empty frame.
func frames(body []byte) []byte {
	var out []byte
	for len(body) > 0 {
		n := min(len(body), 1000)
		out = binary.LittleEndian.AppendUint32(out, uint32(n))
		out = binary.LittleEndian.AppendUint32(out, crc32.Checksum(body[:n], crc32.MakeTable(crc32.Castagnoli)))
		out = append(out, body[:n]...)
		body = body[n:]
	}
	return append(out, 0, 0, 0, 0, 0, 0, 0, 0)
}

// TestSnapshotCorrupt feeds truncated and altered snapshots: each must be
// refused with an error, never a panic, and leave the store as it was.
func TestSnapshotCorrupt(t *testing.T) {
	f := newFixture(t)
	populate(f)
	data := snapshot(t, f.s)
	g := newFixture(t)
	g.do("SET keep me")
	check := func(what string, input []byte) {
		t.Helper()
		_, err := g.s.ReadSnapshot(bytes.NewReader(input))
		if !errors.Is(err, errCorruptSnapshot) {
			t.Fatalf("%s: %v, want errCorruptSnapshot", what, err)
		}
		if got := g.do("GET keep"); got != `"me"` {
			t.Fatalf("%s: the failed read changed the store (GET keep = %s)", what, got)
		}
	}
	for n := 0; n < len(data); n += 1 + n/50 {
		check("truncated to "+strconv.Itoa(n), data[:n])
	}
	r := rand.New(rand.NewSource(1))
	for i := 0; i < 300; i++ {
		bad := append([]byte(nil), data...)
		bad[r.Intn(len(bad))] ^= byte(1 + r.Intn(255))
		check("flipped byte", bad)
	}
	// Checked frames that do not hold what the format says.
	check("bad magic", frames([]byte("XXXX\x02\x00\x00\x00")))
	check("unknown version", frames([]byte("LSKS\x63\x00\x00\x00")))
	check("bytes after the end", frames([]byte("LSKS\x02\x00\x00\x00\x00")))
	check("no end frame", frames([]byte("LSKS\x02\x00\x00\x00"))[:13])
	check("key in the wrong shard", frames([]byte("LSKS\x02\x00\x00\x01\x01\x01\x01a\x00\x00\x01b\x00\x00")))
	// A huge length fails without allocating what it claims.
	check("huge frame", append([]byte{0xff, 0xff, 0xff, 0x7f, 0, 0, 0, 0}, data...))
	check("huge string", frames([]byte("LSKS\x02\xff\xff\xff\xff\x03")))
	// A huge key count, followed by one key of shard 0: the shard's maps are
	// not made for what the count claims.
	key := ""
	for i := 0; key == "" || hashKey(key)>>shardShift != 0; i++ {
		key = "k" + strconv.Itoa(i)
	}
	huge := binary.AppendUvarint([]byte("LSKS\x02\x00\x00\x01\x01"), 1<<40)
	check("huge key count", frames(append(append(huge, byte(len(key))), key+"\x00\x00\x01v"...)))
	if _, err := New().ReadSnapshot(bytes.NewReader(frames([]byte("LSKS\x02\x00\x00\x00")))); err != nil {
		t.Errorf("the worked example of an empty snapshot: %v", err)
	}
}

// FuzzReadSnapshot feeds snapshots to the reader, which a member reads from
// its disk and from the leader: garbage must be refused with an error, never
// a panic or an allocation much larger than the input; what it accepts must
// write a snapshot that reads back to the same keyspace (the same bytes once
// written again).
func FuzzReadSnapshot(f *testing.F) {
	fx := &fixture{s: New(), now: 1_700_000_000_000}
	populate(fx)
	var buf bytes.Buffer
	fr := fx.s.Freeze()
	if err := fr.WriteSnapshot(&buf, []byte("meta")); err != nil {
		f.Fatal(err)
	}
	fx.s.Release(fr)
	f.Add(buf.Bytes())
	buf.Reset()
	empty := New()
	fr = empty.Freeze()
	fr.WriteSnapshot(&buf, nil)
	f.Add(buf.Bytes())
	write := func(t *testing.T, s *Store, meta []byte) []byte {
		var b bytes.Buffer
		fr := s.Freeze()
		defer s.Release(fr)
		if err := fr.WriteSnapshot(&b, meta); err != nil {
			t.Fatal(err)
		}
		return b.Bytes()
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		s := New()
		meta, err := s.ReadSnapshot(bytes.NewReader(data))
		if err != nil {
			if !errors.Is(err, errCorruptSnapshot) {
				t.Fatalf("error %v does not wrap errCorruptSnapshot", err)
			}
			return
		}
		once := write(t, s, meta)
		again := New()
		meta2, err := again.ReadSnapshot(bytes.NewReader(once))
		if err != nil {
			t.Fatalf("a snapshot written from an accepted one does not read: %v", err)
		}
		if twice := write(t, again, meta2); !bytes.Equal(once, twice) {
			t.Fatal("written again, the snapshot differs")
		}
	})
}

// keysInShard returns n keys, with prefix, whose hash falls in shard i.
func keysInShard(prefix string, i, n int) []string {
	var keys []string
	for c := 0; len(keys) < n; c++ {
		if k := prefix + strconv.Itoa(c); int(hashKey(k)>>shardShift) == i {
			keys = append(keys, k)
		}
	}
	return keys
}

// TestSnapshotFrozenIgnoresWritesToEveryMap fills one shard until it is
// split into several maps, and one of those maps to the most keys it holds
// before the shard splits again, and freezes the store. Then a key added
// to that map splits the shard while its other maps are still the frozen
// ones; the shard grows; every one of the maps it had is written to (a value
// changed in place, a key deleted, a key added); the shard's expired keys
// are swept; and another database is emptied. The frozen state must still
// write the bytes of a store that was never changed, and the store must hold
// the writes.
func TestSnapshotFrozenIgnoresWritesToEveryMap(t *testing.T) {
	const shard = 5
	keys := keysInShard("k:", shard, 2400)
	old, rest := keys[:600], keys[600:]
	var bits uint8
	var full []string // the keys that fill map 0 of the shard
	fill := func(f *fixture) {
		for i, k := range old {
			if i%2 == 0 {
				f.do("SET " + k + " v PX 1000")
			} else {
				f.do("HSET " + k + " owner 1")
			}
		}
		bits = f.s.dbs[0].shards[shard].bits
		full = nil
		for _, k := range rest {
			if len(f.s.dbs[0].shards[shard].subs[0].m) == maxSubLen {
				break
			}
			if subIndex(hashKey(k), bits) == 0 {
				f.do("SET " + k + " v")
				full = append(full, k)
			}
		}
		f.do("SELECT 1")
		f.do("SET other v")
		f.do("SELECT 0")
	}
	f, same := newFixture(t), newFixture(t)
	fill(f)
	fill(same)
	if bits < 2 {
		t.Fatalf("600 keys in a shard split it into %d maps, want 4 or more", 1<<bits)
	}
	maps := 1 << bits
	var split string
	var grown, extra []string
	for _, k := range rest {
		switch {
		case slices.Contains(full, k):
		case split == "" && subIndex(hashKey(k), bits) == 0:
			split = k
		case len(grown) < 800:
			grown = append(grown, k)
		default:
			extra = append(extra, k)
		}
	}
	frozen := f.s.Freeze()
	f.do("SET " + split + " new")
	if sh := &f.s.dbs[0].shards[shard]; sh.bits != bits+1 {
		t.Fatalf("a key added to a full map left the shard in %d maps, want %d", len(sh.subs), 2*maps)
	}
	for _, k := range grown {
		f.do("SET " + k + " new")
	}
	// One key of each map the shard had: changed, deleted, and one added.
	changed, deleted, added := make(map[int]string), make(map[int]string), make(map[int]string)
	for _, k := range old {
		j := subIndex(hashKey(k), bits)
		switch {
		case changed[j] == "":
			changed[j] = k
			f.do("SET " + k + " changed")
		case deleted[j] == "":
			deleted[j] = k
			f.do("DEL " + k)
		}
	}
	for _, k := range extra {
		if j := subIndex(hashKey(k), bits); added[j] == "" {
			added[j] = k
			f.do("SET " + k + " new")
		}
	}
	if len(changed) != maps || len(deleted) != maps || len(added) != maps {
		t.Fatalf("wrote to %d, %d and %d of the shard's %d maps", len(changed), len(deleted), len(added), maps)
	}
	swept := f.s.Sweep(0, shard, 1, f.now+2000)
	if swept == 0 {
		t.Fatal("the sweep removed nothing")
	}
	f.do("SELECT 1")
	f.do("FLUSHDB")
	var got bytes.Buffer
	if err := frozen.WriteSnapshot(&got, nil); err != nil {
		t.Fatal(err)
	}
	f.s.Release(frozen)
	want := snapshot(t, same.s)
	if !bytes.Equal(got.Bytes(), want) {
		t.Error("the frozen state changed with the writes made after it was taken")
	}
	f.db = 0
	for j := range maps {
		f.expect("GET "+changed[j], `"changed"`, "EXISTS "+deleted[j], ":0", "GET "+added[j], `"new"`)
	}
	f.expect("DBSIZE", ":"+strconv.Itoa(len(old)+len(full)+1+len(grown)+maps-maps-swept), "SELECT 1", "+OK", "DBSIZE", ":0")

	// A store laid out in other maps (read back from the snapshot, then
	// split further) writes the same bytes.
	g := newFixture(t)
	if _, err := g.s.ReadSnapshot(bytes.NewReader(want)); err != nil {
		t.Fatal(err)
	}
	g.s.split(&g.s.dbs[0].shards[shard])
	if !bytes.Equal(snapshot(t, g.s), want) {
		t.Error("the same keys in more maps write other bytes")
	}
}

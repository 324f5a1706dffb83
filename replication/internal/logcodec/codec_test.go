package logcodec

import (
	"bytes"
	"math"
	"reflect"
	"testing"

	"github.com/lockserver/lockserver/keyspace"
	"github.com/lockserver/lockserver/luaexec"
)

func words(s ...string) [][]byte {
	out := make([][]byte, len(s))
	for i, a := range s {
		out[i] = []byte(a)
	}
	return out
}

func sampleEntries() []*LogEntry {
	return []*LogEntry{
		{Kind: KindCommand, Origin: 0xdeadbeefcafe, Seq: 7, Entry: Entry{
			Time: 1700000000123, DB: 3, Cmds: [][][]byte{words("SET", "lock", "owner", "PX", "30000", "NX")},
		}},
		{Kind: KindCommand, Origin: 1, Seq: math.MaxUint64, Entry: Entry{
			Time: -5, DB: 15, Multi: true, OOM: true,
			Cmds:  [][][]byte{words("INCR", "a"), words("GET", "\x00\r\n")},
			Watch: []Watch{{DB: 0, Key: "a", Version: 42}, {DB: 15, Key: "", Version: math.MaxUint64}},
		}},
		{Kind: KindCommand, Origin: 2, Seq: 8, Relay: RelayTag{Origin: math.MaxUint64, Seq: 1}, Entry: Entry{
			Cmds: [][][]byte{words("PUBLISH", "ch", "m")},
		}},
		{Kind: KindCommand, Origin: 2, Seq: 9, Relay: RelayTag{Origin: 5, Seq: 6}, Entry: Entry{
			Cmds: [][][]byte{words("EVALSHA", "abc", "0")}, User: "alice",
		}},
		{Kind: KindBarrier, Origin: 9, Seq: 1},
		{Kind: KindMemberSet, Origin: 9, Seq: 2, Member: "n1", Addr: "10.0.0.1:6379"},
		{Kind: KindMemberDel, Origin: 9, Seq: 3, Member: "n2"},
		{Kind: KindSweep, Origin: 9, Seq: 4, Entry: Entry{Time: 1700000000123, DB: 15}, Sweep: SweepRange{From: 1023, Shards: 1024}},
		{Kind: KindClusterVersion, Origin: 9, Seq: 5, Version: "0.2"},
		{Kind: KindClusterVersion, Origin: 9, Seq: 6, Version: "12.345", Pinned: true},
	}
}

// The encoding of an entry decodes to the same entry: a worked example of
// each kind, with the edge values of every field.
func TestLogEntryRoundTrip(t *testing.T) {
	for _, e := range sampleEntries() {
		got, err := decodeLogEntry(encodeLogEntry(e))
		if err != nil {
			t.Fatalf("decode %+v: %v", e, err)
		}
		if !reflect.DeepEqual(got, e) {
			t.Fatalf("round trip:\n got %+v\nwant %+v", got, e)
		}
	}
}

// A worked byte-level example pins the format, which the log on disk holds.
func TestLogEntryFormat(t *testing.T) {
	e := &LogEntry{Kind: KindCommand, Origin: 1, Seq: 2, Entry: Entry{
		Time: 3, DB: 4, Multi: true, Cmds: [][][]byte{words("GET", "k")},
	}}
	want := []byte{
		1,                      // kind
		1, 0, 0, 0, 0, 0, 0, 0, // origin, little endian
		2, // seq
		6, // time 3, zigzag
		4, // db
		1, // flags: multi
		1, // one command
		2, // two arguments
		3, 'G', 'E', 'T', 1, 'k',
		0, // no watches
	}
	if got := encodeLogEntry(e); !bytes.Equal(got, want) {
		t.Fatalf("encoding = %v, want %v", got, want)
	}

	// A relayed entry: a flag, and the relaying node's origin and number
	// before the commands. Entries without one keep the format above.
	e = &LogEntry{Kind: KindCommand, Origin: 1, Seq: 2, Relay: RelayTag{Origin: 5, Seq: 6}, Entry: Entry{
		Time: 3, Cmds: [][][]byte{words("GET", "k")},
	}}
	want = []byte{
		1, 1, 0, 0, 0, 0, 0, 0, 0, 2, 6, 0, // kind, origin, seq, time, db
		4,                      // flags: relayed
		5, 0, 0, 0, 0, 0, 0, 0, // the relaying node's origin
		6, // its number for the request
		1, 2, 3, 'G', 'E', 'T', 1, 'k', 0,
	}
	if got := encodeLogEntry(e); !bytes.Equal(got, want) {
		t.Fatalf("relayed encoding = %v, want %v", got, want)
	}

	// A sweep: its stamp, database and range of shards.
	e = &LogEntry{Kind: KindSweep, Origin: 1, Seq: 2, Entry: Entry{Time: 3, DB: 4}, Sweep: SweepRange{From: 5, Shards: 200}}
	want = []byte{5, 1, 0, 0, 0, 0, 0, 0, 0, 2, 6, 4, 5, 0xc8, 1}
	if got := encodeLogEntry(e); !bytes.Equal(got, want) {
		t.Fatalf("sweep encoding = %v, want %v", got, want)
	}

	// A cluster version: the version as a string, and whether it is pinned.
	e = &LogEntry{Kind: KindClusterVersion, Origin: 1, Seq: 2, Version: "0.2", Pinned: true}
	want = []byte{6, 1, 0, 0, 0, 0, 0, 0, 0, 2, 3, '0', '.', '2', 1}
	if got := encodeLogEntry(e); !bytes.Equal(got, want) {
		t.Fatalf("cluster version encoding = %v, want %v", got, want)
	}
}

// The kinds that lockserver 0.1 knows go in batches with others; a later one
// goes alone, so that a 0.1 member that skips it skips nothing else.
func TestLaterKindsGoAlone(t *testing.T) {
	for k, alone := range map[Kind]bool{KindCommand: false, KindBarrier: false, KindMemberSet: false,
		KindMemberDel: false, KindSweep: false, KindClusterVersion: true} {
		if k.Alone() != alone {
			t.Errorf("kind %d: Alone %v, want %v", k, k.Alone(), alone)
		}
	}
}

func sampleRequests() []Request {
	return []Request{
		{DB: 0, Cmds: [][][]byte{words("GET", "k")}},
		{DB: 2, Multi: true, Cmds: [][][]byte{words("SET", "a", "1"), words("DEL", "a")},
			Watch: []Watch{{DB: 2, Key: "a", Version: 3}}},
		{DB: 1, WatchKeys: []string{"x", ""}},
		{DB: 3, Cmds: [][][]byte{words("PUBLISH", "ch", "m")}, Relay: RelayTag{Origin: 0xfeed, Seq: math.MaxUint64}},
		{DB: 0, Cmds: [][][]byte{words("EVAL", "return 1", "0")}, Relay: RelayTag{Origin: 1, Seq: 2}, User: "bob"},
	}
}

func TestRequestsRoundTrip(t *testing.T) {
	reqs := sampleRequests()
	got, err := DecodeRequests(EncodeRequests(reqs))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, reqs) {
		t.Fatalf("round trip:\n got %+v\nwant %+v", got, reqs)
	}
}

func sampleReplies() []keyspace.Reply {
	return []keyspace.Reply{
		keyspace.Null, keyspace.NullArray, keyspace.OK, keyspace.Error("ERR boom"),
		keyspace.Int(math.MinInt64), keyspace.Bulk("a\x00b"), keyspace.Double(math.Inf(-1)),
		{Kind: keyspace.KindBool, Int: 1}, {Kind: keyspace.KindVerbatim, Str: "txt"},
		keyspace.Array(keyspace.Int(1), keyspace.Array(keyspace.Bulk("x")), keyspace.Array()),
		keyspace.Map(keyspace.Bulk("k"), keyspace.Int(2)),
		{Kind: keyspace.KindSet, Elems: []keyspace.Reply{keyspace.Bulk("m")}},
		{Kind: keyspace.KindPush, Elems: []keyspace.Reply{keyspace.Bulk("message")}},
		keyspace.Pairs(keyspace.Bulk("member"), keyspace.Double(1.5)),
		{Kind: keyspace.KindBulk, Str: "every field", Int: 3, Float: -0.5, Elems: []keyspace.Reply{}},
	}
}

func TestRepliesRoundTrip(t *testing.T) {
	replies := sampleReplies()
	got, err := decodeReplies(encodeReplies(replies))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, replies) {
		t.Fatalf("round trip:\n got %+v\nwant %+v", got, replies)
	}
}

// The reply to a forwarded batch carries the leader's applied index before
// the replies, and after them the commands each request's scripts called,
// named as the command table names them.
func TestForwardReplyRoundTrip(t *testing.T) {
	replies := sampleReplies()
	calls := make([][]luaexec.ScriptCall, len(replies))
	calls[1] = []luaexec.ScriptCall{
		{Cmd: keyspace.Lookup([]byte("set")), Nanos: 1500},
		{Cmd: keyspace.Lookup([]byte("incr")), Nanos: 1, Err: "ERR value is not an integer or out of range"},
		{Cmd: keyspace.Lookup([]byte("get")), Rejected: true, Err: "ERR Wrong number of args calling Redis command from script"},
		{Rejected: true, Err: "ERR Unknown Redis command called from script"},
		{Cmd: keyspace.Lookup([]byte("memory")).LookupSub([]byte("usage")), Nanos: 7},
	}
	calls[len(calls)-1] = []luaexec.ScriptCall{{Cmd: keyspace.Lookup([]byte("hincrby")), Nanos: math.MaxInt64}}
	for _, applied := range []uint64{0, 1, math.MaxUint64} {
		gotApplied, got, gotCalls, err := DecodeForwardReply(EncodeForwardReply(applied, replies, calls))
		if err != nil {
			t.Fatal(err)
		}
		if gotApplied != applied || !reflect.DeepEqual(got, replies) || !reflect.DeepEqual(gotCalls, calls) {
			t.Fatalf("round trip: applied %d, %+v, %+v; want %d, %+v, %+v", gotApplied, got, gotCalls, applied, replies, calls)
		}
	}
	if _, _, _, err := DecodeForwardReply(nil); err == nil {
		t.Error("an empty forward reply decoded")
	}
	// A reply without its calls is cut short.
	b := EncodeForwardReply(0, replies, calls)
	if _, _, _, err := DecodeForwardReply(b[:len(b)-1]); err == nil {
		t.Error("a truncated forward reply decoded")
	}
}

// A Raft log entry holds the entries of a batch, in order.
func TestBatchRoundTrip(t *testing.T) {
	entries := sampleEntries()
	enc := EncodeBatch(entries, 0)
	got, err := DecodeBatch(enc)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, entries) {
		t.Fatalf("round trip:\n got %+v\nwant %+v", got, entries)
	}
	// The count is the first byte: a varint below 128.
	enc[0]++
	if _, err := DecodeBatch(enc); err == nil {
		t.Fatal("a batch that claims one entry more than it holds decoded")
	}
}

// Hostile inputs fail with an error, without allocating what they claim.
func TestDecodeRejectsGarbage(t *testing.T) {
	valid := encodeLogEntry(sampleEntries()[1])
	cases := map[string][]byte{
		"empty":          {},
		"unknown kind":   {99, 0, 0, 0, 0, 0, 0, 0, 0, 0},
		"truncated":      valid[:len(valid)-1],
		"trailing bytes": append(append([]byte{}, valid...), 0),
		"bad db":         {1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 16, 0, 0, 0},
		"huge count":     {1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0x0f},
		"nameless cmd":   {1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0},
		// kind 5, origin, seq, time, db, from, shards
		"sweep from past the shards": {5, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x80, 8, 1},
		"sweep of no shard":          {5, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
		"sweep of too many shards":   {5, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x81, 8},
		// kind 6, origin, seq, version, pinned
		"cluster version pinned 2": {6, 0, 0, 0, 0, 0, 0, 0, 0, 0, 3, '0', '.', '2', 2},
	}
	for name, b := range cases {
		if _, err := decodeLogEntry(b); err == nil {
			t.Errorf("%s: decoded without error", name)
		}
	}
	deep := bytes.Repeat([]byte{byte(keyspace.KindArray), replyElems, 1}, maxReplyDepth+2)
	deep = append(append([]byte{1}, deep...), byte(keyspace.KindNull), 0)
	if _, err := decodeReplies(deep); err == nil {
		t.Error("a reply nested deeper than the limit decoded")
	}
	if _, err := decodeReplies([]byte{1, byte(keyspace.KindMap), replyElems, 1, byte(keyspace.KindNull), 0}); err == nil {
		t.Error("a map with an odd number of elements decoded")
	}
	if _, err := DecodeRequests([]byte{1, 0, 0, 0, 0}); err == nil {
		t.Error("a request without commands decoded")
	}
}

// The decoders never panic, and whatever they accept re-encodes to bytes that
// decode to the same value (compared by encoding, so that NaN equals itself).
func FuzzDecodeLogEntry(f *testing.F) {
	for _, e := range sampleEntries() {
		f.Add(encodeLogEntry(e))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		e, err := decodeLogEntry(b)
		if err != nil {
			return
		}
		enc := encodeLogEntry(e)
		again, err := decodeLogEntry(enc)
		if err != nil || !bytes.Equal(encodeLogEntry(again), enc) {
			t.Fatalf("%+v re-encoded to %v, which decodes to %+v, %v", e, enc, again, err)
		}
	})
}

func FuzzDecodeBatch(f *testing.F) {
	f.Add(EncodeBatch(sampleEntries(), 0))
	f.Fuzz(func(t *testing.T, b []byte) {
		entries, err := DecodeBatch(b)
		if err != nil {
			return
		}
		enc := EncodeBatch(entries, 0)
		again, err := DecodeBatch(enc)
		if err != nil || len(again) != len(entries) {
			t.Fatalf("%+v re-encoded to %v, which decodes to %+v, %v", entries, enc, again, err)
		}
	})
}

func FuzzDecodeRequests(f *testing.F) {
	f.Add(EncodeRequests(sampleRequests()))
	f.Fuzz(func(t *testing.T, b []byte) {
		reqs, err := DecodeRequests(b)
		if err != nil {
			return
		}
		enc := EncodeRequests(reqs)
		again, err := DecodeRequests(enc)
		if err != nil || !bytes.Equal(EncodeRequests(again), enc) {
			t.Fatalf("%+v re-encoded to %v, which decodes to %+v, %v", reqs, enc, again, err)
		}
	})
}

func FuzzDecodeReplies(f *testing.F) {
	f.Add(encodeReplies(sampleReplies()))
	f.Fuzz(func(t *testing.T, b []byte) {
		replies, err := decodeReplies(b)
		if err != nil {
			return
		}
		enc := encodeReplies(replies)
		again, err := decodeReplies(enc)
		if err != nil || !bytes.Equal(encodeReplies(again), enc) {
			t.Fatalf("%+v re-encoded to %v, which decodes to %+v, %v", replies, enc, again, err)
		}
	})
}

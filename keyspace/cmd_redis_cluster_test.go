package keyspace

import "testing"

// The check value of CRC-16/XMODEM, and the slots Redis's CLUSTER KEYSLOT
// documentation gives as examples.
func TestKeySlotWorkedExamples(t *testing.T) {
	if got := crc16("123456789"); got != 0x31C3 {
		t.Errorf("crc16(123456789) = %#04x, want 0x31c3 (the XMODEM check value Redis's crc16.c quotes)", got)
	}
	for key, want := range map[string]int{"somekey": 11058, "foo{hash_tag}": 2515} {
		if got := KeySlot(key); got != want {
			t.Errorf("KeySlot(%q) = %d, want %d", key, got, want)
		}
	}
}

// Hash tags: keys sharing a non-empty tag share a slot with the tag itself;
// an empty or unclosed tag leaves the whole key hashed.
func TestKeySlotHashTags(t *testing.T) {
	same := [][2]string{
		{"{user1000}.following", "user1000"},
		{"{user1000}.followers", "user1000"},
		{"a{b}c{d}", "b"},
		{"{{x}}", "{x"},
		{"x{y}", "y"},
	}
	for _, p := range same {
		if a, b := KeySlot(p[0]), KeySlot(p[1]); a != b {
			t.Errorf("KeySlot(%q) = %d, KeySlot(%q) = %d: want equal", p[0], a, p[1], b)
		}
	}
	for _, key := range []string{"{}", "a{}b", "{}x{y}", "{abc", "abc}"} {
		if got, whole := KeySlot(key), int(crc16(key)&16383); got != whole {
			t.Errorf("KeySlot(%q) = %d, want the whole key's slot %d", key, got, whole)
		}
	}
}

// COUNTKEYSINSLOT and GETKEYSINSLOT against a worked example: "t" hashes to
// slot 15891 (redis-server's CLUSTER KEYSLOT t), and so does every key
// tagged {t}; "a" hashes elsewhere.
func TestClusterKeysInSlot(t *testing.T) {
	f := newFixture(t)
	for _, k := range []string{"{t}b", "t", "{t}c", "a", "{t}a"} {
		f.do("SET " + k + " v")
	}
	f.do("HSET {t}h f v")
	f.do("SET {t}short v PX 10")
	f.expect(
		"CLUSTER KEYSLOT t", "-ERR unknown command 'CLUSTER', with args beginning with: 'KEYSLOT' 't' ", // the server serves it
		"CLUSTER COUNTKEYSINSLOT 15891", ":6",
		"CLUSTER GETKEYSINSLOT 15891 10", `["t" "{t}a" "{t}b" "{t}c" "{t}h" "{t}short"]`,
		"CLUSTER COUNTKEYSINSLOT 15495", ":1", // CLUSTER KEYSLOT a
		"CLUSTER GETKEYSINSLOT 15495 1", `["a"]`,
		"CLUSTER COUNTKEYSINSLOT 0", ":0",
		"CLUSTER GETKEYSINSLOT 0 5", "[]",
		"CLUSTER GETKEYSINSLOT 15891 0", "[]",
		"CLUSTER GETKEYSINSLOT 15891 2", `["t" "{t}a"]`,
		"CLUSTER GETKEYSINSLOT 15891 9223372036854775807", `["t" "{t}a" "{t}b" "{t}c" "{t}h" "{t}short"]`,
	)
	// An expired key is gone, swept or not.
	f.now += 10
	f.expect(
		"CLUSTER COUNTKEYSINSLOT 15891", ":5",
		"CLUSTER GETKEYSINSLOT 15891 10", `["t" "{t}a" "{t}b" "{t}c" "{t}h"]`,
	)
	// A node answers for database 0, the only one of a Redis Cluster node,
	// whichever the client selected.
	f.do("SELECT 1")
	f.do("SET {t}d v")
	f.expect(
		"CLUSTER COUNTKEYSINSLOT 15891", ":5",
		"CLUSTER GETKEYSINSLOT 15891 10", `["t" "{t}a" "{t}b" "{t}c" "{t}h"]`,
	)
	f.do("SELECT 0")
	f.do("DEL {t}a t")
	f.expect("CLUSTER GETKEYSINSLOT 15891 10", `["{t}b" "{t}c" "{t}h"]`)
}

// The errors are redis-server's (compat_test compares them too); Exec checks
// a container's subcommand as the server does.
func TestClusterKeysInSlotErrors(t *testing.T) {
	newFixture(t).expect(
		"CLUSTER COUNTKEYSINSLOT 16384", "-ERR Invalid slot",
		"CLUSTER COUNTKEYSINSLOT -1", "-ERR Invalid slot",
		"CLUSTER COUNTKEYSINSLOT x", "-ERR value is not an integer or out of range",
		"CLUSTER COUNTKEYSINSLOT 01", "-ERR value is not an integer or out of range",
		"CLUSTER COUNTKEYSINSLOT", "-ERR wrong number of arguments for 'cluster|countkeysinslot' command",
		"CLUSTER COUNTKEYSINSLOT 1 2", "-ERR wrong number of arguments for 'cluster|countkeysinslot' command",
		"CLUSTER GETKEYSINSLOT 16384 1", "-ERR Invalid slot or number of keys",
		"CLUSTER GETKEYSINSLOT -1 1", "-ERR Invalid slot or number of keys",
		"CLUSTER GETKEYSINSLOT 1 -1", "-ERR Invalid slot or number of keys",
		"CLUSTER GETKEYSINSLOT 16384 x", "-ERR value is not an integer or out of range",
		"CLUSTER GETKEYSINSLOT x 1", "-ERR value is not an integer or out of range",
		"CLUSTER GETKEYSINSLOT 1 99999999999999999999", "-ERR value is not an integer or out of range",
		"CLUSTER GETKEYSINSLOT 1", "-ERR wrong number of arguments for 'cluster|getkeysinslot' command",
		"CLUSTER GETKEYSINSLOT 1 2 3", "-ERR wrong number of arguments for 'cluster|getkeysinslot' command",
		"CLUSTER NOPE", "-ERR unknown subcommand 'NOPE'. Try CLUSTER HELP.",
		"cluster nope", "-ERR unknown subcommand 'nope'. Try CLUSTER HELP.",
	)
}

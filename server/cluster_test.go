package server

import "testing"

// The check value of CRC-16/XMODEM, and the slots Redis's CLUSTER KEYSLOT
// documentation gives as examples.
func TestKeySlotWorkedExamples(t *testing.T) {
	if got := crc16([]byte("123456789")); got != 0x31C3 {
		t.Errorf("crc16(123456789) = %#04x, want 0x31c3 (the XMODEM check value Redis's crc16.c quotes)", got)
	}
	for key, want := range map[string]int{"somekey": 11058, "foo{hash_tag}": 2515} {
		if got := keySlot([]byte(key)); got != want {
			t.Errorf("keySlot(%q) = %d, want %d", key, got, want)
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
		if a, b := keySlot([]byte(p[0])), keySlot([]byte(p[1])); a != b {
			t.Errorf("keySlot(%q) = %d, keySlot(%q) = %d: want equal", p[0], a, p[1], b)
		}
	}
	for _, key := range []string{"{}", "a{}b", "{}x{y}", "{abc", "abc}"} {
		if got, whole := keySlot([]byte(key)), int(crc16([]byte(key))&16383); got != whole {
			t.Errorf("keySlot(%q) = %d, want the whole key's slot %d", key, got, whole)
		}
	}
}

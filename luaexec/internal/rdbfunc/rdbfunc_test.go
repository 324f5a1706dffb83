package rdbfunc

import (
	"slices"
	"strings"
	"testing"
)

// crc-64-jones's published check value: the CRC of "123456789" (Redis's
// crc64.c tests it so too).
func TestChecksumCheckValue(t *testing.T) {
	if got := Checksum([]byte("123456789")); got != 0xe9c6d914c4b8d9ca {
		t.Fatalf("Checksum(123456789) = %#x, want 0xe9c6d914c4b8d9ca", got)
	}
}

func TestWriteThenRead(t *testing.T) {
	codes := []string{"", "#!lua name=a\nx", strings.Repeat("y", 100), strings.Repeat("z", 20000), strings.Repeat("w", 70000)}
	payload := Write(codes)
	got, msg := Read(payload)
	if msg != "" || !slices.Equal(got, codes) {
		t.Fatalf("Read(Write(codes)) = %d codes, %q", len(got), msg)
	}
	// Every byte counts: a payload changed anywhere is refused (tried at
	// every 101st byte and at each of the footer's).
	for i := 0; i < len(payload); i++ {
		if i%101 != 0 && i < len(payload)-10 {
			continue
		}
		bad := slices.Clone(payload)
		bad[i] ^= 0x10
		if _, msg := Read(bad); msg != "DUMP payload version or checksum are wrong" {
			t.Fatalf("byte %d changed: %q", i, msg)
		}
	}
	if _, msg := Read(payload[:9]); msg == "" {
		t.Fatal("a payload shorter than its footer was read")
	}
}

// withFooter ends body with RDB version 10 and its checksum.
func withFooter(body []byte) []byte {
	b := append(slices.Clone(body), 10, 0)
	sum := Checksum(b)
	for i := range 8 {
		b = append(b, byte(sum>>(8*i)))
	}
	return b
}

// Strings in RDB's other encodings, worked out by hand: an LZF run of one
// literal 'a' then a back reference of 9 bytes at distance 1 (ctrl 0xe0:
// length 7 + the next byte, 0, + 2; offset 0 + 1) is ten a's; the integer
// encodings are decimal text.
func TestReadEncodedStrings(t *testing.T) {
	for _, c := range []struct {
		body []byte
		want string
	}{
		{[]byte{245, 0xc3, 5, 10, 0x00, 'a', 0xe0, 0x00, 0x00}, "aaaaaaaaaa"},
		{[]byte{245, 0xc0, 0xfe}, "-2"},
		{[]byte{245, 0xc1, 0x39, 0x30}, "12345"},
		{[]byte{245, 0xc2, 0xff, 0xff, 0xff, 0x7f}, "2147483647"},
		{[]byte{245, 0x40, 3, 'a', 'b', 'c'}, "abc"},
		{[]byte{245, 0x80, 0, 0, 0, 2, 'h', 'i'}, "hi"},
	} {
		got, msg := Read(withFooter(c.body))
		if msg != "" || len(got) != 1 || got[0] != c.want {
			t.Errorf("Read(% x) = %q, %q; want %q", c.body, got, msg, c.want)
		}
	}
	for _, bad := range [][]byte{
		{245, 0xc3, 5, 11, 0x00, 'a', 0xe0, 0x00, 0x00}, // says 11 bytes, makes 10
		{245, 0xc3, 3, 10, 0x00, 'a', 0xe0},             // cut short
		{245, 0xc3, 3, 10, 0x20, 0x05, 0x00},            // refers before the start
		{245, 0x05, 'a'},                                // shorter than its length
		{1, 0},                                          // not a function
	} {
		if got, msg := Read(withFooter(bad)); msg == "" {
			t.Errorf("Read(% x) = %q, want an error", bad, got)
		}
	}
}

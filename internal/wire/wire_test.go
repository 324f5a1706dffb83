package wire

import (
	"bytes"
	"errors"
	"testing"
)

// A worked example: each piece of the form, written out by hand.
func TestDecoderReadsAWorkedExample(t *testing.T) {
	in := []byte{
		7,                      // a byte
		1, 0, 0, 0, 0, 0, 0, 2, // 0x0200000000000001, little-endian
		0xac, 0x02, // uvarint 300
		0x03,           // varint -2
		2, 'h', 'i', 0, // "hi", then an empty string
		2, // a count of 2 items of at least 1 byte, with 2 bytes left
		'x', 'y',
	}
	d := NewDecoder(in)
	if v := d.Byte(); v != 7 {
		t.Errorf("Byte = %d, want 7", v)
	}
	if v := d.Uint64(); v != 0x0200000000000001 {
		t.Errorf("Uint64 = %#x", v)
	}
	if v := d.Uvarint(); v != 300 {
		t.Errorf("Uvarint = %d, want 300", v)
	}
	if v := d.Varint(); v != -2 {
		t.Errorf("Varint = %d, want -2", v)
	}
	if s := d.Bytes(); string(s) != "hi" || cap(s) != 2 {
		t.Errorf("Bytes = %q with capacity %d, want \"hi\" with no room to append into the input", s, cap(s))
	}
	if s := d.Bytes(); len(s) != 0 {
		t.Errorf("Bytes = %q, want empty", s)
	}
	if n := d.Count(1); n != 2 {
		t.Errorf("Count = %d, want 2", n)
	}
	if err := d.Finish(); err == nil || err.Error() != "2 trailing bytes" {
		t.Errorf("Finish with 2 bytes left = %v", err)
	}
	d.Byte()
	d.Byte()
	if err := d.Finish(); err != nil {
		t.Errorf("Finish at the end = %v", err)
	}
}

// The first error sticks, later reads return zero values, and nothing is
// allocated for a length or a count the input cannot hold.
func TestDecoderRefusesWhatTheInputCannotHold(t *testing.T) {
	for _, c := range []struct {
		name string
		in   []byte
		read func(*Decoder)
		want string
	}{
		{"byte of nothing", nil, func(d *Decoder) { d.Byte() }, "truncated"},
		{"uint64 of 7 bytes", make([]byte, 7), func(d *Decoder) { d.Uint64() }, "truncated"},
		{"unfinished uvarint", []byte{0x80}, func(d *Decoder) { d.Uvarint() }, "bad varint"},
		{"uvarint over 64 bits", bytes.Repeat([]byte{0xff}, 10), func(d *Decoder) { d.Uvarint() }, "bad varint"},
		{"unfinished varint", []byte{0x80}, func(d *Decoder) { d.Varint() }, "bad varint"},
		{"string longer than the input", []byte{5, 'a'}, func(d *Decoder) { d.Bytes() }, "truncated"},
		{"count of 3 two-byte items in 5 bytes", []byte{3, 0, 0, 0, 0, 0}, func(d *Decoder) { d.Count(2) }, "count 3 exceeds the input"},
	} {
		d := NewDecoder(c.in)
		c.read(&d)
		if err := d.Err(); err == nil || err.Error() != c.want {
			t.Errorf("%s: error %v, want %q", c.name, err, c.want)
		}
		if d.Byte() != 0 || d.Uvarint() != 0 || d.Bytes() != nil || d.Len() != 0 {
			t.Errorf("%s: a read after the error returned something", c.name)
		}
		if err := d.Finish(); err == nil || err.Error() != c.want {
			t.Errorf("%s: Finish = %v, want the first error %q", c.name, err, c.want)
		}
	}
	d := NewDecoder(nil)
	d.Byte()
	if !errors.Is(d.Err(), ErrTruncated) {
		t.Errorf("a read past the end: %v, want ErrTruncated", d.Err())
	}
}

func TestAppendBytesAndString(t *testing.T) {
	b := AppendString([]byte{9}, "hi")
	b = AppendBytes(b, make([]byte, 200))
	want := append([]byte{9, 2, 'h', 'i', 0xc8, 0x01}, make([]byte, 200)...)
	if !bytes.Equal(b, want) {
		t.Errorf("got % x, want % x", b, want)
	}
}

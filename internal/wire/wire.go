// Package wire reads and writes the pieces that lockserver's binary forms are
// made of (the Raft log and forwarded calls in replication, the users in acl):
// bytes, little-endian uint64s, varints, and strings and counts prefixed by a
// uvarint. The forms themselves, their fields and their order stay with the
// packages that own them.
package wire

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// AppendBytes appends s prefixed by its length.
func AppendBytes(b, s []byte) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// AppendString appends s prefixed by its length, as AppendBytes does.
func AppendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// ErrTruncated is the error of a read past the end of the input.
var ErrTruncated = errors.New("truncated")

// A Decoder reads an encoding that it treats as hostile: every length and
// count is checked against what is left before anything is allocated. After
// the first error every read returns a zero value and the error sticks, so
// callers check it once, at the end.
type Decoder struct {
	b   []byte
	err error
}

// NewDecoder returns a Decoder reading b.
func NewDecoder(b []byte) Decoder { return Decoder{b: b} }

// Err is the first error, or nil.
func (d *Decoder) Err() error { return d.err }

// Len is how many bytes are left.
func (d *Decoder) Len() int { return len(d.b) }

// Fail records err unless an error came first, and stops every later read.
func (d *Decoder) Fail(err error) {
	if d.err == nil {
		d.err = err
	}
	d.b = nil
}

// Finish returns the first error, or an error if any input is left unread.
func (d *Decoder) Finish() error {
	if d.err == nil && len(d.b) != 0 {
		return fmt.Errorf("%d trailing bytes", len(d.b))
	}
	return d.err
}

// Byte reads one byte.
func (d *Decoder) Byte() byte {
	if len(d.b) < 1 {
		d.Fail(ErrTruncated)
		return 0
	}
	c := d.b[0]
	d.b = d.b[1:]
	return c
}

// Uint64 reads a little-endian uint64.
func (d *Decoder) Uint64() uint64 {
	if len(d.b) < 8 {
		d.Fail(ErrTruncated)
		return 0
	}
	v := binary.LittleEndian.Uint64(d.b)
	d.b = d.b[8:]
	return v
}

// Uvarint reads an unsigned varint.
func (d *Decoder) Uvarint() uint64 {
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.Fail(errors.New("bad varint"))
		return 0
	}
	d.b = d.b[n:]
	return v
}

// Varint reads a signed varint.
func (d *Decoder) Varint() int64 {
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.Fail(errors.New("bad varint"))
		return 0
	}
	d.b = d.b[n:]
	return v
}

// Count reads a number of items each at least minSize bytes long, and fails
// if the rest of the input cannot hold them.
func (d *Decoder) Count(minSize int) int {
	n := d.Uvarint()
	if n > uint64(len(d.b)/minSize) {
		d.Fail(fmt.Errorf("count %d exceeds the input", n))
		return 0
	}
	return int(n)
}

// Bytes reads a length-prefixed byte string. It aliases the input, with no
// room to append into what follows it.
func (d *Decoder) Bytes() []byte {
	n := d.Uvarint()
	if n > uint64(len(d.b)) {
		d.Fail(ErrTruncated)
		return nil
	}
	s := d.b[:n:n]
	d.b = d.b[n:]
	return s
}

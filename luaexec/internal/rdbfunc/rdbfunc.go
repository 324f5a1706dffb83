// Package rdbfunc reads and writes the payload of Redis 7.0's FUNCTION DUMP
// and FUNCTION RESTORE: each library's code as an RDB string after the
// RDB_OPCODE_FUNCTION2 opcode, then the RDB version (2 bytes, little-endian)
// and a CRC-64 of everything before it (8 bytes, little-endian), the
// checksum Redis's DUMP uses (crc-64-jones). Payloads this package writes
// restore on redis-server, and redis-server's restore here; Redis
// compresses strings longer than 20 bytes with LZF, which this package
// reads but does not write.
package rdbfunc

import (
	"encoding/binary"
	"hash/crc64"
	"strconv"
)

const (
	// opFunction2 precedes a library in a payload (RDB_OPCODE_FUNCTION2).
	opFunction2 = 245
	// opFunction preceded a library in Redis 7.0's release candidates.
	opFunction = 246
	// rdbVersion is Redis 7.0's RDB version: a payload of a later one is
	// refused, as Redis refuses it.
	rdbVersion = 10
)

// jones is the table of crc-64-jones (polynomial 0xad93d23594c935a9,
// reflected), which Go's crc64 takes in its reversed form.
var jones = crc64.MakeTable(0x95ac9329ac4bc9b5)

// Checksum returns Redis's crc64(0, b): crc-64-jones with no inversion at
// either end, where Go's crc64 inverts at both.
func Checksum(b []byte) uint64 { return ^crc64.Update(^uint64(0), jones, b) }

// Write returns the payload of the libraries of codes.
func Write(codes []string) []byte {
	var b []byte
	for _, code := range codes {
		b = append(b, opFunction2)
		b = appendLength(b, uint64(len(code)))
		b = append(b, code...)
	}
	b = binary.LittleEndian.AppendUint16(b, rdbVersion)
	return binary.LittleEndian.AppendUint64(b, Checksum(b))
}

// appendLength appends n in RDB's length encoding.
func appendLength(b []byte, n uint64) []byte {
	switch {
	case n < 1<<6:
		return append(b, byte(n))
	case n < 1<<14:
		return append(b, byte(n>>8)|0x40, byte(n))
	case n <= 1<<32-1:
		return binary.BigEndian.AppendUint32(append(b, 0x80), uint32(n))
	}
	return binary.BigEndian.AppendUint64(append(b, 0x81), n)
}

// Read returns the library codes of a payload, or the error Redis's
// FUNCTION RESTORE gives (without its "ERR ").
func Read(payload []byte) ([]string, string) {
	n := len(payload)
	if n < 10 || binary.LittleEndian.Uint16(payload[n-10:]) > rdbVersion ||
		binary.LittleEndian.Uint64(payload[n-8:]) != Checksum(payload[:n-8]) {
		return nil, "DUMP payload version or checksum are wrong"
	}
	r := reader{b: payload[:n-10]}
	var codes []string
	for len(r.b) > 0 {
		switch op := r.b[0]; op {
		case opFunction2:
			r.b = r.b[1:]
		case opFunction:
			return nil, "Pre-GA function format not supported"
		default:
			return nil, "given type is not a function"
		}
		code, ok := r.string()
		if !ok {
			return nil, "Failed loading library payload"
		}
		codes = append(codes, code)
	}
	return codes, ""
}

// reader reads RDB's encodings from b.
type reader struct{ b []byte }

func (r *reader) bytes(n uint64) ([]byte, bool) {
	if n > uint64(len(r.b)) {
		return nil, false
	}
	out := r.b[:n]
	r.b = r.b[n:]
	return out, true
}

// length reads a length, or the kind of a string's special encoding when
// encoded is set.
func (r *reader) length() (n uint64, encoded, ok bool) {
	if len(r.b) == 0 {
		return 0, false, false
	}
	first := r.b[0]
	r.b = r.b[1:]
	switch first >> 6 {
	case 0:
		return uint64(first & 0x3f), false, true
	case 1:
		b, ok := r.bytes(1)
		if !ok {
			return 0, false, false
		}
		return uint64(first&0x3f)<<8 | uint64(b[0]), false, true
	case 3:
		return uint64(first & 0x3f), true, true
	}
	switch first {
	case 0x80:
		b, ok := r.bytes(4)
		if !ok {
			return 0, false, false
		}
		return uint64(binary.BigEndian.Uint32(b)), false, true
	case 0x81:
		b, ok := r.bytes(8)
		if !ok {
			return 0, false, false
		}
		return binary.BigEndian.Uint64(b), false, true
	}
	return 0, false, false
}

// Special encodings of a string.
const (
	encInt8 = iota
	encInt16
	encInt32
	encLZF
)

// string reads a string in any of RDB's encodings.
func (r *reader) string() (string, bool) {
	n, encoded, ok := r.length()
	if !ok {
		return "", false
	}
	if !encoded {
		b, ok := r.bytes(n)
		return string(b), ok
	}
	switch n {
	case encInt8, encInt16, encInt32:
		b, ok := r.bytes(1 << n)
		if !ok {
			return "", false
		}
		var v int64
		switch n {
		case encInt8:
			v = int64(int8(b[0]))
		case encInt16:
			v = int64(int16(binary.LittleEndian.Uint16(b)))
		default:
			v = int64(int32(binary.LittleEndian.Uint32(b)))
		}
		return strconv.FormatInt(v, 10), true
	case encLZF:
		clen, enc1, ok1 := r.length()
		ulen, enc2, ok2 := r.length()
		if !ok1 || !ok2 || enc1 || enc2 {
			return "", false
		}
		compressed, ok := r.bytes(clen)
		if !ok || ulen > 1<<32 {
			return "", false
		}
		return decompressLZF(compressed, int(ulen))
	}
	return "", false
}

// decompressLZF expands LZF data (liblzf's format, which Redis uses) into
// exactly n bytes; it reports false on data that does not.
func decompressLZF(in []byte, n int) (string, bool) {
	out := make([]byte, 0, n)
	for i := 0; i < len(in); {
		ctrl := int(in[i])
		i++
		if ctrl < 1<<5 { // a run of ctrl+1 literal bytes
			run := ctrl + 1
			if i+run > len(in) || len(out)+run > n {
				return "", false
			}
			out = append(out, in[i:i+run]...)
			i += run
			continue
		}
		// A back reference: length and offset.
		length := ctrl >> 5
		if length == 7 {
			if i >= len(in) {
				return "", false
			}
			length += int(in[i])
			i++
		}
		if i >= len(in) {
			return "", false
		}
		ref := len(out) - (ctrl&0x1f)<<8 - int(in[i]) - 1
		i++
		length += 2
		if ref < 0 || len(out)+length > n {
			return "", false
		}
		for j := range length { // the copy may overlap what it writes
			out = append(out, out[ref+j])
		}
	}
	return string(out), len(out) == n
}

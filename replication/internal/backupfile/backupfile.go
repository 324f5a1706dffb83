// Package backupfile reads and writes a backup file: a cluster's state at
// one applied index (the body: a snapshot, as a member writes one), with
// what the operator needs to trust it before restoring it.
//
// The file is a fixed header, the body, and a table of the body's blocks'
// checksums:
//
//	offset  size  field
//	0       8     "LKBACKUP"
//	8       2     format version (1), little endian like every number here
//	10      2     zero
//	12      16    the identity of the cluster the backup came from
//	28      8     the applied index the body holds
//	36      8     the leader's term then
//	44      8     when the backup began, Unix nanoseconds on the leader
//	52      8     the body's length
//	60      4     the block size (64 KiB)
//	64      32    SHA-256 of the body
//	96      4     CRC-32C of the block table
//	100     4     CRC-32C of bytes 0-99
//	104     ...   the body
//	...     4n    CRC-32C of each block of the body, in order
//
// The SHA-256 says whether the body is what the leader wrote; the blocks'
// checksums say where it is not, to the block.
package backupfile

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"time"
)

const (
	magic      = "LKBACKUP"
	version    = 1
	headerSize = 104
	blockSize  = 64 << 10
)

var crc32c = crc32.MakeTable(crc32.Castagnoli)

// Header is what a backup file says of its body.
type Header struct {
	Cluster [16]byte
	Index   uint64
	Term    uint64
	Created time.Time
	Length  uint64
	SHA256  [32]byte
}

func (h *Header) encode(tableSum uint32) []byte {
	b := make([]byte, 0, headerSize)
	b = append(b, magic...)
	b = binary.LittleEndian.AppendUint16(b, version)
	b = binary.LittleEndian.AppendUint16(b, 0)
	b = append(b, h.Cluster[:]...)
	b = binary.LittleEndian.AppendUint64(b, h.Index)
	b = binary.LittleEndian.AppendUint64(b, h.Term)
	b = binary.LittleEndian.AppendUint64(b, uint64(h.Created.UnixNano()))
	b = binary.LittleEndian.AppendUint64(b, h.Length)
	b = binary.LittleEndian.AppendUint32(b, blockSize)
	b = append(b, h.SHA256[:]...)
	b = binary.LittleEndian.AppendUint32(b, tableSum)
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, crc32c))
}

// A DamageError says where a backup file is not what was written.
type DamageError struct {
	Path   string
	Offset int64 // the first byte of the damaged range, in the file
	End    int64 // the byte after it
	What   string
}

func (e *DamageError) Error() string {
	return fmt.Sprintf("backup %s is damaged at offset %d (bytes %d-%d): %s", e.Path, e.Offset, e.Offset, e.End-1, e.What)
}

// A Writer writes a backup file: the body through Write, then Commit.
type Writer struct {
	f      *os.File
	path   string
	tmp    string // f's name until Commit
	buf    *bufio.Writer
	sum    hash.Hash
	n      uint64
	block  uint32 // CRC-32C of the block being written
	blocks []byte // the table so far
}

// Create begins the backup file path, written under a temporary name until
// Commit.
func Create(path string) (*Writer, error) {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return nil, err
	}
	w := &Writer{f: f, path: path, tmp: f.Name(), sum: sha256.New()}
	if _, err := f.Write(make([]byte, headerSize)); err != nil {
		w.Abort()
		return nil, err
	}
	w.buf = bufio.NewWriterSize(f, 1<<20)
	return w, nil
}

// Write appends p to the body.
func (w *Writer) Write(p []byte) (int, error) {
	n, err := w.buf.Write(p)
	w.sum.Write(p[:n])
	for q := p[:n]; len(q) > 0; {
		room := blockSize - int(w.n%blockSize)
		k := min(room, len(q))
		w.block = crc32.Update(w.block, crc32c, q[:k])
		w.n += uint64(k)
		q = q[k:]
		if k == room {
			w.blocks = binary.LittleEndian.AppendUint32(w.blocks, w.block)
			w.block = 0
		}
	}
	return n, err
}

// Sum returns the SHA-256 of the body written so far.
func (w *Writer) Sum() [32]byte { return [32]byte(w.sum.Sum(nil)) }

// Commit writes the table and the header (h, with the body's length and
// hash), syncs the file and gives it its name.
func (w *Writer) Commit(h Header) error {
	if w.n%blockSize != 0 {
		w.blocks = binary.LittleEndian.AppendUint32(w.blocks, w.block)
	}
	h.Length, h.SHA256 = w.n, w.Sum()
	err := errors.Join(
		func() error { _, err := w.buf.Write(w.blocks); return err }(),
		w.buf.Flush(),
	)
	if err == nil {
		_, err = w.f.WriteAt(h.encode(crc32.Checksum(w.blocks, crc32c)), 0)
	}
	if err == nil {
		err = w.f.Sync()
	}
	if err == nil {
		err = w.f.Close()
		w.f = nil
	}
	if err == nil {
		err = os.Rename(w.tmp, w.path)
	}
	if err != nil {
		w.Abort()
		return err
	}
	if d, err := os.Open(filepath.Dir(w.path)); err == nil {
		d.Sync()
		d.Close()
	}
	return nil
}

// Abort removes what Create and Write wrote.
func (w *Writer) Abort() {
	if w.f != nil {
		w.f.Close()
		w.f = nil
	}
	os.Remove(w.tmp)
}

// Open checks the backup file path whole (its header, its table and every
// block of its body against both) and returns its header and a reader of
// its body. A file not as written fails with a *DamageError.
func Open(path string) (Header, *os.File, *io.SectionReader, error) {
	f, err := os.Open(path)
	if err != nil {
		return Header{}, nil, nil, err
	}
	h, body, err := check(f, path)
	if err != nil {
		f.Close()
		return Header{}, nil, nil, err
	}
	return h, f, body, nil
}

func check(f *os.File, path string) (Header, *io.SectionReader, error) {
	var h Header
	st, err := f.Stat()
	if err != nil {
		return h, nil, err
	}
	size := st.Size()
	damaged := func(off, end int64, what string) error {
		return &DamageError{Path: path, Offset: off, End: end, What: what}
	}
	head := make([]byte, headerSize)
	if _, err := f.ReadAt(head, 0); err != nil {
		if size < headerSize {
			return h, nil, fmt.Errorf("%s is not a lockserver backup: %d bytes, shorter than a backup's header", path, size)
		}
		return h, nil, err
	}
	if !bytes.HasPrefix(head, []byte(magic)) {
		return h, nil, fmt.Errorf("%s is not a lockserver backup (it does not begin with %q)", path, magic)
	}
	if crc32.Checksum(head[:headerSize-4], crc32c) != binary.LittleEndian.Uint32(head[headerSize-4:]) {
		return h, nil, damaged(0, headerSize, "the header fails its checksum")
	}
	if v := binary.LittleEndian.Uint16(head[8:]); v != version {
		return h, nil, fmt.Errorf("%s is a backup of format %d, which a later release wrote; this build reads format %d", path, v, version)
	}
	copy(h.Cluster[:], head[12:28])
	h.Index = binary.LittleEndian.Uint64(head[28:])
	h.Term = binary.LittleEndian.Uint64(head[36:])
	h.Created = time.Unix(0, int64(binary.LittleEndian.Uint64(head[44:])))
	h.Length = binary.LittleEndian.Uint64(head[52:])
	if bs := binary.LittleEndian.Uint32(head[60:]); bs != blockSize {
		return h, nil, damaged(60, 64, fmt.Sprintf("block size %d, want %d", bs, blockSize))
	}
	copy(h.SHA256[:], head[64:96])
	blocks := (h.Length + blockSize - 1) / blockSize
	tableAt := int64(headerSize) + int64(h.Length)
	if h.Length > uint64(size) || size != tableAt+4*int64(blocks) {
		return h, nil, fmt.Errorf("%s is %d bytes where its header says %d: it was cut short or added to", path, size, int64(headerSize)+int64(h.Length)+4*int64(blocks))
	}
	table := make([]byte, 4*blocks)
	if _, err := f.ReadAt(table, tableAt); err != nil {
		return h, nil, err
	}
	if crc32.Checksum(table, crc32c) != binary.LittleEndian.Uint32(head[96:]) {
		return h, nil, damaged(tableAt, size, "the table of the body's checksums fails its own")
	}
	sum := sha256.New()
	r := bufio.NewReaderSize(io.NewSectionReader(f, headerSize, int64(h.Length)), 1<<20)
	block := make([]byte, blockSize)
	for i := range blocks {
		n := min(uint64(blockSize), h.Length-i*blockSize)
		if _, err := io.ReadFull(r, block[:n]); err != nil {
			return h, nil, err
		}
		sum.Write(block[:n])
		if crc32.Checksum(block[:n], crc32c) != binary.LittleEndian.Uint32(table[4*i:]) {
			off := int64(headerSize) + int64(i)*blockSize
			return h, nil, damaged(off, off+int64(n), fmt.Sprintf("block %d of the body fails its checksum", i))
		}
	}
	if [32]byte(sum.Sum(nil)) != h.SHA256 {
		return h, nil, damaged(headerSize, tableAt, "the body's SHA-256 is not the header's")
	}
	return h, io.NewSectionReader(f, headerSize, int64(h.Length)), nil
}

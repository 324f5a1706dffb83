package backupfile

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func writeBackup(t testing.TB, body []byte) (string, Header) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "b.lkbackup")
	w, err := Create(path)
	if err != nil {
		t.Fatal(err)
	}
	// In uneven pieces, across block boundaries.
	for rest := body; len(rest) > 0; {
		n := min(len(rest), 1+rand.IntN(100_000))
		if _, err := w.Write(rest[:n]); err != nil {
			t.Fatal(err)
		}
		rest = rest[n:]
	}
	h := Header{Cluster: [16]byte{1, 2, 3}, Index: 77, Term: 5, Created: time.Unix(1700000000, 42)}
	if err := w.Commit(h); err != nil {
		t.Fatal(err)
	}
	return path, h
}

// What Commit wrote, Open reads back: the header as given, the body's
// length and SHA-256 (computed here with crypto/sha256), and the body.
func TestRoundTrip(t *testing.T) {
	for _, size := range []int{0, 1, blockSize, 3*blockSize + 17} {
		body := make([]byte, size)
		for i := range body {
			body[i] = byte(rand.Uint32())
		}
		path, want := writeBackup(t, body)
		h, f, r, err := Open(path)
		if err != nil {
			t.Fatalf("%d bytes: %v", size, err)
		}
		got, err := io.ReadAll(r)
		f.Close()
		if err != nil || !bytes.Equal(got, body) {
			t.Fatalf("%d bytes: read back %d bytes (%v), want the body", size, len(got), err)
		}
		want.Length, want.SHA256 = uint64(size), sha256.Sum256(body)
		if h != want {
			t.Fatalf("%d bytes: header %+v, want %+v", size, h, want)
		}
		entries, _ := os.ReadDir(filepath.Dir(path))
		if len(entries) != 1 {
			t.Fatalf("%d bytes: the directory holds %d files, want the backup alone", size, len(entries))
		}
	}
}

// A byte flipped anywhere is refused, and the error's range holds it.
func TestFlippedByteIsLocated(t *testing.T) {
	body := make([]byte, 5*blockSize+100)
	for i := range body {
		body[i] = byte(i * 7)
	}
	path, _ := writeBackup(t, body)
	clean, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, off := range []int64{3, 20, 70, headerSize, headerSize + 2*blockSize + 5, headerSize + 5*blockSize + 99, int64(len(clean)) - 1} {
		damaged := bytes.Clone(clean)
		damaged[off] ^= 0x10
		if err := os.WriteFile(path, damaged, 0o600); err != nil {
			t.Fatal(err)
		}
		_, _, _, err := Open(path)
		var de *DamageError
		switch {
		case off < 8:
			if err == nil {
				t.Errorf("byte %d flipped (the magic): opened", off)
			}
		case !errors.As(err, &de):
			t.Errorf("byte %d flipped: %v, want a DamageError", off, err)
		case off < de.Offset || off >= de.End:
			t.Errorf("byte %d flipped: damage reported at %d-%d", off, de.Offset, de.End)
		}
	}
	// Cut short.
	if err := os.WriteFile(path, clean[:len(clean)-3], 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := Open(path); err == nil {
		t.Error("a backup cut short opened")
	}
}

// No file makes Open panic or return a body it did not check: whatever it
// accepts reads back whole, as long as its header says.
func FuzzOpen(f *testing.F) {
	path, _ := writeBackup(f, []byte("a body of a few bytes"))
	if valid, err := os.ReadFile(path); err == nil {
		f.Add(valid)
		f.Add(valid[:headerSize])
	}
	f.Add([]byte(magic))
	f.Fuzz(func(t *testing.T, data []byte) {
		path := filepath.Join(t.TempDir(), "f")
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		h, file, body, err := Open(path)
		if err != nil {
			return
		}
		defer file.Close()
		got, err := io.ReadAll(body)
		if err != nil || uint64(len(got)) != h.Length || sha256.Sum256(got) != h.SHA256 {
			t.Fatalf("accepted a body of %d bytes (%v) whose header says %d", len(got), err, h.Length)
		}
	})
}

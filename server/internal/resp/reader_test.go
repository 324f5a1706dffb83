package resp

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

// readAll runs a reader over input delivered in chunks of size chunk and
// returns the commands, joined as "a b c", and the error that ended it.
func readAll(t testing.TB, input string, chunk int, lim *Limits, authed func() bool) ([]string, error) {
	t.Helper()
	var src io.Reader = strings.NewReader(input)
	if chunk > 0 {
		src = &chunked{data: []byte(input), n: chunk}
	}
	r := NewReader(src, lim, authed)
	var cmds []string
	for {
		for {
			args, err := r.Next()
			if err != nil {
				return cmds, err
			}
			if args == nil {
				break
			}
			cmds = append(cmds, string(bytes.Join(args, []byte(" "))))
		}
		if err := r.Fill(); err != nil {
			return cmds, err
		}
	}
}

// chunked delivers its data n bytes per Read.
type chunked struct {
	data []byte
	n    int
}

func (c *chunked) Read(p []byte) (int, error) {
	if len(c.data) == 0 {
		return 0, io.EOF
	}
	n := copy(p[:min(len(p), c.n)], c.data)
	c.data = c.data[n:]
	return n, nil
}

func TestReader(t *testing.T) {
	cases := []struct {
		name, input string
		want        []string
		err         string // "" means EOF
	}{
		{"multibulk", "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$6\r\nv a\r\nl\r\n", []string{"SET k v a\r\nl"}, ""},
		{"pipeline", "*1\r\n$4\r\nPING\r\n*2\r\n$4\r\nECHO\r\n$0\r\n\r\n", []string{"PING", "ECHO "}, ""},
		{"binary", "*2\r\n$3\r\nGET\r\n$3\r\n\x00\xff\n\r\n", []string{"GET \x00\xff\n"}, ""},
		{"empty and negative multibulks", "*0\r\n*-1\r\n*1\r\n$1\r\nA\r\n", []string{"A"}, ""},
		{"no CRLF check after a body", "*1\r\n$1\r\nAxy", []string{"A"}, ""},
		{"inline", "SET k v\r\nGET k\nPING\r\n", []string{"SET k v", "GET k", "PING"}, ""},
		{"inline blanks", "  SET\t k  \r\n\r\n \n", []string{"SET k"}, ""},
		{"inline double quotes", `SET "a b" "\x41\n\t\"\\\q"` + "\r\n", []string{"SET a b A\n\t\"\\q"}, ""},
		{"inline bad hex is literal", `ECHO "\xZZ"` + "\n", []string{"ECHO xZZ"}, ""},
		{"inline single quotes", `SET 'it\'s' '\n'` + "\n", []string{`SET it's \n`}, ""},
		{"inline empty quotes", `SET k ""` + "\n", []string{"SET k "}, ""},
		{"inline quote mid-word", `SET a"b c"d` + "\n", nil, "Protocol error: unbalanced quotes in request"},
		{"inline quote mid-word ends", `SET a"b c"` + "\n", []string{"SET ab c"}, ""},
		{"inline unbalanced", `SET "a` + "\n", nil, "Protocol error: unbalanced quotes in request"},
		{"inline NUL never ends the line", "PING\x00\r\nPING\r\n", nil, ""},
		{"expected dollar", "*1\r\n:1\r\n", nil, "Protocol error: expected '$', got ':'"},
		{"expected dollar, got CR", "*1\r\n\r\n", nil, "Protocol error: expected '$', got '\r'"},
		{"bad multibulk", "*1x\r\n", nil, "Protocol error: invalid multibulk length"},
		{"multibulk with plus", "*+1\r\n", nil, "Protocol error: invalid multibulk length"},
		{"multibulk leading zero", "*01\r\n", nil, "Protocol error: invalid multibulk length"},
		{"bad bulk", "*1\r\n$-1\r\n", nil, "Protocol error: invalid bulk length"},
		{"crash packet", "*1\r\n$9223372036854775802\r\nabcdefgh\r\n", nil, "Protocol error: invalid bulk length"},
		{"overflowing bulk", "*1\r\n$92233720368547758070\r\n", nil, "Protocol error: invalid bulk length"},
		{"commands before an error", "PING\r\n*1\r\n$x\r\n", []string{"PING"}, "Protocol error: invalid bulk length"},
		{"incomplete", "*2\r\n$3\r\nGET\r\n$10\r\nabc", nil, ""},
	}
	for _, c := range cases {
		for _, chunk := range []int{0, 1, 3} {
			got, err := readAll(t, c.input, chunk, NewLimits(0, 0, 0, 0), nil)
			if errors.Is(err, io.EOF) {
				err = nil
			}
			if (err == nil) != (c.err == "") || (err != nil && err.Error() != c.err) {
				t.Errorf("%s (chunk %d): error %v, want %q", c.name, chunk, err, c.err)
			}
			if strings.Join(got, "|") != strings.Join(c.want, "|") {
				t.Errorf("%s (chunk %d): commands %q, want %q", c.name, chunk, got, c.want)
			}
		}
	}
}

func TestReaderLimits(t *testing.T) {
	lim := NewLimits(10, 3, 16, 40) // MaxBulk, MaxMultibulk, MaxInline, MaxQuery
	cases := []struct {
		name, input string
		err         string
	}{
		{"bulk at the limit", "*1\r\n$10\r\n0123456789\r\n", ""},
		{"bulk over the limit", "*1\r\n$11\r\n", "Protocol error: invalid bulk length"},
		{"multibulk at the limit", "*3\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\nc\r\n", ""},
		{"multibulk over the limit", "*4\r\n", "Protocol error: invalid multibulk length"},
		{"inline line over the limit", strings.Repeat("x", 17), "Protocol error: too big inline request"},
		{"count line over the limit", "*" + strings.Repeat("1", 17), "Protocol error: too big mbulk count string"},
		{"bulk line over the limit", "*1\r\n$" + strings.Repeat("1", 17), "Protocol error: too big bulk count string"},
		{"command over the query limit", "*3\r\n$10\r\n0123456789\r\n$10\r\n0123456789\r\n$10\r\n", ErrQueryTooBig.Error()},
	}
	for _, c := range cases {
		for _, chunk := range []int{0, 1} {
			_, err := readAll(t, c.input, chunk, lim, nil)
			if errors.Is(err, io.EOF) {
				err = nil
			}
			if (err == nil) != (c.err == "") || (err != nil && err.Error() != c.err) {
				t.Errorf("%s (chunk %d): error %v, want %q", c.name, chunk, err, c.err)
			}
		}
	}
	// A stranger (password set, not authenticated) gets Redis's small limits.
	stranger := func() bool { return false }
	if _, err := readAll(t, "*11\r\n", 0, NewLimits(0, 0, 0, 0), stranger); err == nil || err.Error() != "Protocol error: unauthenticated multibulk length" {
		t.Errorf("stranger's multibulk: %v", err)
	}
	if _, err := readAll(t, "*1\r\n$16385\r\n", 0, NewLimits(0, 0, 0, 0), stranger); err == nil || err.Error() != "Protocol error: unauthenticated bulk length" {
		t.Errorf("stranger's bulk: %v", err)
	}
	if got, err := readAll(t, "*10\r\n"+strings.Repeat("$16384\r\n"+strings.Repeat("x", 16384)+"\r\n", 10), 0, NewLimits(0, 0, 0, 0), stranger); len(got) != 1 || !errors.Is(err, io.EOF) {
		t.Errorf("stranger within the limits: %d commands, %v", len(got), err)
	}
}

// TestReaderGrowsWithData: a declared length reserves nothing; the buffer
// grows only with the bytes that arrive, and shrinks after a big command.
func TestReaderGrowsWithData(t *testing.T) {
	src := &chunked{data: []byte("*2\r\n$3\r\nGET\r\n$536870912\r\n" + strings.Repeat("x", 100000)), n: 4096}
	r := NewReader(src, NewLimits(0, 0, 0, 0), nil)
	for r.Fill() == nil {
		if args, err := r.Next(); args != nil || err != nil {
			t.Fatalf("next = %q, %v", args, err)
		}
	}
	if len(r.buf) > 4*100000 {
		t.Errorf("buffer of %d bytes for 100 kB received", len(r.buf))
	}

	big := "*2\r\n$4\r\nECHO\r\n$200000\r\n" + strings.Repeat("y", 200000) + "\r\n*1\r\n$4\r\nPING\r\n"
	r = NewReader(iotest.HalfReader(strings.NewReader(big)), NewLimits(0, 0, 0, 0), nil)
	var n int
	for r.Fill() == nil {
		for {
			args, err := r.Next()
			if err != nil {
				t.Fatal(err)
			}
			if args == nil {
				break
			}
			n++
		}
	}
	if n != 2 || len(r.buf) != ReadBufSize {
		t.Errorf("%d commands, buffer of %d bytes after them; want 2 and %d", n, len(r.buf), ReadBufSize)
	}
}

// FuzzReader feeds arbitrary bytes, in arbitrary chunks, to the reader: it
// must never panic, every argument must lie inside what was sent, and the
// buffer must stay within the limits. A protocol error ends the input, as
// it ends the connection: the reader is not used after one.
func FuzzReader(f *testing.F) {
	for _, s := range []string{
		"*1\r\n$4\r\nPING\r\n", "PING\r\n", "*1\r\n$9223372036854775802\r\nabcdefgh\r\n", "SET \"a\\x41\" 'b'\r\n",
		"*2\r\n$3\r\nGET\r\n$-1\r\n", "*-1\r\n", "\x00\r\n", "*3\r\n$1\r\na\r\n$1\r\nb",
	} {
		f.Add([]byte(s), uint8(7))
	}
	lim := NewLimits(1<<10, 64, 256, 4<<10) // MaxBulk, MaxMultibulk, MaxInline, MaxQuery
	f.Fuzz(func(t *testing.T, data []byte, chunk uint8) {
		r := NewReader(&chunked{data: data, n: int(chunk) + 1}, lim, nil)
		for {
			for {
				args, err := r.Next()
				if err != nil {
					return // the server closes the connection
				}
				if args == nil {
					break
				}
				if len(args) > 64 {
					t.Fatalf("%d arguments past MaxMultibulk", len(args))
				}
				for _, a := range args {
					if len(a) > 256 && len(a) > 1<<10 {
						t.Fatalf("argument of %d bytes past the limits", len(a))
					}
				}
			}
			if len(r.buf) > 2*(4<<10)+ReadBufSize {
				t.Fatalf("buffer of %d bytes past MaxQuery", len(r.buf))
			}
			if r.Fill() != nil {
				return
			}
		}
	})
}

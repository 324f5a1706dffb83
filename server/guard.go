package server

import (
	"io"

	"github.com/lockserver/lockserver/keyspace"
)

// Limits bound what one client may send, as Redis's limits do. The zero value of
// a field means its default.
type Limits struct {
	// MaxBulk is the largest bulk string a client may send (proto-max-bulk-len).
	MaxBulk int64
	// MaxMultibulk is the largest number of arguments of one command.
	MaxMultibulk int64
	// MaxInline is the longest inline command line, and the longest RESP header line.
	MaxInline int
	// MaxQuery is the most bytes one command may take (client-query-buffer-limit).
	MaxQuery int64
}

// Defaults for Limits, Redis 7's except MaxMultibulk (Redis allows 2^31-1; we
// bound it because every argument costs memory before the command runs).
const (
	DefaultMaxBulk      = 512 << 20
	DefaultMaxMultibulk = 1 << 20
	DefaultMaxInline    = 64 << 10
	DefaultMaxQuery     = 1 << 30
)

func (l Limits) withDefaults() Limits {
	if l.MaxBulk <= 0 {
		l.MaxBulk = DefaultMaxBulk
	}
	if l.MaxMultibulk <= 0 {
		l.MaxMultibulk = DefaultMaxMultibulk
	}
	if l.MaxInline <= 0 {
		l.MaxInline = DefaultMaxInline
	}
	if l.MaxQuery <= 0 {
		l.MaxQuery = DefaultMaxQuery
	}
	return l
}

// Limits for a connection that has not authenticated on a server with a
// password, as in Redis: a stranger cannot make the server buffer much.
const (
	unauthMaxMultibulk = 10
	unauthMaxBulk      = 16384
)

// protocolError is a malformed or oversized request. The connection replies
// "-ERR <text>" and closes, as Redis does.
type protocolError string

func (e protocolError) Error() string { return "Protocol error: " + string(e) }

// guard sits between a connection and redcon's reader. It follows the RESP
// framing of the byte stream and fails, with Redis's error text, before redcon
// sees a header that exceeds the limits or that redcon would mishandle (lengths
// that overflow, empty multibulks). Redcon therefore only ever parses
// well-framed input of bounded size.
type guard struct {
	src    io.Reader
	lim    Limits
	authed func() bool // nil: no password is required

	buf []byte // raw bytes read from src
	out []byte // checked bytes not yet handed to the reader
	err error  // returned once out is drained

	state   guardState
	line    []byte // the header or inline line being collected, including '\n'
	args    int64  // bulk strings left in the current multibulk
	body    int64  // bytes left in the current bulk, CRLF included
	cmdSize int64  // bytes of the current command so far
}

type guardState uint8

const (
	atCommand guardState = iota // the next byte starts a command
	inCount                     // collecting "*<count>\r\n"
	inInline                    // collecting an inline command line
	atBulk                      // the next byte must be '$'
	inBulkLen                   // collecting "$<len>\r\n"
	inBody                      // passing a bulk's bytes
)

func newGuard(src io.Reader, lim Limits, authed func() bool) *guard {
	return &guard{src: src, lim: lim.withDefaults(), authed: authed, buf: make([]byte, 16<<10)}
}

func (g *guard) Read(p []byte) (int, error) {
	for len(g.out) == 0 {
		if g.err != nil {
			return 0, g.err
		}
		// A large bulk body goes straight into p: nothing in it needs checking.
		if g.state == inBody && g.body > 2 && len(p) > 0 {
			want := min(int64(len(p)), g.body-2)
			n, err := g.src.Read(p[:want])
			g.body -= int64(n)
			g.cmdSize += int64(n)
			if err != nil {
				g.err = err
			}
			if n > 0 {
				return n, nil
			}
			continue
		}
		n, err := g.src.Read(g.buf)
		g.scan(g.buf[:n])
		if err != nil && g.err == nil {
			g.err = err
		}
	}
	n := copy(p, g.out)
	g.out = g.out[n:]
	if len(g.out) == 0 {
		g.out = g.out[:0:0]
	}
	return n, nil
}

// scan checks b and appends what may pass to g.out. On a violation it sets
// g.err and drops the rest.
func (g *guard) scan(b []byte) {
	for len(b) > 0 && g.err == nil {
		switch g.state {
		case atCommand:
			g.cmdSize = 0
			if b[0] == '*' {
				g.state = inCount
			} else {
				g.state = inInline
			}
		case inCount, inInline, inBulkLen:
			var done bool
			b, done = g.collect(b)
			if done {
				g.endLine()
			}
		case atBulk:
			if b[0] != '$' {
				g.fail("expected '$', got '" + string(b[0]) + "'")
				return
			}
			g.state = inBulkLen
		case inBody:
			n := min(int64(len(b)), g.body)
			g.out = append(g.out, b[:n]...)
			b = b[n:]
			g.body -= n
			g.cmdSize += n
			if g.body == 0 {
				g.nextArg()
			}
		}
	}
}

// collect moves bytes of the current line from b into g.line and reports
// whether the line is complete.
func (g *guard) collect(b []byte) ([]byte, bool) {
	for i, c := range b {
		if c == '\n' {
			g.line = append(g.line, b[:i+1]...)
			return b[i+1:], true
		}
	}
	g.line = append(g.line, b...)
	if len(g.line) > g.lim.MaxInline {
		switch g.state {
		case inInline:
			g.fail("too big inline request")
		case inCount:
			g.fail("too big mbulk count string")
		default:
			g.fail("too big bulk count string")
		}
	}
	return nil, false
}

// endLine acts on a complete line.
func (g *guard) endLine() {
	line := g.line
	g.line = g.line[:0]
	if len(line) > g.lim.MaxInline {
		if g.state == inInline {
			g.fail("too big inline request")
		} else {
			g.fail("too big mbulk count string")
		}
		return
	}
	g.cmdSize += int64(len(line))
	switch g.state {
	case inInline:
		g.out = append(g.out, line...)
		g.state = atCommand
	case inCount:
		n, ok := parseHeader(line)
		switch {
		case !ok || n > g.lim.MaxMultibulk:
			g.fail("invalid multibulk length")
		case n > unauthMaxMultibulk && g.stranger():
			g.fail("unauthenticated multibulk length")
		case n <= 0:
			g.state = atCommand // Redis ignores empty multibulks; redcon would fail on them
		default:
			g.out = append(g.out, line...)
			g.args = n
			g.state = atBulk
		}
	case inBulkLen:
		n, ok := parseHeader(line)
		switch {
		case !ok || n < 0 || n > g.lim.MaxBulk:
			g.fail("invalid bulk length")
		case n > unauthMaxBulk && g.stranger():
			g.fail("unauthenticated bulk length")
		case g.cmdSize+n > g.lim.MaxQuery:
			g.fail("too big query")
		default:
			g.out = append(g.out, line...)
			g.body = n + 2
			g.state = inBody
		}
	}
}

func (g *guard) nextArg() {
	g.args--
	if g.args == 0 {
		g.state = atCommand
	} else {
		g.state = atBulk
	}
}

func (g *guard) stranger() bool { return g.authed != nil && !g.authed() }

func (g *guard) fail(msg string) { g.err = protocolError(msg) }

// parseHeader parses the number in a "*<n>\r\n" or "$<n>\r\n" line.
func parseHeader(line []byte) (int64, bool) {
	if len(line) < 4 || line[len(line)-2] != '\r' {
		return 0, false
	}
	return keyspace.ParseInt(line[1 : len(line)-2])
}

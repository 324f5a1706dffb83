package server

import (
	"bytes"
	"io"
	"sync/atomic"

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
	// MaxQuery is the most bytes one command may take (client-query-buffer-limit);
	// a client that sends more is disconnected, as Redis does.
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

// liveLimits are the limits in force; CONFIG SET changes them while clients
// are connected.
type liveLimits struct {
	maxBulk, maxMultibulk, maxInline, maxQuery atomic.Int64
}

func newLiveLimits(l Limits) *liveLimits {
	l = l.withDefaults()
	ll := &liveLimits{}
	ll.maxBulk.Store(l.MaxBulk)
	ll.maxMultibulk.Store(l.MaxMultibulk)
	ll.maxInline.Store(int64(l.MaxInline))
	ll.maxQuery.Store(l.MaxQuery)
	return ll
}

// Limits for a connection that has not authenticated on a server with a
// password, as in Redis: a stranger cannot make the server buffer much.
const (
	unauthMaxMultibulk = 10
	unauthMaxBulk      = 16384
)

// protocolError is a malformed or oversized request. The connection replies
// "-ERR Protocol error: <text>" and closes, as Redis does.
type protocolError string

func (e protocolError) Error() string { return "Protocol error: " + string(e) }

// errQueryTooBig ends a client whose command exceeds MaxQuery. Redis closes
// such a client without a reply.
var errQueryTooBig = queryTooBig{}

type queryTooBig struct{}

func (queryTooBig) Error() string { return "client exceeded the query buffer limit" }

// reader frames the commands a client sends, in RESP multibulk or inline form,
// exactly as Redis's processMultibulkBuffer and processInlineBuffer do, and
// enforces Redis's limits before it buffers anything: a header that declares
// too much fails at once, and the buffer grows only with bytes that arrive.
//
// Arguments point into the read buffer, without a copy. They stay valid until
// the next fill: the connection runs a whole batch of commands, writes their
// replies, and only then reads more.
type reader struct {
	src    io.Reader
	lim    *liveLimits
	authed func() bool // nil: no password is required
	err    error       // a read error to return once the buffered bytes are used

	buf   []byte
	start int // first byte of the command being parsed
	pos   int // parse position
	end   int // end of the bytes read

	state     readState
	lineStart int   // start of the last header line parsed
	want      int64 // arguments of the multibulk still to parse
	bulk      int   // length of the argument whose body is awaited
	marks     []int // begin/end offsets of parsed arguments, relative to start
	// argv holds the arguments of every command of the batch, so that a
	// command's slice survives while later ones are parsed.
	argv [][]byte
	// total counts the bytes read, and reads the reads that brought them,
	// for INFO; other goroutines read them.
	total, reads atomic.Int64
	// qbuf and qbufFree are CLIENT LIST's, published for other connections to
	// read: the bytes not yet parsed into arguments and the room after them.
	qbuf, qbufFree atomic.Int64
}

// publishQuery publishes qbuf and qbufFree before and after each read. They
// stay as they are while the batch read runs, as Redis's query buffer keeps
// a batch's bytes until all its commands have run: a command sees its own
// bytes counted; a connection waiting for the rest of a command shows what
// it holds of an argument not yet whole.
func (r *reader) publishQuery() {
	r.qbuf.Store(int64(r.end - r.pos))
	r.qbufFree.Store(int64(len(r.buf) - r.end))
}

type readState uint8

const (
	atCommand readState = iota // pos starts a command
	atHeader                   // pos starts "$<len>\r\n"
	atBody                     // pos starts the body of a bulk of length bulk
)

// readBufSize is the initial and resting size of a connection's read buffer,
// Redis's PROTO_IOBUF_LEN.
const readBufSize = 16 << 10

func newReader(src io.Reader, lim *liveLimits, authed func() bool) *reader {
	return &reader{src: src, lim: lim, authed: authed, buf: make([]byte, readBufSize)}
}

// next returns the next complete command in the buffer, or nil when more
// input is needed. The slice and its arguments are valid until fill.
func (r *reader) next() ([][]byte, error) {
	for {
		switch r.state {
		case atCommand:
			r.start = r.pos
			if r.pos == r.end {
				return nil, nil
			}
			if r.buf[r.pos] != '*' {
				args, complete, err := r.inline()
				if err != nil || !complete {
					return nil, err
				}
				if len(args) > 0 {
					return args, nil
				}
				continue // an empty line, which Redis ignores
			}
			n, complete, err := r.header(protocolError("too big mbulk count string"))
			if err != nil || !complete {
				return nil, err
			}
			switch {
			case !n.ok || n.v > r.lim.maxMultibulk.Load():
				return nil, protocolError("invalid multibulk length")
			case n.v > unauthMaxMultibulk && r.stranger():
				return nil, protocolError("unauthenticated multibulk length")
			case n.v <= 0:
				continue // Redis ignores empty multibulks
			}
			r.want = n.v
			r.marks = r.marks[:0]
			r.state = atHeader
		case atHeader:
			if r.want == 0 {
				r.state = atCommand
				return r.args(), nil
			}
			n, complete, err := r.header(protocolError("too big bulk count string"))
			if err != nil || !complete {
				return nil, err
			}
			if c := r.buf[r.lineStart]; c != '$' {
				return nil, protocolError("expected '$', got '" + string(c) + "'")
			}
			switch {
			case !n.ok || n.v < 0 || n.v > r.lim.maxBulk.Load():
				return nil, protocolError("invalid bulk length")
			case n.v > unauthMaxBulk && r.stranger():
				return nil, protocolError("unauthenticated bulk length")
			case int64(r.pos-r.start)+n.v > r.lim.maxQuery.Load():
				return nil, errQueryTooBig
			}
			r.bulk = int(n.v)
			r.state = atBody
		case atBody:
			if r.end-r.pos < r.bulk+2 {
				return nil, nil
			}
			// Like Redis, do not insist on the CRLF after the body.
			r.marks = append(r.marks, r.pos-r.start, r.pos-r.start+r.bulk)
			r.pos += r.bulk + 2
			r.want--
			r.state = atHeader
		}
	}
}

// number is a header's value and whether it parsed as Redis's string2ll.
type number struct {
	v  int64
	ok bool
}

// header parses a "*<n>\r\n" or "$<n>\r\n" line at pos. As in Redis the line
// ends at the first '\r', which must be followed by one more byte. A line
// longer than MaxInline fails with tooLong.
func (r *reader) header(tooLong protocolError) (n number, complete bool, err error) {
	rest := r.buf[r.pos:r.end]
	i := bytes.IndexByte(rest, '\r')
	if i < 0 || bytes.IndexByte(rest[:i], 0) >= 0 {
		// Redis looks for the '\r' with strchr, which stops at a NUL byte:
		// such a line never ends.
		if int64(len(rest)) > r.lim.maxInline.Load() {
			return n, false, tooLong
		}
		return n, false, nil
	}
	if i+2 > len(rest) {
		return n, false, nil
	}
	if i > 0 { // the line is its type byte and the number
		n.v, n.ok = keyspace.ParseInt(rest[1:i])
	}
	r.lineStart = r.pos
	r.pos += i + 2
	return n, true, nil
}

// args returns the arguments of the command just parsed, in the batch's arena.
func (r *reader) args() [][]byte {
	base := len(r.argv)
	for i := 0; i < len(r.marks); i += 2 {
		r.argv = append(r.argv, r.buf[r.start+r.marks[i]:r.start+r.marks[i+1]:r.start+r.marks[i+1]])
	}
	return r.argv[base:len(r.argv):len(r.argv)]
}

// inline parses an inline command line at pos, as Redis's processInlineBuffer
// and sdssplitargs do.
func (r *reader) inline() (args [][]byte, complete bool, err error) {
	rest := r.buf[r.pos:r.end]
	i := bytes.IndexByte(rest, '\n')
	if i < 0 || bytes.IndexByte(rest[:i], 0) >= 0 {
		// Redis looks for the '\n' with strchr, which stops at a NUL byte:
		// such a line never ends.
		if int64(len(rest)) > r.lim.maxInline.Load() {
			return nil, false, protocolError("too big inline request")
		}
		return nil, false, nil
	}
	line := rest[:i]
	if len(line) > 0 && line[len(line)-1] == '\r' {
		line = line[:len(line)-1]
	}
	base := len(r.argv)
	r.argv, err = splitArgs(r.argv, line)
	if err != nil {
		return nil, false, err
	}
	r.pos += i + 1
	return r.argv[base:len(r.argv):len(r.argv)], true, nil
}

// splitArgs appends the arguments of an inline command line (which holds no
// NUL byte) to argv, following sdssplitargs: blanks separate arguments;
// "double quotes" understand \n \r \t \b \a \xHH and \<any>; 'single quotes'
// understand \'; a closing quote must be followed by a blank or the end.
// Arguments are new slices: quoting rewrites bytes.
func splitArgs(argv [][]byte, line []byte) ([][]byte, error) {
	p := 0
	for {
		for p < len(line) && isSpace(line[p]) {
			p++
		}
		if p == len(line) {
			return argv, nil
		}
		var cur []byte
		inDouble, inSingle := false, false
		for done := false; !done; {
			var c byte
			if p < len(line) {
				c = line[p]
			}
			switch {
			case inDouble:
				switch {
				case c == '\\' && p+3 < len(line) && line[p+1] == 'x' && isHex(line[p+2]) && isHex(line[p+3]):
					cur = append(cur, unhex(line[p+2])<<4|unhex(line[p+3]))
					p += 3
				case c == '\\' && p+1 < len(line):
					p++
					cur = append(cur, unescape(line[p]))
				case c == '"':
					if p+1 < len(line) && !isSpace(line[p+1]) {
						return argv, protocolError("unbalanced quotes in request")
					}
					done = true
				case p == len(line):
					return argv, protocolError("unbalanced quotes in request")
				default:
					cur = append(cur, c)
				}
			case inSingle:
				switch {
				case c == '\\' && p+1 < len(line) && line[p+1] == '\'':
					p++
					cur = append(cur, '\'')
				case c == '\'':
					if p+1 < len(line) && !isSpace(line[p+1]) {
						return argv, protocolError("unbalanced quotes in request")
					}
					done = true
				case p == len(line):
					return argv, protocolError("unbalanced quotes in request")
				default:
					cur = append(cur, c)
				}
			default:
				switch {
				case p == len(line) || c == ' ' || c == '\n' || c == '\r' || c == '\t':
					done = true
				case c == '"':
					inDouble = true
				case c == '\'':
					inSingle = true
				default:
					cur = append(cur, c)
				}
			}
			if p < len(line) {
				p++
			}
		}
		if cur == nil {
			cur = []byte{}
		}
		argv = append(argv, cur)
	}
}

// isSpace is C's isspace in the "C" locale.
func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r'
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func unhex(c byte) byte {
	switch {
	case c <= '9':
		return c - '0'
	case c >= 'a':
		return c - 'a' + 10
	}
	return c - 'A' + 10
}

func unescape(c byte) byte {
	switch c {
	case 'n':
		return '\n'
	case 'r':
		return '\r'
	case 't':
		return '\t'
	case 'b':
		return '\b'
	case 'a':
		return '\a'
	}
	return c
}

// stranger reports whether the client must authenticate and has not.
func (r *reader) stranger() bool { return r.authed != nil && !r.authed() }

// fill reads more input. It ends the batch: the arguments returned by next
// before it are no longer valid.
func (r *reader) fill() error {
	r.argv = r.argv[:0]
	if r.err != nil {
		return r.err
	}
	// Drop the bytes of finished commands; marks are relative to start, so
	// they survive the move.
	if r.start > 0 {
		n := copy(r.buf, r.buf[r.start:r.end])
		r.pos -= r.start
		r.end = n
		r.start = 0
	}
	if r.end == 0 && len(r.buf) > readBufSize {
		// A big command is over: let its buffer go.
		r.buf = make([]byte, readBufSize)
	}
	if r.end == len(r.buf) {
		if int64(r.end) >= r.lim.maxQuery.Load() {
			return errQueryTooBig
		}
		// Grow with what has arrived, never with what a header declares.
		grown := make([]byte, 2*len(r.buf))
		copy(grown, r.buf[:r.end])
		r.buf = grown
	}
	r.publishQuery()
	n, err := r.src.Read(r.buf[r.end:])
	r.end += n
	r.total.Add(int64(n))
	r.reads.Add(1)
	r.publishQuery()
	if err != nil {
		if n > 0 {
			r.err = err
			return nil
		}
		return err
	}
	return nil
}

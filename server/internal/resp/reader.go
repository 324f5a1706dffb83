// Package resp is the RESP protocol as a Redis server speaks it: a Reader
// that frames the commands a client sends (multibulk and inline, as Redis
// frames them, within Redis's limits), and AppendReply, which writes a
// keyspace.Reply in RESP2 or RESP3.
package resp

import (
	"bytes"
	"errors"
	"io"
	"sync/atomic"

	"github.com/lockserver/lockserver/internal/splitargs"
	"github.com/lockserver/lockserver/keyspace"
)

// Limits bound what one client may send, as Redis's limits do. They are
// read as the reader needs them: the server's CONFIG SET changes them while
// clients are connected.
type Limits struct {
	// MaxBulk is the largest bulk string a client may send (proto-max-bulk-len).
	MaxBulk atomic.Int64
	// MaxMultibulk is the largest number of arguments of one command.
	MaxMultibulk atomic.Int64
	// MaxInline is the longest inline command line, and the longest RESP header line.
	MaxInline atomic.Int64
	// MaxQuery is the most bytes one command may take (client-query-buffer-limit);
	// a client that sends more is disconnected, as Redis does.
	MaxQuery atomic.Int64
}

// Defaults of the limits, Redis 7's except MaxMultibulk (Redis allows 2^31-1;
// it is bounded because every argument costs memory before the command runs).
const (
	defaultMaxBulk      = 512 << 20
	defaultMaxMultibulk = 1 << 20
	defaultMaxInline    = 64 << 10
	defaultMaxQuery     = 1 << 30
)

// NewLimits returns the limits given, each one that is not positive at its
// default.
func NewLimits(maxBulk, maxMultibulk, maxInline, maxQuery int64) *Limits {
	orDefault := func(v, def int64) int64 {
		if v <= 0 {
			return def
		}
		return v
	}
	l := &Limits{}
	l.MaxBulk.Store(orDefault(maxBulk, defaultMaxBulk))
	l.MaxMultibulk.Store(orDefault(maxMultibulk, defaultMaxMultibulk))
	l.MaxInline.Store(orDefault(maxInline, defaultMaxInline))
	l.MaxQuery.Store(orDefault(maxQuery, defaultMaxQuery))
	return l
}

// Limits for a connection that has not authenticated on a server with a
// password, as in Redis: a stranger cannot make the server buffer much.
const (
	unauthMaxMultibulk = 10
	unauthMaxBulk      = 16384
)

// ProtocolError is a malformed or oversized request. The server replies
// "-ERR Protocol error: <text>" and closes the connection, as Redis does.
type ProtocolError string

func (e ProtocolError) Error() string { return "Protocol error: " + string(e) }

// ErrQueryTooBig ends a client whose command exceeds MaxQuery. Redis closes
// such a client without a reply.
var ErrQueryTooBig error = queryTooBig{}

type queryTooBig struct{}

func (queryTooBig) Error() string { return "client exceeded the query buffer limit" }

// ErrIdle, returned by a reader's source with nothing read, says that the
// client is idle: a reader that holds no partial command then lets its
// buffer go, as Redis frees an idle client's query buffer, and waits for
// the client's next byte without one.
var ErrIdle = errors.New("the client is idle")

// Reader frames the commands a client sends, in RESP multibulk or inline form,
// exactly as Redis's processMultibulkBuffer and processInlineBuffer do, and
// enforces Redis's limits before it buffers anything: a header that declares
// too much fails at once, and the buffer grows only with bytes that arrive.
//
// Arguments point into the read buffer, without a copy. They stay valid until
// the next fill: the connection runs a whole batch of commands, writes their
// replies, and only then reads more.
type Reader struct {
	src    io.Reader
	lim    *Limits
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
	// Total counts the bytes read, and Reads the reads that brought them,
	// for INFO; other goroutines read them.
	Total, Reads atomic.Int64
	// QueryBuf and QueryBufFree are CLIENT LIST's qbuf and qbuf-free,
	// published for other connections to read: the bytes not yet parsed
	// into arguments and the room after them.
	QueryBuf, QueryBufFree atomic.Int64
}

// publishQuery publishes QueryBuf and QueryBufFree before and after each read. They
// stay as they are while the batch read runs, as Redis's query buffer keeps
// a batch's bytes until all its commands have run: a command sees its own
// bytes counted; a connection waiting for the rest of a command shows what
// it holds of an argument not yet whole.
func (r *Reader) publishQuery() {
	r.QueryBuf.Store(int64(r.end - r.pos))
	r.QueryBufFree.Store(int64(len(r.buf) - r.end))
}

type readState uint8

const (
	atCommand readState = iota // pos starts a command
	atHeader                   // pos starts "$<len>\r\n"
	atBody                     // pos starts the body of a bulk of length bulk
)

// ReadBufSize is the initial and resting size of a reader's buffer, Redis's
// PROTO_IOBUF_LEN.
const ReadBufSize = 16 << 10

// NewReader returns a reader of src within lim. authed reports whether the
// client has authenticated, if it must (nil: no password is required): a
// stranger gets Redis's small limits.
func NewReader(src io.Reader, lim *Limits, authed func() bool) *Reader {
	return &Reader{src: src, lim: lim, authed: authed, buf: make([]byte, ReadBufSize)}
}

// BufferSize is the size of the read buffer, which grows with what arrives,
// within the limits.
func (r *Reader) BufferSize() int { return len(r.buf) }

// Next returns the next complete command in the buffer, or nil when more
// input is needed. The slice and its arguments are valid until Fill.
func (r *Reader) Next() ([][]byte, error) {
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
			n, complete, err := r.header(ProtocolError("too big mbulk count string"))
			if err != nil || !complete {
				return nil, err
			}
			switch {
			case !n.ok || n.v > r.lim.MaxMultibulk.Load():
				return nil, ProtocolError("invalid multibulk length")
			case n.v > unauthMaxMultibulk && r.stranger():
				return nil, ProtocolError("unauthenticated multibulk length")
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
			n, complete, err := r.header(ProtocolError("too big bulk count string"))
			if err != nil || !complete {
				return nil, err
			}
			if c := r.buf[r.lineStart]; c != '$' {
				return nil, ProtocolError("expected '$', got '" + string(c) + "'")
			}
			switch {
			case !n.ok || n.v < 0 || n.v > r.lim.MaxBulk.Load():
				return nil, ProtocolError("invalid bulk length")
			case n.v > unauthMaxBulk && r.stranger():
				return nil, ProtocolError("unauthenticated bulk length")
			case int64(r.pos-r.start)+n.v > r.lim.MaxQuery.Load():
				return nil, ErrQueryTooBig
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
func (r *Reader) header(tooLong ProtocolError) (n number, complete bool, err error) {
	rest := r.buf[r.pos:r.end]
	i := bytes.IndexByte(rest, '\r')
	if i < 0 || bytes.IndexByte(rest[:i], 0) >= 0 {
		// Redis looks for the '\r' with strchr, which stops at a NUL byte:
		// such a line never ends.
		if int64(len(rest)) > r.lim.MaxInline.Load() {
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
func (r *Reader) args() [][]byte {
	base := len(r.argv)
	for i := 0; i < len(r.marks); i += 2 {
		r.argv = append(r.argv, r.buf[r.start+r.marks[i]:r.start+r.marks[i+1]:r.start+r.marks[i+1]])
	}
	return r.argv[base:len(r.argv):len(r.argv)]
}

// inline parses an inline command line at pos, as Redis's processInlineBuffer
// and sdssplitargs do.
func (r *Reader) inline() (args [][]byte, complete bool, err error) {
	rest := r.buf[r.pos:r.end]
	i := bytes.IndexByte(rest, '\n')
	if i < 0 || bytes.IndexByte(rest[:i], 0) >= 0 {
		// Redis looks for the '\n' with strchr, which stops at a NUL byte:
		// such a line never ends.
		if int64(len(rest)) > r.lim.MaxInline.Load() {
			return nil, false, ProtocolError("too big inline request")
		}
		return nil, false, nil
	}
	line := rest[:i]
	if len(line) > 0 && line[len(line)-1] == '\r' {
		line = line[:len(line)-1]
	}
	base := len(r.argv)
	var ok bool
	if r.argv, ok = splitargs.Split(r.argv, line); !ok {
		return nil, false, ProtocolError("unbalanced quotes in request")
	}
	r.pos += i + 1
	return r.argv[base:len(r.argv):len(r.argv)], true, nil
}

// stranger reports whether the client must authenticate and has not.
func (r *Reader) stranger() bool { return r.authed != nil && !r.authed() }

// Fill reads more input. It ends the batch: the arguments returned by Next
// before it are no longer valid.
func (r *Reader) Fill() error {
	r.argv = r.argv[:0]
	if r.err != nil {
		return r.err
	}
	if r.buf == nil {
		return r.fillIdle()
	}
	// Drop the bytes of finished commands; marks are relative to start, so
	// they survive the move.
	if r.start > 0 {
		n := copy(r.buf, r.buf[r.start:r.end])
		r.pos -= r.start
		r.end = n
		r.start = 0
	}
	if r.end == 0 && len(r.buf) > ReadBufSize {
		// A big command is over: let its buffer go.
		r.buf = make([]byte, ReadBufSize)
	}
	if r.end == len(r.buf) {
		if int64(r.end) >= r.lim.MaxQuery.Load() {
			return ErrQueryTooBig
		}
		// Grow with what has arrived, never with what a header declares.
		grown := make([]byte, 2*len(r.buf))
		copy(grown, r.buf[:r.end])
		r.buf = grown
	}
	r.publishQuery()
	n, err := r.src.Read(r.buf[r.end:])
	return r.filled(n, err)
}

// filled counts n bytes read, with err, and publishes the buffer's figures.
func (r *Reader) filled(n int, err error) error {
	r.end += n
	r.Total.Add(int64(n))
	r.Reads.Add(1)
	if errors.Is(err, ErrIdle) {
		if r.end == 0 {
			r.buf = nil
		}
		err = nil
	}
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

// fillIdle is Fill for a reader that let its buffer go (ErrIdle): it reads
// one byte, then takes a buffer again for what follows.
func (r *Reader) fillIdle() error {
	first := make([]byte, 1)
	n, err := r.src.Read(first)
	if n > 0 {
		r.buf = make([]byte, ReadBufSize)
		r.buf[0] = first[0]
	}
	return r.filled(n, err)
}

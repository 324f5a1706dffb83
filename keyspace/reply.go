package keyspace

import (
	"errors"
	"math"
	"math/big"
	"strconv"
	"strings"
)

// Kind is the type of a Reply. The kinds are RESP3's; a RESP2 connection
// receives the RESP2 rendering of each (see server's writer).
type Kind uint8

const (
	// KindNull is a missing value: RESP2 null bulk ($-1), RESP3 null (_), Lua false.
	KindNull Kind = iota
	// KindNullArray is a missing array: RESP2 null array (*-1), RESP3 null (_), Lua false.
	KindNullArray
	// KindStatus is a simple string (+OK).
	KindStatus
	// KindError is an error reply; Str holds the whole text, code included ("ERR syntax error").
	// Int is 1 on an error already counted in the error statistics where it
	// arose (see CountedError).
	KindError
	// KindInt is an integer reply.
	KindInt
	// KindBulk is a binary-safe string.
	KindBulk
	// KindArray is an array of Elems.
	KindArray
	// KindMap holds key/value pairs flattened in Elems (k1, v1, k2, v2, ...).
	// RESP2 renders it as a flat array.
	KindMap
	// KindSet is an unordered collection in Elems; RESP2 renders it as an array.
	KindSet
	// KindDouble is a floating point number in Float; RESP2 renders it as a bulk string.
	KindDouble
	// KindBool is a RESP3 boolean in Int (0 or 1); RESP2 renders it as an integer.
	KindBool
	// KindVerbatim is a RESP3 verbatim text ("txt") in Str; RESP2 renders it as a bulk string.
	KindVerbatim
	// KindPush is an out-of-band message (pub/sub) in Elems; RESP2 renders it as an array.
	KindPush
	// KindPairs holds (member, score) pairs flattened in Elems, as ZRANGE ... WITHSCORES
	// and ZPOPMIN with a count reply: RESP2 (and Lua) gets a flat array, RESP3 an
	// array of two-element arrays.
	KindPairs
)

// Reply is the protocol-independent result of a command. The zero Reply is a null bulk.
type Reply struct {
	Kind  Kind
	Int   int64
	Float float64
	Str   string
	Elems []Reply
}

// WouldWrite is the reply of a dry run (Call.Dry) that reached a write. It
// is never sent to a client: the engine runs the command again for real.
var WouldWrite = Reply{Kind: KindError, Str: "WOULDWRITE a dry run reached a write"}

// IsWouldWrite reports whether r is WouldWrite.
func (r Reply) IsWouldWrite() bool { return r.Kind == KindError && r.Str == WouldWrite.Str }

// Frequent replies, shared to avoid rebuilding them.
var (
	OK         = Reply{Kind: KindStatus, Str: "OK"}
	Null       = Reply{Kind: KindNull}
	NullArray  = Reply{Kind: KindNullArray}
	Zero       = Reply{Kind: KindInt, Int: 0}
	One        = Reply{Kind: KindInt, Int: 1}
	emptyArray = Reply{Kind: KindArray, Elems: []Reply{}}
)

// Int returns an integer reply.
func Int(n int64) Reply { return Reply{Kind: KindInt, Int: n} }

// Bool returns 1 or 0 as an integer reply, as Redis's predicates (EXISTS, HEXISTS, ...) do.
func Bool(b bool) Reply {
	if b {
		return One
	}
	return Zero
}

// Bulk returns a bulk string reply.
func Bulk(s string) Reply { return Reply{Kind: KindBulk, Str: s} }

// BulkBytes returns a bulk string reply holding a copy of b.
func BulkBytes(b []byte) Reply { return Reply{Kind: KindBulk, Str: string(b)} }

// Status returns a simple string reply.
func Status(s string) Reply { return Reply{Kind: KindStatus, Str: s} }

// Error returns an error reply. msg must start with its code ("ERR ...", "WRONGTYPE ...").
func Error(msg string) Reply { return Reply{Kind: KindError, Str: msg} }

// CountedError returns an error reply that the error statistics (INFO
// errorstats) must not count: a script's error that Redis marks
// ignore_error_stats_update, which the command the script called counted
// when it failed.
func CountedError(msg string) Reply { return Reply{Kind: KindError, Str: msg, Int: 1} }

// Array returns an array reply.
func Array(elems ...Reply) Reply {
	if elems == nil {
		elems = []Reply{}
	}
	return Reply{Kind: KindArray, Elems: elems}
}

// BulkArray returns an array of bulk strings.
func BulkArray(items []string) Reply {
	elems := make([]Reply, len(items))
	for i, s := range items {
		elems[i] = Bulk(s)
	}
	return Reply{Kind: KindArray, Elems: elems}
}

// Map returns a map reply from flattened key/value pairs.
func Map(pairs ...Reply) Reply {
	if pairs == nil {
		pairs = []Reply{}
	}
	return Reply{Kind: KindMap, Elems: pairs}
}

// Pairs returns a KindPairs reply from flattened (member, score) pairs.
func Pairs(flat ...Reply) Reply {
	if flat == nil {
		flat = []Reply{}
	}
	return Reply{Kind: KindPairs, Elems: flat}
}

// Double returns a double reply.
func Double(f float64) Reply { return Reply{Kind: KindDouble, Float: f} }

// HumanDouble is Double(f) written as Redis's addReplyHumanLongDouble
// writes it: 17 decimals, trailing zeros (and point) cut, where Double's
// text is %.17g. GEOPOS replies so.
func HumanDouble(f float64) Reply {
	return Reply{Kind: KindDouble, Float: f, Str: formatLongDouble(new(big.Float).SetFloat64(f))}
}

// DoubleText is the text of a double reply: HumanDouble's, or
// FormatDouble's.
func (r Reply) DoubleText() string {
	if r.Str != "" {
		return r.Str
	}
	return FormatDouble(r.Float)
}

// IsError reports whether r is an error reply.
func (r Reply) IsError() bool { return r.Kind == KindError }

// Counted reports whether r is an error reply already counted (see
// CountedError).
func (r Reply) Counted() bool { return r.Kind == KindError && r.Int != 0 }

// Err returns the error reply r as a Go error, for a function that returns
// errors to a caller that answers a client with them (an engine's WAIT, a
// call to another member): ReplyOf gives r back.
func (r Reply) Err() error { return replyError{r} }

// replyError carries an error reply through Go's error returns.
type replyError struct{ reply Reply }

func (e replyError) Error() string { return e.reply.Str }

// ReplyOf returns the error reply that err carries (see Reply.Err), if one
// in its chain does.
func ReplyOf(err error) (Reply, bool) {
	var e replyError
	if errors.As(err, &e) {
		return e.reply, true
	}
	return Reply{}, false
}

// FormatDouble formats f as Redis 7 does when a double travels as a string
// (RESP2 doubles, scores passed to Lua, INCRBYFLOAT's stored value aside):
// "inf", "-inf", integers without a fraction, otherwise %.17g.
func FormatDouble(f float64) string {
	return string(AppendDouble(nil, f))
}

// AppendDouble appends FormatDouble(f) to b.
func AppendDouble(b []byte, f float64) []byte {
	switch {
	case math.IsInf(f, 1):
		return append(b, "inf"...)
	case math.IsInf(f, -1):
		return append(b, "-inf"...)
	case math.IsNaN(f):
		return append(b, "nan"...)
	}
	return strconv.AppendFloat(b, f, 'g', 17, 64)
}

// Error replies that the layers above give too, with Redis 7's exact texts.
var (
	ErrSyntax     = Error("ERR syntax error")
	ErrNotInteger = Error("ERR value is not an integer or out of range")
)

// The error replies of the keyspace's commands, with Redis 7's exact texts.
var (
	errWrongType     = Error("WRONGTYPE Operation against a key holding the wrong kind of value")
	errNotFloat      = Error("ERR value is not a valid float")
	errOverflow      = Error("ERR increment or decrement would overflow")
	errNoSuchKey     = Error("ERR no such key")
	errOutOfRange    = Error("ERR index out of range")
	errInvalidDB     = Error("ERR DB index is out of range")
	errNaNOrInfinity = Error("ERR increment would produce NaN or Infinity")
	errStringTooLong = Error("ERR string exceeds maximum allowed size (proto-max-bulk-len)")
	errHashNotInt    = Error("ERR hash value is not an integer")
	errHashNotFloat  = Error("ERR hash value is not a float")
	errInvalidCursor = Error("ERR invalid cursor")
	errNotPositive   = Error("ERR value is out of range, must be positive")
	errMinMaxFloat   = Error("ERR min or max is not a float")
)

// ErrWrongArity returns Redis's arity error for the named command.
func ErrWrongArity(name string) Reply {
	return Error("ERR wrong number of arguments for '" + name + "' command")
}

// ErrUnknownCommand returns Redis 7's reply to an unknown command: the name cut at
// 128 bytes, then the first arguments quoted until 128 bytes of them are shown,
// with CR and LF turned into spaces.
func ErrUnknownCommand(args [][]byte) Reply {
	name := args[0]
	if len(name) > 128 {
		name = name[:128]
	}
	var shown []byte
	for _, a := range args[1:] {
		if len(shown) >= 128 {
			break
		}
		if room := 128 - len(shown); len(a) > room {
			a = a[:room]
		}
		shown = append(append(append(shown, '\''), a...), "' "...)
	}
	return errorLine("ERR unknown command '" + string(name) + "', with args beginning with: " + string(shown))
}

// ErrUnknownSubcommand returns Redis's reply to an unknown subcommand of the
// container command args[0]: the subcommand cut at 128 bytes.
func ErrUnknownSubcommand(args [][]byte) Reply {
	name := args[1]
	if len(name) > 128 {
		name = name[:128]
	}
	return errorLine("ERR unknown subcommand '" + string(name) + "'. Try " + strings.ToUpper(string(args[0])) + " HELP.")
}

// ErrSubcommandSyntax returns Redis's reply to a known subcommand of the
// container command args[0] given arguments it does not take
// (addReplySubcommandSyntaxError): the subcommand cut at 128 bytes.
func ErrSubcommandSyntax(args [][]byte) Reply {
	name := args[1]
	if len(name) > 128 {
		name = name[:128]
	}
	return errorLine("ERR unknown subcommand or wrong number of arguments for '" + string(name) + "'. Try " + strings.ToUpper(string(args[0])) + " HELP.")
}

// errorLine returns an error reply of msg with CR and LF turned into spaces,
// as Redis does to an error that quotes arguments, so that it stays one line.
func errorLine(msg string) Reply {
	b := []byte(msg)
	for i, c := range b {
		if c == '\r' || c == '\n' {
			b[i] = ' '
		}
	}
	return Error(string(b))
}

package server

import (
	"strconv"

	"github.com/lockserver/lockserver/keyspace"
)

// appendReply appends r to b in RESP2 (proto 2) or RESP3 (proto 3). It is the
// server's only RESP writer: every reply, push message and forwarded reply goes
// through it.
func appendReply(b []byte, r keyspace.Reply, proto int) []byte {
	switch r.Kind {
	case keyspace.KindNull:
		if proto >= 3 {
			return append(b, "_\r\n"...)
		}
		return append(b, "$-1\r\n"...)
	case keyspace.KindNullArray:
		if proto >= 3 {
			return append(b, "_\r\n"...)
		}
		return append(b, "*-1\r\n"...)
	case keyspace.KindStatus:
		return appendLine(append(b, '+'), r.Str)
	case keyspace.KindError:
		return appendLine(append(b, '-'), r.Str)
	case keyspace.KindInt:
		return append(strconv.AppendInt(append(b, ':'), r.Int, 10), '\r', '\n')
	case keyspace.KindBulk:
		return appendBulk(b, r.Str)
	case keyspace.KindArray:
		return appendElems(b, '*', len(r.Elems), r.Elems, proto)
	case keyspace.KindPush:
		if proto >= 3 {
			return appendElems(b, '>', len(r.Elems), r.Elems, proto)
		}
		return appendElems(b, '*', len(r.Elems), r.Elems, proto)
	case keyspace.KindPairs:
		if proto >= 3 {
			b = append(strconv.AppendInt(append(b, '*'), int64(len(r.Elems)/2), 10), '\r', '\n')
			for i := 0; i+1 < len(r.Elems); i += 2 {
				b = appendElems(b, '*', 2, r.Elems[i:i+2], proto)
			}
			return b
		}
		return appendElems(b, '*', len(r.Elems), r.Elems, proto)
	case keyspace.KindMap:
		if proto >= 3 {
			return appendElems(b, '%', len(r.Elems)/2, r.Elems, proto)
		}
		return appendElems(b, '*', len(r.Elems), r.Elems, proto)
	case keyspace.KindSet:
		if proto >= 3 {
			return appendElems(b, '~', len(r.Elems), r.Elems, proto)
		}
		return appendElems(b, '*', len(r.Elems), r.Elems, proto)
	case keyspace.KindDouble:
		if proto >= 3 {
			return append(keyspace.AppendDouble(append(b, ','), r.Float), '\r', '\n')
		}
		return appendBulk(b, keyspace.FormatDouble(r.Float))
	case keyspace.KindBool:
		if proto >= 3 {
			if r.Int != 0 {
				return append(b, "#t\r\n"...)
			}
			return append(b, "#f\r\n"...)
		}
		return append(strconv.AppendInt(append(b, ':'), r.Int, 10), '\r', '\n')
	case keyspace.KindVerbatim:
		if proto >= 3 {
			b = strconv.AppendInt(append(b, '='), int64(len(r.Str)+4), 10)
			return append(append(append(b, "\r\ntxt:"...), r.Str...), '\r', '\n')
		}
		return appendBulk(b, r.Str)
	}
	return appendLine(append(b, '-'), "ERR internal error: unknown reply kind")
}

func appendElems(b []byte, prefix byte, n int, elems []keyspace.Reply, proto int) []byte {
	b = append(strconv.AppendInt(append(b, prefix), int64(n), 10), '\r', '\n')
	for _, e := range elems {
		b = appendReply(b, e, proto)
	}
	return b
}

func appendBulk(b []byte, s string) []byte {
	b = append(strconv.AppendInt(append(b, '$'), int64(len(s)), 10), '\r', '\n')
	return append(append(b, s...), '\r', '\n')
}

// appendLine appends a status or error line, replacing CR and LF so that the
// reply stays one line, as Redis does.
func appendLine(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '\r' || c == '\n' {
			c = ' '
		}
		b = append(b, c)
	}
	return append(b, '\r', '\n')
}

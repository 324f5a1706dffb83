package resp

import (
	"strconv"

	"github.com/lockserver/lockserver/keyspace"
	"github.com/tidwall/redcon"
)

// AppendReply appends r to b in RESP2 (proto 2) or RESP3 (proto 3). It is the
// server's only RESP writer: every reply, push message and forwarded reply goes
// through it. RESP2's types are encoded by redcon; redcon has no RESP3 writers,
// so the RESP3 types (null, map, set, push, double, boolean, verbatim) are
// written here.
func AppendReply(b []byte, r keyspace.Reply, proto int) []byte {
	switch r.Kind {
	case keyspace.KindNull:
		if proto >= 3 {
			return append(b, "_\r\n"...)
		}
		return redcon.AppendNull(b)
	case keyspace.KindNullArray:
		if proto >= 3 {
			return append(b, "_\r\n"...)
		}
		return append(b, "*-1\r\n"...)
	case keyspace.KindStatus:
		return redcon.AppendString(b, r.Str) // CR and LF become spaces, as in Redis
	case keyspace.KindError:
		return redcon.AppendError(b, r.Str)
	case keyspace.KindInt:
		return redcon.AppendInt(b, r.Int)
	case keyspace.KindBulk:
		return redcon.AppendBulkString(b, r.Str)
	case keyspace.KindArray:
		return appendElems(b, '*', len(r.Elems), r.Elems, proto)
	case keyspace.KindPush:
		if proto >= 3 {
			return appendElems(b, '>', len(r.Elems), r.Elems, proto)
		}
		return appendElems(b, '*', len(r.Elems), r.Elems, proto)
	case keyspace.KindPairs:
		if proto >= 3 {
			b = redcon.AppendArray(b, len(r.Elems)/2)
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
			if r.Str != "" {
				return append(append(append(b, ','), r.Str...), '\r', '\n')
			}
			return append(keyspace.AppendDouble(append(b, ','), r.Float), '\r', '\n')
		}
		return redcon.AppendBulkString(b, r.DoubleText())
	case keyspace.KindBool:
		if proto >= 3 {
			if r.Int != 0 {
				return append(b, "#t\r\n"...)
			}
			return append(b, "#f\r\n"...)
		}
		return redcon.AppendInt(b, r.Int)
	case keyspace.KindVerbatim:
		if proto >= 3 {
			b = strconv.AppendInt(append(b, '='), int64(len(r.Str)+4), 10)
			return append(append(append(b, "\r\ntxt:"...), r.Str...), '\r', '\n')
		}
		return redcon.AppendBulkString(b, r.Str)
	}
	return redcon.AppendError(b, "ERR internal error: unknown reply kind")
}

func appendElems(b []byte, prefix byte, n int, elems []keyspace.Reply, proto int) []byte {
	if prefix == '*' {
		b = redcon.AppendArray(b, n)
	} else {
		b = append(strconv.AppendInt(append(b, prefix), int64(n), 10), '\r', '\n')
	}
	for _, e := range elems {
		b = AppendReply(b, e, proto)
	}
	return b
}

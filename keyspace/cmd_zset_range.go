package keyspace

import "math"

// The range commands of sorted sets: ZCOUNT, the ZRANGE family and
// ZREMRANGEBY*, and how they read a range.

// parseScoreBound parses a score bound: "(" makes it exclusive.
func parseScoreBound(b []byte) (bound, bool) {
	var r bound
	if len(b) > 0 && b[0] == '(' {
		r.ex = true
		b = b[1:]
	}
	f, ok := parseRangeFloat(b)
	if !ok || math.IsNaN(f) {
		return r, false
	}
	r.score = f
	return r, true
}

// parseLexBound parses a lex bound: "-", "+", "(member" or "[member".
func parseLexBound(b []byte) (bound, bool) {
	if len(b) == 0 {
		return bound{}, false
	}
	switch b[0] {
	case '+', '-':
		if len(b) > 1 && b[1] != 0 {
			return bound{}, false
		}
		inf := 1
		if b[0] == '-' {
			inf = -1
		}
		return bound{inf: inf, ex: true}, true
	case '(', '[':
		return bound{lex: string(b[1:]), ex: b[0] == '('}, true
	}
	return bound{}, false
}

// parseZRange parses min and max as a score range, or a lex range.
func parseZRange(min, max []byte, lex bool) (zrange, Reply, bool) {
	r := zrange{lex: lex}
	var ok1, ok2 bool
	if lex {
		r.min, ok1 = parseLexBound(min)
		r.max, ok2 = parseLexBound(max)
		if !ok1 || !ok2 {
			return r, errMinMaxLex, false
		}
		return r, Reply{}, true
	}
	r.min, ok1 = parseScoreBound(min)
	r.max, ok2 = parseScoreBound(max)
	if !ok1 || !ok2 {
		return r, errMinMaxFloat, false
	}
	return r, Reply{}, true
}

// ZCOUNT key min max
func cmdZCount(c *Call) Reply {
	r, err, ok := parseZRange(c.Args[2], c.Args[3], false)
	if !ok {
		return err
	}
	z, ok := c.readZSet(c.Args[1])
	if !ok {
		return errWrongType
	}
	if z == nil {
		return Zero
	}
	first := z.first(&r)
	if first == nil {
		return Zero
	}
	last := z.last(&r)
	return Int(int64(z.rank(last.member) - z.rank(first.member) + 1))
}

// Kinds of range of the ZRANGE family.
const (
	byRank = iota
	byScore
	byLex
)

// ZRANGE key start stop [BYSCORE|BYLEX] [REV] [LIMIT offset count] [WITHSCORES],
// and the fixed forms ZREVRANGE, ZRANGEBYSCORE, ZREVRANGEBYSCORE, ZRANGEBYLEX,
// ZREVRANGEBYLEX: Redis's zrangeGenericCommand, checks in its order.
func cmdZRange(c *Call) Reply {
	name := Lookup(c.Args[0]).Name
	kind, rev, fixed := byRank, false, true
	switch name {
	case "zrange":
		fixed = false
	case "zrevrange":
		rev = true
	case "zrangebyscore":
		kind = byScore
	case "zrevrangebyscore":
		kind, rev = byScore, true
	case "zrangebylex":
		kind = byLex
	case "zrevrangebylex":
		kind, rev = byLex, true
	}
	kindSet := fixed
	withScores := false
	offset, limit := int64(0), int64(-1)
	for j := 4; j < len(c.Args); j++ {
		opt := c.Args[j]
		switch {
		case eqFold(opt, "withscores"):
			withScores = true
		case eqFold(opt, "limit") && j+2 < len(c.Args):
			o, ok1 := ParseInt(c.Args[j+1])
			if !ok1 {
				return ErrNotInteger
			}
			l, ok2 := ParseInt(c.Args[j+2])
			if !ok2 {
				return ErrNotInteger
			}
			offset, limit = o, l
			j += 2
		case !fixed && !rev && eqFold(opt, "rev"):
			rev = true
		case !kindSet && eqFold(opt, "bylex"):
			kind, kindSet = byLex, true
		case !kindSet && eqFold(opt, "byscore"):
			kind, kindSet = byScore, true
		default:
			return ErrSyntax
		}
	}
	if limit != -1 && kind == byRank {
		return Error("ERR syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX")
	}
	if withScores && kind == byLex {
		return Error("ERR syntax error, WITHSCORES not supported in combination with BYLEX")
	}
	minArg, maxArg := c.Args[2], c.Args[3]
	if rev && kind != byRank {
		minArg, maxArg = maxArg, minArg
	}
	var start, end int64
	var r zrange
	if kind == byRank {
		var ok1, ok2 bool
		start, ok1 = ParseInt(minArg)
		end, ok2 = ParseInt(maxArg)
		if !ok1 || !ok2 {
			return ErrNotInteger
		}
	} else {
		var err Reply
		var ok bool
		if r, err, ok = parseZRange(minArg, maxArg, kind == byLex); !ok {
			return err
		}
	}
	z, ok := c.readZSet(c.Args[1])
	if !ok {
		return errWrongType
	}
	out := rangeOutput{withScores: withScores}
	if z == nil {
		return out.reply()
	}
	if kind == byRank {
		from, to := clampRange(start, end, int64(z.length))
		if from == to {
			return out.reply()
		}
		var x *zslNode
		if rev {
			x = z.byRank(z.length - 1 - int(from))
		} else {
			x = z.byRank(int(from))
		}
		for n := to - from; n > 0; n-- {
			out.add(x)
			x = step(x, rev)
		}
		return out.reply()
	}
	if offset > 0 && offset >= int64(z.length) {
		return out.reply()
	}
	x := z.first(&r)
	if rev {
		x = z.last(&r)
	}
	if offset < 0 {
		return out.reply() // Redis walks the whole range skipping a negative offset
	}
	for ; x != nil && offset > 0; offset-- {
		x = step(x, rev)
	}
	for ; x != nil && limit != 0; limit-- {
		if (rev && !r.gteMin(x)) || (!rev && !r.lteMax(x)) {
			break
		}
		out.add(x)
		x = step(x, rev)
	}
	return out.reply()
}

// step returns the next node in the direction of a range.
func step(x *zslNode, rev bool) *zslNode {
	if rev {
		return x.backward
	}
	return x.level[0].forward
}

// rangeOutput collects the reply of a range: members, or (member, score) pairs.
type rangeOutput struct {
	withScores bool
	elems      []Reply
}

func (o *rangeOutput) add(x *zslNode) {
	o.elems = append(o.elems, Bulk(x.member))
	if o.withScores {
		o.elems = append(o.elems, Double(x.score))
	}
}

func (o *rangeOutput) reply() Reply {
	if o.withScores {
		return Pairs(o.elems...)
	}
	return Array(o.elems...)
}

// ZREMRANGEBYSCORE key min max, ZREMRANGEBYRANK key start stop, ZREMRANGEBYLEX key min max
func cmdZRemRange(c *Call) Reply {
	key := c.Args[1]
	name := c.Args[0]
	kind := byScore
	switch name[len(name)-1] | 0x20 {
	case 'k':
		kind = byRank
	case 'x':
		kind = byLex
	}
	var start, end int64
	var r zrange
	if kind == byRank {
		var ok1, ok2 bool
		start, ok1 = ParseInt(c.Args[2])
		end, ok2 = ParseInt(c.Args[3])
		if !ok1 || !ok2 {
			return ErrNotInteger
		}
	} else {
		var err Reply
		var ok bool
		if r, err, ok = parseZRange(c.Args[2], c.Args[3], kind == byLex); !ok {
			return err
		}
	}
	z, ok := c.readZSet(key)
	if !ok {
		return errWrongType
	}
	if z == nil {
		return Zero
	}
	var doomed []string
	if kind == byRank {
		from, to := clampRange(start, end, int64(z.length))
		for x, n := z.byRank(int(from)), to-from; n > 0; n-- {
			doomed = append(doomed, x.member)
			x = x.level[0].forward
		}
	} else {
		for x := z.first(&r); x != nil && r.lteMax(x); x = x.level[0].forward {
			doomed = append(doomed, x.member)
		}
	}
	for _, m := range doomed {
		z.remove(m)
	}
	if len(doomed) > 0 {
		c.modifiedOrEmpty(key, z.length == 0)
	}
	return Int(int64(len(doomed)))
}

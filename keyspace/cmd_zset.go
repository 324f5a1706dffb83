package keyspace

import "math"

func init() {
	rw, w, ro := Write|DenyOOM, Write, ReadOnly
	addRows(
		&Command{Name: "zadd", Arity: -4, Flags: rw | Fast, FirstKey: 1, LastKey: 1, KeyStep: 1, Run: cmdZAdd},
		&Command{Name: "zincrby", Arity: 4, Flags: rw | Fast, FirstKey: 1, LastKey: 1, KeyStep: 1, Run: cmdZIncrBy},
		&Command{Name: "zscore", Arity: 3, Flags: ro | Fast, FirstKey: 1, LastKey: 1, KeyStep: 1, Run: cmdZScore},
		&Command{Name: "zmscore", Arity: -3, Flags: ro | Fast, FirstKey: 1, LastKey: 1, KeyStep: 1, Run: cmdZMScore},
		&Command{Name: "zrem", Arity: -3, Flags: w | Fast, FirstKey: 1, LastKey: 1, KeyStep: 1, Run: cmdZRem},
		&Command{Name: "zcard", Arity: 2, Flags: ro | Fast, FirstKey: 1, LastKey: 1, KeyStep: 1, Run: cmdZCard},
		&Command{Name: "zcount", Arity: 4, Flags: ro | Fast, FirstKey: 1, LastKey: 1, KeyStep: 1, Run: cmdZCount},
		&Command{Name: "zrank", Arity: 3, Flags: ro | Fast, FirstKey: 1, LastKey: 1, KeyStep: 1, Run: cmdZRank},
		&Command{Name: "zrevrank", Arity: 3, Flags: ro | Fast, FirstKey: 1, LastKey: 1, KeyStep: 1, Run: cmdZRank},
		&Command{Name: "zrange", Arity: -4, Flags: ro, FirstKey: 1, LastKey: 1, KeyStep: 1, Run: cmdZRange},
		&Command{Name: "zrevrange", Arity: -4, Flags: ro, FirstKey: 1, LastKey: 1, KeyStep: 1, Run: cmdZRange},
		&Command{Name: "zrangebyscore", Arity: -4, Flags: ro, FirstKey: 1, LastKey: 1, KeyStep: 1, Run: cmdZRange},
		&Command{Name: "zrevrangebyscore", Arity: -4, Flags: ro, FirstKey: 1, LastKey: 1, KeyStep: 1, Run: cmdZRange},
		&Command{Name: "zrangebylex", Arity: -4, Flags: ro, FirstKey: 1, LastKey: 1, KeyStep: 1, Run: cmdZRange},
		&Command{Name: "zrevrangebylex", Arity: -4, Flags: ro, FirstKey: 1, LastKey: 1, KeyStep: 1, Run: cmdZRange},
		&Command{Name: "zremrangebyscore", Arity: 4, Flags: w, FirstKey: 1, LastKey: 1, KeyStep: 1, Run: cmdZRemRange},
		&Command{Name: "zremrangebyrank", Arity: 4, Flags: w, FirstKey: 1, LastKey: 1, KeyStep: 1, Run: cmdZRemRange},
		&Command{Name: "zremrangebylex", Arity: 4, Flags: w, FirstKey: 1, LastKey: 1, KeyStep: 1, Run: cmdZRemRange},
		&Command{Name: "zpopmin", Arity: -2, Flags: w | Fast, FirstKey: 1, LastKey: 1, KeyStep: 1, Run: cmdZPop},
		&Command{Name: "zpopmax", Arity: -2, Flags: w | Fast, FirstKey: 1, LastKey: 1, KeyStep: 1, Run: cmdZPop},
		&Command{Name: "zscan", Arity: -3, Flags: ro | unordered, FirstKey: 1, LastKey: 1, KeyStep: 1, Run: cmdZScan},
	)
}

var (
	errMinMaxLex = Error("ERR min or max not valid string range item")
	errNaNScore  = Error("ERR resulting score is not a number (NaN)")
)

// readZSet returns the live sorted set at key (nil when missing), or false for WRONGTYPE.
func (c *Call) readZSet(key []byte) (*zset, bool) {
	o, wrong := c.lookupType(key, typeZSet)
	if o == nil {
		return nil, !wrong
	}
	return o.asZSet(), true
}

// Option bits of ZADD.
const (
	zaddNX = 1 << iota
	zaddXX
	zaddGT
	zaddLT
	zaddCH
	zaddIncr
)

// ZADD key [NX|XX] [GT|LT] [CH] [INCR] score member [score member ...]
func cmdZAdd(c *Call) Reply {
	flags, i := 0, 2
options:
	for ; i < len(c.Args); i++ {
		switch opt := c.Args[i]; {
		case eqFold(opt, "nx"):
			flags |= zaddNX
		case eqFold(opt, "xx"):
			flags |= zaddXX
		case eqFold(opt, "ch"):
			flags |= zaddCH
		case eqFold(opt, "incr"):
			flags |= zaddIncr
		case eqFold(opt, "gt"):
			flags |= zaddGT
		case eqFold(opt, "lt"):
			flags |= zaddLT
		default:
			break options
		}
	}
	return c.zadd(flags, c.Args[i:])
}

// ZINCRBY key increment member
func cmdZIncrBy(c *Call) Reply {
	return c.zadd(zaddIncr, c.Args[2:])
}

// zadd is Redis's zaddGenericCommand over the score/member pairs.
func (c *Call) zadd(flags int, pairs [][]byte) Reply {
	if len(pairs) == 0 || len(pairs)%2 != 0 {
		return ErrSyntax
	}
	has := func(f int) bool { return flags&f != 0 }
	if has(zaddNX) && has(zaddXX) {
		return Error("ERR XX and NX options at the same time are not compatible")
	}
	if (has(zaddGT) && has(zaddNX)) || (has(zaddLT) && has(zaddNX)) || (has(zaddGT) && has(zaddLT)) {
		return Error("ERR GT, LT, and/or NX options at the same time are not compatible")
	}
	if has(zaddIncr) && len(pairs) > 2 {
		return Error("ERR INCR option supports a single increment-element pair")
	}
	scores := make([]float64, len(pairs)/2)
	for j := range scores {
		s, ok := parseFloat(pairs[2*j])
		if !ok {
			return errNotFloat
		}
		scores[j] = s
	}
	key := c.Args[1]
	z, ok := c.readZSet(key)
	if !ok {
		return errWrongType
	}
	var added, updated, processed int64
	var score float64
	if z == nil && !has(zaddXX) {
		z = newZSet(pairs[1])
		c.put(key, object{typ: typeZSet, coll: z})
	}
	for j := 0; z != nil && j < len(scores); j++ {
		member := string(pairs[2*j+1])
		score = scores[j]
		cur, exists := z.dict[member]
		switch {
		case exists && has(zaddNX), !exists && has(zaddXX):
			continue
		case exists:
			if has(zaddIncr) {
				if score += cur; math.IsNaN(score) {
					return errNaNScore
				}
			}
			if (has(zaddLT) && score >= cur) || (has(zaddGT) && score <= cur) {
				continue
			}
			if score != cur {
				z.set(member, score)
				updated++
			}
		default:
			z.set(member, score)
			added++
		}
		processed++
	}
	if added+updated > 0 {
		c.modified(key)
	}
	if has(zaddIncr) {
		if processed == 0 {
			return Null
		}
		return Double(z.dict[string(pairs[1])])
	}
	if has(zaddCH) {
		return Int(added + updated)
	}
	return Int(added)
}

func cmdZScore(c *Call) Reply {
	z, ok := c.readZSet(c.Args[1])
	if !ok {
		return errWrongType
	}
	if z == nil {
		return Null
	}
	if s, found := z.dict[string(c.Args[2])]; found {
		return Double(s)
	}
	return Null
}

func cmdZMScore(c *Call) Reply {
	z, ok := c.readZSet(c.Args[1])
	if !ok {
		return errWrongType
	}
	elems := make([]Reply, len(c.Args)-2)
	for i, m := range c.Args[2:] {
		if z == nil {
			continue
		}
		if s, found := z.dict[string(m)]; found {
			elems[i] = Double(s)
		}
	}
	return Array(elems...)
}

func cmdZRem(c *Call) Reply {
	key := c.Args[1]
	z, ok := c.readZSet(key)
	if !ok {
		return errWrongType
	}
	if z == nil {
		return Zero
	}
	var n int64
	for _, m := range c.Args[2:] {
		if z.remove(string(m)) {
			n++
		}
	}
	if n > 0 {
		c.modifiedOrEmpty(key, z.length == 0)
	}
	return Int(n)
}

func cmdZCard(c *Call) Reply {
	z, ok := c.readZSet(c.Args[1])
	if !ok {
		return errWrongType
	}
	if z == nil {
		return Zero
	}
	return Int(int64(z.length))
}

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

// ZRANK key member, ZREVRANK key member
func cmdZRank(c *Call) Reply {
	z, ok := c.readZSet(c.Args[1])
	if !ok {
		return errWrongType
	}
	if z == nil {
		return Null
	}
	member := string(c.Args[2])
	if _, found := z.dict[member]; !found {
		return Null
	}
	rank := z.rank(member)
	if c.Args[0][3]|0x20 == 'v' { // zrevrank
		rank = z.length - 1 - rank
	}
	return Int(int64(rank))
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

// ZPOPMIN key [count], ZPOPMAX key [count]: without a count one flat pair, with
// one a list of pairs (nested in RESP3).
func cmdZPop(c *Call) Reply {
	if len(c.Args) > 3 {
		return ErrSyntax
	}
	key := c.Args[1]
	fromMax := c.Args[0][5]|0x20 == 'a' // zpopmax
	count := int64(-1)
	if len(c.Args) == 3 {
		n, err, ok := parsePositive(c.Args[2], errNotPositive)
		if !ok {
			return err
		}
		count = n
	}
	z, ok := c.readZSet(key)
	if !ok {
		return errWrongType
	}
	if z == nil || count == 0 {
		return emptyArray
	}
	n := min(max1(count), int64(z.length))
	out := rangeOutput{withScores: true}
	for ; n > 0; n-- {
		x := z.head.level[0].forward
		if fromMax {
			x = z.tail
		}
		out.add(x)
		z.remove(x.member)
	}
	c.modifiedOrEmpty(key, z.length == 0)
	if count < 0 {
		return Array(out.elems...)
	}
	return out.reply()
}

// max1 turns an absent count (-1) into one.
func max1(n int64) int64 {
	if n < 0 {
		return 1
	}
	return n
}

// formatPackedScore formats a score as Redis's d2string writes it into a
// listpack: integral values within int64 as integers, others as %.17g.
func formatPackedScore(f float64) string {
	if f > -0x1p63 && f < 0x1p63 && f == math.Trunc(f) {
		return formatInt(int64(f))
	}
	return FormatDouble(f)
}

// ZSCAN key cursor [MATCH pattern] [COUNT count]: a small sorted set whole, in
// order, with cursor 0, as Redis returns a listpack; scores as strings.
func cmdZScan(c *Call) Reply {
	cursor, ok := parseCursor(c.Args[2])
	if !ok {
		return errInvalidCursor
	}
	z, ok := c.readZSet(c.Args[1])
	if !ok {
		return errWrongType
	}
	if z == nil {
		return scanCursorReply(0, nil)
	}
	opts, err, ok := parseScanOptions(c.Args[3:], false)
	if !ok {
		return err
	}
	c.Work += int64(len(z.dict)) // a page is found among all the members
	var elems []Reply
	if !z.big {
		for x := z.head.level[0].forward; x != nil; x = x.level[0].forward {
			if opts.matches(x.member) {
				elems = append(elems, Bulk(x.member), Bulk(formatPackedScore(x.score)))
			}
		}
		return scanCursorReply(0, elems)
	}
	var candidates []hashed
	for m := range z.dict {
		if h := hashKey(m); h >= cursor {
			candidates = append(candidates, hashed{h, m})
		}
	}
	sortHashed(candidates)
	page, next := takePage(candidates, opts.count)
	for _, e := range page {
		if opts.matches(e.key) {
			elems = append(elems, Bulk(e.key), Bulk(FormatDouble(z.dict[e.key])))
		}
	}
	return scanCursorReply(next, elems)
}

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
	flags, rest := zaddOptions(c.Args[2:], zaddNX|zaddXX|zaddCH|zaddIncr|zaddGT|zaddLT)
	return c.zadd(flags, rest)
}

// zaddOptions reads the options of ZADD, of those allowed, that args
// begin with, and returns them and the arguments after them.
func zaddOptions(args [][]byte, allowed int) (flags int, rest [][]byte) {
	names := [...]struct {
		name string
		flag int
	}{{"nx", zaddNX}, {"xx", zaddXX}, {"ch", zaddCH}, {"incr", zaddIncr}, {"gt", zaddGT}, {"lt", zaddLT}}
next:
	for i, opt := range args {
		for _, n := range names {
			if n.flag&allowed != 0 && eqFold(opt, n.name) {
				flags |= n.flag
				continue next
			}
		}
		return flags, args[i:]
	}
	return flags, nil
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

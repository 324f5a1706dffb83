package keyspace

func init() {
	rw, w, ro := Write|DenyOOM, Write, ReadOnly
	addRows(
		&Command{Name: "lpush", Arity: -3, Flags: rw | Fast, FirstKey: 1, LastKey: 1, KeyStep: 1, Run: cmdPush},
		&Command{Name: "rpush", Arity: -3, Flags: rw | Fast, FirstKey: 1, LastKey: 1, KeyStep: 1, Run: cmdPush},
		&Command{Name: "lpushx", Arity: -3, Flags: rw | Fast, FirstKey: 1, LastKey: 1, KeyStep: 1, Run: cmdPush},
		&Command{Name: "rpushx", Arity: -3, Flags: rw | Fast, FirstKey: 1, LastKey: 1, KeyStep: 1, Run: cmdPush},
		&Command{Name: "lpop", Arity: -2, Flags: w | Fast, FirstKey: 1, LastKey: 1, KeyStep: 1, Run: cmdPop},
		&Command{Name: "rpop", Arity: -2, Flags: w | Fast, FirstKey: 1, LastKey: 1, KeyStep: 1, Run: cmdPop},
		&Command{Name: "llen", Arity: 2, Flags: ro | Fast, FirstKey: 1, LastKey: 1, KeyStep: 1, Run: cmdLLen},
		&Command{Name: "lindex", Arity: 3, Flags: ro, FirstKey: 1, LastKey: 1, KeyStep: 1, Run: cmdLIndex},
		&Command{Name: "lrange", Arity: 4, Flags: ro, FirstKey: 1, LastKey: 1, KeyStep: 1, Run: cmdLRange},
		&Command{Name: "lrem", Arity: 4, Flags: w, FirstKey: 1, LastKey: 1, KeyStep: 1, Run: cmdLRem},
		&Command{Name: "lset", Arity: 4, Flags: rw, FirstKey: 1, LastKey: 1, KeyStep: 1, Run: cmdLSet},
		&Command{Name: "ltrim", Arity: 4, Flags: w, FirstKey: 1, LastKey: 1, KeyStep: 1, Run: cmdLTrim},
		&Command{Name: "linsert", Arity: 5, Flags: rw, FirstKey: 1, LastKey: 1, KeyStep: 1, Run: cmdLInsert},
		&Command{Name: "lpos", Arity: -3, Flags: ro, FirstKey: 1, LastKey: 1, KeyStep: 1, Run: cmdLPos},
		&Command{Name: "rpoplpush", Arity: 3, Flags: rw, FirstKey: 1, LastKey: 2, KeyStep: 1, Run: cmdRPopLPush},
		&Command{Name: "lmove", Arity: 5, Flags: rw, FirstKey: 1, LastKey: 2, KeyStep: 1, Run: cmdLMove},
	)
}

// readList returns the live list at key (nil when missing), or false for WRONGTYPE.
func (c *Call) readList(key []byte) (*list, bool) {
	o, wrong := c.lookupType(key, typeList)
	if o == nil {
		return nil, !wrong
	}
	return o.asList(), true
}

// LPUSH, RPUSH, LPUSHX, RPUSHX key element...: the new length.
func cmdPush(c *Call) Reply {
	name, key := c.Args[0], c.Args[1]
	head := name[0]|0x20 == 'l'
	onlyExisting := len(name) == 6
	l, ok := c.readList(key)
	if !ok {
		return errWrongType
	}
	if l == nil {
		if onlyExisting {
			return Zero
		}
		l = c.put(key, object{typ: typeList, coll: &list{}}).asList()
	}
	for _, e := range c.Args[2:] {
		if head {
			l.pushFront(string(e))
		} else {
			l.pushBack(string(e))
		}
	}
	c.modified(key)
	return Int(int64(l.len()))
}

// LPOP key [count], RPOP key [count]
func cmdPop(c *Call) Reply {
	if len(c.Args) > 3 {
		return ErrWrongArity(Lookup(c.Args[0]).Name)
	}
	key := c.Args[1]
	head := c.Args[0][0]|0x20 == 'l'
	count := int64(-1)
	if len(c.Args) == 3 {
		n, err, ok := parsePositive(c.Args[2], errNotPositive)
		if !ok {
			return err
		}
		count = n
	}
	l, ok := c.readList(key)
	if !ok {
		return errWrongType
	}
	if l == nil {
		if count >= 0 {
			return NullArray
		}
		return Null
	}
	if count == 0 {
		return emptyArray
	}
	pop := l.popBack
	if head {
		pop = l.popFront
	}
	var r Reply
	if count < 0 {
		r = Bulk(pop())
	} else {
		elems := make([]Reply, min(count, int64(l.len())))
		for i := range elems {
			elems[i] = Bulk(pop())
		}
		r = Array(elems...)
	}
	c.modifiedOrEmpty(key, l.len() == 0)
	return r
}

// parsePositive parses a non-negative integer argument, replying errNeg (with
// Redis's text for the option) when it is negative or not an integer, as
// Redis's getPositiveLongFromObjectOrReply does.
func parsePositive(b []byte, errNeg Reply) (int64, Reply, bool) {
	n, ok := ParseInt(b)
	if !ok || n < 0 {
		return 0, errNeg, false
	}
	return n, Reply{}, true
}

func cmdLLen(c *Call) Reply {
	l, ok := c.readList(c.Args[1])
	if !ok {
		return errWrongType
	}
	if l == nil {
		return Zero
	}
	return Int(int64(l.len()))
}

// LINDEX key index: the key is looked up before the index is parsed, as in Redis.
func cmdLIndex(c *Call) Reply {
	l, ok := c.readList(c.Args[1])
	if !ok {
		return errWrongType
	}
	if l == nil {
		return Null
	}
	i, ok := ParseInt(c.Args[2])
	if !ok {
		return ErrNotInteger
	}
	items := l.items()
	if i < 0 {
		i += int64(len(items))
	}
	if i < 0 || i >= int64(len(items)) {
		return Null
	}
	return Bulk(items[i])
}

// clampRange applies Redis's LRANGE rules to start and end over n elements and
// returns the half-open range, empty when nothing is selected.
func clampRange(start, end, n int64) (int64, int64) {
	if start < 0 {
		start += n
	}
	if end < 0 {
		end += n
	}
	start = max(start, 0)
	if start > end || start >= n {
		return 0, 0
	}
	return start, min(end, n-1) + 1
}

func cmdLRange(c *Call) Reply {
	start, ok1 := ParseInt(c.Args[2])
	end, ok2 := ParseInt(c.Args[3])
	if !ok1 || !ok2 {
		return ErrNotInteger
	}
	l, ok := c.readList(c.Args[1])
	if !ok {
		return errWrongType
	}
	if l == nil {
		return emptyArray
	}
	items := l.items()
	from, to := clampRange(start, end, int64(len(items)))
	return BulkArray(items[from:to])
}

// LREM key count element: count > 0 removes from the head, < 0 from the tail, 0 all.
func cmdLRem(c *Call) Reply {
	key := c.Args[1]
	count, ok := ParseInt(c.Args[2])
	if !ok {
		return ErrNotInteger
	}
	l, ok := c.readList(key)
	if !ok {
		return errWrongType
	}
	if l == nil {
		return Zero
	}
	items, elem := l.items(), string(c.Args[3])
	c.Work += int64(len(items))
	remove := make([]bool, len(items))
	var removed int64
	for k := range items {
		i := k
		if count < 0 {
			i = len(items) - 1 - k
		}
		if items[i] == elem {
			remove[i] = true
			removed++
			if count != 0 && removed == max(count, -count) {
				break
			}
		}
	}
	if removed == 0 {
		return Zero
	}
	kept := make([]string, 0, len(items)-int(removed))
	for i, s := range items {
		if !remove[i] {
			kept = append(kept, s)
		}
	}
	l.replace(kept)
	c.modifiedOrEmpty(key, len(kept) == 0)
	return Int(removed)
}

// LSET key index element
func cmdLSet(c *Call) Reply {
	key := c.Args[1]
	l, ok := c.readList(key)
	if !ok {
		return errWrongType
	}
	if l == nil {
		return errNoSuchKey
	}
	i, ok := ParseInt(c.Args[2])
	if !ok {
		return ErrNotInteger
	}
	items := l.items()
	if i < 0 {
		i += int64(len(items))
	}
	if i < 0 || i >= int64(len(items)) {
		return errOutOfRange
	}
	items[i] = string(c.Args[3])
	c.modified(key)
	return OK
}

// LTRIM key start stop
func cmdLTrim(c *Call) Reply {
	key := c.Args[1]
	start, ok1 := ParseInt(c.Args[2])
	end, ok2 := ParseInt(c.Args[3])
	if !ok1 || !ok2 {
		return ErrNotInteger
	}
	l, ok := c.readList(key)
	if !ok {
		return errWrongType
	}
	if l == nil {
		return OK
	}
	items := l.items()
	from, to := clampRange(start, end, int64(len(items)))
	c.Work += int64(len(items))
	l.replace(append([]string(nil), items[from:to]...))
	c.modifiedOrEmpty(key, from == to)
	return OK
}

// LINSERT key BEFORE|AFTER pivot element: the new length, -1 without the pivot.
func cmdLInsert(c *Call) Reply {
	key := c.Args[1]
	var after bool
	switch {
	case eqFold(c.Args[2], "after"):
		after = true
	case eqFold(c.Args[2], "before"):
	default:
		return ErrSyntax
	}
	l, ok := c.readList(key)
	if !ok {
		return errWrongType
	}
	if l == nil {
		return Zero
	}
	items, pivot := l.items(), string(c.Args[3])
	c.Work += int64(len(items))
	for i, s := range items {
		if s != pivot {
			continue
		}
		if after {
			i++
		}
		grown := make([]string, 0, len(items)+1)
		grown = append(append(append(grown, items[:i]...), string(c.Args[4])), items[i:]...)
		l.replace(grown)
		c.modified(key)
		return Int(int64(len(grown)))
	}
	return Int(-1)
}

// LPOS key element [RANK rank] [COUNT num-matches] [MAXLEN len]
func cmdLPos(c *Call) Reply {
	rank, count, maxlen := int64(1), int64(-1), int64(0)
	for j := 3; j < len(c.Args); j++ {
		opt, more := c.Args[j], j+1 < len(c.Args)
		switch {
		case eqFold(opt, "rank") && more:
			j++
			n, ok := ParseInt(c.Args[j])
			if !ok {
				return ErrNotInteger
			}
			if n == 0 {
				return Error("ERR RANK can't be zero: use 1 to start from the first match, 2 from the second ... or use negative to start from the end of the list")
			}
			rank = n
		case eqFold(opt, "count") && more:
			j++
			n, err, ok := parsePositive(c.Args[j], Error("ERR COUNT can't be negative"))
			if !ok {
				return err
			}
			count = n
		case eqFold(opt, "maxlen") && more:
			j++
			n, err, ok := parsePositive(c.Args[j], Error("ERR MAXLEN can't be negative"))
			if !ok {
				return err
			}
			maxlen = n
		default:
			return ErrSyntax
		}
	}
	fromTail := rank < 0
	if fromTail {
		rank = -rank
	}
	l, ok := c.readList(c.Args[1])
	if !ok {
		return errWrongType
	}
	if l == nil {
		if count != -1 {
			return emptyArray
		}
		return Null
	}
	items, elem := l.items(), string(c.Args[2])
	n := int64(len(items))
	c.Work += n
	var found []Reply
	var matches int64
	for k := int64(0); k < n && (maxlen == 0 || k < maxlen); k++ {
		i := k
		if fromTail {
			i = n - 1 - k
		}
		if items[i] != elem {
			continue
		}
		matches++
		if matches < rank {
			continue
		}
		if count == -1 {
			return Int(i)
		}
		found = append(found, Int(i))
		if count != 0 && matches-rank+1 >= count {
			break
		}
	}
	if count == -1 {
		return Null
	}
	return Array(found...)
}

// RPOPLPUSH source destination
func cmdRPopLPush(c *Call) Reply { return c.move(false, true) }

// LMOVE source destination LEFT|RIGHT LEFT|RIGHT
func cmdLMove(c *Call) Reply {
	from, ok1 := parseSide(c.Args[3])
	if !ok1 {
		return ErrSyntax
	}
	to, ok2 := parseSide(c.Args[4])
	if !ok2 {
		return ErrSyntax
	}
	return c.move(from, to)
}

// parseSide reads LEFT (true) or RIGHT (false).
func parseSide(b []byte) (left bool, ok bool) {
	switch {
	case eqFold(b, "left"):
		return true, true
	case eqFold(b, "right"):
		return false, true
	}
	return false, false
}

// move pops from the source's head (fromLeft) or tail and pushes onto the
// destination's head (toLeft) or tail; source and destination may be one list.
func (c *Call) move(fromLeft, toLeft bool) Reply {
	srcKey, dstKey := c.Args[1], c.Args[2]
	src, ok := c.readList(srcKey)
	if !ok {
		return errWrongType
	}
	if src == nil {
		return Null
	}
	dst, ok := c.readList(dstKey)
	if !ok {
		return errWrongType
	}
	var v string
	if fromLeft {
		v = src.popFront()
	} else {
		v = src.popBack()
	}
	if dst == nil {
		dst = c.put(dstKey, object{typ: typeList, coll: &list{}}).asList()
	}
	if toLeft {
		dst.pushFront(v)
	} else {
		dst.pushBack(v)
	}
	c.modified(dstKey)
	c.modifiedOrEmpty(srcKey, src.len() == 0)
	return Bulk(v)
}

package keyspace

import "strconv"

func init() {
	rw, w, ro := Write|DenyOOM, Write, ReadOnly
	addRows(
		&Command{Name: "hset", Arity: -4, Flags: rw | Fast, FirstKey: 1, LastKey: 1, KeyStep: 1, Run: cmdHSet},
		&Command{Name: "hmset", Arity: -4, Flags: rw | Fast, FirstKey: 1, LastKey: 1, KeyStep: 1, Run: cmdHSet},
		&Command{Name: "hsetnx", Arity: 4, Flags: rw | Fast, FirstKey: 1, LastKey: 1, KeyStep: 1, Run: cmdHSetNX},
		&Command{Name: "hget", Arity: 3, Flags: ro | Fast, FirstKey: 1, LastKey: 1, KeyStep: 1, Run: cmdHGet},
		&Command{Name: "hmget", Arity: -3, Flags: ro | Fast, FirstKey: 1, LastKey: 1, KeyStep: 1, Run: cmdHMGet},
		&Command{Name: "hdel", Arity: -3, Flags: w | Fast, FirstKey: 1, LastKey: 1, KeyStep: 1, Run: cmdHDel},
		&Command{Name: "hexists", Arity: 3, Flags: ro | Fast, FirstKey: 1, LastKey: 1, KeyStep: 1, Run: cmdHExists},
		&Command{Name: "hlen", Arity: 2, Flags: ro | Fast, FirstKey: 1, LastKey: 1, KeyStep: 1, Run: cmdHLen},
		&Command{Name: "hstrlen", Arity: 3, Flags: ro | Fast, FirstKey: 1, LastKey: 1, KeyStep: 1, Run: cmdHStrlen},
		&Command{Name: "hkeys", Arity: 2, Flags: ro | unordered, FirstKey: 1, LastKey: 1, KeyStep: 1, Run: cmdHGetAll},
		&Command{Name: "hvals", Arity: 2, Flags: ro | unordered, FirstKey: 1, LastKey: 1, KeyStep: 1, Run: cmdHGetAll},
		&Command{Name: "hgetall", Arity: 2, Flags: ro | unordered, FirstKey: 1, LastKey: 1, KeyStep: 1, Run: cmdHGetAll},
		&Command{Name: "hincrby", Arity: 4, Flags: rw | Fast, FirstKey: 1, LastKey: 1, KeyStep: 1, Run: cmdHIncrBy},
		&Command{Name: "hincrbyfloat", Arity: 4, Flags: rw | Fast, FirstKey: 1, LastKey: 1, KeyStep: 1, Run: cmdHIncrByFloat},
		&Command{Name: "hscan", Arity: -3, Flags: ro | unordered, FirstKey: 1, LastKey: 1, KeyStep: 1, Run: cmdHScan},
	)
}

// hashForWrite returns the live hash at key, storing an empty one when there
// is none (every caller then adds a field), or reports WRONGTYPE. The caller
// records its change with c.modified.
func (c *Call) hashForWrite(key []byte) (o *object, wrong bool) {
	o, wrong = c.lookupType(key, typeHash)
	if o == nil && !wrong {
		o = c.put(key, newHash())
	}
	return o, wrong
}

// HSET key field value [field value ...], HMSET (replies OK)
func cmdHSet(c *Call) Reply {
	if len(c.Args)%2 == 1 {
		return ErrWrongArity(Lookup(c.Args[0]).Name)
	}
	key := c.Args[1]
	o, wrong := c.hashForWrite(key)
	if wrong {
		return errWrongType
	}
	o.hashFit(c.Args[2:]...)
	var added int64
	for i := 2; i < len(c.Args); i += 2 {
		if o.hashSet(c.Args[i], c.Args[i+1]) {
			added++
		}
	}
	c.modified(key)
	if c.Args[0][1]|0x20 == 'm' {
		return OK
	}
	return Int(added)
}

func cmdHSetNX(c *Call) Reply {
	key := c.Args[1]
	o, wrong := c.hashForWrite(key)
	if wrong {
		return errWrongType
	}
	o.hashFit(c.Args[2:]...)
	if _, exists := o.hashGet(c.Args[2]); exists {
		return Zero
	}
	o.hashSet(c.Args[2], c.Args[3])
	c.modified(key)
	return One
}

// readHash returns the live hash at key (nil when missing) or a WRONGTYPE error.
func (c *Call) readHash(key []byte) (*object, bool) {
	o, wrong := c.lookupType(key, typeHash)
	return o, !wrong
}

func cmdHGet(c *Call) Reply {
	o, ok := c.readHash(c.Args[1])
	if !ok {
		return errWrongType
	}
	if o == nil {
		return Null
	}
	if v, found := o.hashGet(c.Args[2]); found {
		return Bulk(v)
	}
	return Null
}

func cmdHMGet(c *Call) Reply {
	o, ok := c.readHash(c.Args[1])
	if !ok {
		return errWrongType
	}
	elems := make([]Reply, len(c.Args)-2)
	if o != nil {
		for i, f := range c.Args[2:] {
			if v, found := o.hashGet(f); found {
				elems[i] = Bulk(v)
			}
		}
	}
	return Array(elems...)
}

func cmdHDel(c *Call) Reply {
	key := c.Args[1]
	o, ok := c.readHash(key)
	if !ok {
		return errWrongType
	}
	if o == nil {
		return Zero
	}
	var n int64
	for _, f := range c.Args[2:] {
		if o.hashDel(f) {
			n++
		}
	}
	if n > 0 {
		c.modifiedOrEmpty(key, o.hashLen() == 0)
	}
	return Int(n)
}

// modifiedOrEmpty records a change to the collection at key, deleting the key
// when the change left the collection empty, as Redis does.
func (c *Call) modifiedOrEmpty(key []byte, empty bool) {
	if empty {
		c.del(key)
		return
	}
	c.modified(key)
}

func cmdHExists(c *Call) Reply {
	o, ok := c.readHash(c.Args[1])
	if !ok {
		return errWrongType
	}
	if o == nil {
		return Zero
	}
	_, found := o.hashGet(c.Args[2])
	return Bool(found)
}

func cmdHLen(c *Call) Reply {
	o, ok := c.readHash(c.Args[1])
	if !ok {
		return errWrongType
	}
	if o == nil {
		return Zero
	}
	return Int(int64(o.hashLen()))
}

func cmdHStrlen(c *Call) Reply {
	o, ok := c.readHash(c.Args[1])
	if !ok {
		return errWrongType
	}
	if o == nil {
		return Zero
	}
	v, _ := o.hashGet(c.Args[2])
	return Int(int64(len(v)))
}

// HGETALL (a map), HKEYS, HVALS. A packed hash replies in insertion order, as
// Redis's listpack does; a large one in field order.
func cmdHGetAll(c *Call) Reply {
	o, ok := c.readHash(c.Args[1])
	if !ok {
		return errWrongType
	}
	name := c.Args[0]
	all := name[1]|0x20 == 'g'
	keys := name[1]|0x20 == 'k'
	if o == nil {
		if all {
			return Map()
		}
		return emptyArray
	}
	n := o.hashLen()
	if all {
		n *= 2
	}
	elems := make([]Reply, 0, n)
	o.hashEach(func(f, v string) {
		switch {
		case all:
			elems = append(elems, Bulk(f), Bulk(v))
		case keys:
			elems = append(elems, Bulk(f))
		default:
			elems = append(elems, Bulk(v))
		}
	})
	if all {
		return Map(elems...)
	}
	return Array(elems...)
}

// HINCRBY key field increment
func cmdHIncrBy(c *Call) Reply {
	incr, ok := ParseInt(c.Args[3])
	if !ok {
		return ErrNotInteger
	}
	key, field := c.Args[1], c.Args[2]
	o, wrong := c.hashForWrite(key)
	if wrong {
		return errWrongType
	}
	var v int64
	if cur, found := o.hashGet(field); found {
		if v, ok = parseIntString(cur); !ok {
			return errHashNotInt
		}
	}
	if (incr < 0 && v < 0 && incr < minInt64-v) || (incr > 0 && v > 0 && incr > maxInt64-v) {
		return errOverflow
	}
	v += incr
	var buf [20]byte
	o.hashSet(field, strconv.AppendInt(buf[:0], v, 10))
	c.modified(key)
	return Int(v)
}

const (
	maxInt64 = 1<<63 - 1
	minInt64 = -1 << 63
)

// HINCRBYFLOAT key field increment, in long double arithmetic as Redis.
func cmdHIncrByFloat(c *Call) Reply {
	incr, ok := parseLongDouble(c.Args[3])
	if !ok {
		return errNotFloat
	}
	if incr.IsInf() {
		return Error("ERR value is NaN or Infinity")
	}
	key, field := c.Args[1], c.Args[2]
	o, wrong := c.hashForWrite(key)
	if wrong {
		return errWrongType
	}
	v, _ := parseLongDouble("0")
	if cur, found := o.hashGet(field); found {
		if v, ok = parseLongDouble(cur); !ok {
			return errHashNotFloat
		}
	}
	sum, ok := addLongDouble(v, incr)
	if !ok {
		return errNaNOrInfinity
	}
	s := formatLongDouble(sum)
	o.hashSet(field, []byte(s))
	c.modified(key)
	return Bulk(s)
}

// HSCAN key cursor [MATCH pattern] [COUNT count]. A packed hash is returned
// whole with cursor 0, as Redis returns a listpack.
func cmdHScan(c *Call) Reply {
	cursor, ok := parseCursor(c.Args[2])
	if !ok {
		return errInvalidCursor
	}
	o, ok := c.readHash(c.Args[1])
	if !ok {
		return errWrongType
	}
	if o == nil {
		return scanCursorReply(0, nil)
	}
	opts, err, ok := parseScanOptions(c.Args[3:], false)
	if !ok {
		return err
	}
	var elems []Reply
	m := o.hashMap()
	c.Work += int64(len(m)) // a page is found among all the fields
	if m == nil {
		o.hashEach(func(f, v string) {
			if opts.matches(f) {
				elems = append(elems, Bulk(f), Bulk(v))
			}
		})
		return scanCursorReply(0, elems)
	}
	var candidates []hashed
	for f := range m {
		if h := hashKey(f); h >= cursor {
			candidates = append(candidates, hashed{h, f})
		}
	}
	sortHashed(candidates)
	page, next := takePage(candidates, opts.count)
	for _, e := range page {
		if opts.matches(e.key) {
			elems = append(elems, Bulk(e.key), Bulk(m[e.key]))
		}
	}
	return scanCursorReply(next, elems)
}

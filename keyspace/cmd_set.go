package keyspace

func init() {
	rw, w, ro := Write|DenyOOM, Write, ReadOnly
	addRows(
		&Command{Name: "sadd", Arity: -3, Flags: rw | Fast, FirstKey: 1, LastKey: 1, KeyStep: 1, Run: cmdSAdd},
		&Command{Name: "srem", Arity: -3, Flags: w | Fast, FirstKey: 1, LastKey: 1, KeyStep: 1, Run: cmdSRem},
		&Command{Name: "smembers", Arity: 2, Flags: ro | unordered, FirstKey: 1, LastKey: 1, KeyStep: 1, Run: cmdSMembers},
		&Command{Name: "sismember", Arity: 3, Flags: ro | Fast, FirstKey: 1, LastKey: 1, KeyStep: 1, Run: cmdSIsMember},
		&Command{Name: "smismember", Arity: -3, Flags: ro | Fast, FirstKey: 1, LastKey: 1, KeyStep: 1, Run: cmdSIsMember},
		&Command{Name: "scard", Arity: 2, Flags: ro | Fast, FirstKey: 1, LastKey: 1, KeyStep: 1, Run: cmdSCard},
		&Command{Name: "sscan", Arity: -3, Flags: ro | unordered, FirstKey: 1, LastKey: 1, KeyStep: 1, Run: cmdSScan},
		&Command{Name: "sinter", Arity: -2, Flags: ro | unordered, FirstKey: 1, LastKey: -1, KeyStep: 1, Run: cmdSInter},
		&Command{Name: "sunion", Arity: -2, Flags: ro | unordered, FirstKey: 1, LastKey: -1, KeyStep: 1, Run: cmdSUnionDiff},
		&Command{Name: "sdiff", Arity: -2, Flags: ro | unordered, FirstKey: 1, LastKey: -1, KeyStep: 1, Run: cmdSUnionDiff},
	)
}

// readSet returns the live set at key (nil when missing), or false for WRONGTYPE.
func (c *Call) readSet(key []byte) (*set, bool) {
	o, wrong := c.lookupType(key, typeSet)
	if o == nil {
		return nil, !wrong
	}
	return o.asSet(), true
}

// setReply replies members as a set (RESP3 '~').
func setReply(members []string) Reply {
	r := BulkArray(members)
	r.Kind = KindSet
	return r
}

func cmdSAdd(c *Call) Reply {
	key := c.Args[1]
	s, ok := c.readSet(key)
	if !ok {
		return errWrongType
	}
	if s == nil {
		s = newSet(c.Args[2])
		c.put(key, object{typ: typeSet, coll: s})
	}
	var added int64
	for _, m := range c.Args[2:] {
		if s.add(m) {
			added++
		}
	}
	if added > 0 {
		c.modified(key)
	}
	return Int(added)
}

func cmdSRem(c *Call) Reply {
	key := c.Args[1]
	s, ok := c.readSet(key)
	if !ok {
		return errWrongType
	}
	if s == nil {
		return Zero
	}
	var removed int64
	for _, m := range c.Args[2:] {
		if s.has(m) {
			delete(s.m, string(m))
			removed++
		}
	}
	if removed > 0 {
		c.modifiedOrEmpty(key, len(s.m) == 0)
	}
	return Int(removed)
}

func cmdSMembers(c *Call) Reply {
	s, ok := c.readSet(c.Args[1])
	if !ok {
		return errWrongType
	}
	if s == nil {
		return setReply(nil)
	}
	return setReply(s.members())
}

// SISMEMBER key member (an integer), SMISMEMBER key member... (an array of them)
func cmdSIsMember(c *Call) Reply {
	s, ok := c.readSet(c.Args[1])
	if !ok {
		return errWrongType
	}
	if len(c.Args[0]) == len("sismember") {
		return Bool(s != nil && s.has(c.Args[2]))
	}
	elems := make([]Reply, len(c.Args)-2)
	for i, m := range c.Args[2:] {
		elems[i] = Bool(s != nil && s.has(m))
	}
	return Array(elems...)
}

func cmdSCard(c *Call) Reply {
	s, ok := c.readSet(c.Args[1])
	if !ok {
		return errWrongType
	}
	if s == nil {
		return Zero
	}
	return Int(int64(len(s.m)))
}

// SSCAN key cursor [MATCH pattern] [COUNT count]: an intset whole with cursor 0,
// as Redis returns it.
func cmdSScan(c *Call) Reply {
	cursor, ok := parseCursor(c.Args[2])
	if !ok {
		return errInvalidCursor
	}
	s, ok := c.readSet(c.Args[1])
	if !ok {
		return errWrongType
	}
	if s == nil {
		return scanCursorReply(0, nil)
	}
	opts, err, ok := parseScanOptions(c.Args[3:], false)
	if !ok {
		return err
	}
	c.Work += int64(len(s.m)) // a page is found among all the members
	var elems []Reply
	if s.intset {
		for _, m := range s.members() {
			if opts.matches(m) {
				elems = append(elems, Bulk(m))
			}
		}
		return scanCursorReply(0, elems)
	}
	var candidates []hashed
	for m := range s.m {
		if h := hashKey(m); h >= cursor {
			candidates = append(candidates, hashed{h, m})
		}
	}
	sortHashed(candidates)
	page, next := takePage(candidates, opts.count)
	for _, e := range page {
		if opts.matches(e.key) {
			elems = append(elems, Bulk(e.key))
		}
	}
	return scanCursorReply(next, elems)
}

// readSets returns the sets at the call's keys (nil for missing ones), or false
// when any key holds another type.
func (c *Call) readSets() ([]*set, bool) {
	sets := make([]*set, len(c.Args)-1)
	for i, k := range c.Args[1:] {
		s, ok := c.readSet(k)
		if !ok {
			return nil, false
		}
		sets[i] = s
	}
	return sets, true
}

// workSets counts the members of sets as the work of combining them.
func (c *Call) workSets(sets []*set) {
	for _, s := range sets {
		if s != nil {
			c.Work += int64(len(s.m))
		}
	}
}

// resultSet replies the members of a computed set in the order Redis's result
// would have: ascending numbers when it would be an intset.
func resultSet(members []string) Reply {
	sortMembers(members, allIntegers(members))
	return setReply(members)
}

func cmdSInter(c *Call) Reply {
	sets, ok := c.readSets()
	if !ok {
		return errWrongType
	}
	c.workSets(sets)
	smallest := -1
	for i, s := range sets {
		if s == nil {
			return setReply(nil)
		}
		if smallest < 0 || len(s.m) < len(sets[smallest].m) {
			smallest = i
		}
	}
	var out []string
	for m := range sets[smallest].m {
		in := true
		for _, s := range sets {
			if _, ok := s.m[m]; !ok {
				in = false
				break
			}
		}
		if in {
			out = append(out, m)
		}
	}
	return resultSet(out)
}

// SUNION key..., SDIFF key... (the first set less the others)
func cmdSUnionDiff(c *Call) Reply {
	sets, ok := c.readSets()
	if !ok {
		return errWrongType
	}
	c.workSets(sets)
	union := c.Args[0][1]|0x20 == 'u'
	result := map[string]struct{}{}
	for i, s := range sets {
		if s == nil {
			continue
		}
		for m := range s.m {
			switch {
			case union || i == 0:
				result[m] = struct{}{}
			default:
				delete(result, m)
			}
		}
		if !union && len(result) == 0 {
			break
		}
	}
	out := make([]string, 0, len(result))
	for m := range result {
		out = append(out, m)
	}
	return resultSet(out)
}

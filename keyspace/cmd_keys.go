package keyspace

import (
	"cmp"
	"math"
	"slices"
	"sort"
	"strings"

	"github.com/lockserver/lockserver/keyspace/internal/glob"
)

func init() {
	w, ro := Write, ReadOnly
	addRows(
		&Command{Name: "del", Arity: -2, Flags: w, FirstKey: 1, LastKey: -1, KeyStep: 1, Run: cmdDel},
		&Command{Name: "unlink", Arity: -2, Flags: w | Fast, FirstKey: 1, LastKey: -1, KeyStep: 1, Run: cmdDel},
		&Command{Name: "exists", Arity: -2, Flags: ro | Fast, FirstKey: 1, LastKey: -1, KeyStep: 1, Run: cmdExists},
		&Command{Name: "touch", Arity: -2, Flags: ro | Fast, FirstKey: 1, LastKey: -1, KeyStep: 1, Run: cmdExists},
		&Command{Name: "expire", Arity: -3, Flags: w | Fast, FirstKey: 1, LastKey: 1, KeyStep: 1, Run: cmdExpire},
		&Command{Name: "pexpire", Arity: -3, Flags: w | Fast, FirstKey: 1, LastKey: 1, KeyStep: 1, Run: cmdExpire},
		&Command{Name: "expireat", Arity: -3, Flags: w | Fast, FirstKey: 1, LastKey: 1, KeyStep: 1, Run: cmdExpire},
		&Command{Name: "pexpireat", Arity: -3, Flags: w | Fast, FirstKey: 1, LastKey: 1, KeyStep: 1, Run: cmdExpire},
		&Command{Name: "ttl", Arity: 2, Flags: ro | Fast, FirstKey: 1, LastKey: 1, KeyStep: 1, Run: cmdTTL},
		&Command{Name: "pttl", Arity: 2, Flags: ro | Fast, FirstKey: 1, LastKey: 1, KeyStep: 1, Run: cmdTTL},
		&Command{Name: "expiretime", Arity: 2, Flags: ro | Fast, FirstKey: 1, LastKey: 1, KeyStep: 1, Run: cmdTTL},
		&Command{Name: "pexpiretime", Arity: 2, Flags: ro | Fast, FirstKey: 1, LastKey: 1, KeyStep: 1, Run: cmdTTL},
		&Command{Name: "persist", Arity: 2, Flags: w | Fast, FirstKey: 1, LastKey: 1, KeyStep: 1, Run: cmdPersist},
		&Command{Name: "type", Arity: 2, Flags: ro | Fast, FirstKey: 1, LastKey: 1, KeyStep: 1, Run: cmdType},
		&Command{Name: "keys", Arity: 2, Flags: ro | unordered, Run: cmdKeys},
		&Command{Name: "scan", Arity: -2, Flags: ro | unordered, Run: cmdScan},
		&Command{Name: "rename", Arity: 3, Flags: w, FirstKey: 1, LastKey: 2, KeyStep: 1, Run: cmdRename},
		&Command{Name: "renamenx", Arity: 3, Flags: w | Fast, FirstKey: 1, LastKey: 2, KeyStep: 1, Run: cmdRename},
		&Command{Name: "copy", Arity: -3, Flags: w | DenyOOM, FirstKey: 1, LastKey: 2, KeyStep: 1, Run: cmdCopy},
		&Command{Name: "move", Arity: 3, Flags: w | Fast, FirstKey: 1, LastKey: 1, KeyStep: 1, Run: cmdMove},
		&Command{Name: "swapdb", Arity: 3, Flags: w | Fast, Run: cmdSwapDB},
		&Command{Name: "dbsize", Arity: 1, Flags: ro | Fast, Run: cmdDBSize},
		&Command{Name: "flushdb", Arity: -1, Flags: w, Run: cmdFlush},
		&Command{Name: "flushall", Arity: -1, Flags: w, Run: cmdFlush},
	)
}

// errSameObject is Redis's reply when a command's source and destination coincide.
var errSameObject = Error("ERR source and destination objects are the same")

// DEL key..., UNLINK key...
func cmdDel(c *Call) Reply {
	var n int64
	for _, k := range c.Args[1:] {
		if c.del(k) {
			n++
		}
	}
	return Int(n)
}

// EXISTS key..., TOUCH key...: a key named twice counts twice.
func cmdExists(c *Call) Reply {
	var n int64
	for _, k := range c.Args[1:] {
		if c.lookup(k) != nil {
			n++
		}
	}
	return Int(n)
}

// Option bits of EXPIRE and friends.
const (
	expireNX = 1 << iota
	expireXX
	expireGT
	expireLT
)

// EXPIRE key seconds [NX|XX|GT|LT], PEXPIRE key ms, EXPIREAT key unix-s,
// PEXPIREAT key unix-ms: Redis's expireGenericCommand, checks in its order.
func cmdExpire(c *Call) Reply {
	seconds := c.Args[0][0]|0x20 == 'e'
	absolute := c.Args[0][len(c.Args[0])-1]|0x20 == 't'
	var flags int
	for _, opt := range c.Args[3:] {
		switch {
		case eqFold(opt, "nx"):
			flags |= expireNX
		case eqFold(opt, "xx"):
			flags |= expireXX
		case eqFold(opt, "gt"):
			flags |= expireGT
		case eqFold(opt, "lt"):
			flags |= expireLT
		default:
			return Error("ERR Unsupported option " + string(opt))
		}
	}
	if flags&expireNX != 0 && flags&(expireXX|expireGT|expireLT) != 0 {
		return Error("ERR NX and XX, GT or LT options at the same time are not compatible")
	}
	if flags&expireGT != 0 && flags&expireLT != 0 {
		return Error("ERR GT and LT options at the same time are not compatible")
	}
	when, ok := ParseInt(c.Args[2])
	if !ok {
		return ErrNotInteger
	}
	if seconds {
		if when > math.MaxInt64/1000 || when < math.MinInt64/1000 {
			return c.errExpireTime()
		}
		when *= 1000
	}
	var base int64
	if !absolute {
		base = c.Now
	}
	if when > math.MaxInt64-base {
		return c.errExpireTime()
	}
	when += base
	key := c.Args[1]
	o := c.lookup(key)
	if o == nil {
		return Zero
	}
	cur := o.deadline
	switch {
	case flags&expireNX != 0 && cur != 0,
		flags&expireXX != 0 && cur == 0,
		flags&expireGT != 0 && (cur == 0 || when <= cur),
		flags&expireLT != 0 && cur != 0 && when >= cur:
		return Zero
	}
	if when <= c.Now { // 0 too, which as a deadline would mean "none"
		c.del(key)
	} else {
		c.setDeadline(key, o, when)
	}
	return One
}

// errExpireTime is errExpireTime for the call's command, named in lower case as
// Redis names it.
func (c *Call) errExpireTime() Reply {
	return errExpireTime(Lookup(c.Args[0]).Name)
}

// TTL, PTTL, EXPIRETIME, PEXPIRETIME: -2 when the key is missing, -1 when it
// has no deadline; seconds are rounded to the nearest.
func cmdTTL(c *Call) Reply {
	name := c.Args[0]
	ms := name[0]|0x20 == 'p'
	absolute := len(name) > 4 // expiretime, pexpiretime
	o := c.lookup(c.Args[1])
	if o == nil {
		return Int(-2)
	}
	if o.deadline == 0 {
		return Int(-1)
	}
	t := o.deadline
	if !absolute {
		t = max(t-c.Now, 0)
	}
	if !ms {
		t = int64((uint64(t) + 500) / 1000) // unsigned: a deadline near MaxInt64 must not wrap
	}
	return Int(t)
}

func cmdPersist(c *Call) Reply {
	o := c.lookup(c.Args[1])
	if o == nil || o.deadline == 0 {
		return Zero
	}
	c.setDeadline(c.Args[1], o, 0)
	return One
}

func cmdType(c *Call) Reply {
	o := c.lookup(c.Args[1])
	if o == nil {
		return Status("none")
	}
	return Status(o.typ.name())
}

// KEYS pattern. The order is the shards' (Go map order within a shard), so a
// script gets the keys sorted.
func cmdKeys(c *Call) Reply {
	pattern := c.Args[1]
	all := len(pattern) == 1 && pattern[0] == '*'
	var keys []string
	d := c.db()
	c.Work += int64(d.count)
	for k, o := range d.all() {
		if live(o.deadline, c.Now) && (all || glob.Match(pattern, k)) {
			keys = append(keys, k)
		}
	}
	if c.Script {
		sort.Strings(keys)
	}
	return BulkArray(keys)
}

// parseCursor parses a SCAN cursor as Redis does with strtoul: an optional sign
// (a negative cursor wraps), decimal digits, nothing else; "" is cursor 0.
func parseCursor(b []byte) (uint64, bool) {
	if len(b) == 0 {
		return 0, true
	}
	neg := b[0] == '-'
	if b[0] == '-' || b[0] == '+' {
		b = b[1:]
	}
	if len(b) == 0 {
		return 0, false
	}
	var v uint64
	for _, ch := range b {
		if ch < '0' || ch > '9' {
			return 0, false
		}
		d := uint64(ch - '0')
		if v > (math.MaxUint64-d)/10 {
			return 0, false
		}
		v = v*10 + d
	}
	if neg {
		v = -v
	}
	return v, true
}

// scanOptions are SCAN's and the *SCAN commands' MATCH, COUNT and TYPE.
type scanOptions struct {
	match    []byte // nil matches everything
	count    int
	typeName []byte // nil for no filter (SCAN only)
}

// parseScanOptions reads [MATCH pattern] [COUNT n] [TYPE t] (TYPE only when
// withType) from args.
func parseScanOptions(args [][]byte, withType bool) (scanOptions, Reply, bool) {
	opts := scanOptions{count: 10}
	for i := 0; i < len(args); i += 2 {
		if i+1 >= len(args) {
			return opts, ErrSyntax, false
		}
		switch {
		case eqFold(args[i], "count"):
			n, ok := ParseInt(args[i+1])
			if !ok {
				return opts, ErrNotInteger, false
			}
			if n < 1 {
				return opts, ErrSyntax, false
			}
			opts.count = int(min(n, math.MaxInt32))
		case eqFold(args[i], "match"):
			opts.match = args[i+1]
			if len(opts.match) == 1 && opts.match[0] == '*' {
				opts.match = nil
			}
		case withType && eqFold(args[i], "type"):
			opts.typeName = args[i+1]
		default:
			return opts, ErrSyntax, false
		}
	}
	return opts, Reply{}, true
}

// matches reports whether an element passes the MATCH filter.
func (o *scanOptions) matches(s string) bool {
	return o.match == nil || glob.Match(o.match, s)
}

// hashed is a key or field with its hash, for cursor order.
type hashed struct {
	h   uint64
	key string
}

// sortHashed orders elements by hash, then by name, the order SCAN walks.
func sortHashed(elems []hashed) {
	slices.SortFunc(elems, func(a, b hashed) int {
		if c := cmp.Compare(a.h, b.h); c != 0 {
			return c
		}
		return strings.Compare(a.key, b.key)
	})
}

// takePage returns the first elements of sorted (all at or after the cursor)
// until count are taken, never splitting elements of one hash between pages,
// and the cursor of the element after them (0 when none is left).
func takePage(sorted []hashed, count int) ([]hashed, uint64) {
	n := min(count, len(sorted))
	for n < len(sorted) && n > 0 && sorted[n].h == sorted[n-1].h {
		n++
	}
	if n == len(sorted) {
		return sorted, 0
	}
	return sorted[:n], sorted[n].h
}

// scanCursorReply is the reply of every SCAN command: the next cursor, then the elements.
func scanCursorReply(next uint64, elems []Reply) Reply {
	return Array(Bulk(formatUint(next)), Array(elems...))
}

func formatUint(v uint64) string {
	var buf [20]byte
	i := len(buf)
	for {
		i--
		buf[i] = byte('0' + v%10)
		v /= 10
		if v == 0 {
			return string(buf[i:])
		}
	}
}

// SCAN cursor [MATCH pattern] [COUNT count] [TYPE type]. The cursor is a
// position in the order of key hashes: a key present for a whole iteration is
// returned exactly once, however the keyspace changes meanwhile.
func cmdScan(c *Call) Reply {
	cursor, ok := parseCursor(c.Args[1])
	if !ok {
		return errInvalidCursor
	}
	opts, err, ok := parseScanOptions(c.Args[2:], true)
	if !ok {
		return err
	}
	d := c.db()
	var page []hashed
	next := cursor
	for s := cursor >> shardShift; len(page) < opts.count; {
		var candidates []hashed
		c.Work += int64(d.shardLen(int(s)))
		for k, o := range d.shardKeys(int(s)) {
			if h := hashKey(k); h >= next && live(o.deadline, c.Now) {
				candidates = append(candidates, hashed{h, k})
			}
		}
		sortHashed(candidates)
		taken, after := takePage(candidates, opts.count-len(page))
		page = append(page, taken...)
		if after != 0 {
			next = after
			break
		}
		if s++; s == numShards {
			next = 0
			break
		}
		next = s << shardShift
	}
	var elems []Reply
	for _, e := range page {
		if !opts.matches(e.key) {
			continue
		}
		if opts.typeName != nil {
			o := entry(d, e.key, e.h)
			if !eqFold(opts.typeName, o.typ.name()) {
				continue
			}
		}
		elems = append(elems, Bulk(e.key))
	}
	return scanCursorReply(next, elems)
}

// RENAME key newkey, RENAMENX key newkey: the value and its deadline move.
func cmdRename(c *Call) Reply {
	nx := len(c.Args[0]) == len("renamenx")
	src, dst := c.Args[1], c.Args[2]
	o := c.lookup(src)
	if o == nil {
		return errNoSuchKey
	}
	if string(src) == string(dst) {
		if nx {
			return Zero
		}
		return OK
	}
	if nx && c.lookup(dst) != nil {
		return Zero
	}
	v := *o
	c.del(src)
	c.put(dst, v)
	if nx {
		return One
	}
	return OK
}

// parseDBIndex parses a database number as Redis's getIntFromObjectOrReply and
// selectDb do.
func parseDBIndex(b []byte) (int, Reply, bool) {
	n, ok := ParseInt(b)
	if !ok {
		return 0, ErrNotInteger, false
	}
	if n < math.MinInt32 || n > math.MaxInt32 {
		return 0, Error("ERR value is out of range, value must between -2147483648 and 2147483647"), false
	}
	if n < 0 || n >= NumDBs {
		return 0, Error("ERR DB index is out of range"), false
	}
	return int(n), Reply{}, true
}

// COPY source destination [DB destination-db] [REPLACE]
func cmdCopy(c *Call) Reply {
	dstDB, replace := c.DB, false
	for j := 3; j < len(c.Args); j++ {
		switch {
		case eqFold(c.Args[j], "replace"):
			replace = true
		case eqFold(c.Args[j], "db") && j+1 < len(c.Args):
			n, err, ok := parseDBIndex(c.Args[j+1])
			if !ok {
				return err
			}
			dstDB = n
			j++
		default:
			return ErrSyntax
		}
	}
	src, dst := c.Args[1], c.Args[2]
	if dstDB == c.DB && string(src) == string(dst) {
		return errSameObject
	}
	o := c.lookup(src)
	if o == nil {
		return Zero
	}
	target := *c
	target.DB = dstDB
	if target.lookup(dst) != nil && !replace {
		return Zero
	}
	target.put(dst, o.clone())
	c.Work += o.elements()
	return One
}

// MOVE key db
func cmdMove(c *Call) Reply {
	dstDB, err, ok := parseDBIndex(c.Args[2])
	if !ok {
		return err
	}
	if dstDB == c.DB {
		return errSameObject
	}
	key := c.Args[1]
	o := c.lookup(key)
	if o == nil {
		return Zero
	}
	target := *c
	target.DB = dstDB
	if target.lookup(key) != nil {
		return Zero
	}
	v := *o
	c.del(key)
	target.put(key, v)
	return One
}

// SWAPDB index1 index2
func cmdSwapDB(c *Call) Reply {
	a, ok1 := parseSwapIndex(c.Args[1])
	if !ok1 {
		return Error("ERR invalid first DB index")
	}
	b, ok2 := parseSwapIndex(c.Args[2])
	if !ok2 {
		return Error("ERR invalid second DB index")
	}
	if a < 0 || a >= NumDBs || b < 0 || b >= NumDBs {
		return Error("ERR DB index is out of range")
	}
	s := c.Store
	s.touchAll(int(a))
	s.touchAll(int(b))
	s.dbs[a], s.dbs[b] = s.dbs[b], s.dbs[a]
	s.touchAll(int(a))
	s.touchAll(int(b))
	return OK
}

// parseSwapIndex parses a SWAPDB index: any value that fits an int.
func parseSwapIndex(b []byte) (int64, bool) {
	n, ok := ParseInt(b)
	return n, ok && n >= math.MinInt32 && n <= math.MaxInt32
}

// touchAll records a modification of every key of database i, for WATCH.
func (s *Store) touchAll(i int) {
	for k := range s.dbs[i].all() {
		s.touch(i, hashKey(k))
	}
}

// DBSIZE counts expired keys not yet swept, as Redis does; but sweeps run on
// each node at its own pace, so a script, which must see the same on every
// node, counts only live keys.
func cmdDBSize(c *Call) Reply {
	d := c.db()
	if !c.Script {
		return Int(int64(d.count))
	}
	var n int64
	for _, o := range d.all() {
		if live(o.deadline, c.Now) {
			n++
		}
	}
	return Int(n)
}

// FLUSHDB [ASYNC|SYNC], FLUSHALL [ASYNC|SYNC]: both modes empty at once.
func cmdFlush(c *Call) Reply {
	if len(c.Args) > 2 || (len(c.Args) == 2 && !eqFold(c.Args[1], "sync") && !eqFold(c.Args[1], "async")) {
		return ErrSyntax
	}
	if c.Args[0][len(c.Args[0])-2]|0x20 == 'd' { // flushdb
		c.Store.flush(c.DB)
		return OK
	}
	for i := range c.Store.dbs {
		c.Store.flush(i)
	}
	return OK
}

// flush empties database i.
func (s *Store) flush(i int) {
	s.touchAll(i)
	s.dbs[i] = db{}
}

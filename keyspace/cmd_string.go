package keyspace

import (
	"math"
	"unsafe"
)

func init() {
	rw, w, ro := Write|DenyOOM, Write, ReadOnly
	addRows(
		&Command{Name: "get", Arity: 2, Flags: ro | Fast, FirstKey: 1, LastKey: 1, KeyStep: 1, Run: cmdGet},
		&Command{Name: "set", Arity: -3, Flags: rw, FirstKey: 1, LastKey: 1, KeyStep: 1, Run: cmdSet, conditional: setConditional},
		&Command{Name: "setnx", Arity: 3, Flags: rw | Fast, FirstKey: 1, LastKey: 1, KeyStep: 1, Run: cmdSetNX, conditional: always},
		&Command{Name: "setex", Arity: 4, Flags: rw, FirstKey: 1, LastKey: 1, KeyStep: 1, Run: cmdSetEX},
		&Command{Name: "psetex", Arity: 4, Flags: rw, FirstKey: 1, LastKey: 1, KeyStep: 1, Run: cmdSetEX},
		&Command{Name: "getset", Arity: 3, Flags: rw | Fast, FirstKey: 1, LastKey: 1, KeyStep: 1, Run: cmdGetSet},
		&Command{Name: "getdel", Arity: 2, Flags: w | Fast, FirstKey: 1, LastKey: 1, KeyStep: 1, Run: cmdGetDel},
		&Command{Name: "getex", Arity: -2, Flags: w | Fast, FirstKey: 1, LastKey: 1, KeyStep: 1, Run: cmdGetEX},
		&Command{Name: "mget", Arity: -2, Flags: ro | Fast, FirstKey: 1, LastKey: -1, KeyStep: 1, Run: cmdMGet},
		&Command{Name: "mset", Arity: -3, Flags: rw, FirstKey: 1, LastKey: -1, KeyStep: 2, Run: cmdMSet},
		&Command{Name: "msetnx", Arity: -3, Flags: rw, FirstKey: 1, LastKey: -1, KeyStep: 2, Run: cmdMSetNX},
		&Command{Name: "incr", Arity: 2, Flags: rw | Fast, FirstKey: 1, LastKey: 1, KeyStep: 1, Run: cmdIncr},
		&Command{Name: "decr", Arity: 2, Flags: rw | Fast, FirstKey: 1, LastKey: 1, KeyStep: 1, Run: cmdIncr},
		&Command{Name: "incrby", Arity: 3, Flags: rw | Fast, FirstKey: 1, LastKey: 1, KeyStep: 1, Run: cmdIncrBy},
		&Command{Name: "decrby", Arity: 3, Flags: rw | Fast, FirstKey: 1, LastKey: 1, KeyStep: 1, Run: cmdIncrBy},
		&Command{Name: "incrbyfloat", Arity: 3, Flags: rw | Fast, FirstKey: 1, LastKey: 1, KeyStep: 1, Run: cmdIncrByFloat},
		&Command{Name: "append", Arity: 3, Flags: rw | Fast, FirstKey: 1, LastKey: 1, KeyStep: 1, Run: cmdAppend},
		&Command{Name: "strlen", Arity: 2, Flags: ro | Fast, FirstKey: 1, LastKey: 1, KeyStep: 1, Run: cmdStrlen},
		&Command{Name: "getrange", Arity: 4, Flags: ro, FirstKey: 1, LastKey: 1, KeyStep: 1, Run: cmdGetRange},
		&Command{Name: "setrange", Arity: 4, Flags: rw, FirstKey: 1, LastKey: 1, KeyStep: 1, Run: cmdSetRange},
	)
}

// maxStringLength is Redis's default proto-max-bulk-len, the largest string
// APPEND and SETRANGE may build.
const maxStringLength = 512 << 20

// getString returns the live string object at key (nil when missing), or a
// WRONGTYPE error.
func (c *Call) getString(key []byte) (*object, Reply, bool) {
	o, wrong := c.lookupType(key, typeString)
	if wrong {
		return nil, errWrongType, false
	}
	return o, Reply{}, true
}

// bulkOrNull replies o's string, or null when o is nil.
func bulkOrNull(o *object) Reply {
	if o == nil {
		return Null
	}
	return Bulk(o.lend())
}

func cmdGet(c *Call) Reply {
	o, err, ok := c.getString(c.Args[1])
	if !ok {
		return err
	}
	return bulkOrNull(o)
}

// Option bits of SET and GETEX (Redis's OBJ_SET_* flags).
const (
	optNX = 1 << iota
	optXX
	optGet
	optKeepTTL
	optPersist
	optEX
	optPX
	optEXAT
	optPXAT
	optExpire = optEX | optPX | optEXAT | optPXAT
)

// parseSetOptions reads the options of SET (forSet) or GETEX from args with
// Redis's rules of which may be combined, returning the option bits and the
// argument of the expiry option.
func parseSetOptions(args [][]byte, forSet bool) (flags int, expire []byte, ok bool) {
	for j := 0; j < len(args); j++ {
		opt := args[j]
		hasNext := j+1 < len(args)
		switch {
		case forSet && eqFold(opt, "nx") && flags&optXX == 0:
			flags |= optNX
		case forSet && eqFold(opt, "xx") && flags&optNX == 0:
			flags |= optXX
		case forSet && eqFold(opt, "get"):
			flags |= optGet
		case forSet && eqFold(opt, "keepttl") && flags&(optPersist|optExpire) == 0:
			flags |= optKeepTTL
		case !forSet && eqFold(opt, "persist") && flags&(optKeepTTL|optExpire) == 0:
			flags |= optPersist
		case eqFold(opt, "ex") && flags&(optKeepTTL|optPersist|optExpire&^optEX) == 0 && hasNext:
			flags |= optEX
		case eqFold(opt, "px") && flags&(optKeepTTL|optPersist|optExpire&^optPX) == 0 && hasNext:
			flags |= optPX
		case eqFold(opt, "exat") && flags&(optKeepTTL|optPersist|optExpire&^optEXAT) == 0 && hasNext:
			flags |= optEXAT
		case eqFold(opt, "pxat") && flags&(optKeepTTL|optPersist|optExpire&^optPXAT) == 0 && hasNext:
			flags |= optPXAT
		default:
			return 0, nil, false
		}
		if flags&optExpire != 0 && (eqFold(opt, "ex") || eqFold(opt, "px") || eqFold(opt, "exat") || eqFold(opt, "pxat")) {
			j++
			expire = args[j]
		}
	}
	return flags, expire, true
}

// errExpireTime is Redis's reply to an expiry out of range for the named command.
func errExpireTime(name string) Reply {
	return Error("ERR invalid expire time in '" + name + "' command")
}

// expireDeadline turns the argument of EX, PX, EXAT or PXAT into an absolute
// deadline as Redis's getExpireMillisecondsOrReply does, overflow checks included.
func (c *Call) expireDeadline(name string, arg []byte, flags int) (int64, Reply, bool) {
	n, ok := ParseInt(arg)
	if !ok {
		return 0, ErrNotInteger, false
	}
	seconds := flags&(optEX|optEXAT) != 0
	if n <= 0 || (seconds && n > math.MaxInt64/1000) {
		return 0, errExpireTime(name), false
	}
	if seconds {
		n *= 1000
	}
	if flags&(optEX|optPX) != 0 {
		n += c.Now // wraps negative on overflow, as in C, and is refused below
	}
	if n <= 0 {
		return 0, errExpireTime(name), false
	}
	return n, Reply{}, true
}

// SET key value [NX | XX] [GET] [EX s | PX ms | EXAT s | PXAT ms | KEEPTTL]
func cmdSet(c *Call) Reply {
	flags, expire, ok := parseSetOptions(c.Args[3:], true)
	if !ok {
		return ErrSyntax
	}
	return c.setGeneric("set", flags, c.Args[1], c.Args[2], expire, OK, Null)
}

// setGeneric is Redis's setGenericCommand, shared by SET, SETNX, SETEX and PSETEX.
func (c *Call) setGeneric(name string, flags int, key, value, expire []byte, okReply, abortReply Reply) Reply {
	var deadline int64
	if expire != nil {
		d, err, ok := c.expireDeadline(name, expire, flags)
		if !ok {
			return err
		}
		deadline = d
	}
	old, wrong := c.lookupType(key, typeString)
	if flags&optGet != 0 {
		if wrong {
			return errWrongType
		}
		okReply, abortReply = bulkOrNull(old), bulkOrNull(old)
	}
	found := old != nil || wrong
	if (flags&optNX != 0 && found) || (flags&optXX != 0 && !found) {
		return abortReply
	}
	if c.Dry {
		return WouldWrite
	}
	if flags&optKeepTTL != 0 && old != nil {
		deadline = old.deadline
	}
	v := object{typ: typeString, str: string(value), deadline: deadline}
	if old != nil {
		c.replace(hashKey(key), old, v)
	} else {
		c.put(key, v)
	}
	return okReply
}

// setConditional reports whether SET's options make it write only as it
// finds the key: NX or XX.
func setConditional(args [][]byte) bool {
	flags, _, ok := parseSetOptions(args[3:], true)
	return ok && flags&(optNX|optXX) != 0
}

// always is the conditional of a row that always writes only as it finds the keyspace.
func always([][]byte) bool { return true }

func cmdSetNX(c *Call) Reply {
	return c.setGeneric("setnx", optNX, c.Args[1], c.Args[2], nil, One, Zero)
}

// SETEX key seconds value, PSETEX key milliseconds value
func cmdSetEX(c *Call) Reply {
	name, flags := "setex", optEX
	if c.Args[0][0]|0x20 == 'p' {
		name, flags = "psetex", optPX
	}
	return c.setGeneric(name, flags, c.Args[1], c.Args[3], c.Args[2], OK, Null)
}

func cmdGetSet(c *Call) Reply {
	return c.setGeneric("getset", optGet, c.Args[1], c.Args[2], nil, OK, Null)
}

func cmdGetDel(c *Call) Reply {
	o, err, ok := c.getString(c.Args[1])
	if !ok {
		return err
	}
	if o == nil {
		return Null
	}
	r := Bulk(o.lend())
	c.del(c.Args[1])
	return r
}

// GETEX key [EX s | PX ms | EXAT s | PXAT ms | PERSIST]
func cmdGetEX(c *Call) Reply {
	key := c.Args[1]
	flags, expire, ok := parseSetOptions(c.Args[2:], false)
	if !ok {
		return ErrSyntax
	}
	o, err, ok := c.getString(key)
	if !ok || o == nil {
		return bulkOrNullOrErr(o, err, ok)
	}
	var deadline int64
	if expire != nil {
		if deadline, err, ok = c.expireDeadline("getex", expire, flags); !ok {
			return err
		}
	}
	r := Bulk(o.lend())
	switch {
	case expire != nil && !live(deadline, c.Now):
		c.del(key)
	case expire != nil:
		c.setDeadline(key, o, deadline)
	case flags&optPersist != 0 && o.deadline != 0:
		c.setDeadline(key, o, 0)
	}
	return r
}

// bulkOrNullOrErr is the reply of a read that failed (err) or found o.
func bulkOrNullOrErr(o *object, err Reply, ok bool) Reply {
	if !ok {
		return err
	}
	return bulkOrNull(o)
}

func cmdMGet(c *Call) Reply {
	elems := make([]Reply, len(c.Args)-1)
	for i, k := range c.Args[1:] {
		if o := c.lookup(k); o != nil && o.typ == typeString {
			elems[i] = Bulk(o.lend())
		}
	}
	return Array(elems...)
}

func cmdMSet(c *Call) Reply {
	if len(c.Args)%2 == 0 {
		return ErrWrongArity("mset")
	}
	c.msetPairs()
	return OK
}

func cmdMSetNX(c *Call) Reply {
	if len(c.Args)%2 == 0 {
		return ErrWrongArity("msetnx")
	}
	for i := 1; i < len(c.Args); i += 2 {
		if c.lookup(c.Args[i]) != nil {
			return Zero
		}
	}
	c.msetPairs()
	return One
}

// msetPairs stores the key/value pairs of MSET and MSETNX, without deadlines.
func (c *Call) msetPairs() {
	for i := 1; i < len(c.Args); i += 2 {
		c.put(c.Args[i], object{typ: typeString, str: string(c.Args[i+1])})
	}
}

// INCR key, DECR key
func cmdIncr(c *Call) Reply {
	if c.Args[0][0]|0x20 == 'd' {
		return c.incrBy(-1)
	}
	return c.incrBy(1)
}

// INCRBY key increment, DECRBY key decrement
func cmdIncrBy(c *Call) Reply {
	n, ok := ParseInt(c.Args[2])
	if !ok {
		return ErrNotInteger
	}
	if c.Args[0][0]|0x20 == 'd' {
		if n == math.MinInt64 {
			return Error("ERR decrement would overflow")
		}
		n = -n
	}
	return c.incrBy(n)
}

// incrBy adds n to the integer at key, keeping its deadline.
func (c *Call) incrBy(n int64) Reply {
	key := c.Args[1]
	o, err, ok := c.getString(key)
	if !ok {
		return err
	}
	var v int64
	if o != nil {
		if v, ok = parseIntString(o.str); !ok {
			return ErrNotInteger
		}
	}
	if (n < 0 && v < 0 && n < math.MinInt64-v) || (n > 0 && v > 0 && n > math.MaxInt64-v) {
		return errOverflow
	}
	v += n
	c.storeString(key, o, formatInt(v))
	return Int(v)
}

// storeString sets the string at key to s, keeping the deadline of o, the live
// string there (nil when there is none).
func (c *Call) storeString(key []byte, o *object, s string) {
	if o == nil {
		c.put(key, object{typ: typeString, str: s})
		return
	}
	o.str, o.coll = s, nil
	c.modified(key)
}

// A string that APPEND or SETRANGE writes keeps its bytes in a buffer of its
// own (o.coll), with spare capacity once it has grown, so that writing a few
// bytes of it costs a few bytes, as in Redis, rather than a copy of the whole
// value. The value is then a prefix of the growable buffer. Every string
// ever taken from that value (a reply in flight, a Lua string, a frozen
// snapshot's, a copy made by COPY) is a prefix of the buffer no longer than
// the buffer's length at that time, and is taken by lend or clone, which mark
// the buffer lent. So:
//   - bytes past the buffer's length are read by nobody: a value as long as
//     its buffer may write there (a value that shares the buffer and is
//     shorter, because another key grew it since, copies instead);
//   - bytes within it are rewritten in place only while the buffer has never
//     been lent; otherwise the value moves to a new buffer first.
type growable struct {
	b    []byte
	lent bool
}

// lend returns the string o holds, for a reader that may keep it (a reply):
// its bytes must not change after this (see growable).
func (o *object) lend() string {
	if g, ok := o.coll.(*growable); ok {
		g.lent = true
	}
	return o.str
}

// growCapacity is how much room a string of n bytes is given when it must
// move: Redis's sdsMakeRoomFor, which doubles below 1 MB and adds 1 MB above.
func growCapacity(n int) int {
	const maxPrealloc = 1 << 20
	if n < maxPrealloc {
		return 2 * n
	}
	return n + maxPrealloc
}

// writeRange writes value at offset into the live string o at key,
// zero-filling any gap past its end. It writes in place when o may (see
// growable), and otherwise moves o to a new buffer first: one of the value's
// size when the write lies within it, one with room to grow when it extends
// it.
func (c *Call) writeRange(key []byte, o *object, offset int, value []byte) {
	n := len(o.str)
	size := max(n, offset+len(value))
	g, _ := o.coll.(*growable)
	if g == nil || len(g.b) != n || cap(g.b) < size || (offset < n && g.lent) {
		capacity := size
		if size > n {
			capacity = growCapacity(size)
		}
		b := make([]byte, n, capacity)
		copy(b, o.str)
		g = &growable{b: b}
		c.Work += int64(n) / 16
	}
	c.Work += int64(len(value)+max(offset-n, 0)) / 16
	b := g.b[:size]
	if offset > n {
		clear(b[n:offset])
	}
	copy(b[offset:], value)
	g.b = b
	o.str, o.coll = unsafe.String(&b[0], len(b)), g
	c.modified(key)
}

func cmdIncrByFloat(c *Call) Reply {
	key := c.Args[1]
	o, err, ok := c.getString(key)
	if !ok {
		return err
	}
	cur := "0"
	if o != nil {
		cur = o.str
	}
	v, ok1 := parseLongDouble(cur)
	incr, ok2 := parseLongDouble(c.Args[2])
	if !ok1 || !ok2 {
		return errNotFloat
	}
	sum, ok := addLongDouble(v, incr)
	if !ok {
		return errNaNOrInfinity
	}
	s := formatLongDouble(sum)
	c.storeString(key, o, s)
	return Bulk(s)
}

func cmdAppend(c *Call) Reply {
	key, tail := c.Args[1], c.Args[2]
	o, err, ok := c.getString(key)
	if !ok {
		return err
	}
	if o == nil {
		c.put(key, object{typ: typeString, str: string(tail)})
		return Int(int64(len(tail)))
	}
	if len(o.str)+len(tail) > maxStringLength {
		return errStringTooLong
	}
	if len(tail) > 0 {
		c.writeRange(key, o, len(o.str), tail)
	}
	return Int(int64(len(o.str)))
}

func cmdStrlen(c *Call) Reply {
	o, err, ok := c.getString(c.Args[1])
	if !ok {
		return err
	}
	if o == nil {
		return Zero
	}
	return Int(int64(len(o.str)))
}

// GETRANGE key start end, with Redis's clamping of negative and large indexes.
func cmdGetRange(c *Call) Reply {
	start, ok1 := ParseInt(c.Args[2])
	end, ok2 := ParseInt(c.Args[3])
	if !ok1 || !ok2 {
		return ErrNotInteger
	}
	o, err, ok := c.getString(c.Args[1])
	if !ok {
		return err
	}
	empty := Bulk("")
	if o == nil || (start < 0 && end < 0 && start > end) {
		return empty
	}
	n := int64(len(o.str))
	if start < 0 {
		start += n
	}
	if end < 0 {
		end += n
	}
	start, end = max(start, 0), max(end, 0)
	if end >= n {
		end = n - 1
	}
	if start > end || n == 0 {
		return empty
	}
	return Bulk(o.lend()[start : end+1])
}

// SETRANGE key offset value
func cmdSetRange(c *Call) Reply {
	key, value := c.Args[1], c.Args[3]
	offset, ok := ParseInt(c.Args[2])
	if !ok {
		return ErrNotInteger
	}
	if offset < 0 {
		return Error("ERR offset is out of range")
	}
	o, err, ok := c.getString(key)
	if !ok {
		return err
	}
	if len(value) == 0 {
		if o == nil {
			return Zero
		}
		return Int(int64(len(o.str)))
	}
	if offset > maxStringLength-int64(len(value)) {
		return errStringTooLong
	}
	if o == nil {
		buf := make([]byte, offset+int64(len(value)))
		copy(buf[offset:], value)
		c.Work += int64(len(buf)) / 16
		c.put(key, object{typ: typeString, str: unsafe.String(&buf[0], len(buf))})
		return Int(int64(len(buf)))
	}
	c.writeRange(key, o, int(offset), value)
	return Int(int64(len(o.str)))
}

package keyspace

import "strings"

func init() {
	register(
		&Command{Name: "get", Arity: 2, Flags: ReadOnly | Fast, FirstKey: 1, LastKey: 1, KeyStep: 1, Run: cmdGet},
		&Command{Name: "set", Arity: -3, Flags: Write | DenyOOM, FirstKey: 1, LastKey: 1, KeyStep: 1, Run: cmdSet},
	)
}

// getString returns the string at key, whether it exists, and a WRONGTYPE
// error reply when the key holds another type.
func (c *Call) getString(key string) (string, bool, *Reply) {
	o := c.get(key)
	if o == nil {
		return "", false, nil
	}
	s, ok := o.value.(string)
	if !ok {
		return "", false, &ErrWrongType
	}
	return s, true, nil
}

func cmdGet(c *Call) Reply {
	s, ok, err := c.getString(string(c.Args[1]))
	if err != nil {
		return *err
	}
	if !ok {
		return Null
	}
	return Bulk(s)
}

// SET key value [NX | XX] [GET] [EX s | PX ms | EXAT s | PXAT ms | KEEPTTL]
func cmdSet(c *Call) Reply {
	key := string(c.Args[1])
	var nx, xx, get, keepTTL bool
	var deadline int64
	expireSet := false
	for i := 3; i < len(c.Args); i++ {
		opt := strings.ToLower(string(c.Args[i]))
		switch {
		case opt == "nx" && !xx:
			nx = true
		case opt == "xx" && !nx:
			xx = true
		case opt == "get":
			get = true
		case opt == "keepttl" && !expireSet:
			keepTTL = true
		case (opt == "ex" || opt == "px" || opt == "exat" || opt == "pxat") && !keepTTL && !expireSet && i+1 < len(c.Args):
			i++
			n, ok := ParseInt(c.Args[i])
			if !ok {
				return ErrNotInteger
			}
			if n <= 0 || (opt[0] == 'e' && n > maxSeconds) {
				return ErrInvalidExpr
			}
			switch opt {
			case "ex":
				deadline = c.Now + n*1000
			case "px":
				deadline = c.Now + n
			case "exat":
				deadline = n * 1000
			case "pxat":
				deadline = n
			}
			if deadline <= 0 || (opt[1] != 'x' && opt != "px" && deadline < n) {
				return ErrInvalidExpr
			}
			expireSet = true
		default:
			return ErrSyntax
		}
	}
	old, exists, wrong := c.getString(key)
	if wrong != nil && get {
		return *wrong
	}
	exists = exists || wrong != nil
	if (nx && exists) || (xx && !exists) {
		if get && exists {
			return Bulk(old)
		}
		return Null
	}
	if keepTTL {
		if o := c.get(key); o != nil {
			deadline = o.deadline
		}
	}
	c.set(key, string(c.Args[2]), deadline)
	if get {
		if !exists {
			return Null
		}
		return Bulk(old)
	}
	return OK
}

// maxSeconds bounds second-based expiry arguments so that converting them to
// milliseconds cannot overflow.
const maxSeconds = (1<<63 - 1) / 1000

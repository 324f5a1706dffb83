package luaexec

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/lockserver/lockserver/luaexec/internal/budget"
	"github.com/lockserver/lockserver/luaexec/internal/clib"
	lua "github.com/yuin/gopher-lua"
)

// cjson as Redis ships it (lua-cjson 2.1.0): {} encodes as {}, arrays are
// tables whose keys are 1..n (sparse ones refused), numbers use "%.14g",
// '/' is escaped, null decodes to cjson.null, numbers decode with strtod
// (so 0x10, inf and 01 are accepted as lua-cjson accepts them), and errors
// read as lua-cjson's. Objects encode in the table's iteration order, which
// here is insertion order and in Redis is hash order.
//
// The configuration functions (encode_max_depth and friends) change the
// settings for the rest of the running script only: in Redis they persist
// in the server, which a replicated state machine cannot allow.

// cjsonConfig is lua-cjson's configuration.
type cjsonConfig struct {
	sparseConvert    bool
	sparseRatio      int
	sparseSafe       int
	encodeMaxDepth   int
	decodeMaxDepth   int
	precision        int
	keepBuffer       bool
	encodeInvalid    int // 0 refuse, 1 encode, 2 encode as null
	decodeInvalid    bool
	configuredForRun bool
}

func defaultCjsonConfig() cjsonConfig {
	return cjsonConfig{sparseRatio: 2, sparseSafe: 10, encodeMaxDepth: 1000, decodeMaxDepth: 1000,
		precision: 14, keepBuffer: true, decodeInvalid: true, configuredForRun: true}
}

// cjson returns the running script's configuration.
func (v *vm) cjson() *cjsonConfig {
	if !v.run.cjson.configuredForRun {
		v.run.cjson = defaultCjsonConfig()
	}
	return &v.run.cjson
}

func (v *vm) cjsonLib() *lua.LTable {
	L := v.L
	v.cjsonNull = L.NewUserData()
	var lib *lua.LTable
	lib = newLib(L, map[string]lua.LGFunction{
		"encode": v.cjsonEncode,
		"decode": v.cjsonDecode,
		"encode_sparse_array": func(L *lua.LState) int {
			c := v.cjson()
			c.sparseConvert = optBoolOption(L, 1, c.sparseConvert)
			c.sparseRatio = optIntRange(L, 2, c.sparseRatio, 0, math.MaxInt32)
			c.sparseSafe = optIntRange(L, 3, c.sparseSafe, 0, math.MaxInt32)
			L.Push(lua.LBool(c.sparseConvert))
			L.Push(lua.LNumber(c.sparseRatio))
			L.Push(lua.LNumber(c.sparseSafe))
			return 3
		},
		"encode_max_depth": func(L *lua.LState) int {
			c := v.cjson()
			c.encodeMaxDepth = optIntRange(L, 1, c.encodeMaxDepth, 1, math.MaxInt32)
			L.Push(lua.LNumber(c.encodeMaxDepth))
			return 1
		},
		"decode_max_depth": func(L *lua.LState) int {
			c := v.cjson()
			c.decodeMaxDepth = optIntRange(L, 1, c.decodeMaxDepth, 1, math.MaxInt32)
			L.Push(lua.LNumber(c.decodeMaxDepth))
			return 1
		},
		"encode_number_precision": func(L *lua.LState) int {
			c := v.cjson()
			c.precision = optIntRange(L, 1, c.precision, 1, 14)
			L.Push(lua.LNumber(c.precision))
			return 1
		},
		"encode_keep_buffer": func(L *lua.LState) int {
			c := v.cjson()
			c.keepBuffer = optBoolOption(L, 1, c.keepBuffer)
			L.Push(lua.LBool(c.keepBuffer))
			return 1
		},
		"encode_invalid_numbers": func(L *lua.LState) int {
			c := v.cjson()
			if s, ok := L.Get(1).(lua.LString); ok && s == "null" {
				c.encodeInvalid = 2
			} else if L.GetTop() >= 1 && L.Get(1) != lua.LNil {
				c.encodeInvalid = 0
				if optBoolOption(L, 1, false) {
					c.encodeInvalid = 1
				}
			}
			if c.encodeInvalid == 2 {
				L.Push(lua.LString("null"))
			} else {
				L.Push(lua.LBool(c.encodeInvalid == 1))
			}
			return 1
		},
		"decode_invalid_numbers": func(L *lua.LState) int {
			c := v.cjson()
			c.decodeInvalid = optBoolOption(L, 1, c.decodeInvalid)
			L.Push(lua.LBool(c.decodeInvalid))
			return 1
		},
		"new": func(L *lua.LState) int {
			L.Push(v.protect(lib))
			return 1
		},
	})
	lib.RawSetString("null", v.cjsonNull)
	lib.RawSetString("_NAME", lua.LString("cjson"))
	lib.RawSetString("_VERSION", lua.LString("2.1.0"))
	return lib
}

// optBoolOption reads an optional boolean configuration argument.
func optBoolOption(L *lua.LState, n int, def bool) bool {
	switch x := L.Get(n).(type) {
	case *lua.LNilType:
		return def
	case lua.LBool:
		return bool(x)
	}
	argError(L, n, "invalid option '"+lua.LVAsString(L.Get(n))+"'")
	return def
}

// optIntRange reads an optional integer configuration argument.
func optIntRange(L *lua.LState, n, def, min, max int) int {
	if L.Get(n) == lua.LNil {
		return def
	}
	i := checkInt(L, n)
	if i < min || i > max {
		argError(L, n, fmt.Sprintf("expected integer between %d and %d", min, max))
	}
	return i
}

// ---- encode ----

type jsonEncoder struct {
	v   *vm
	L   *lua.LState
	cfg *cjsonConfig
	b   strings.Builder
}

func (v *vm) cjsonEncode(L *lua.LState) int {
	if L.GetTop() != 1 {
		argError(L, 1, "expected 1 argument")
	}
	enc := &jsonEncoder{v: v, L: L, cfg: v.cjson()}
	enc.value(L.Get(1), 0)
	budget.Bytes(v, L, enc.b.Len())
	L.Push(lua.LString(enc.b.String()))
	return 1
}

func (enc *jsonEncoder) fail(val lua.LValue, reason string) {
	raiseError(enc.L, "Cannot serialise %s: %s", val.Type().String(), reason)
}

func (enc *jsonEncoder) value(val lua.LValue, depth int) {
	enc.v.Charge(enc.L, 1)
	switch x := val.(type) {
	case lua.LString:
		budget.Bytes(enc.v, enc.L, len(x))
		jsonQuote(&enc.b, string(x))
	case lua.LNumber:
		enc.number(x)
	case lua.LBool:
		if x {
			enc.b.WriteString("true")
		} else {
			enc.b.WriteString("false")
		}
	case *lua.LNilType:
		enc.b.WriteString("null")
	case *lua.LTable:
		depth++
		if depth > enc.cfg.encodeMaxDepth {
			raiseError(enc.L, "Cannot serialise, excessive nesting (%d)", depth)
		}
		if n := enc.arrayLength(x); n > 0 {
			enc.b.WriteByte('[')
			for i := 1; i <= n; i++ {
				if i > 1 {
					enc.b.WriteByte(',')
				}
				enc.value(x.RawGetInt(i), depth)
			}
			enc.b.WriteByte(']')
			return
		}
		enc.b.WriteByte('{')
		first := true
		enc.v.forEach(enc.L, x, func(k, e lua.LValue) {
			if !first {
				enc.b.WriteByte(',')
			}
			first = false
			switch key := k.(type) {
			case lua.LNumber:
				enc.b.WriteByte('"')
				enc.number(key)
				enc.b.WriteString(`":`)
			case lua.LString:
				jsonQuote(&enc.b, string(key))
				enc.b.WriteByte(':')
			default:
				enc.fail(k, "table key must be a number or string")
			}
			enc.value(e, depth)
		})
		enc.b.WriteByte('}')
	case *lua.LUserData:
		if x == enc.v.cjsonNull {
			enc.b.WriteString("null")
			return
		}
		enc.fail(val, "type not supported")
	default:
		enc.fail(val, "type not supported")
	}
}

// arrayLength is lua_array_length: the largest key when every key is a
// positive integer, 0 for an object, refusing excessively sparse arrays.
func (enc *jsonEncoder) arrayLength(t *lua.LTable) int {
	max, items := 0, 0
	array := true
	enc.v.forEach(enc.L, t, func(k, _ lua.LValue) {
		if !array {
			return
		}
		n, ok := k.(lua.LNumber)
		f := float64(n)
		if !ok || f != math.Floor(f) || f < 1 {
			array = false
			return
		}
		if f > float64(max) {
			max = int(f)
		}
		items++
	})
	if !array {
		return 0
	}
	c := enc.cfg
	if c.sparseRatio > 0 && max > items*c.sparseRatio && max > c.sparseSafe {
		if !c.sparseConvert {
			enc.fail(t, "excessively sparse array")
		}
		return 0
	}
	return max
}

func (enc *jsonEncoder) number(n lua.LNumber) {
	f := float64(n)
	if math.IsInf(f, 0) || math.IsNaN(f) {
		switch enc.cfg.encodeInvalid {
		case 0:
			enc.fail(n, "must not be NaN or Inf")
		case 1:
			if math.IsNaN(f) {
				enc.b.WriteString("nan")
				return
			}
		default:
			enc.b.WriteString("null")
			return
		}
	}
	enc.b.Write(clib.AppendNumber(nil, f, enc.cfg.precision))
}

// jsonEscapes are lua-cjson's escapes: control characters, '"', '\\', '/' and DEL.
var jsonEscapes = func() [256]string {
	var e [256]string
	for c := 0; c < 0x20; c++ {
		e[c] = fmt.Sprintf("\\u%04x", c)
	}
	e['\b'], e['\t'], e['\n'], e['\f'], e['\r'] = `\b`, `\t`, `\n`, `\f`, `\r`
	e['"'], e['\\'], e['/'], e[0x7f] = `\"`, `\\`, `\/`, `\u007f`
	return e
}()

func jsonQuote(b *strings.Builder, s string) {
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		if esc := jsonEscapes[s[i]]; esc != "" {
			b.WriteString(esc)
		} else {
			b.WriteByte(s[i])
		}
	}
	b.WriteByte('"')
}

// ---- decode ----

// JSON token types, named as lua-cjson names them in errors.
const (
	tObjBegin = iota
	tObjEnd
	tArrBegin
	tArrEnd
	tString
	tNumber
	tBoolean
	tNull
	tColon
	tComma
	tEnd
	tError
)

var jsonTokenNames = [...]string{"T_OBJ_BEGIN", "T_OBJ_END", "T_ARR_BEGIN", "T_ARR_END", "T_STRING",
	"T_NUMBER", "T_BOOLEAN", "T_NULL", "T_COLON", "T_COMMA", "T_END", "T_ERROR"}

type jsonToken struct {
	kind  int
	index int
	str   string
	num   float64
	b     bool
	err   string
}

type jsonDecoder struct {
	v     *vm
	L     *lua.LState
	cfg   *cjsonConfig
	data  string
	pos   int
	depth int
}

func (v *vm) cjsonDecode(L *lua.LState) int {
	if L.GetTop() != 1 {
		argError(L, 1, "expected 1 argument")
	}
	data := checkString(L, 1)
	budget.Bytes(v, L, len(data))
	d := &jsonDecoder{v: v, L: L, cfg: v.cjson(), data: data}
	tok := d.next()
	val := d.value(tok)
	if tok := d.next(); tok.kind != tEnd {
		d.parseError("the end", tok)
	}
	L.Push(val)
	return 1
}

// at returns the byte at i, NUL past the end (lua-cjson reads a C string).
func (d *jsonDecoder) at(i int) byte {
	if i < len(d.data) {
		return d.data[i]
	}
	return 0
}

func (d *jsonDecoder) parseError(expected string, tok jsonToken) {
	found := jsonTokenNames[tok.kind]
	if tok.kind == tError {
		found = tok.err
	}
	raiseError(d.L, "Expected %s but found %s at character %d", expected, found, tok.index+1)
}

func (d *jsonDecoder) errorToken(msg string) jsonToken {
	return jsonToken{kind: tError, index: d.pos, err: msg}
}

// invalidNumber is json_is_invalid_number: numbers JSON forbids but strtod
// reads (a sign '+', hex, leading zeros, inf, nan).
func (d *jsonDecoder) invalidNumber() bool {
	p := d.pos
	if d.at(p) == '+' {
		return true
	}
	if d.at(p) == '-' {
		p++
	}
	if d.at(p) == '0' {
		c := d.at(p + 1)
		return c|0x20 == 'x' || c >= '0' && c <= '9'
	}
	if d.at(p) <= '9' {
		return false
	}
	rest := d.data[min(p, len(d.data)):]
	return clib.HasPrefixFold(rest, "inf") || clib.HasPrefixFold(rest, "nan")
}

func (d *jsonDecoder) number() jsonToken {
	rest := d.data[d.pos:]
	if i := strings.IndexByte(rest, 0); i >= 0 {
		rest = rest[:i]
	}
	f, n := clib.Strtod(rest)
	if n == 0 {
		return d.errorToken("invalid number")
	}
	tok := jsonToken{kind: tNumber, index: d.pos, num: f}
	d.pos += n
	return tok
}

func (d *jsonDecoder) next() jsonToken {
	for {
		c := d.at(d.pos)
		if c != ' ' && c != '\t' && c != '\n' && c != '\r' {
			break
		}
		d.pos++
	}
	start := d.pos
	c := d.at(d.pos)
	if k, ok := jsonSimpleTokens[c]; ok {
		d.pos++
		return jsonToken{kind: k, index: start}
	}
	rest := d.data[min(d.pos, len(d.data)):]
	switch {
	case c == 0:
		return jsonToken{kind: tEnd, index: start}
	case strings.IndexByte("fiInNt\"+-0123456789", c) < 0:
		return d.errorToken("invalid token")
	case c == '"':
		return d.stringToken()
	case c == '-' || c >= '0' && c <= '9':
		if !d.cfg.decodeInvalid && d.invalidNumber() {
			return d.errorToken("invalid number")
		}
		return d.number()
	case strings.HasPrefix(rest, "true"):
		d.pos += 4
		return jsonToken{kind: tBoolean, index: start, b: true}
	case strings.HasPrefix(rest, "false"):
		d.pos += 5
		return jsonToken{kind: tBoolean, index: start}
	case strings.HasPrefix(rest, "null"):
		d.pos += 4
		return jsonToken{kind: tNull, index: start}
	case d.cfg.decodeInvalid && d.invalidNumber():
		return d.number()
	}
	return d.errorToken("invalid token")
}

var jsonSimpleTokens = map[byte]int{'{': tObjBegin, '}': tObjEnd, '[': tArrBegin, ']': tArrEnd, ',': tComma, ':': tColon}

var jsonUnescapes = map[byte]byte{'"': '"', '\\': '\\', '/': '/', 'b': '\b', 'f': '\f', 'n': '\n', 'r': '\r', 't': '\t'}

func (d *jsonDecoder) stringToken() jsonToken {
	start := d.pos
	d.pos++
	var b strings.Builder
	for {
		c := d.at(d.pos)
		if c == '"' {
			break
		}
		if c == 0 {
			return d.errorToken("unexpected end of string")
		}
		if c == '\\' {
			e := d.at(d.pos + 1)
			if e == 'u' {
				if !d.unicodeEscape(&b) {
					return d.errorToken("invalid unicode escape code")
				}
				continue
			}
			u, ok := jsonUnescapes[e]
			if !ok {
				return d.errorToken("invalid escape code")
			}
			c = u
			d.pos++
		}
		b.WriteByte(c)
		d.pos++
	}
	d.pos++
	return jsonToken{kind: tString, index: start, str: b.String()}
}

func (d *jsonDecoder) hex4(p int) int {
	if p+4 > len(d.data) {
		return -1
	}
	v, err := strconv.ParseUint(d.data[p:p+4], 16, 16)
	if err != nil {
		return -1
	}
	return int(v)
}

// unicodeEscape decodes \uXXXX (and a surrogate pair) into UTF-8.
func (d *jsonDecoder) unicodeEscape(b *strings.Builder) bool {
	cp := d.hex4(d.pos + 2)
	if cp < 0 {
		return false
	}
	n := 6
	if cp&0xF800 == 0xD800 {
		if cp&0x400 != 0 || d.at(d.pos+6) != '\\' || d.at(d.pos+7) != 'u' {
			return false
		}
		low := d.hex4(d.pos + 8)
		if low < 0 || low&0xFC00 != 0xDC00 {
			return false
		}
		cp = ((cp&0x3FF)<<10 | low&0x3FF) + 0x10000
		n = 12
	}
	var buf [4]byte
	b.Write(buf[:utf8.EncodeRune(buf[:], rune(cp))])
	d.pos += n
	return true
}

func (d *jsonDecoder) descend() {
	d.depth++
	if d.depth > d.cfg.decodeMaxDepth {
		raiseError(d.L, "Found too many nested data structures (%d) at character %d", d.depth, d.pos)
	}
}

func (d *jsonDecoder) value(tok jsonToken) lua.LValue {
	L := d.L
	switch tok.kind {
	case tString:
		return lua.LString(tok.str)
	case tNumber:
		return lua.LNumber(tok.num)
	case tBoolean:
		return lua.LBool(tok.b)
	case tNull:
		return d.v.cjsonNull
	case tObjBegin:
		d.descend()
		t := L.NewTable()
		tok = d.next()
		if tok.kind == tObjEnd {
			d.depth--
			return t
		}
		for {
			if tok.kind != tString {
				d.parseError("object key string", tok)
			}
			key := tok.str
			if tok = d.next(); tok.kind != tColon {
				d.parseError("colon", tok)
			}
			t.RawSetString(key, d.value(d.next()))
			d.v.Charge(L, 1)
			tok = d.next()
			if tok.kind == tObjEnd {
				d.depth--
				return t
			}
			if tok.kind != tComma {
				d.parseError("comma or object end", tok)
			}
			tok = d.next()
		}
	case tArrBegin:
		d.descend()
		t := L.NewTable()
		tok = d.next()
		if tok.kind == tArrEnd {
			d.depth--
			return t
		}
		for i := 1; ; i++ {
			t.RawSetInt(i, d.value(tok))
			d.v.Charge(L, 1)
			tok = d.next()
			if tok.kind == tArrEnd {
				d.depth--
				return t
			}
			if tok.kind != tComma {
				d.parseError("comma or array end", tok)
			}
			tok = d.next()
		}
	}
	d.parseError("value", tok)
	return lua.LNil
}

package lualib

import (
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/lockserver/lockserver/luaexec/internal/budget"
	"github.com/lockserver/lockserver/luaexec/internal/clib"
	lua "github.com/yuin/gopher-lua"
)

// cjson.decode, as lua-cjson 2.1.0 reads JSON: its tokens, its errors, and
// numbers read with strtod.

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
	l     *Libs
	L     *lua.LState
	cfg   *cjsonConfig
	data  string
	pos   int
	depth int
}

func (l *Libs) cjsonDecode(L *lua.LState) int {
	if L.GetTop() != 1 {
		ArgError(L, 1, "expected 1 argument")
	}
	data := CheckString(L, 1)
	budget.Bytes(l.budget, L, len(data))
	d := &jsonDecoder{l: l, L: L, cfg: l.cjson(), data: data}
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
	RaiseError(d.L, "Expected %s but found %s at character %d", expected, found, tok.index+1)
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
		RaiseError(d.L, "Found too many nested data structures (%d) at character %d", d.depth, d.pos)
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
		return d.l.cjsonNull
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
			d.l.budget.Charge(L, 1)
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
			d.l.budget.Charge(L, 1)
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

package lualib

import (
	"fmt"
	"math"
	"strings"

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
func (l *Libs) cjson() *cjsonConfig {
	if !l.cjsonConf.configuredForRun {
		l.cjsonConf = defaultCjsonConfig()
	}
	return &l.cjsonConf
}

// CJSONLib returns the cjson library.
func (l *Libs) CJSONLib() *lua.LTable {
	L := l.state
	l.cjsonNull = L.NewUserData()
	var lib *lua.LTable
	lib = NewLib(L, map[string]lua.LGFunction{
		"encode": l.cjsonEncode,
		"decode": l.cjsonDecode,
		"encode_sparse_array": func(L *lua.LState) int {
			c := l.cjson()
			c.sparseConvert = optBoolOption(L, 1, c.sparseConvert)
			c.sparseRatio = optIntRange(L, 2, c.sparseRatio, 0, math.MaxInt32)
			c.sparseSafe = optIntRange(L, 3, c.sparseSafe, 0, math.MaxInt32)
			L.Push(lua.LBool(c.sparseConvert))
			L.Push(lua.LNumber(c.sparseRatio))
			L.Push(lua.LNumber(c.sparseSafe))
			return 3
		},
		"encode_max_depth": func(L *lua.LState) int {
			c := l.cjson()
			c.encodeMaxDepth = optIntRange(L, 1, c.encodeMaxDepth, 1, math.MaxInt32)
			L.Push(lua.LNumber(c.encodeMaxDepth))
			return 1
		},
		"decode_max_depth": func(L *lua.LState) int {
			c := l.cjson()
			c.decodeMaxDepth = optIntRange(L, 1, c.decodeMaxDepth, 1, math.MaxInt32)
			L.Push(lua.LNumber(c.decodeMaxDepth))
			return 1
		},
		"encode_number_precision": func(L *lua.LState) int {
			c := l.cjson()
			c.precision = optIntRange(L, 1, c.precision, 1, 14)
			L.Push(lua.LNumber(c.precision))
			return 1
		},
		"encode_keep_buffer": func(L *lua.LState) int {
			c := l.cjson()
			c.keepBuffer = optBoolOption(L, 1, c.keepBuffer)
			L.Push(lua.LBool(c.keepBuffer))
			return 1
		},
		"encode_invalid_numbers": func(L *lua.LState) int {
			c := l.cjson()
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
			c := l.cjson()
			c.decodeInvalid = optBoolOption(L, 1, c.decodeInvalid)
			L.Push(lua.LBool(c.decodeInvalid))
			return 1
		},
		"new": func(L *lua.LState) int {
			L.Push(l.ro.Protect(lib))
			return 1
		},
	})
	lib.RawSetString("null", l.cjsonNull)
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
	ArgError(L, n, "invalid option '"+lua.LVAsString(L.Get(n))+"'")
	return def
}

// optIntRange reads an optional integer configuration argument.
func optIntRange(L *lua.LState, n, def, min, max int) int {
	if L.Get(n) == lua.LNil {
		return def
	}
	i := CheckInt(L, n)
	if i < min || i > max {
		ArgError(L, n, fmt.Sprintf("expected integer between %d and %d", min, max))
	}
	return i
}

// ---- encode ----

type jsonEncoder struct {
	l   *Libs
	L   *lua.LState
	cfg *cjsonConfig
	b   strings.Builder
}

func (l *Libs) cjsonEncode(L *lua.LState) int {
	if L.GetTop() != 1 {
		ArgError(L, 1, "expected 1 argument")
	}
	enc := &jsonEncoder{l: l, L: L, cfg: l.cjson()}
	enc.value(L.Get(1), 0)
	budget.Bytes(l.budget, L, enc.b.Len())
	L.Push(lua.LString(enc.b.String()))
	return 1
}

func (enc *jsonEncoder) fail(val lua.LValue, reason string) {
	RaiseError(enc.L, "Cannot serialise %s: %s", val.Type().String(), reason)
}

func (enc *jsonEncoder) value(val lua.LValue, depth int) {
	enc.l.budget.Charge(enc.L, 1)
	switch x := val.(type) {
	case lua.LString:
		budget.Bytes(enc.l.budget, enc.L, len(x))
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
			RaiseError(enc.L, "Cannot serialise, excessive nesting (%d)", depth)
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
		traverse(enc.l.budget, enc.L, x, func(k, e lua.LValue) {
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
		if x == enc.l.cjsonNull {
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
	traverse(enc.l.budget, enc.L, t, func(k, _ lua.LValue) {
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

package lualib

import (
	"encoding/binary"
	"math"

	"github.com/lockserver/lockserver/luaexec/internal/budget"
	"github.com/lockserver/lockserver/luaexec/internal/clib"
	lua "github.com/yuin/gopher-lua"
)

// cmsgpack is lua-cmsgpack 0.4.0 as Redis ships it: integers in the smallest
// MessagePack integer form, other numbers as float 32 when exact, else float
// 64, strings as str, tables as arrays when their keys are exactly 1..n and as
// maps otherwise, nesting beyond 16 levels as nil, and unsupported values as
// nil. It decodes no bin or ext types ("Bad data format in input.").

const (
	msgpackMaxNesting = 16 // LUACMSGPACK_MAX_NESTING, for encoding
	// msgpackMaxDecodeDepth bounds decoding, which lua-cmsgpack does not
	// bound at all (and overflows the C stack on deep input).
	msgpackMaxDecodeDepth = 1000
)

// CMsgpackLib returns the cmsgpack library.
func (l *Libs) CMsgpackLib() *lua.LTable {
	t := NewLib(l.state, map[string]lua.LGFunction{
		"pack":   l.msgpackPack,
		"unpack": func(L *lua.LState) int { return l.msgpackUnpack(L, 0, 0) },
		"unpack_one": func(L *lua.LState) int {
			offset := OptInt(L, 2, 0)
			L.SetTop(1)
			return l.msgpackUnpack(L, 1, offset)
		},
		"unpack_limit": func(L *lua.LState) int {
			limit := int(checkInteger(L, 2))
			offset := OptInt(L, 3, 0)
			L.SetTop(1)
			return l.msgpackUnpack(L, limit, offset)
		},
	})
	t.RawSetString("_NAME", lua.LString("cmsgpack"))
	t.RawSetString("_VERSION", lua.LString("lua-cmsgpack 0.4.0"))
	t.RawSetString("_COPYRIGHT", lua.LString("Copyright (C) 2012, Salvatore Sanfilippo"))
	t.RawSetString("_DESCRIPTION", lua.LString("MessagePack C implementation for Lua"))
	return t
}

type msgpackEncoder struct {
	l *Libs
	L *lua.LState
	b []byte
}

func (l *Libs) msgpackPack(L *lua.LState) int {
	n := L.GetTop()
	if n == 0 {
		ArgError(L, 0, "MessagePack pack needs input.")
	}
	enc := &msgpackEncoder{l: l, L: L}
	for i := 1; i <= n; i++ {
		enc.value(L.Get(i), 0)
	}
	budget.Bytes(l.budget, L, len(enc.b))
	L.Push(lua.LString(enc.b))
	return 1
}

func (enc *msgpackEncoder) value(val lua.LValue, level int) {
	enc.l.budget.Charge(enc.L, 1)
	switch x := val.(type) {
	case lua.LString:
		budget.Bytes(enc.l.budget, enc.L, len(x))
		enc.header(len(x), 0xa0, 31, 0xd9, 0xda, 0xdb)
		enc.b = append(enc.b, x...)
	case lua.LBool:
		if x {
			enc.b = append(enc.b, 0xc3)
		} else {
			enc.b = append(enc.b, 0xc2)
		}
	case lua.LNumber:
		enc.number(float64(x))
	case *lua.LTable:
		if level == msgpackMaxNesting {
			enc.b = append(enc.b, 0xc0)
			return
		}
		enc.table(x, level)
	default:
		enc.b = append(enc.b, 0xc0)
	}
}

// header writes a str, array or map header: the fixed form up to fixMax,
// then (for strings only) the 8-bit form, then 16 and 32 bits.
func (enc *msgpackEncoder) header(n int, fix byte, fixMax int, c8, c16, c32 byte) {
	switch {
	case n <= fixMax:
		enc.b = append(enc.b, fix|byte(n))
	case c8 != 0 && n <= 0xff:
		enc.b = append(enc.b, c8, byte(n))
	case n <= 0xffff:
		enc.b = binary.BigEndian.AppendUint16(append(enc.b, c16), uint16(n))
	default:
		enc.b = binary.BigEndian.AppendUint32(append(enc.b, c32), uint32(n))
	}
}

func (enc *msgpackEncoder) number(f float64) {
	if !math.IsInf(f, 0) && float64(clib.ToInteger(f)) == f {
		enc.integer(clib.ToInteger(f))
		return
	}
	if f32 := float32(f); float64(f32) == f {
		enc.b = binary.BigEndian.AppendUint32(append(enc.b, 0xca), math.Float32bits(f32))
		return
	}
	enc.b = binary.BigEndian.AppendUint64(append(enc.b, 0xcb), math.Float64bits(f))
}

func (enc *msgpackEncoder) integer(n int64) {
	b := enc.b
	switch {
	case n >= 0 && n <= 127:
		b = append(b, byte(n))
	case n >= 0 && n <= 0xff:
		b = append(b, 0xcc, byte(n))
	case n >= 0 && n <= 0xffff:
		b = binary.BigEndian.AppendUint16(append(b, 0xcd), uint16(n))
	case n >= 0 && n <= 0xffffffff:
		b = binary.BigEndian.AppendUint32(append(b, 0xce), uint32(n))
	case n >= 0:
		b = binary.BigEndian.AppendUint64(append(b, 0xcf), uint64(n))
	case n >= -32:
		b = append(b, byte(n))
	case n >= -128:
		b = append(b, 0xd0, byte(n))
	case n >= -32768:
		b = binary.BigEndian.AppendUint16(append(b, 0xd1), uint16(n))
	case n >= -2147483648:
		b = binary.BigEndian.AppendUint32(append(b, 0xd2), uint32(n))
	default:
		b = binary.BigEndian.AppendUint64(append(b, 0xd3), uint64(n))
	}
	enc.b = b
}

// isArray is table_is_an_array: every key a positive integer (that fits a C
// int) and no holes.
func (enc *msgpackEncoder) isArray(t *lua.LTable) bool {
	count, max := 0, 0.0
	array := true
	traverse(enc.l.budget, enc.L, t, func(k, _ lua.LValue) {
		n, ok := k.(lua.LNumber)
		f := float64(n)
		if !array || !ok || f <= 0 || math.IsInf(f, 0) || float64(int32(f)) != f {
			array = false
			return
		}
		max = math.Max(max, f)
		count++
	})
	return array && max == float64(count)
}

func (enc *msgpackEncoder) table(t *lua.LTable, level int) {
	if enc.isArray(t) {
		n := Length(enc.l.budget, enc.L, t)
		enc.header(n, 0x90, 15, 0, 0xdc, 0xdd)
		for i := 1; i <= n; i++ {
			enc.value(enc.L.GetTable(t, lua.LNumber(i)), level+1)
		}
		return
	}
	n := 0
	traverse(enc.l.budget, enc.L, t, func(_, _ lua.LValue) { n++ })
	enc.header(n, 0x80, 15, 0, 0xde, 0xdf)
	traverse(enc.l.budget, enc.L, t, func(k, val lua.LValue) {
		enc.value(k, level+1)
		enc.value(val, level+1)
	})
}

// ---- unpack ----

type msgpackDecoder struct {
	l     *Libs
	L     *lua.LState
	data  string
	pos   int
	depth int
}

func (l *Libs) msgpackUnpack(L *lua.LState, limit, offset int) int {
	s := CheckString(L, 1)
	decodeAll := limit == 0 && offset == 0
	if offset < 0 || limit < 0 {
		RaiseError(L, "Invalid request to unpack with offset of %d and limit of %d.", offset, len(s))
	} else if offset > len(s) {
		RaiseError(L, "Start offset %d greater than input length %d.", offset, len(s))
	}
	if decodeAll {
		limit = math.MaxInt32
	}
	budget.Bytes(l.budget, L, len(s)-offset)
	d := &msgpackDecoder{l: l, L: L, data: s, pos: offset}
	n := 0
	for ; d.pos < len(s) && n < limit; n++ {
		L.Push(d.value())
	}
	if decodeAll {
		return n
	}
	next := d.pos
	if d.pos == len(s) {
		next = -1
	}
	L.Insert(lua.LNumber(next), 2)
	return n + 1
}

func (d *msgpackDecoder) need(n int) string {
	if len(d.data)-d.pos < n {
		RaiseError(d.L, "Missing bytes in input.")
	}
	s := d.data[d.pos : d.pos+n]
	d.pos += n
	return s
}

func (d *msgpackDecoder) uint(n int) uint64 {
	var u uint64
	for _, c := range []byte(d.need(n)) {
		u = u<<8 | uint64(c)
	}
	return u
}

func (d *msgpackDecoder) value() lua.LValue {
	d.l.budget.Charge(d.L, 1)
	c := d.need(1)[0]
	switch c {
	case 0xcc:
		return lua.LNumber(d.uint(1))
	case 0xd0:
		return lua.LNumber(int8(d.uint(1)))
	case 0xcd:
		return lua.LNumber(d.uint(2))
	case 0xd1:
		return lua.LNumber(int16(d.uint(2)))
	case 0xce:
		return lua.LNumber(d.uint(4))
	case 0xd2:
		return lua.LNumber(int32(d.uint(4)))
	case 0xcf, 0xd3:
		return lua.LNumber(int64(d.uint(8)))
	case 0xc0:
		return lua.LNil
	case 0xc3:
		return lua.LTrue
	case 0xc2:
		return lua.LFalse
	case 0xca:
		return lua.LNumber(math.Float32frombits(uint32(d.uint(4))))
	case 0xcb:
		return lua.LNumber(math.Float64frombits(d.uint(8)))
	case 0xd9:
		return lua.LString(d.need(int(d.uint(1))))
	case 0xda:
		return lua.LString(d.need(int(d.uint(2))))
	case 0xdb:
		return lua.LString(d.need(int(d.uint(4))))
	case 0xdc:
		return d.array(int(d.uint(2)))
	case 0xdd:
		return d.array(int(d.uint(4)))
	case 0xde:
		return d.hash(int(d.uint(2)))
	case 0xdf:
		return d.hash(int(d.uint(4)))
	}
	switch {
	case c&0x80 == 0:
		return lua.LNumber(c)
	case c&0xe0 == 0xe0:
		return lua.LNumber(int8(c))
	case c&0xe0 == 0xa0:
		return lua.LString(d.need(int(c & 0x1f)))
	case c&0xf0 == 0x90:
		return d.array(int(c & 0xf))
	case c&0xf0 == 0x80:
		return d.hash(int(c & 0xf))
	}
	RaiseError(d.L, "Bad data format in input.")
	return lua.LNil
}

func (d *msgpackDecoder) descend() {
	d.depth++
	if d.depth > msgpackMaxDecodeDepth {
		RaiseError(d.L, "MessagePack input nests deeper than %d levels", msgpackMaxDecodeDepth)
	}
}

func (d *msgpackDecoder) array(n int) lua.LValue {
	d.descend()
	t := d.L.NewTable()
	for i := 1; i <= n; i++ {
		t.RawSetInt(i, d.value())
	}
	d.depth--
	return t
}

func (d *msgpackDecoder) hash(n int) lua.LValue {
	d.descend()
	t := d.L.NewTable()
	for i := 0; i < n; i++ {
		k := d.value()
		val := d.value()
		if k == lua.LNil {
			d.L.Error(lua.LString("table index is nil"), 0)
		}
		t.RawSet(k, val)
	}
	d.depth--
	return t
}

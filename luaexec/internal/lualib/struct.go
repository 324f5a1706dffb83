package lualib

import (
	"encoding/binary"
	"fmt"
	"math"
	"strings"

	"github.com/lockserver/lockserver/luaexec/internal/budget"
	"github.com/lockserver/lockserver/luaexec/internal/clib"
	lua "github.com/yuin/gopher-lua"
)

// struct is Roberto Ierusalimschy's struct library as Redis ships it:
// pack(fmt, ...), unpack(fmt, s [, pos]) and size(fmt) over the options
// < > ! x b B h H l L T i[n] I[n] c[n] s f d, for x86-64 (native little
// endian, long and size_t of 8 bytes, maximum alignment 8).

const (
	structMaxIntSize = 32
	structMaxAlign   = 8
)

type structHeader struct {
	little bool
	align  int
}

type structFormat struct {
	L   *lua.LState
	fmt string
	i   int
}

func (f *structFormat) more() bool { return f.i < len(f.fmt) && f.fmt[f.i] != 0 }

func (f *structFormat) next() byte {
	c := f.fmt[f.i]
	f.i++
	return c
}

// num reads an optional size after an option.
func (f *structFormat) num(def int) int {
	if !f.more() || !clib.IsDigit(f.fmt[f.i]) {
		return def
	}
	a := 0
	for f.more() && clib.IsDigit(f.fmt[f.i]) {
		d := int(f.fmt[f.i] - '0')
		if a > math.MaxInt32/10 || a*10 > math.MaxInt32-d {
			RaiseError(f.L, "integral size overflow")
		}
		a = a*10 + d
		f.i++
	}
	return a
}

// size is optsize: the size of an option (0 for those without one).
func (f *structFormat) size(opt byte) int {
	switch opt {
	case 'B', 'b', 'x':
		return 1
	case 'H', 'h':
		return 2
	case 'L', 'l', 'T', 'd':
		return 8
	case 'f':
		return 4
	case 'c':
		return f.num(1)
	case 'i', 'I':
		sz := f.num(4)
		if sz > structMaxIntSize {
			RaiseError(f.L, "integral size %d is larger than limit of %d", sz, structMaxIntSize)
		}
		return sz
	}
	return 0
}

func structAlign(pos int, h *structHeader, opt byte, size int) int {
	if size == 0 || opt == 'c' {
		return 0
	}
	if size > h.align {
		size = h.align
	}
	return (size - (pos & (size - 1))) & (size - 1)
}

// control handles the options that set endianness and alignment.
func (f *structFormat) control(opt byte, h *structHeader) {
	switch opt {
	case ' ':
	case '>':
		h.little = false
	case '<':
		h.little = true
	case '!':
		a := f.num(structMaxAlign)
		if a <= 0 || a&(a-1) != 0 {
			RaiseError(f.L, "alignment %d is not a power of 2", a)
		}
		h.align = a
	default:
		ArgError(f.L, 1, fmt.Sprintf("invalid format option '%c'", opt))
	}
}

func isIntOption(opt byte) bool { return strings.IndexByte("bBhHlLTiI", opt) >= 0 }

// StructLib returns the struct library.
func (l *Libs) StructLib() *lua.LTable {
	return NewLib(l.state, map[string]lua.LGFunction{
		"pack":   l.structPack,
		"unpack": l.structUnpack,
		"size":   structSize,
	})
}

// structNumber reads a number argument of pack. C's pack pushes a nil after
// its arguments, so the first missing one reads as nil, not "no value".
func structNumber(L *lua.LState, n, top int) float64 {
	if n == top+1 {
		if _, ok := ToNumber(L.Get(n)); !ok {
			ArgError(L, n, "number expected, got nil")
		}
	}
	return checkNumber(L, n)
}

func (l *Libs) structPack(L *lua.LState) int {
	f := &structFormat{L: L, fmt: CheckString(L, 1)}
	top := L.GetTop()
	h := structHeader{little: true, align: 1}
	arg := 2
	var b []byte
	for f.more() {
		opt := f.next()
		size := f.size(opt)
		b = append(b, make([]byte, structAlign(len(b), &h, opt, size))...)
		switch {
		case isIntOption(opt):
			n := structNumber(L, arg, top)
			arg++
			var u uint64
			if n < 0 {
				u = uint64(clib.ToInteger(n))
			} else {
				u = clib.ToUnsigned(n)
			}
			buf := make([]byte, size)
			for i := 0; i < size; i++ {
				pos := i
				if !h.little {
					pos = size - 1 - i
				}
				buf[pos] = byte(u)
				u >>= 8
			}
			b = append(b, buf...)
		case opt == 'x':
			b = append(b, 0)
		case opt == 'f':
			bits := math.Float32bits(float32(structNumber(L, arg, top)))
			arg++
			b = appendUint(b, uint64(bits), 4, h.little)
		case opt == 'd':
			bits := math.Float64bits(structNumber(L, arg, top))
			arg++
			b = appendUint(b, bits, 8, h.little)
		case opt == 'c' || opt == 's':
			s := CheckString(L, arg)
			arg++
			if size == 0 {
				size = len(s)
			}
			if len(s) < size {
				ArgError(L, arg, "string too short")
			}
			budget.Bytes(l.budget, L, size)
			b = append(b, s[:size]...)
			if opt == 's' {
				b = append(b, 0)
			}
		default:
			f.control(opt, &h)
		}
	}
	L.Push(lua.LString(b))
	return 1
}

func appendUint(b []byte, u uint64, size int, little bool) []byte {
	buf := make([]byte, 8)
	if little {
		binary.LittleEndian.PutUint64(buf, u)
		return append(b, buf[:size]...)
	}
	binary.BigEndian.PutUint64(buf, u)
	return append(b, buf[8-size:]...)
}

func (l *Libs) structUnpack(L *lua.LState) int {
	f := &structFormat{L: L, fmt: CheckString(L, 1)}
	data := CheckString(L, 2)
	pos := optInteger(L, 3, 1) - 1
	if pos < 0 {
		ArgError(L, 3, "offset must be 1 or greater")
	}
	h := structHeader{little: true, align: 1}
	n := 0
	for f.more() {
		opt := f.next()
		size := f.size(opt)
		pos += int64(structAlign(int(pos), &h, opt, size))
		if size > len(data) || pos > int64(len(data)-size) {
			ArgError(L, 2, "data string too short")
		}
		switch {
		case isIntOption(opt):
			var u uint64
			for i := 0; i < size; i++ {
				j := i
				if h.little {
					j = size - 1 - i
				}
				u = u<<8 | uint64(data[int(pos)+j])
			}
			if opt >= 'a' && opt <= 'z' {
				mask := ^uint64(0) << (uint(size*8-1) & 63) // x86 masks the shift count
				if u&mask != 0 {
					u |= mask
				}
				L.Push(lua.LNumber(float64(int64(u))))
			} else {
				L.Push(lua.LNumber(float64(u)))
			}
			n++
		case opt == 'x':
		case opt == 'f' || opt == 'd':
			var u uint64
			for i := 0; i < size; i++ {
				j := i
				if h.little {
					j = size - 1 - i
				}
				u = u<<8 | uint64(data[int(pos)+j])
			}
			if opt == 'f' {
				L.Push(lua.LNumber(math.Float32frombits(uint32(u))))
			} else {
				L.Push(lua.LNumber(math.Float64frombits(u)))
			}
			n++
		case opt == 'c':
			if size == 0 {
				prev, ok := ToNumber(L.Get(-1))
				if n == 0 || !ok {
					RaiseError(L, "format 'c0' needs a previous size")
				}
				size = int(clib.ToInteger(prev))
				L.Pop(1)
				n--
				if size < 0 || size > len(data) || pos > int64(len(data)-size) {
					ArgError(L, 2, "data string too short")
				}
			}
			budget.Bytes(l.budget, L, size)
			L.Push(lua.LString(data[pos : pos+int64(size)]))
			n++
		case opt == 's':
			end := strings.IndexByte(data[pos:], 0)
			if end < 0 {
				RaiseError(L, "unfinished string in data")
			}
			size = end + 1
			budget.Bytes(l.budget, L, size)
			L.Push(lua.LString(data[pos : pos+int64(end)]))
			n++
		default:
			f.control(opt, &h)
		}
		pos += int64(size)
	}
	L.Push(lua.LNumber(pos + 1))
	return n + 1
}

func structSize(L *lua.LState) int {
	f := &structFormat{L: L, fmt: CheckString(L, 1)}
	h := structHeader{little: true, align: 1}
	pos := 0
	for f.more() {
		opt := f.next()
		size := f.size(opt)
		pos += structAlign(pos, &h, opt, size)
		if opt == 's' {
			ArgError(L, 1, "option 's' has no fixed size")
		} else if opt == 'c' && size == 0 {
			ArgError(L, 1, "option 'c0' has no fixed size")
		}
		if !clib.IsAlnum(int(opt)) {
			f.control(opt, &h)
		}
		pos += size
	}
	L.Push(lua.LNumber(pos))
	return 1
}

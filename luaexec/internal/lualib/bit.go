package lualib

import (
	"math"

	lua "github.com/yuin/gopher-lua"
)

// bit is LuaBitOp 1.0 as Redis ships it: 32-bit operations whose arguments
// are normalised by adding 2^52+2^51 to the double and keeping the low 32
// bits (round to nearest, modulo 2^32), and whose results are signed.

// bitArg is LuaBitOp's barg.
func bitArg(L *lua.LState, n int) uint32 {
	f, ok := ToNumber(L.Get(n))
	if !ok {
		TypeError(L, n, "number")
	}
	return uint32(math.Float64bits(f + 6755399441055744.0))
}

func bitResult(L *lua.LState, b uint32) int {
	L.Push(lua.LNumber(int32(b)))
	return 1
}

// BitLib returns the bit library.
func (l *Libs) BitLib() *lua.LTable {
	fold := func(op func(a, b uint32) uint32) lua.LGFunction {
		return func(L *lua.LState) int {
			b := bitArg(L, 1)
			for i := L.GetTop(); i > 1; i-- {
				b = op(b, bitArg(L, i))
			}
			return bitResult(L, b)
		}
	}
	shift := func(op func(b uint32, n uint) uint32) lua.LGFunction {
		return func(L *lua.LState) int {
			b, n := bitArg(L, 1), uint(bitArg(L, 2)&31)
			return bitResult(L, op(b, n))
		}
	}
	return NewLib(l.state, map[string]lua.LGFunction{
		"tobit":   func(L *lua.LState) int { return bitResult(L, bitArg(L, 1)) },
		"bnot":    func(L *lua.LState) int { return bitResult(L, ^bitArg(L, 1)) },
		"band":    fold(func(a, b uint32) uint32 { return a & b }),
		"bor":     fold(func(a, b uint32) uint32 { return a | b }),
		"bxor":    fold(func(a, b uint32) uint32 { return a ^ b }),
		"lshift":  shift(func(b uint32, n uint) uint32 { return b << n }),
		"rshift":  shift(func(b uint32, n uint) uint32 { return b >> n }),
		"arshift": shift(func(b uint32, n uint) uint32 { return uint32(int32(b) >> n) }),
		"rol":     shift(func(b uint32, n uint) uint32 { return b<<n | b>>(32-n) }),
		"ror":     shift(func(b uint32, n uint) uint32 { return b>>n | b<<(32-n) }),
		"bswap": func(L *lua.LState) int {
			b := bitArg(L, 1)
			return bitResult(L, b>>24|b>>8&0xff00|b&0xff00<<8|b<<24)
		},
		"tohex": func(L *lua.LState) int {
			b := bitArg(L, 1)
			n := int32(8)
			if L.GetTop() >= 2 {
				n = int32(bitArg(L, 2))
			}
			digits := "0123456789abcdef"
			if n < 0 {
				n, digits = -n, "0123456789ABCDEF"
			}
			n = max(0, min(n, 8))
			buf := make([]byte, n)
			for i := n - 1; i >= 0; i-- {
				buf[i] = digits[b&15]
				b >>= 4
			}
			L.Push(lua.LString(buf))
			return 1
		},
	})
}

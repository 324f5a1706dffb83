package lualib

import (
	"math"

	lua "github.com/yuin/gopher-lua"
)

// The math library of Lua 5.1, with Redis's math.random: its own rand48, so
// that a script's sequence does not depend on the C library. Redis 7.0 never
// reseeds it, so each script goes on where the one before stopped. Here each
// script starts from a state drawn from its command's seed (keyspace.Call),
// its place in the log: scripts draw different numbers, and every node the
// same ones, with no generator state to replicate. Seed 0 is the state a
// freshly started redis-server has.

// rand48 state as Redis's rand.c initialises it (X0, X1, X2), and its constants.
const (
	rand48Init = 0x1234ABCD330E
	rand48Mul  = 0x5DEECE66D
	rand48Add  = 0xB
	rand48Mask = 1<<48 - 1
	rand48Max  = 1<<31 - 1 // REDIS_LRAND48_MAX
)

// randState is the generator state a script with seed starts from. The
// finaliser of MurmurHash3 spreads consecutive seeds over the whole state and
// keeps 0 at 0.
func randState(seed uint64) uint64 {
	seed ^= seed >> 33
	seed *= 0xff51afd7ed558ccd
	seed ^= seed >> 33
	seed *= 0xc4ceb9fe1a85ec53
	seed ^= seed >> 33
	return (rand48Init ^ seed) & rand48Mask
}

// lrand48 advances the generator and returns its next 31-bit value.
func (l *Libs) lrand48() int64 {
	l.rand = (l.rand*rand48Mul + rand48Add) & rand48Mask
	return int64(l.rand >> 17)
}

// srand48 seeds the generator as redisSrand48 does.
func (l *Libs) srand48(seed int32) {
	l.rand = uint64(uint32(seed))<<16 | 0x330E
}

// MathLib returns the math library.
func (l *Libs) MathLib() *lua.LTable {
	f1 := func(f func(float64) float64) lua.LGFunction {
		return func(L *lua.LState) int {
			x := checkNumber(L, 1)
			L.Push(lua.LNumber(cNaN(f(x), x)))
			return 1
		}
	}
	f2 := func(f func(a, b float64) float64) lua.LGFunction {
		return func(L *lua.LState) int {
			x, y := checkNumber(L, 1), checkNumber(L, 2)
			L.Push(lua.LNumber(cNaN(f(x, y), x, y)))
			return 1
		}
	}
	t := NewLib(l.state, map[string]lua.LGFunction{
		"abs":   f1(math.Abs),
		"acos":  f1(math.Acos),
		"asin":  f1(math.Asin),
		"atan":  f1(math.Atan),
		"atan2": f2(math.Atan2),
		"ceil":  f1(math.Ceil),
		"cos":   f1(math.Cos),
		"cosh":  f1(math.Cosh),
		"deg":   f1(func(x float64) float64 { return x / (math.Pi / 180) }),
		"exp":   f1(math.Exp),
		"floor": f1(math.Floor),
		"fmod":  f2(math.Mod),
		"frexp": func(L *lua.LState) int {
			m, e := math.Frexp(checkNumber(L, 1))
			L.Push(lua.LNumber(m))
			L.Push(lua.LNumber(e))
			return 2
		},
		"ldexp": func(L *lua.LState) int {
			L.Push(lua.LNumber(math.Ldexp(checkNumber(L, 1), CheckInt(L, 2))))
			return 1
		},
		"log":   f1(math.Log),
		"log10": f1(math.Log10),
		"max":   mathMinMax(func(a, b float64) bool { return a > b }),
		"min":   mathMinMax(func(a, b float64) bool { return a < b }),
		"mod":   f2(math.Mod),
		"modf": func(L *lua.LState) int {
			x := checkNumber(L, 1)
			ip, fp := math.Modf(x)
			if math.IsInf(x, 0) {
				fp = 0 // C's modf: the fraction of an infinity is zero
			}
			L.Push(lua.LNumber(ip))
			L.Push(lua.LNumber(fp))
			return 2
		},
		"pow":        f2(math.Pow),
		"rad":        f1(func(x float64) float64 { return x * (math.Pi / 180) }),
		"random":     l.mathRandom,
		"randomseed": l.mathRandomseed,
		"sin":        f1(math.Sin),
		"sinh":       f1(math.Sinh),
		"sqrt":       f1(math.Sqrt),
		"tan":        f1(math.Tan),
		"tanh":       f1(math.Tanh),
	})
	t.RawSetString("huge", lua.LNumber(math.Inf(1)))
	t.RawSetString("pi", lua.LNumber(math.Pi))
	return t
}

// cNaN returns r, or x86's default NaN (which prints "-nan") when r is a
// NaN that the C library would have produced from non-NaN arguments: Go's
// math functions return a positive NaN.
func cNaN(r float64, args ...float64) float64 {
	if !math.IsNaN(r) {
		return r
	}
	for _, a := range args {
		if math.IsNaN(a) {
			return r
		}
	}
	return math.Float64frombits(0xFFF8000000000000)
}

func mathMinMax(better func(a, b float64) bool) lua.LGFunction {
	return func(L *lua.LState) int {
		best := checkNumber(L, 1)
		for i := 2; i <= L.GetTop(); i++ {
			if d := checkNumber(L, i); better(d, best) {
				best = d
			}
		}
		L.Push(lua.LNumber(best))
		return 1
	}
}

func (l *Libs) mathRandom(L *lua.LState) int {
	r := float64(l.lrand48()%rand48Max) / rand48Max
	switch L.GetTop() {
	case 0:
		L.Push(lua.LNumber(r))
	case 1:
		u := CheckInt(L, 1)
		if u < 1 {
			ArgError(L, 1, "interval is empty")
		}
		L.Push(lua.LNumber(math.Floor(r*float64(u)) + 1))
	case 2:
		l := CheckInt(L, 1)
		u := CheckInt(L, 2)
		if l > u {
			ArgError(L, 2, "interval is empty")
		}
		L.Push(lua.LNumber(math.Floor(r*float64(int32(u-l+1))) + float64(l))) // C int arithmetic
	default:
		RaiseError(L, "wrong number of arguments")
	}
	return 1
}

func (l *Libs) mathRandomseed(L *lua.LState) int {
	l.srand48(int32(CheckInt(L, 1)))
	return 0
}

package luaexec

import (
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/lockserver/lockserver/luaexec/internal/budget"
	"github.com/lockserver/lockserver/luaexec/internal/clib"
	"github.com/lockserver/lockserver/luaexec/internal/lua51"
	"github.com/lockserver/lockserver/luaexec/internal/lualib"
	lua "github.com/yuin/gopher-lua"
)

// The base library as Redis 7.0 leaves it: Lua 5.1's, without dofile,
// loadfile, print, getfenv, setfenv and newproxy. gcinfo and collectgarbage
// report 0: memory figures differ between nodes, and a script's result must
// not.

func (v *vm) openBase() {
	L := v.L
	fns := map[string]lua.LGFunction{
		"assert":         v.assert,
		"collectgarbage": baseCollectGarbage,
		"error":          v.error,
		"gcinfo":         func(L *lua.LState) int { L.Push(lua.LNumber(0)); return 1 },
		"getmetatable":   v.getmetatable,
		"ipairs":         v.ipairs,
		"load":           v.load,
		"loadstring":     v.loadstring,
		"next":           v.next,
		"pairs":          v.pairs,
		"pcall":          v.pcall,
		"rawequal":       v.rawequal,
		"rawget":         v.rawget,
		"rawset":         v.rawset,
		"select":         baseSelect,
		"setmetatable":   v.setmetatable,
		"tonumber":       v.tonumber,
		"tostring":       v.baseTostring,
		"type":           func(L *lua.LState) int { L.Push(lua.LString(lualib.CheckAny(L, 1).Type().String())); return 1 },
		"unpack":         v.unpack,
		"xpcall":         v.xpcall,
	}
	for _, name := range lualib.SortedKeys(fns) {
		v.hidden.RawSetString(name, L.NewFunction(fns[name]))
	}
	v.nextFn = v.hidden.RawGetString("next")
	v.ipairsIter = L.NewFunction(v.ipairsAux)
}

// assert raises its message with a position, copying it: the copy is
// charged, as is every message built below.
func (v *vm) assert(L *lua.LState) int {
	if !lua.LVAsBool(lualib.CheckAny(L, 1)) {
		msg := lualib.OptString(L, 2, "assertion failed!")
		budget.Scan(v, L, len(msg))
		lualib.RaiseError(L, "%s", msg)
	}
	return L.GetTop()
}

var gcOptions = []string{"stop", "restart", "collect", "count", "step", "setpause", "setstepmul"}

func baseCollectGarbage(L *lua.LState) int {
	opt := lualib.OptString(L, 1, "collect")
	found := false
	for _, o := range gcOptions {
		found = found || o == opt
	}
	if !found {
		lualib.ArgError(L, 1, fmt.Sprintf("invalid option '%s'", opt))
	}
	lualib.OptInt(L, 2, 0)
	if opt == "step" {
		L.Push(lua.LFalse)
	} else {
		L.Push(lua.LNumber(0))
	}
	return 1
}

// baseError is Lua 5.1's error: a string or number message gets the position
// of the function at the given level.
func (v *vm) error(L *lua.LState) int {
	level := lualib.OptInt(L, 2, 1)
	msg := L.Get(1)
	if s, ok := lualib.ToString(msg); ok && level > 0 {
		budget.Scan(v, L, len(s))
		msg = lua.LString(lualib.Where(L, level) + s)
	}
	L.Error(msg, 0)
	return 0
}

func (v *vm) getmetatable(L *lua.LState) int {
	obj := lualib.CheckAny(L, 1)
	var mt lua.LValue = lua.LNil
	switch x := obj.(type) {
	case *lua.LTable:
		if m, ok := v.metaOf[x]; ok {
			L.Push(m)
			return 1
		}
		mt = x.Metatable
	case *lua.LUserData:
		mt = x.Metatable
	case lua.LString:
		mt = v.stringMeta
	}
	if t, ok := mt.(*lua.LTable); ok {
		if protected := t.RawGetString("__metatable"); protected != lua.LNil {
			mt = protected
		}
	}
	L.Push(mt)
	return 1
}

func (v *vm) setmetatable(L *lua.LState) int {
	t := lualib.CheckTable(L, 1)
	mt := L.Get(2)
	if mt != lua.LNil && mt.Type() != lua.LTTable {
		lualib.ArgError(L, 2, "nil or table expected")
	}
	if m, ok := t.Metatable.(*lua.LTable); ok && m.RawGetString("__metatable") != lua.LNil {
		lualib.RaiseError(L, "cannot change a protected metatable")
	}
	v.RefuseWrite(L, t)
	t.Metatable = mt
	L.SetTop(1)
	return 1
}

func (v *vm) ipairs(L *lua.LState) int {
	t := lualib.CheckTable(L, 1)
	L.Push(v.ipairsIter)
	L.Push(t)
	L.Push(lua.LNumber(0))
	return 3
}

func (v *vm) ipairsAux(L *lua.LState) int {
	i := lualib.CheckInt(L, 2) + 1
	t := v.Contents(lualib.CheckTable(L, 1))
	val := t.RawGetInt(i)
	if val == lua.LNil {
		return 0
	}
	L.Push(lua.LNumber(i))
	L.Push(val)
	return 2
}

func (v *vm) next(L *lua.LState) int {
	t := v.Contents(lualib.CheckTable(L, 1))
	k, val := lualib.Next(v, L, t, L.Get(2))
	if k == lua.LNil {
		L.Push(lua.LNil)
		return 1
	}
	L.Push(k)
	L.Push(val)
	return 2
}

func (v *vm) pairs(L *lua.LState) int {
	t := lualib.CheckTable(L, 1)
	L.Push(v.nextFn)
	L.Push(t)
	L.Push(lua.LNil)
	return 3
}

func (v *vm) rawequal(L *lua.LState) int {
	a, b := lualib.CheckAny(L, 1), lualib.CheckAny(L, 2)
	if s, ok := a.(lua.LString); ok {
		if t, ok := b.(lua.LString); ok && len(s) == len(t) {
			budget.Scan(v, L, len(s))
		}
	}
	L.Push(lua.LBool(a == b))
	return 1
}

func (v *vm) rawget(L *lua.LState) int {
	t := v.Contents(lualib.CheckTable(L, 1))
	k := lualib.CheckAny(L, 2)
	budget.ScanString(v, L, k)
	L.Push(t.RawGet(k))
	return 1
}

func (v *vm) rawset(L *lua.LState) int {
	t := lualib.CheckTable(L, 1)
	k := lualib.CheckAny(L, 2)
	val := lualib.CheckAny(L, 3)
	v.RefuseWrite(L, t)
	checkKey(L, k)
	budget.ScanString(v, L, k)
	v.chargeGap(L, t, k)
	t.RawSet(k, val)
	L.SetTop(1)
	return 1
}

// checkKey refuses the keys a Lua table cannot hold.
func checkKey(L *lua.LState, k lua.LValue) {
	// Raised from inside the table code, these errors have no position.
	switch x := k.(type) {
	case *lua.LNilType:
		L.Error(lua.LString("table index is nil"), 0)
	case lua.LNumber:
		if math.IsNaN(float64(x)) {
			L.Error(lua.LString("table index is NaN"), 0)
		}
	}
}

func baseSelect(L *lua.LState) int {
	n := L.GetTop()
	if s, ok := L.Get(1).(lua.LString); ok && strings.HasPrefix(string(s), "#") {
		L.Push(lua.LNumber(n - 1))
		return 1
	}
	i := lualib.CheckInt(L, 1)
	if i < 0 {
		i = n + i
	} else if i > n {
		i = n
	}
	if i < 1 {
		lualib.ArgError(L, 1, "index out of range")
	}
	return n - i
}

// baseTonumber is Lua 5.1's tonumber: base 10 converts as the language
// does (strtod: "1e3", "0x10", " 5 ", "inf"); other bases use strtoul.
func (v *vm) tonumber(L *lua.LState) int {
	base := lualib.OptInt(L, 2, 10)
	if s, ok := L.Get(1).(lua.LString); ok {
		budget.Scan(v, L, len(s))
	}
	if base == 10 {
		if f, ok := lualib.ToNumber(lualib.CheckAny(L, 1)); ok {
			L.Push(lua.LNumber(f))
			return 1
		}
		L.Push(lua.LNil)
		return 1
	}
	s := lualib.CheckString(L, 1)
	if base < 2 || base > 36 {
		lualib.ArgError(L, 2, "base out of range")
	}
	if i := strings.IndexByte(s, 0); i >= 0 {
		s = s[:i]
	}
	if u, n := clib.Strtoul(s, base); n > 0 {
		for n < len(s) && clib.IsSpace(s[n]) {
			n++
		}
		if n == len(s) {
			L.Push(lua.LNumber(float64(u)))
			return 1
		}
	}
	L.Push(lua.LNil)
	return 1
}

// baseTostring is tostring: a __tostring metamethod's result is returned as
// it is, whatever its type, as Lua 5.1 does.
func (v *vm) baseTostring(L *lua.LState) int {
	val := lualib.CheckAny(L, 1)
	if mm := L.GetMetaField(val, "__tostring"); mm != lua.LNil {
		L.Push(mm)
		L.Push(val)
		L.Call(1, 1)
		return 1
	}
	L.Push(lua.LString(v.tostring(L, val)))
	return 1
}

// tostring converts a value as Lua 5.1's tostring does. Tables, functions
// and other objects print as "table: 0x..." with an address that is a
// counter of this run rather than a memory address, so that every node
// prints the same.
func (v *vm) tostring(L *lua.LState, val lua.LValue) string {
	if mm := L.GetMetaField(val, "__tostring"); mm != lua.LNil {
		L.Push(mm)
		L.Push(val)
		L.Call(1, 1)
		res := L.Get(-1)
		L.Pop(1)
		s, _ := lualib.ToString(res)
		return s
	}
	switch x := val.(type) {
	case lua.LString:
		return string(x)
	case lua.LNumber:
		return clib.FormatNumber(float64(x))
	case *lua.LNilType:
		return "nil"
	case lua.LBool:
		if x {
			return "true"
		}
		return "false"
	}
	v.Charge(L, objectCharge)
	return fmt.Sprintf("%s: 0x%08x", val.Type().String(), v.objectID(val))
}

// objectCharge is what printing an object costs: formatting, and numbering
// it in a map that keeps it until the script ends.
const objectCharge = 8

// objectID numbers the objects that a run prints, in the order it prints them.
func (v *vm) objectID(val lua.LValue) int {
	r := v.run
	if r == nil {
		return 0
	}
	if r.ids == nil {
		r.ids = make(map[any]int)
	}
	id, ok := r.ids[val]
	if !ok {
		id = 0x1000 + 16*len(r.ids)
		r.ids[val] = id
	}
	return id
}

// unpack returns t[i], ..., t[j]; like Lua 5.1 it refuses more results than
// fit in the 8000-slot stack of a C function.
func (v *vm) unpack(L *lua.LState) int {
	t := v.Contents(lualib.CheckTable(L, 1))
	i := lualib.OptInt(L, 2, 1)
	var e int
	if L.Get(3) == lua.LNil {
		e = lualib.Length(v, L, t)
	} else {
		e = lualib.CheckInt(L, 3)
	}
	if i > e {
		return 0
	}
	n := e - i + 1
	if n <= 0 || n+L.GetTop() > lualib.MaxCStack {
		lualib.RaiseError(L, "too many results to unpack")
	}
	v.Charge(L, int64(n))
	for k := i; k <= e; k++ {
		L.Push(t.RawGetInt(k))
	}
	return n
}

// pcall is Lua's pcall with Redis 7's change: an error raised as a table
// with an err field (redis.call's) is returned as that string. A script out
// of budget cannot catch its stop.
func (v *vm) pcall(L *lua.LState) int {
	if L.GetTop() == 0 {
		// Redis's pcall calls the boolean it pushes for its result.
		L.Push(lua.LFalse)
		L.Push(lua.LString("attempt to call a boolean value"))
		return 2
	}
	if msg, ok := uncallable(L, L.Get(1)); ok {
		L.Push(lua.LFalse)
		L.Push(lua.LString(msg))
		return 2
	}
	nargs := L.GetTop() - 1
	// An error handler, even one that changes nothing, spares gopher-lua
	// building a traceback for every caught error.
	err := L.PCall(nargs, lua.MultRet, v.identity)
	v.caught(L, err)
	if err == nil {
		L.Insert(lua.LTrue, 1)
		return L.GetTop()
	}
	L.Push(lua.LFalse)
	L.Push(errorObject(err))
	return 2
}

// uncallable returns Lua 5.1's error for pcall or xpcall of fn when fn is a
// table or a string that cannot be called, which Lua raises from inside
// pcall, with no position (gopher-lua words it its own way, with one).
func uncallable(L *lua.LState, fn lua.LValue) (string, bool) {
	switch fn.(type) {
	case *lua.LTable, lua.LString:
		if L.GetMetaField(fn, "__call") == lua.LNil {
			return "attempt to call a " + fn.Type().String() + " value", true
		}
	}
	return "", false
}

// caught accounts for an error that pcall or xpcall caught: it re-raises a
// stopped budget, charges for unwinding (a Go panic and its recovery), and
// for the traceback gopher-lua built when the error handler could not run
// (a full call stack).
func (v *vm) caught(L *lua.LState, err error) {
	v.reraise(L)
	if err != nil {
		v.Charge(L, caughtCharge)
	}
	if ae, ok := err.(*lua.ApiError); ok && ae.StackTrace != "" {
		v.Charge(L, overflowCharge)
	}
}

// errorObject returns the value an error was raised with, turning Redis's
// error tables into their text.
func errorObject(err error) lua.LValue {
	ae, ok := err.(*lua.ApiError)
	if !ok {
		return lua.LString(err.Error())
	}
	if t, ok := ae.Object.(*lua.LTable); ok {
		if s, ok := t.RawGetString("err").(lua.LString); ok {
			return s
		}
	}
	return ae.Object
}

// xpcall(f, handler) calls f without arguments, as Lua 5.1 does, and on
// error returns false and what handler returns for the error.
func (v *vm) xpcall(L *lua.LState) int {
	lualib.CheckAny(L, 2)
	handler := L.Get(2)
	L.SetTop(1)
	var herr *lua.LFunction
	if fn, ok := handler.(*lua.LFunction); ok {
		herr = fn
	} else {
		herr = L.NewFunction(func(L *lua.LState) int {
			L.Push(lua.LString("error in error handling"))
			return 1
		})
	}
	if msg, ok := uncallable(L, L.Get(1)); ok {
		// Lua 5.1 hands the error to the handler, as any other.
		L.SetTop(0)
		L.Push(herr)
		L.Push(lua.LString(msg))
		err := L.PCall(1, 1, nil)
		v.caught(L, err)
		if err != nil {
			L.Push(lua.LString("error in error handling"))
		}
		L.Insert(lua.LFalse, 1)
		return 2
	}
	err := L.PCall(0, lua.MultRet, herr)
	v.caught(L, err)
	if err == nil {
		L.Insert(lua.LTrue, 1)
		return L.GetTop()
	}
	L.Push(lua.LFalse)
	if ae, ok := err.(*lua.ApiError); ok {
		L.Push(ae.Object)
	} else {
		L.Push(lua.LString(err.Error()))
	}
	return 2
}

// loadstring compiles a chunk through the same parser and instrumentation as
// scripts, so that loaded code is sandboxed and budgeted alike.
func (v *vm) loadstring(L *lua.LState) int {
	src := lualib.CheckString(L, 1)
	return v.loadChunk(L, src, lualib.OptString(L, 2, src))
}

func (v *vm) load(L *lua.LState) int {
	reader, ok := L.Get(1).(*lua.LFunction)
	if !ok {
		lualib.TypeError(L, 1, "function")
	}
	name := lualib.OptString(L, 2, "=(load)")
	var b strings.Builder
	for {
		L.Push(reader)
		L.Call(0, 1)
		piece := L.Get(-1)
		L.Pop(1)
		if piece == lua.LNil {
			break
		}
		s, ok := lualib.ToString(piece)
		if !ok {
			L.Push(lua.LNil)
			L.Push(lua.LString("reader function must return a string"))
			return 2
		}
		if s == "" {
			break
		}
		budget.Bytes(v, L, len(s))
		b.WriteString(s)
	}
	return v.loadChunk(L, b.String(), name)
}

func (v *vm) loadChunk(L *lua.LState, src, name string) int {
	v.Charge(L, 1)
	if strings.HasPrefix(src, "\x1bLua") {
		L.Push(lua.LNil)
		L.Push(lua.LString(chunkID(name) + ": bytecode loading is not supported"))
		return 2
	}
	id := chunkID(name)
	// Compiling is charged as the work it takes, up to what is left, twice
	// over: a unit of compile work (a token, or 16 bytes of source) costs
	// about twice as long as a step of running (BenchmarkWorstInputs'
	// Loadstring).
	proto, pool, work, err := compileChunk(src, id, 1, 1, int(max(v.run.steps/2, 1)), aliases)
	if errors.Is(err, lua51.ErrOverBudget) {
		v.Charge(L, v.run.steps+1)
	}
	v.Charge(L, 2*int64(work))
	if err != nil {
		L.Push(lua.LNil)
		L.Push(lua.LString(err.Error()))
		return 2
	}
	if v.sources == nil {
		v.sources = make(map[string]string)
	}
	v.sources[id] = name
	L.Push(v.closure(proto, pool, v.globals))
	return 1
}

// chunkID formats a chunk name for messages as Lua 5.1's luaO_chunkid does.
func chunkID(name string) string {
	const idSize = 60
	if i := strings.IndexByte(name, 0); i >= 0 {
		name = name[:i] // a C string
	}
	switch {
	case strings.HasPrefix(name, "="):
		s := name[1:]
		if len(s) > idSize-1 {
			s = s[:idSize-1]
		}
		return s
	case strings.HasPrefix(name, "@"):
		s := name[1:]
		if room := idSize - len(" '...' ") - 1; len(s) > room {
			s = "..." + s[len(s)-room:]
		}
		return s
	}
	room := idSize - len(" [string \"...\"] ") - 1
	line := name
	if i := strings.IndexAny(line, "\r\n"); i >= 0 {
		line = line[:i]
	}
	if len(line) > room {
		line = line[:room]
	}
	if len(line) < len(name) {
		return `[string "` + line + `..."]`
	}
	return `[string "` + line + `"]`
}

package luaexec

import (
	"github.com/lockserver/lockserver/luaexec/internal/lualib"
	lua "github.com/yuin/gopher-lua"
)

// The coroutine library is gopher-lua's, with bounds: each coroutine is a
// Lua state of its own with its own Go stack when resumed, so a script may
// create only so many and nest them only so deep. A stopped budget is
// re-raised through resume, which would otherwise return it as a value.

// coroutineLib wraps gopher-lua's coroutine functions (from orig).
func (v *vm) coroutineLib(orig *lua.LTable) *lua.LTable {
	fn := func(name string) lua.LGFunction {
		return orig.RawGetString(name).(*lua.LFunction).GFunction
	}
	create, resume, yield, status := fn("create"), fn("resume"), fn("yield"), fn("status")
	v.coCreate = func(L *lua.LState) int {
		if f, ok := L.Get(1).(*lua.LFunction); !ok || f.IsG {
			lualib.ArgError(L, 1, "Lua function expected")
		}
		r := v.run
		r.coCount++
		if r.coCount > maxCoroutines {
			lualib.RaiseError(L, "too many coroutines (a script may create %d)", maxCoroutines)
		}
		v.Charge(L, 100)
		// The new state copies L's options: give it a small call stack.
		saved := L.Options
		L.Options.CallStackSize = coroutineCallStackSize
		L.Options.RegistrySize = registrySize / 4
		defer func() { L.Options = saved }()
		return create(L)
	}
	v.coResume = func(L *lua.LState) int {
		checkCoroutine(L)
		r := v.run
		if r.coDepth >= maxCoroutineDepth {
			L.Push(lua.LFalse)
			L.Push(lua.LString("C stack overflow"))
			return 2
		}
		r.coDepth++
		n := resume(L)
		r.coDepth--
		v.reraise(L)
		if n == 2 && L.Get(-2) == lua.LFalse {
			if msg, ok := resumeMessages[lua.LVAsString(L.Get(-1))]; ok {
				L.Pop(1)
				L.Push(lua.LString(msg))
			}
		}
		return n
	}
	return lualib.NewLib(v.L, map[string]lua.LGFunction{
		"create":  v.coCreate,
		"resume":  v.coResume,
		"running": fn("running"),
		"status": func(L *lua.LState) int {
			checkCoroutine(L)
			return status(L)
		},
		"wrap": v.coWrap,
		"yield": func(L *lua.LState) int {
			if L.Parent == nil {
				L.Error(lua.LString("attempt to yield across metamethod/C-call boundary"), 0)
			}
			return yield(L)
		},
	})
}

// checkCoroutine is Lua 5.1's getco: argument 1 must be a coroutine.
func checkCoroutine(L *lua.LState) {
	if _, ok := L.Get(1).(*lua.LState); !ok {
		lualib.ArgError(L, 1, "coroutine expected")
	}
}

// resumeMessages are Lua 5.1's words for gopher-lua's resume failures.
var resumeMessages = map[string]string{
	"can not resume a dead thread":    "cannot resume dead coroutine",
	"can not resume a running thread": "cannot resume non-suspended coroutine",
}

// coWrap is coroutine.wrap: a function that resumes the coroutine and
// raises its errors, with the caller's position as Lua 5.1 adds it.
func (v *vm) coWrap(L *lua.LState) int {
	v.coCreate(L)
	co := L.Get(-1)
	resume := L.NewFunction(v.coResume)
	L.Push(L.NewFunction(func(L *lua.LState) int {
		n := L.GetTop()
		L.Push(resume)
		L.Push(co)
		for i := 1; i <= n; i++ {
			L.Push(L.Get(i))
		}
		L.Call(n+1, lua.MultRet)
		if !lua.LVAsBool(L.Get(n + 1)) {
			msg := L.Get(n + 2)
			if s, ok := lualib.ToString(msg); ok {
				msg = lua.LString(lualib.Where(L, 1) + s)
			}
			L.Error(msg, 0)
		}
		return L.GetTop() - n - 1
	}))
	return 1
}

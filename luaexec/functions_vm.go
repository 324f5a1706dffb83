package luaexec

import (
	"strings"

	lua "github.com/yuin/gopher-lua"
)

// registered is a function that a library's code registered as it ran.
type registered struct {
	info *function
	fn   *lua.LFunction
}

// functionEnv builds, the first time, the environment of library code: the
// table every function of a library reads its globals through (fenv), and
// what it reads while the library's code runs (loadAPI): as in Redis, only
// redis.register_function, redis.log with its levels, and the version; any
// other global, and any other field of that redis table, is an error.
func (v *vm) functionEnv() {
	if v.fenv != nil {
		return
	}
	L := v.L
	nonexistent := L.NewTable()
	nonexistent.RawSetString("__index", L.NewFunction(v.nonexistentGlobal))
	redis := L.NewTable()
	redis.RawSetString("register_function", L.NewFunction(v.registerFunction))
	for _, name := range []string{"log", "LOG_DEBUG", "LOG_VERBOSE", "LOG_NOTICE", "LOG_WARNING", "REDIS_VERSION", "REDIS_VERSION_NUM"} {
		redis.RawSetString(name, v.redis.RawGetString(name))
	}
	L.SetMetatable(redis, nonexistent)
	v.loadAPI = L.NewTable()
	v.loadAPI.RawSetString("redis", v.Protect(redis))
	L.SetMetatable(v.loadAPI, nonexistent)
	v.fenv = L.CreateTable(0, 0)
	v.fenvMeta = L.CreateTable(0, 2)
	v.fenvMeta.RawSetString("__index", v.hidden)
	v.fenvMeta.RawSetString("__newindex", L.NewFunction(v.readonlyError))
	L.SetMetatable(v.fenv, v.fenvMeta)
}

// loadLibrary runs a library's code, within budget steps, as FUNCTION LOAD
// does, and returns the functions it registered, by lower-case name: new
// closures, which share nothing with those of an earlier run.
func (v *vm) loadLibrary(lib *library, budget int64) (map[string]*registered, *scriptError) {
	v.functionEnv()
	outer := v.run
	r := &run{readOnly: true, resp: 2, steps: budget}
	v.run = r
	v.loading = map[string]*registered{}
	v.fenvMeta.RawSetString("__index", v.loadAPI)
	defer func() {
		v.fenvMeta.RawSetString("__index", v.hidden)
		v.loading = nil
		v.run = outer
	}()
	v.L.Push(v.closure(lib.proto, lib.pool, v.fenv))
	if _, serr := v.protectedCall(r, libraryChunk, 0); serr != nil {
		if r.exhausted {
			// Redis gives a library's code 500 ms to run.
			serr.msg = "ERR FUNCTION LOAD timeout: " + v.budgetMessage()
		}
		return nil, serr
	}
	return v.loading, nil
}

// call runs a library's function with the given keys and arguments, its two
// parameters, in a fresh run of its library's code (see functions.go).
func (v *vm) call(r *run, fn *function, keys, args [][]byte) (lua.LValue, *scriptError) {
	fns, serr := v.loadLibrary(fn.lib, v.e.budget())
	if serr != nil {
		// The same code registered the function when FUNCTION LOAD applied.
		return nil, serr
	}
	reg := fns[strings.ToLower(fn.name)]
	if reg == nil {
		return nil, &scriptError{msg: errFunctionNotFound.Str}
	}
	v.run = r
	defer v.endRun()
	// Functions have no KEYS and ARGV globals.
	v.hidden.RawSetString("KEYS", lua.LNil)
	v.hidden.RawSetString("ARGV", lua.LNil)
	defer func() {
		v.hidden.RawSetString("KEYS", v.keys)
		v.hidden.RawSetString("ARGV", v.argv)
	}()
	L := v.L
	L.Push(reg.fn)
	L.Push(v.byteArray(keys))
	L.Push(v.byteArray(args))
	return v.protectedCall(r, libraryChunk, 2)
}

// registerFunction is redis.register_function, which only a library's code
// may call as it loads: redis.register_function(name, callback), or with
// one table of named arguments, function_name, callback, description and
// flags. Its errors are Redis 7.0's.
func (v *vm) registerFunction(L *lua.LState) int {
	if v.loading == nil {
		return raiseTable(L, "redis.register_function can only be called on FUNCTION LOAD command")
	}
	var f function
	var cb *lua.LFunction
	switch L.GetTop() {
	case 1:
		t, ok := L.Get(1).(*lua.LTable)
		if !ok {
			return raiseTable(L, "calling redis.register_function with a single argument is only applicable to Lua table (representing named arguments).")
		}
		var named bool
		for k, val := t.Next(lua.LNil); k != lua.LNil; k, val = t.Next(k) {
			key, ok := luaString(k)
			if !ok {
				return raiseTable(L, "named argument key given to redis.register_function is not a string")
			}
			switch strings.ToLower(key) {
			case "function_name":
				if f.name, ok = luaString(val); !ok {
					return raiseTable(L, "function_name argument given to redis.register_function must be a string")
				}
				named = true
			case "description":
				if f.desc, ok = luaString(val); !ok {
					return raiseTable(L, "description argument given to redis.register_function must be a string")
				}
				f.hasDesc = true
			case "callback":
				if cb, ok = val.(*lua.LFunction); !ok {
					return raiseTable(L, "callback argument given to redis.register_function must be a function")
				}
			case "flags":
				flags, ok := val.(*lua.LTable)
				if !ok {
					return raiseTable(L, "flags argument to redis.register_function must be a table representing function flags")
				}
				if f.flags, ok = readFunctionFlags(flags); !ok {
					return raiseTable(L, "unknown flag given")
				}
			default:
				return raiseTable(L, "unknown argument given to redis.register_function")
			}
		}
		switch {
		case !named:
			return raiseTable(L, "redis.register_function must get a function name argument")
		case cb == nil:
			return raiseTable(L, "redis.register_function must get a callback argument")
		}
	case 2:
		var ok bool
		if f.name, ok = luaString(L.Get(1)); !ok {
			return raiseTable(L, "first argument to redis.register_function must be a string")
		}
		if cb, ok = L.Get(2).(*lua.LFunction); !ok {
			return raiseTable(L, "second argument to redis.register_function must be a function")
		}
	default:
		return raiseTable(L, "wrong number of arguments to redis.register_function")
	}
	if !validFunctionName(f.name) {
		return raiseTable(L, errBadLibraryName) // Redis's words, for functions too
	}
	// Redis compares names within a library with case, and then links only
	// one of two that differ in case alone (and crashes as it unloads the
	// library); they are the same name here, as they are to FCALL.
	key := strings.ToLower(f.name)
	if v.loading[key] != nil {
		return raiseTable(L, "Function already exists in the library")
	}
	v.loading[key] = &registered{info: &f, fn: cb}
	return 0
}

// readFunctionFlags reads the flags of a function, a Lua array of their
// names in any case; it reports false on a name it does not know.
func readFunctionFlags(t *lua.LTable) (int, bool) {
	flags := 0
	for i := 1; ; i++ {
		val := t.RawGetInt(i)
		if val == lua.LNil {
			return flags, true
		}
		name, ok := luaString(val)
		if !ok {
			return 0, false
		}
		bit, ok := shebangFlags[strings.ToLower(name)]
		if !ok {
			return 0, false
		}
		flags |= bit
	}
}

// luaString returns val as Lua's tostring of a string or a number does, and
// reports false for any other value (lua_isstring).
func luaString(val lua.LValue) (string, bool) {
	switch val.(type) {
	case lua.LString, lua.LNumber:
		return lua.LVAsString(val), true
	}
	return "", false
}

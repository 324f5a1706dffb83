package lualib

import (
	"fmt"
	"sort"
	"strings"

	"github.com/lockserver/lockserver/luaexec/internal/budget"
	"github.com/lockserver/lockserver/luaexec/internal/clib"
	"github.com/lockserver/lockserver/luaexec/internal/lua51"
	lua "github.com/yuin/gopher-lua"
)

// Argument checking for the libraries, with Lua 5.1's conversions (numeric
// strings are numbers, numbers are strings) and its messages: "bad argument
// #1 to 'sub' (number expected, got no value)". gopher-lua's own checks
// accept no numeric strings and word their messages differently.

// funcName is the name by which the running Go function was called, as Lua
// names it in messages, or "?".
func funcName(L *lua.LState) string {
	dbg, ok := L.GetStack(0)
	if !ok {
		return "?"
	}
	if _, err := L.GetInfo("n", dbg, lua.LNil); err != nil || dbg.Name == "" {
		return "?"
	}
	switch dbg.Name[0] {
	case '(', '<':
		return "?"
	}
	if dbg.Name == "main chunk" {
		return "?"
	}
	if name, ok := strings.CutPrefix(dbg.Name, lua51.AliasPrefix); ok {
		// An alias: Lua names a function by its field, lib.name by name.
		return name[strings.LastIndexByte(name, '.')+1:]
	}
	return dbg.Name
}

// ArgError is luaL_argerror: "bad argument #n to 'name' (msg)".
func ArgError(L *lua.LState, n int, msg string) {
	RaiseError(L, "bad argument #%d to '%s' (%s)", n, funcName(L), msg)
}

// typeName is the type of argument n as messages say it ("no value" past the end).
func typeName(L *lua.LState, n int) string {
	if n > L.GetTop() {
		return "no value"
	}
	return L.Get(n).Type().String()
}

// TypeError is luaL_typerror: argument n is not of the type expected.
func TypeError(L *lua.LState, n int, expected string) {
	ArgError(L, n, fmt.Sprintf("%s expected, got %s", expected, typeName(L, n)))
}

// ToNumber converts v as lua_tonumber does.
func ToNumber(v lua.LValue) (float64, bool) {
	switch x := v.(type) {
	case lua.LNumber:
		return float64(x), true
	case lua.LString:
		return clib.Str2Number(string(x))
	}
	return 0, false
}

// ToString converts v as lua_tolstring does: strings, and numbers in "%.14g".
func ToString(v lua.LValue) (string, bool) {
	switch x := v.(type) {
	case lua.LString:
		return string(x), true
	case lua.LNumber:
		return clib.FormatNumber(float64(x)), true
	}
	return "", false
}

// checkNumber is luaL_checknumber, which converts a numeric string: the
// budget is charged for scanning it.
func checkNumber(L *lua.LState, n int) float64 {
	val := L.Get(n)
	if s, ok := val.(lua.LString); ok {
		chargeScan(L, len(s))
	}
	f, ok := ToNumber(val)
	if !ok {
		TypeError(L, n, "number")
	}
	return f
}

// chargeScan is budget.Scan for code that has only the Lua state.
func chargeScan(L *lua.LState, n int) {
	if n < budget.BytesPerStep {
		return
	}
	if c := budget.Of(L); c != nil {
		budget.Scan(c, L, n)
	}
}

// checkInteger is luaL_checkinteger: a number truncated as C casts it.
func checkInteger(L *lua.LState, n int) int64 {
	return clib.ToInteger(checkNumber(L, n))
}

func optInteger(L *lua.LState, n int, def int64) int64 {
	if L.Get(n) == lua.LNil {
		return def
	}
	return checkInteger(L, n)
}

// CheckInt is luaL_checkint: checkInteger cut to a C int.
func CheckInt(L *lua.LState, n int) int {
	return clib.ToInt(checkNumber(L, n))
}

// OptInt is luaL_optint: def for nil.
func OptInt(L *lua.LState, n int, def int) int {
	if L.Get(n) == lua.LNil {
		return def
	}
	return CheckInt(L, n)
}

// CheckString is luaL_checkstring, which converts a number.
func CheckString(L *lua.LState, n int) string {
	s, ok := ToString(L.Get(n))
	if !ok {
		TypeError(L, n, "string")
	}
	return s
}

// OptString is luaL_optstring: def for nil.
func OptString(L *lua.LState, n int, def string) string {
	if L.Get(n) == lua.LNil {
		return def
	}
	return CheckString(L, n)
}

// CheckTable returns argument n, which must be a table.
func CheckTable(L *lua.LState, n int) *lua.LTable {
	t, ok := L.Get(n).(*lua.LTable)
	if !ok {
		TypeError(L, n, "table")
	}
	return t
}

// CheckAny is luaL_checkany: argument n must be given, nil or not.
func CheckAny(L *lua.LState, n int) lua.LValue {
	if n > L.GetTop() {
		ArgError(L, n, "value expected")
	}
	return L.Get(n)
}

// RaiseError is luaL_error: the message gets the position of the caller of
// the running Go function when that is Lua code, and none when it is another
// Go function, as under pcall(f, ...): Lua 5.1 says "bad argument #1 to '?'"
// there, not "user_script:1: bad argument ...". (gopher-lua's RaiseError
// skips Go functions to find a position.)
func RaiseError(L *lua.LState, format string, args ...any) {
	L.Error(lua.LString(Where(L, 1)+fmt.Sprintf(format, args...)), 0)
}

// Where is luaL_where: "chunk:line: " for the function at the given level
// (1 is the caller of the running Go function), or "" for Go functions.
func Where(L *lua.LState, level int) string {
	dbg, ok := L.GetStack(level)
	if !ok {
		return ""
	}
	if _, err := L.GetInfo("Sl", dbg, lua.LNil); err != nil || dbg.CurrentLine <= 0 {
		return ""
	}
	return fmt.Sprintf("%s:%d: ", dbg.Source, dbg.CurrentLine)
}

// SortedKeys returns the keys of m in order, so that tables are filled in
// the same order on every node (their iteration order is insertion order).
func SortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// NewLib builds a library table from functions, in name order.
func NewLib(L *lua.LState, fns map[string]lua.LGFunction) *lua.LTable {
	t := L.CreateTable(0, len(fns))
	for _, name := range SortedKeys(fns) {
		t.RawSetString(name, L.NewFunction(fns[name]))
	}
	return t
}

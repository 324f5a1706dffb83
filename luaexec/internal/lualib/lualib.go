// Package lualib holds the libraries of the script engine that need nothing
// of it but its budget and its read-only tables: Lua 5.1's string, table
// and math libraries (lstrlib.c, ltablib.c, lmathlib.c) rewritten, since
// gopher-lua's differ from Lua 5.1's in their conversions, messages, sort
// and pattern matcher and charge no budget; and the libraries Redis ships
// beside them, cjson, cmsgpack, struct and bit. The engine's own libraries
// (base, coroutine, redis) use its argument checks, with Lua 5.1's
// conversions and messages (aux.go), and its charges for the work
// gopher-lua's tables do behind one operation (tables.go).
//
// Every function charges the running script's budget for its work before
// doing it, so that no call can take unbounded time or memory, and returns
// the same values on every node. A library function may be called only
// while a script runs.
package lualib

import (
	"github.com/lockserver/lockserver/luaexec/internal/budget"
	lua "github.com/yuin/gopher-lua"
)

// MaxCStack is how many values a C function's stack holds in Lua 5.1
// (LUAI_MAXCSTACK): the most results a library function returns.
const MaxCStack = 8000

// ReadOnly is how the engine protects the tables scripts may not change
// (its globals and libraries): scripts reach them through proxies, whose
// metatable serves reads and refuses writes.
type ReadOnly interface {
	// Contents returns the table holding t's entries: t itself, or the
	// table behind t when t is a proxy.
	Contents(t *lua.LTable) *lua.LTable
	// RefuseWrite raises Redis's error when t is a proxy.
	RefuseWrite(L *lua.LState, t *lua.LTable)
	// Protect returns a new proxy of t.
	Protect(t *lua.LTable) *lua.LTable
}

// Libs are the libraries of one Lua state, and their state for the script
// it runs.
type Libs struct {
	state  *lua.LState // the state the libraries are built in
	budget budget.Charger
	ro     ReadOnly
	// rand is math.random's 48-bit state.
	rand uint64
	// cjsonConf is cjson's configuration for the script; its zero value
	// stands for the defaults.
	cjsonConf cjsonConfig
	cjsonNull *lua.LUserData
}

// New returns the libraries of L, which charge b and see through ro's
// proxies.
func New(L *lua.LState, b budget.Charger, ro ReadOnly) *Libs {
	return &Libs{state: L, budget: b, ro: ro}
}

// Start readies the libraries for a script whose command has seed
// (keyspace.Call.Seed): math.random starts from a state drawn from it, and
// cjson's configuration is the default again.
func (l *Libs) Start(seed uint64) {
	l.rand = randState(seed)
	l.cjsonConf = cjsonConfig{}
}

// Package budget defines the unit of a script's budget, the step, and the
// interface through which whatever runs in a script charges it: the engine
// implements Charger, the Lua front end weighs code in steps, and the
// libraries charge each call for its work.
//
// A step is one operation of the script's code (a statement, a call, a
// table read, an arithmetic operation: the weights of the front end), or
// BytesPerStep bytes built, copied, hashed, compared or scanned, or
// SlotsPerStep table slots scanned or values expanded from '...'. Bytes are
// charged, not only operations, so that the budget bounds the memory a
// script can build as well as its time. Every node counts alike, so a
// script stops at the same point everywhere.
package budget

import lua "github.com/yuin/gopher-lua"

const (
	// BytesPerStep is how many bytes cost a step.
	BytesPerStep = 16
	// SlotsPerStep is how many slots next or # may scan, or how many values
	// '...' may expand to, for a step.
	SlotsPerStep = 16
)

// Charger is the budget of the script that is running.
type Charger interface {
	// Charge spends n steps. When the budget runs out it raises the
	// budget's error in L, and so does every later charge of the script, so
	// that a script that catches the error cannot go on. Between scripts it
	// charges nothing.
	Charge(L *lua.LState, n int64)
}

// Bytes charges for n bytes produced or scanned: a step, and one for each
// BytesPerStep bytes.
func Bytes(c Charger, L *lua.LState, n int) {
	c.Charge(L, 1+int64(n)/BytesPerStep)
}

// Scan charges for n bytes that an operation already charged (by its
// weight, or as a call) scans: nothing for a short string.
func Scan(c Charger, L *lua.LState, n int) {
	if n >= BytesPerStep {
		c.Charge(L, int64(n)/BytesPerStep)
	}
}

// ScanString charges for scanning val when it is a string: hashing a table
// key, converting a numeric string.
func ScanString(c Charger, L *lua.LState, val lua.LValue) {
	if s, ok := val.(lua.LString); ok {
		Scan(c, L, len(s))
	}
}

// chargerKey is where the registry of a Lua state holds its Charger.
const chargerKey = "budget#charger"

// Attach makes c the charger that Of returns for L and for the coroutines
// it creates, which share its registry: for code that has only the Lua
// state (argument conversions).
func Attach(L *lua.LState, c Charger) {
	L.G.Registry.RawSetString(chargerKey, &lua.LUserData{Value: c})
}

// Of returns the charger attached to L, or nil.
func Of(L *lua.LState) Charger {
	if ud, ok := L.G.Registry.RawGetString(chargerKey).(*lua.LUserData); ok {
		return ud.Value.(Charger)
	}
	return nil
}

package luaexec

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/lockserver/lockserver/keyspace"
	"github.com/lockserver/lockserver/luaexec/internal/budget"
	"github.com/lockserver/lockserver/luaexec/internal/lua51"
	"github.com/lockserver/lockserver/luaexec/internal/lualib"
	lua "github.com/yuin/gopher-lua"
)

// Sizes of the Lua state. The call stack is allocated whole (80 bytes a
// frame), because gopher-lua's growing stack reports an overflow as a Go
// panic without the line. It is smaller than Lua 5.1's (20000 calls):
// gopher-lua builds a traceback when an error handler cannot run on a full
// stack, in time quadratic in the depth. Coroutines get small stacks. The
// registry is the value stack: it grows on demand, to a size that fits
// unpack's 8000 results with room.
const (
	callStackSize = 2000
	// overflowCharge is what a caught stack overflow costs the budget, for
	// the traceback gopher-lua builds (a few milliseconds at full depth).
	overflowCharge = 25_000
	// caughtCharge is what an error caught by pcall or xpcall costs beyond
	// the call: gopher-lua raises errors as Go panics, which take
	// microseconds to unwind and recover.
	caughtCharge           = 8
	coroutineCallStackSize = 200
	registrySize           = 1024
	registryMaxSize        = 1 << 20
	registryGrow           = 4096
	// maxCoroutineDepth bounds coroutines resumed inside coroutines: each
	// resume nests the Go stack.
	maxCoroutineDepth = 16
	// maxCoroutines bounds the coroutines one script may create: each holds
	// a Lua state of its own.
	maxCoroutines = 1000
)

// maxMetaChain bounds the __index and __newindex tables one access may go
// through (Lua 5.1's MAXTAGLOOP is 100). gopher-lua follows them inside one
// instruction, which the budget charges as one: a script looping over an
// access through 99 of them took several times as long a step as the
// costliest other steps (BenchmarkWorstInputs; bench/RESULTS.md). A
// chain longer than this fails with "too many recursions in gettable"
// (Lua's "loop in gettable"). gopher-lua reads the bound from a variable of
// its package, so it holds for every Lua state of the process.
const maxMetaChain = 16

func init() { lua.MaxTableGetLoop = maxMetaChain }

const errReadonly = "Attempt to modify a readonly table"

// vm is the one Lua state of an Engine, reused by every script: it is built
// once with the sandbox and libraries, and each run only sets KEYS and ARGV.
type vm struct {
	e *Engine
	L *lua.LState
	// redis holds the contents of the redis table (see redisLib).
	redis *lua.LTable
	// globals is the _G that scripts see: empty, with reads served from
	// hidden (where libraries, redis, KEYS and ARGV live) and writes refused.
	globals *lua.LTable
	hidden  *lua.LTable
	// readonly maps each protected table that scripts can reach to the table
	// holding its contents: scripts see empty proxies whose metatable serves
	// reads and refuses writes, and rawset, setmetatable and the table
	// library refuse them too. rawget, next and pairs see through them.
	readonly map[*lua.LTable]*lua.LTable
	// metaOf is what getmetatable returns for each protected table.
	metaOf map[*lua.LTable]lua.LValue
	// stringMeta is the metatable of strings as getmetatable('') shows it.
	stringMeta *lua.LTable
	libs       *lualib.Libs
	helpers    []lua.LValue // the functions of lua51.Helpers, in its order
	nextFn     lua.LValue   // the base library's next, which pairs returns
	ipairsIter *lua.LFunction
	// sources maps the names that messages give loaded chunks to the chunk
	// names they were loaded with.
	sources  map[string]string
	identity *lua.LFunction // an error handler that returns the error as it is
	coCreate lua.LGFunction
	coResume lua.LGFunction

	// fenv is the environment of the functions of libraries: reads go to
	// its metatable's __index, which is loadAPI while a library's code
	// runs (loadLibrary) and the globals' contents else; writes are
	// refused. loading collects what that code registers. All are built
	// for the first library (functionEnv).
	fenv, fenvMeta, loadAPI *lua.LTable
	loading                 map[string]*registered

	run     *run // the script being run, nil between runs
	current run  // the storage run points to, reused by every script
	// handler records the error information of a failing script in errInfo.
	handler *lua.LFunction
	errInfo *scriptError
	// keys and argv are the last script's KEYS and ARGV, refilled for the
	// next when it left them as they were (see refill).
	keys, argv *lua.LTable
	// args and argBytes hold the command line of the redis.call being run
	// (see scriptArgs); cmdCall is its Call. Reusing them spares
	// allocations on every call: only one command runs at a time.
	args       [][]byte
	argBytes   []byte
	cmdCall    keyspace.Call
	commands   commandCache
	argStrings argStrings
}

// run is the state of one script execution.
type run struct {
	call     keyspace.Call // a copy: SELECT inside the script must not change the caller's database
	readOnly bool          // EVAL_RO, EVALSHA_RO or a no-writes script
	// dry is set for a dry run (keyspace.Call.Dry): the first write command
	// the script calls sets wouldWrite and stops it, as the budget does.
	dry, wouldWrite bool
	allowOOM        bool
	wrote           bool // a write command ran: from then on OOM cannot stop the script
	resp            int  // protocol of redis.call replies as the script sees them
	steps           int64
	exhausted       bool
	ids             map[any]int
	coDepth         int
	coCount         int
	// monitor, when set, is told of each command the script calls (MONITOR).
	monitor func(db int, args [][]byte)
}

func newVM(e *Engine) *vm {
	L := lua.NewState(lua.Options{
		SkipOpenLibs:     true,
		CallStackSize:    callStackSize,
		RegistrySize:     registrySize,
		RegistryMaxSize:  registryMaxSize,
		RegistryGrowStep: registryGrow,
	})
	v := &vm{
		e:        e,
		L:        L,
		readonly: make(map[*lua.LTable]*lua.LTable),
		metaOf:   make(map[*lua.LTable]lua.LValue),
	}
	v.libs = lualib.New(L, v, v)
	// gopher-lua registers its coroutine library in the state's own globals,
	// which scripts never see; take it from there.
	lua.OpenCoroutine(L)
	coroutines := L.G.Global.RawGetString("coroutine").(*lua.LTable)
	L.SetTop(0)

	v.hidden = L.NewTable()
	v.globals = v.Protect(v.hidden)
	L.Env = v.globals
	L.G.Global = v.globals

	hiddenMeta := L.NewTable()
	hiddenMeta.RawSetString("__index", L.NewFunction(v.nonexistentGlobal))
	L.SetMetatable(v.hidden, hiddenMeta)
	// getmetatable(_G) shows a read-only table like Redis's, whose __index
	// raises the nonexistent-global error.
	gmeta := L.NewTable()
	gmeta.RawSetString("__index", L.NewFunction(v.nonexistentGlobal))
	gmeta.RawSetString("__newindex", L.NewFunction(v.readonlyError))
	v.metaOf[v.globals] = v.Protect(gmeta)

	v.openBase()
	v.setLib("string", v.libs.StringLib())
	v.setLib("table", v.libs.TableLib())
	v.setLib("math", v.libs.MathLib())
	v.setLib("coroutine", v.coroutineLib(coroutines))
	v.setLib("cjson", v.libs.CJSONLib())
	v.setLib("bit", v.libs.BitLib())
	v.setLib("struct", v.libs.StructLib())
	v.setLib("cmsgpack", v.libs.CMsgpackLib())
	v.setLib("redis", v.redisLib())
	v.keys, v.argv = L.CreateTable(0, 0), L.CreateTable(0, 0)
	v.hidden.RawSetString("KEYS", v.keys)
	v.hidden.RawSetString("ARGV", v.argv)
	v.hidden.RawSetString("_G", v.globals)
	v.hidden.RawSetString("_VERSION", lua.LString("Lua 5.1"))

	v.setTypeMetatables()
	budget.Attach(L, v)
	v.identity = L.NewFunction(func(L *lua.LState) int {
		L.Push(v.callError(L, L.Get(1)))
		return 1
	})
	v.handler = L.NewFunction(func(L *lua.LState) int {
		v.errInfo = v.errorInfo(L, L.Get(1))
		return 0
	})
	helpers := map[string]lua.LGFunction{
		lua51.HelperBudget:   v.budget,
		lua51.HelperConcat:   v.concat,
		lua51.HelperNeg:      v.neg,
		lua51.HelperMod:      v.mod,
		lua51.HelperForInit:  v.forCoerce("initial value"),
		lua51.HelperForLimit: v.forCoerce("limit"),
		lua51.HelperForStep:  v.forCoerce("step"),
		lua51.HelperSetIndex: v.setIndex,
		lua51.HelperSetFlds:  v.setFields,
		lua51.HelperLen:      v.lenOp,
		lua51.HelperCmp:      v.compare,
		lua51.HelperKey:      v.key,
		lua51.HelperVarg:     v.varg,
	}
	for _, name := range lua51.Helpers {
		v.helpers = append(v.helpers, L.NewFunction(helpers[name]))
	}
	return v
}

// Protect returns a read-only proxy of t and registers it.
func (v *vm) Protect(t *lua.LTable) *lua.LTable {
	// The proxy never holds an entry; without a hash part, every read
	// through it skips straight to the metatable.
	proxy := v.L.CreateTable(0, 0)
	// Sized for its two entries: Go searches a small map faster.
	mt := v.L.CreateTable(0, 2)
	mt.RawSetString("__index", t)
	mt.RawSetString("__newindex", v.L.NewFunction(v.readonlyError))
	v.L.SetMetatable(proxy, mt)
	v.readonly[proxy] = t
	v.metaOf[proxy] = lua.LNil
	return proxy
}

// setLib publishes a library table as a read-only global.
func (v *vm) setLib(name string, lib *lua.LTable) {
	v.hidden.RawSetString(name, v.Protect(lib))
}

// Contents returns the table holding t's entries: t itself, or the hidden
// table behind a protected proxy.
func (v *vm) Contents(t *lua.LTable) *lua.LTable {
	if c, ok := v.readonly[t]; ok {
		return c
	}
	return t
}

func (v *vm) readonlyError(L *lua.LState) int {
	L.RaiseError(errReadonly)
	return 0
}

// RefuseWrite raises Redis's error, without a position as Redis raises it
// from inside the C API, when t is protected.
func (v *vm) RefuseWrite(L *lua.LState, t *lua.LTable) {
	if _, ok := v.readonly[t]; ok {
		L.Error(lua.LString(errReadonly), 0)
	}
}

func (v *vm) nonexistentGlobal(L *lua.LState) int {
	L.RaiseError("Script attempted to access nonexistent global variable '%s'", lua.LVAsString(L.Get(2)))
	return 0
}

// ---- budget ----

// budget is the helper at the top of every function and loop body: it
// charges the body's weight (lua51's weight.go).
func (v *vm) budget(L *lua.LState) int {
	w, _ := L.Get(1).(lua.LNumber)
	v.Charge(L, max(int64(w), 1))
	return 0
}

// Charge spends n steps of the script's budget and stops the script when it
// runs out. Once out, every later charge raises again, so that a script that
// catches the error with pcall cannot go on.
func (v *vm) Charge(L *lua.LState, n int64) {
	r := v.run
	if r == nil {
		return
	}
	r.steps -= n
	if r.steps < 0 {
		r.exhausted = true
	}
	v.reraise(L)
}

func (v *vm) budgetMessage() string {
	return fmt.Sprintf("Script exceeded its execution budget of %d steps (loop iterations, calls and bytes processed)", v.e.budget())
}

// chargeGap is lualib.ChargeGap for a store to t[k], t being any value: a
// proxy's store is charged on the table that holds its entries.
func (v *vm) chargeGap(L *lua.LState, t, k lua.LValue) {
	if tbl, ok := t.(*lua.LTable); ok {
		lualib.ChargeGap(v, L, v.Contents(tbl), k)
	}
}

// reraise propagates the budget error, or a dry run's stop, through a
// protected call that caught it.
func (v *vm) reraise(L *lua.LState) {
	switch r := v.run; {
	case r == nil:
	case r.exhausted:
		L.RaiseError("%s", v.budgetMessage())
	case r.wouldWrite:
		L.RaiseError("%s", keyspace.WouldWrite.Str)
	}
}

// ---- running scripts ----

// scriptError is a script's failure as Redis reports it: the error message
// (code included) and where it happened.
type scriptError struct {
	msg     string
	source  string
	line    int
	counted bool // the error statistics counted it already (statsCounted)
}

// exec runs a compiled script, instantiated, with the given KEYS and ARGV
// and returns its result or its error.
func (v *vm) exec(r *run, s *compiled, keys, args [][]byte) (lua.LValue, *scriptError) {
	L := v.L
	v.run = r
	defer v.endRun()
	if t := v.refill(v.keys, keys); t != v.keys {
		v.keys = t
		v.hidden.RawSetString("KEYS", t)
	}
	if t := v.refill(v.argv, args); t != v.argv {
		v.argv = t
		v.hidden.RawSetString("ARGV", t)
	}
	// The script reads them through its aliases (see aliasedGlobals).
	if s.keys != nil && s.keys.Value() != v.keys {
		s.keys.SetValue(v.keys)
	}
	if s.argv != nil && s.argv.Value() != v.argv {
		s.argv.SetValue(v.argv)
	}

	L.Push(s.fn)
	return v.protectedCall(r, scriptChunk, 0)
}

// scriptChunk is the chunk name messages give a script's body.
const scriptChunk = "user_script"

// protectedCall calls the function on the stack below its nargs arguments, in a
// protected call, and returns its result or its error; chunk is the name
// of the chunk it is in, for the errors that have no position.
func (v *vm) protectedCall(r *run, chunk string, nargs int) (lua.LValue, *scriptError) {
	L := v.L
	v.errInfo = nil
	err := L.PCall(nargs, 1, v.handler)
	info := v.errInfo
	if r.exhausted {
		v.e.stopped++
		line := 0
		if info != nil {
			line = info.line
		}
		return nil, &scriptError{msg: "ERR " + chunk + ":" + fmt.Sprint(line) + ": " + v.budgetMessage(), source: "@" + chunk, line: line}
	}
	if err != nil {
		if info == nil {
			// The handler could not run: the call stack was full.
			info = v.overflowInfo(err, chunk)
		}
		return nil, info
	}
	ret := L.Get(-1)
	L.Pop(1)
	return ret, nil
}

// endRun lets go of what the script held.
func (v *vm) endRun() {
	v.run = nil
	if cap(v.argBytes) > maxKeptArgBytes {
		v.args, v.argBytes = nil, nil
	}
}

// errorInfo builds the reply for an error raised by a script, as Redis 7's
// error handler does: a table error keeps its 'err' text, anything else
// becomes "ERR " .. tostring(err); the position is the line of the Lua
// function that raised it, or of the first Lua function below the Go
// functions that did.
func (v *vm) errorInfo(L *lua.LState, obj lua.LValue) *scriptError {
	info := &scriptError{}
	if t, ok := obj.(*lua.LTable); ok {
		if s, ok := t.RawGetString("err").(lua.LString); ok {
			info.msg = string(s)
			info.counted = statsCounted(t)
		} else {
			// Redis 7.0 crashes on such an error object; report it plainly.
			info.msg = "ERR Error object raised by the script has no 'err' string field"
		}
	} else {
		info.msg = "ERR " + v.tostring(L, v.callError(L, obj))
	}
	if dbg, _ := luaFrame(L); dbg != nil {
		info.source = "@" + dbg.Source
		if raw, ok := v.sources[dbg.Source]; ok {
			info.source = raw // a chunk from loadstring: Lua names it by its text
		}
		info.line = dbg.CurrentLine
	}
	return info
}

// luaFrame returns, from an error handler, the frame of the Lua function
// that raised the error or called the Go function that did (the innermost
// of the ten above that is not a Go function), with its source and line;
// nil when there is none.
func luaFrame(L *lua.LState) (*lua.Debug, *lua.LFunction) {
	for level := 1; level <= 10; level++ {
		dbg, ok := L.GetStack(level)
		if !ok {
			return nil, nil
		}
		fn, _ := L.GetInfo("Slf", dbg, lua.LNil)
		if f, ok := fn.(*lua.LFunction); ok && !f.IsG {
			return dbg, f
		}
	}
	return nil, nil
}

// overflowInfo describes an error whose handler could not run (a stack
// overflow), taking the line from the message's "chunk:N:" prefix.
func (v *vm) overflowInfo(err error, chunk string) *scriptError {
	var obj lua.LValue = lua.LString(err.Error())
	if ae, ok := err.(*lua.ApiError); ok {
		obj = ae.Object
	}
	info := &scriptError{msg: "ERR " + lua.LVAsString(obj)}
	if s, ok := obj.(lua.LString); ok {
		if rest, ok := strings.CutPrefix(string(s), chunk+":"); ok {
			if n, err := strconv.Atoi(rest[:strings.IndexByte(rest+":", ':')]); err == nil {
				info.source, info.line = "@"+chunk, n
			}
		}
	}
	return info
}

// maxRefill is the most arguments refill reuses a table for; larger arrays
// are built anew, so that a table grown large is not kept.
const maxRefill = 16

// refill returns t holding the array of strings items, or a new table when
// t cannot be reused. Scripts must see KEYS and ARGV fresh on every call, as
// in Redis; no reference to them outlives a script (globals, libraries and
// every other table that persists between scripts are read-only), so a
// table the last script left with no metatable and no hash entries is, once
// cut to length and refilled, indistinguishable from a new one, to the
// script and to the budget's charging alike.
func (v *vm) refill(t *lua.LTable, items [][]byte) *lua.LTable {
	if !lualib.TableShapeKnown || t.Metatable != lua.LNil || len(items) > maxRefill {
		return v.byteArray(items)
	}
	array, keys := lualib.TableSizes(t)
	if keys != 0 || array > maxRefill {
		return v.byteArray(items)
	}
	for n := array; n > len(items); n-- {
		t.Remove(n)
	}
	for i, b := range items {
		t.RawSetInt(i+1, v.argStrings.value(b))
	}
	return t
}

// byteArray returns a new Lua array of strings.
func (v *vm) byteArray(items [][]byte) *lua.LTable {
	t := v.L.CreateTable(len(items), 0)
	for _, b := range items {
		t.Append(v.argStrings.value(b))
	}
	return t
}

// argStrings keeps the short arguments of recent scripts as Lua values, so
// that the keys, owners and leases clients send again and again are not
// converted again: a conversion allocates twice, for the bytes and for the
// interface's header. Strings are values in Lua, so which copy a script
// gets cannot be told.
type argStrings struct{ m map[string]lua.LValue }

// Bounds of argStrings: the longest string kept, and how many are kept
// before all are let go.
const (
	maxArgStringLen = 64
	maxArgStrings   = 1024
)

func (c *argStrings) value(b []byte) lua.LValue {
	if len(b) > maxArgStringLen {
		return lua.LString(b)
	}
	if val, ok := c.m[string(b)]; ok {
		return val
	}
	if len(c.m) >= maxArgStrings {
		clear(c.m)
	}
	if c.m == nil {
		c.m = make(map[string]lua.LValue)
	}
	s := string(b)
	val := lua.LValue(lua.LString(s))
	c.m[s] = val
	return val
}

// errorReply renders a script error as Redis does: the message, then where
// it happened.
func (e *scriptError) reply(sha string) keyspace.Reply {
	msg := e.msg
	if e.source != "" {
		msg += " script: " + sha + ", on " + e.source + ":" + fmt.Sprint(e.line) + "."
	}
	if e.counted {
		return keyspace.CountedError(msg)
	}
	return keyspace.Error(msg)
}

package luaexec

import (
	"crypto/sha1"
	"errors"
	"fmt"
	"maps"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/lockserver/lockserver/luaexec/internal/clib"
	"github.com/lockserver/lockserver/luaexec/internal/lua51"
	lua "github.com/yuin/gopher-lua"
	"github.com/yuin/gopher-lua/ast"
)

// Script flags that a "#!lua flags=..." first line can declare (Redis 7.0's set).
const (
	flagNoWrites = 1 << iota
	flagAllowOOM
	flagAllowStale
	flagNoCluster
	flagAllowCrossSlot
)

var shebangFlags = map[string]int{
	"no-writes":             flagNoWrites,
	"allow-oom":             flagAllowOOM,
	"allow-stale":           flagAllowStale,
	"no-cluster":            flagNoCluster,
	"allow-cross-slot-keys": flagAllowCrossSlot,
}

// shebang is what a script's first line declares.
type shebang struct {
	present bool
	flags   int
}

// parseShebang reads a "#!lua [flags=a,b]" first line as Redis 7.0's
// evalExtractShebangFlags does. It returns the declaration and the error text
// (without "ERR ") when the line is invalid.
func parseShebang(body string) (shebang, string) {
	if !strings.HasPrefix(body, "#!") {
		return shebang{}, ""
	}
	end := strings.IndexByte(body, '\n')
	if end < 0 {
		return shebang{}, "Invalid script shebang"
	}
	line := body[:end]
	if i := strings.IndexByte(line, 0); i >= 0 {
		line = line[:i] // Redis reads the line as a C string
	}
	parts, ok := splitArgs(line)
	if !ok || len(parts) == 0 {
		return shebang{}, "Invalid engine in script shebang"
	}
	if parts[0] != "#!lua" {
		return shebang{}, "Unexpected engine in script shebang: " + parts[0]
	}
	sb := shebang{present: true}
	for _, part := range parts[1:] {
		list, ok := strings.CutPrefix(part, "flags=")
		if !ok {
			return shebang{}, "Unknown lua shebang option: " + part
		}
		if list == "" {
			continue
		}
		for _, f := range strings.Split(list, ",") {
			bit, ok := shebangFlags[f]
			if !ok {
				return shebang{}, "Unexpected flag in script shebang: " + f
			}
			sb.flags |= bit
		}
	}
	return sb, ""
}

// splitArgs splits a line into arguments as Redis's sdssplitargs does:
// spaces separate, "double quotes" take C escapes (\n, \xHH, ...), 'single
// quotes' take only \'. A closing quote must be followed by a space or the
// end. It reports false on unbalanced quotes.
func splitArgs(line string) ([]string, bool) {
	var args []string
	i := 0
	for {
		for i < len(line) && clib.IsSpace(line[i]) {
			i++
		}
		if i >= len(line) {
			return args, true
		}
		var cur []byte
		inDouble, inSingle, done := false, false, false
		for !done {
			switch {
			case inDouble:
				if i >= len(line) {
					return nil, false
				}
				c := line[i]
				switch {
				case c == '\\' && i+3 < len(line) && line[i+1] == 'x' && clib.IsHexDigit(line[i+2]) && clib.IsHexDigit(line[i+3]):
					cur = append(cur, byte(clib.DigitValue(line[i+2])*16+clib.DigitValue(line[i+3])))
					i += 3
				case c == '\\' && i+1 < len(line):
					i++
					switch line[i] {
					case 'n':
						cur = append(cur, '\n')
					case 'r':
						cur = append(cur, '\r')
					case 't':
						cur = append(cur, '\t')
					case 'b':
						cur = append(cur, '\b')
					case 'a':
						cur = append(cur, '\a')
					default:
						cur = append(cur, line[i])
					}
				case c == '"':
					if i+1 < len(line) && !clib.IsSpace(line[i+1]) {
						return nil, false
					}
					done = true
				default:
					cur = append(cur, c)
				}
			case inSingle:
				if i >= len(line) {
					return nil, false
				}
				c := line[i]
				switch {
				case c == '\\' && i+1 < len(line) && line[i+1] == '\'':
					i++
					cur = append(cur, '\'')
				case c == '\'':
					if i+1 < len(line) && !clib.IsSpace(line[i+1]) {
						return nil, false
					}
					done = true
				default:
					cur = append(cur, c)
				}
			default:
				if i >= len(line) {
					done = true
					continue
				}
				switch c := line[i]; {
				case c == ' ' || c == '\n' || c == '\r' || c == '\t':
					done = true
				case c == '"':
					inDouble = true
				case c == '\'':
					inSingle = true
				default:
					cur = append(cur, c)
				}
			}
			if i < len(line) {
				i++
			}
		}
		args = append(args, string(cur))
	}
}

// aliasedGlobals are the globals that scripts read as locals of the wrapper
// chunk rather than through the sandbox (see lua51.Aliases): every global
// the VM defines. A global read costs two map look-ups behind the read-only
// proxy (its metatable, then the hidden table), a large share of the
// instructions of a lock script. The values are the same: globals cannot be
// assigned, KEYS and ARGV are set for each script (vm.exec), and the rest
// never change. lualib's funcName strips lua51.AliasPrefix from the names
// messages give functions.
var aliasedGlobals = []string{
	"ARGV", "KEYS", "_G", "_VERSION", "assert", "bit", "cjson", "cmsgpack", "collectgarbage",
	"coroutine", "error", "gcinfo", "getmetatable", "ipairs", "load", "loadstring", "math",
	"next", "pairs", "pcall", "rawequal", "rawget", "rawset", "redis", "select", "setmetatable",
	"string", "struct", "table", "tonumber", "tostring", "type", "unpack", "xpcall",
}

// aliasedFields are library functions read as locals in the same way when
// a script names them as lib.name, lib being the aliased global: libraries
// are read-only, and these are what lock scripts call.
var aliasedFields = []string{"redis.call", "redis.pcall"}

var aliases = lua51.NewAliases(aliasedGlobals, aliasedFields)

// wrapperLocals are the locals of the wrapper chunk, which the parsed chunk
// reads: the helpers, then the aliases of the globals and of the fields,
// then the constant pool.
var wrapperLocals = func() []string {
	names := append([]string(nil), lua51.Helpers...)
	for _, name := range append(aliasedGlobals, aliasedFields...) {
		names = append(names, lua51.AliasPrefix+name)
	}
	return append(names, lua51.PoolName)
}()

// compileChunk compiles Lua source into a prototype that, run once with the
// values of wrapperLocals as arguments, returns the script function. chunk
// names the source in messages ("user_script"); firstLine is the line the
// source starts at, level the syntax levels in use (lua51.Options).
//
// The body becomes the body of a function rather than a main chunk: a main
// chunk is vararg and gopher-lua builds an 'arg' table for it on every call.
//
// Compiling is work: it returns the work it took, in steps (lua51's
// Chunk.Work), and gives up with an error once that passes maxWork (0: no
// limit).
func compileChunk(src, chunk string, firstLine, level, maxWork int) (*lua.FunctionProto, []lua.LValue, int, error) {
	c, err := lua51.Parse(src, lua51.Options{Chunk: chunk, FirstLine: firstLine, Level: level, MaxWork: maxWork, Aliases: aliases})
	if err != nil {
		return nil, nil, 0, err
	}
	decl := &ast.LocalAssignStmt{Names: wrapperLocals, Exprs: []ast.Expr{&ast.Comma3Expr{}}}
	fn := &ast.FunctionExpr{ParList: &ast.ParList{HasVargs: c.UsesDots, Names: []string{}}, Stmts: c.Body}
	fn.SetLine(0)
	ret := &ast.ReturnStmt{Exprs: []ast.Expr{fn}}
	proto, err := safeCompile([]ast.Stmt{decl, ret}, chunk)
	if err != nil {
		return nil, nil, 0, err
	}
	// No script reads 'arg' (Lua 5.1's main chunk has none), so never build it.
	proto.FunctionPrototypes[0].IsVarArg &^= lua.VarArgNeedsArg
	return proto, c.Pool, c.Work, nil
}

// safeCompile runs gopher-lua's compiler, turning its errors (and any panic
// on an input it does not expect) into Lua-style messages.
func safeCompile(stmts []ast.Stmt, chunk string) (proto *lua.FunctionProto, err error) {
	defer func() {
		if r := recover(); r != nil {
			proto, err = nil, fmt.Errorf("%s: cannot compile: %v", chunk, r)
		}
	}()
	proto, err = lua.Compile(stmts, chunk)
	if err == nil {
		fixSetList(proto)
	}
	var ce *lua.CompileError
	if errors.As(err, &ce) {
		msg := ce.Message
		if strings.HasPrefix(msg, "register overflow") {
			msg = "function or expression too complex" // Lua 5.1's words for running out of registers
		}
		return nil, fmt.Errorf("%s:%d: %s", chunk, max(ce.Line, 1), msg)
	}
	return proto, err
}

// fixSetList corrects gopher-lua's code for table constructors of more than
// 25,550 positional fields. SETLIST stores a batch of 50 fields; its C
// operand numbers the batch, and a batch number past 511 goes in the word
// after the instruction, with C = 0. gopher-lua writes 0 in that word (it
// zeroes C before writing it), so the 512th batch and later ones store at
// indexes -49..0, each over the last: {0, 1, ..., 29999} had 25,550
// elements and t[0] = 29999. A constructor's batches are its SETLISTs since
// its NEWTABLE on the same register (a constructor nested in it works in the
// registers above), so the word is set to their count.
func fixSetList(proto *lua.FunctionProto) {
	var batches [256]uint32 // per register
	code := proto.Code
	for pc := 0; pc < len(code); pc++ {
		inst := code[pc]
		a := inst >> 18 & 0xff
		switch int(inst >> 26) {
		case lua.OP_NEWTABLE:
			batches[a] = 0
		case lua.OP_SETLIST:
			batches[a]++
			if inst>>9&0x1ff == 0 && pc+1 < len(code) {
				pc++
				code[pc] = batches[a]
			}
		}
	}
	for _, p := range proto.FunctionPrototypes {
		fixSetList(p)
	}
}

// closure instantiates a compiled chunk in the VM: it runs the wrapper with
// the helpers, the globals' current values and the chunk's pooled constants,
// and returns the function it returns.
func (v *vm) closure(proto *lua.FunctionProto, pool []lua.LValue) *lua.LFunction {
	L := v.L
	L.Push(L.NewFunctionFromProto(proto))
	for _, h := range v.helpers {
		L.Push(h)
	}
	for _, name := range aliasedGlobals {
		L.Push(v.hidden.RawGetString(name))
	}
	for _, name := range aliasedFields {
		lib, field, _ := strings.Cut(name, ".")
		L.Push(v.Contents(v.hidden.RawGetString(lib).(*lua.LTable)).RawGetString(field))
	}
	L.Push(lua51.PoolTable(L, pool))
	L.Call(len(wrapperLocals), 1)
	fn := L.Get(-1).(*lua.LFunction)
	L.Pop(1)
	return fn
}

// upvalue returns fn's upvalue of the given name, or nil when fn has none.
func upvalue(fn *lua.LFunction, name string) *lua.Upvalue {
	for i, n := range fn.Proto.DbgUpvalues {
		if n == name {
			return fn.Upvalues[i]
		}
	}
	return nil
}

// compiled is a script ready to run.
type compiled struct {
	sha     string // the body's SHA1 in lower-case hex, which names it
	body    string
	shebang shebang
	proto   *lua.FunctionProto
	pool    []lua.LValue   // its pooled constants (lua51.Chunk.Pool)
	fn      *lua.LFunction // instantiated in the VM on first use
	// keys and argv are fn's aliases of KEYS and ARGV, nil when the script
	// reads neither: each run points them to its tables.
	keys, argv *lua.Upvalue
	used       atomic.Uint64 // the cache's epoch when it was last used
}

// compileScript checks and compiles a script body as EVAL and SCRIPT LOAD do,
// within budget steps of compile work. The error text has no code; callers
// prefix "ERR ".
func compileScript(sha, body string, budget int64) (*compiled, string) {
	sb, msg := parseShebang(body)
	if msg != "" {
		return nil, msg
	}
	src, first := body, 1
	if sb.present {
		// Redis blanks the shebang line, so lines keep their numbers.
		src, first = body[strings.IndexByte(body, '\n')+1:], 2
	}
	proto, pool, _, err := compileChunk(src, "user_script", first, 0, int(budget))
	if err != nil {
		return nil, "Error compiling script (new function): " + err.Error()
	}
	return &compiled{sha: sha, body: body, shebang: sb, proto: proto, pool: pool}, ""
}

// scriptCache holds the script bodies, which are replicated state (SCRIPT
// LOAD and EVAL add, SCRIPT FLUSH clears), and a bounded cache of their
// compiled forms, which is not: a miss recompiles, with the same result on
// every node. Both are keyed by the SHA1 in lower-case hex. It is safe for
// concurrent use, so that Prepare may run beside Exec.
//
// Every EVALSHA looks its script up twice (Prepare and Exec), often on two
// cores at once, so lookups share a read lock and, once a script's use is
// recorded, write nothing: a shared LRU list rewritten on every lookup made
// the two cores wait for each other's cache lines. Recency is kept in epochs
// instead: each compile stamps its script with a new epoch and starts another
// for the uses after it, so uses between two compiles count as one moment. A
// full cache evicts the script with the oldest stamp, found by a scan, which
// is small beside the compile that caused it.
//
// Even a read lock writes its count, a cache line the two cores then pass
// back and forth: 5% of the CPU of embedded lock cycles through Do, most of
// it in the read lock's atomic add. So a script found loaded and compiled
// under the lock is added to ready, a map no one changes once it is
// published, which later lookups read without a lock. It is copied to add a
// script, to drop one evicted, and emptied by a flush; a client that EVALs a
// new body each time never finds one loaded and compiled, and copies nothing.
type scriptCache struct {
	mu       sync.RWMutex
	bodies   map[string]string
	max      int
	budget   int64 // of compile work for one script
	compiled map[string]*compiled
	epoch    atomic.Uint64 // the stamp of uses now; advanced under the write lock
	ready    atomic.Pointer[map[string]*compiled]
}

func newScriptCache(max int, budget int64) *scriptCache {
	c := &scriptCache{bodies: make(map[string]string), max: max, budget: budget, compiled: make(map[string]*compiled)}
	c.ready.Store(&map[string]*compiled{})
	return c
}

// promote adds s to ready if it is still loaded and compiled.
func (c *scriptCache) promote(s *compiled) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ready := *c.ready.Load()
	if _, loaded := c.bodies[s.sha]; !loaded || c.compiled[s.sha] != s || ready[s.sha] != nil {
		return
	}
	m := maps.Clone(ready)
	m[s.sha] = s
	c.ready.Store(&m)
}

// lookup returns the body of the script whose SHA1 is sha, in hex of either
// case, and its compiled form when it is at hand: what every EVALSHA needs,
// without allocating, and for a script in ready without a lock.
func (c *scriptCache) lookup(sha []byte) (body string, s *compiled, ok bool) {
	if s := (*c.ready.Load())[string(sha)]; s != nil {
		c.touch(s)
		return s.body, s, true
	}
	c.mu.RLock()
	body, s, ok = c.lookupLocked(sha)
	c.mu.RUnlock()
	if s != nil {
		c.promote(s)
	}
	return body, s, ok
}

// lookupLocked is lookup's search under the read lock.
func (c *scriptCache) lookupLocked(sha []byte) (body string, s *compiled, ok bool) {
	key := sha
	if body, ok = c.bodies[string(key)]; !ok {
		// Clients send lower case; try upper case only when that fails.
		var lower [2 * sha1.Size]byte
		if len(sha) != len(lower) {
			return "", nil, false
		}
		for i, ch := range sha {
			if 'A' <= ch && ch <= 'Z' {
				ch += 'a' - 'A'
			}
			lower[i] = ch
		}
		key = lower[:]
		if body, ok = c.bodies[string(key)]; !ok {
			return "", nil, false
		}
	}
	if s = c.compiled[string(key)]; s != nil {
		c.touch(s)
	}
	return body, s, true
}

// touch records a use of s in the current epoch.
func (c *scriptCache) touch(s *compiled) {
	if e := c.epoch.Load(); s.used.Load() != e {
		s.used.Store(e)
	}
}

func (c *scriptCache) add(sha, body string) {
	c.mu.Lock()
	c.bodies[sha] = body
	c.mu.Unlock()
}

func (c *scriptCache) flush() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.bodies = make(map[string]string)
	c.compiled = make(map[string]*compiled)
	c.ready.Store(&map[string]*compiled{})
}

// get returns the compiled form of a body, compiling it on a miss.
func (c *scriptCache) get(sha, body string) (*compiled, string) {
	c.mu.RLock()
	if s := c.compiled[sha]; s != nil {
		c.touch(s)
		c.mu.RUnlock()
		return s, ""
	}
	c.mu.RUnlock()
	s, msg := compileScript(sha, body, c.budget)
	if s == nil {
		return nil, msg
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if old := c.compiled[sha]; old != nil { // compiled meanwhile by another caller
		return old, ""
	}
	s.used.Store(c.epoch.Load() + 1)
	c.epoch.Add(2)
	c.compiled[sha] = s
	if len(c.compiled) > c.max {
		// Every other script's stamp is older than s's: s is never evicted.
		var oldest *compiled
		for _, o := range c.compiled {
			if oldest == nil || o.used.Load() < oldest.used.Load() {
				oldest = o
			}
		}
		delete(c.compiled, oldest.sha)
		if ready := *c.ready.Load(); ready[oldest.sha] != nil {
			m := maps.Clone(ready)
			delete(m, oldest.sha)
			c.ready.Store(&m)
		}
	}
	return s, ""
}

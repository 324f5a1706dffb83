package luaexec

import (
	"errors"
	"fmt"
	"strings"
	"sync/atomic"

	"github.com/lockserver/lockserver/internal/splitargs"
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
	parts, ok := splitargs.Split(nil, []byte(line))
	if !ok || len(parts) == 0 {
		return shebang{}, "Invalid engine in script shebang"
	}
	if string(parts[0]) != "#!lua" {
		return shebang{}, "Unexpected engine in script shebang: " + string(parts[0])
	}
	sb := shebang{present: true}
	for _, p := range parts[1:] {
		part := string(p)
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
// source starts at, level the syntax levels in use (lua51.Options), al the
// globals it reads as locals (nil: none, every global read goes to the
// function's environment).
//
// The body becomes the body of a function rather than a main chunk: a main
// chunk is vararg and gopher-lua builds an 'arg' table for it on every call.
//
// Compiling is work: it returns the work it took, in steps (lua51's
// Chunk.Work), and gives up with an error once that passes maxWork (0: no
// limit).
func compileChunk(src, chunk string, firstLine, level, maxWork int, al *lua51.Aliases) (*lua.FunctionProto, []lua.LValue, int, error) {
	c, err := lua51.Parse(src, lua51.Options{Chunk: chunk, FirstLine: firstLine, Level: level, MaxWork: maxWork, Aliases: al})
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
// and returns the function it returns, whose environment, and that of every
// function it creates, is env.
func (v *vm) closure(proto *lua.FunctionProto, pool []lua.LValue, env *lua.LTable) *lua.LFunction {
	L := v.L
	wrapper := L.NewFunctionFromProto(proto)
	wrapper.Env = env
	L.Push(wrapper)
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
	proto, pool, _, err := compileChunk(src, scriptChunk, first, 0, int(budget), aliases)
	if err != nil {
		return nil, "Error compiling script (new function): " + err.Error()
	}
	return &compiled{sha: sha, body: body, shebang: sb, proto: proto, pool: pool}, ""
}

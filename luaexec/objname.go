package luaexec

import (
	"fmt"
	"reflect"
	"regexp"
	"strings"

	"github.com/lockserver/lockserver/luaexec/internal/lua51"
	lua "github.com/yuin/gopher-lua"
)

// Lua 5.1 names the value an operation failed on when the code says where
// it came from: "attempt to call field 'register_function' (a nil value)",
// "attempt to index local 'x' (a nil value)". It finds the name in the
// failing function's bytecode (ldebug.c's getobjname): a local variable's
// name, or else the instruction that last set the register, a global, a
// table field with a constant key, an upvalue or a method. gopher-lua
// compiles to Lua 5.1's instruction set (with GETTABLEKS and SETTABLEKS for
// constant string keys, and MOVEN), so the same search works on its code.

// operandName returns the kind ("local", "global", "field", "upvalue",
// "method") and name of the operand of op ("call", "index", "get length
// of") that the Lua function at level 1 is failing on, or "" when the code
// does not tell, as Lua 5.1 leaves it unnamed. An operation the
// instrumented code does through a helper (the length) fails in the helper,
// whose first argument is the operand.
func (v *vm) operandName(L *lua.LState, op string) (kind, name string) {
	f, pc, helper := v.failingFunction(L)
	if f == nil {
		return "", ""
	}
	inst := f.Proto.Code[pc]
	reg := -1
	switch code := opCode(inst); {
	case helper:
		if code != lua.OP_CALL {
			return "", ""
		}
		reg = argA(inst) + 1
	case op == "call" && (code == lua.OP_CALL || code == lua.OP_TAILCALL):
		reg = argA(inst)
	case op == "index" && (code == lua.OP_GETTABLE || code == lua.OP_GETTABLEKS || code == lua.OP_SELF):
		reg = argB(inst)
	case op == "index" && (code == lua.OP_SETTABLE || code == lua.OP_SETTABLEKS):
		reg = argA(inst)
	case op == "get length of" && code == lua.OP_LEN:
		reg = argB(inst)
	default:
		return "", ""
	}
	return objName(f.Proto, pc, reg, 0)
}

// failingFunction returns the Lua function an operation failed in, the
// instruction it was running, and whether it did the operation through a
// helper; nil if the operation did not fail in Lua code.
func (v *vm) failingFunction(L *lua.LState) (*lua.LFunction, int, bool) {
	helper := false
	for level := 1; level <= 2; level++ {
		dbg, ok := L.GetStack(level)
		if !ok {
			return nil, 0, false
		}
		fn, _ := L.GetInfo("f", dbg, lua.LNil)
		f, ok := fn.(*lua.LFunction)
		switch {
		case !ok:
			return nil, 0, false
		case level == 1 && v.isHelper(f):
			helper = true
			continue
		case f.IsG:
			return nil, 0, false
		}
		pc := framePC(dbg)
		if pc < 0 || pc >= len(f.Proto.Code) {
			return nil, 0, false
		}
		return f, pc, helper
	}
	return nil, 0, false
}

// framePC returns the index of the instruction that the Lua frame dbg
// describes is running: gopher-lua keeps its frame unexported, with a Pc
// already past that instruction. -1 if it cannot be read.
func framePC(dbg *lua.Debug) int {
	frame := reflect.ValueOf(dbg).Elem().FieldByName("frame")
	if frame.Kind() != reflect.Pointer || frame.IsNil() {
		return -1
	}
	pc := frame.Elem().FieldByName("Pc")
	if !pc.CanInt() {
		return -1
	}
	return int(pc.Int()) - 1
}

// Bounds of the search for a name, which runs for every error a script
// raises or catches, and which the budget does not charge: a function
// with more locals than maxNamedLocals names nothing, and the instruction
// that set a register is looked for among the nameWindow before pc. (Lua
// 5.1 looks at them all; a name is found within a few instructions.)
const (
	maxNamedLocals = 1024
	nameWindow     = 64
)

// objName names what register reg holds at instruction pc of f, as Lua
// 5.1's getobjname does; depth bounds its following of MOVEs.
func objName(p *lua.FunctionProto, pc, reg, depth int) (kind, name string) {
	if len(p.DbgLocals) > maxNamedLocals {
		return "", ""
	}
	if name, ok := localName(p, reg, pc); ok {
		return "local", name
	}
	set, ok := lastSet(p, pc, reg)
	if !ok {
		return "", ""
	}
	switch inst := p.Code[set]; opCode(inst) {
	case lua.OP_GETGLOBAL:
		if s, ok := p.Constants[argBx(inst)].(lua.LString); ok {
			return "global", string(s)
		}
	case lua.OP_MOVE:
		if b := argB(inst); b < argA(inst) && depth < 16 {
			return objName(p, pc, b, depth+1)
		}
	case lua.OP_GETTABLE, lua.OP_GETTABLEKS:
		return "field", constantName(p, argC(inst))
	case lua.OP_SELF:
		return "method", constantName(p, argC(inst))
	case lua.OP_GETUPVAL:
		name := "?"
		if b := argB(inst); b < len(p.DbgUpvalues) {
			name = p.DbgUpvalues[b]
		}
		// The globals and library fields a script reads through aliases
		// (lua51.Aliases) are upvalues of its function; Lua reads them as
		// a global and a field.
		if alias, ok := strings.CutPrefix(name, lua51.AliasPrefix); ok {
			if _, field, ok := strings.Cut(alias, "."); ok {
				return "field", field
			}
			return "global", alias
		}
		return "upvalue", name
	}
	return "", ""
}

// localName returns the name of the local variable in register reg at
// instruction pc, as Lua 5.1's luaF_getlocalname: the locals active there,
// in order of declaration, hold the registers from 0. (gopher-lua's own
// LocalName misses a local at its first instruction and at its last:
// its StartPc is that first instruction and its EndPc that last one.)
func localName(p *lua.FunctionProto, reg, pc int) (string, bool) {
	for _, l := range p.DbgLocals {
		if l.StartPc > pc {
			break
		}
		if pc <= l.EndPc {
			if reg == 0 {
				return l.Name, true
			}
			reg--
		}
	}
	return "", false
}

// constantName is Lua 5.1's kname: the constant string an RK operand names,
// else "?".
func constantName(p *lua.FunctionProto, rk int) string {
	if rk&rkConstant != 0 {
		if s, ok := p.Constants[rk&^rkConstant].(lua.LString); ok {
			return string(s)
		}
	}
	return "?"
}

// lastSet returns the last instruction before lastpc that sets register reg,
// among the nameWindow before it, running through p's code as Lua 5.1's
// symbexec does: forward jumps that land before lastpc are taken, so that
// the branch not taken is skipped.
func lastSet(p *lua.FunctionProto, lastpc, reg int) (int, bool) {
	last := -1
	for pc := max(0, lastpc-nameWindow); pc < lastpc; pc++ {
		inst := p.Code[pc]
		a := argA(inst)
		switch opCode(inst) {
		case lua.OP_CLOSURE:
			if a == reg {
				last = pc
			}
			// The instructions after it name the upvalues it captures.
			if bx := argBx(inst); bx < len(p.FunctionPrototypes) {
				pc += int(p.FunctionPrototypes[bx].NumUpvalues)
			}
		case lua.OP_LOADNIL:
			if a <= reg && reg <= argB(inst) {
				last = pc
			}
		case lua.OP_CALL, lua.OP_TAILCALL, lua.OP_VARARG:
			if reg >= a {
				last = pc
			}
		case lua.OP_TFORLOOP:
			if reg >= a+2 {
				last = pc
			}
		case lua.OP_SELF:
			if reg == a || reg == a+1 {
				last = pc
			}
		case lua.OP_JMP:
			if dest := pc + 1 + argSbx(inst); pc < dest && dest <= lastpc {
				pc = dest - 1
			}
		case lua.OP_SETGLOBAL, lua.OP_SETUPVAL, lua.OP_SETTABLE, lua.OP_SETTABLEKS, lua.OP_EQ, lua.OP_LT, lua.OP_LE,
			lua.OP_TEST, lua.OP_RETURN, lua.OP_SETLIST, lua.OP_CLOSE, lua.OP_NOP:
		default:
			if a == reg {
				last = pc
			}
		}
	}
	return last, last >= 0
}

// gopher-lua's instruction fields (its opcode.go): opcode 6 bits, A 8, C 9
// and B 9, or Bx 18; an RK operand with rkConstant set names a constant.
const rkConstant = 1 << 8

func opCode(inst uint32) int { return int(inst >> 26) }
func argA(inst uint32) int   { return int(inst>>18) & 0xff }
func argB(inst uint32) int   { return int(inst & 0x1ff) }
func argC(inst uint32) int   { return int(inst>>9) & 0x1ff }
func argBx(inst uint32) int  { return int(inst & 0x3ffff) }
func argSbx(inst uint32) int { return argBx(inst) - 0x3ffff>>1 }

// nonFunction ends gopher-lua's error for calling a value that is neither a
// function nor has a __call (a table, a string), which no metamethod of
// ours words as Lua 5.1 does.
const nonFunction = "attempt to call a non-function object"

// gopherCompare matches gopher-lua's error for comparing two values that
// are neither both numbers nor both strings, where no metamethod of ours
// runs (a comparison the compiler made directly, of two nils).
var gopherCompare = regexp.MustCompile(`attempt to compare (\w+) with (\w+)$`)

// callError rewrites gopher-lua's errors that Lua 5.1 words otherwise,
// raised with obj: a call of a table or a string, with the value's type and
// its name where the code tells, and a comparison of two values of one
// type (orderError). The error handlers call it where the error was
// raised, while the failing frame is still there. Any other obj is returned
// as it is, and so is a call's error when the call that failed is not the
// Lua function's own (pcall of a table).
func (v *vm) callError(L *lua.LState, obj lua.LValue) lua.LValue {
	s, ok := obj.(lua.LString)
	if !ok {
		return obj
	}
	// Only the message's end is looked at: a script may raise and catch a
	// long string again and again, and this costs its budget nothing.
	tail := len(s) - min(len(s), 64)
	if m := gopherCompare.FindStringSubmatchIndex(string(s[tail:])); m != nil {
		t1, t2 := string(s[tail+m[2]:tail+m[3]]), string(s[tail+m[4]:tail+m[5]])
		if len(t1) > 2 && len(t2) > 2 && t1[2] == t2[2] {
			return lua.LString(string(s[:tail+m[0]]) + "attempt to compare two " + t1 + " values")
		}
		return obj
	}
	where, ok := strings.CutSuffix(string(s), nonFunction)
	if !ok {
		return obj
	}
	dbg, f := luaFrame(L)
	if dbg == nil {
		return obj
	}
	pc := framePC(dbg)
	if pc < 0 || pc >= len(f.Proto.Code) {
		return obj
	}
	inst := f.Proto.Code[pc]
	if code := opCode(inst); code != lua.OP_CALL && code != lua.OP_TAILCALL {
		return obj
	}
	_, val := L.GetLocal(dbg, argA(inst)+1)
	if _, callable := val.(*lua.LFunction); callable || val == lua.LNil {
		return obj // not the value this instruction called
	}
	if kind, name := objName(f.Proto, pc, argA(inst), 0); kind != "" {
		return lua.LString(fmt.Sprintf("%sattempt to call %s '%s' (a %s value)", where, kind, name, val.Type().String()))
	}
	return lua.LString(fmt.Sprintf("%sattempt to call a %s value", where, val.Type().String()))
}

// typeOpMessage is Lua 5.1's message for op on a value of the wrong type,
// naming the operand where the code tells.
func (v *vm) typeOpMessage(L *lua.LState, op string, val lua.LValue) string {
	if kind, name := v.operandName(L, op); kind != "" {
		return fmt.Sprintf("attempt to %s %s '%s' (a %s value)", op, kind, name, val.Type().String())
	}
	return fmt.Sprintf("attempt to %s a %s value", op, val.Type().String())
}

package lua51

import (
	"math"
	"strconv"

	"github.com/lockserver/lockserver/luaexec/internal/budget"
	lua "github.com/yuin/gopher-lua"
	"github.com/yuin/gopher-lua/ast"
)

// Constants and the time to compile them.
//
// gopher-lua's compiler finds a constant's slot in its function's constant
// table by a linear search (funcContext.ConstIndex), so a function with n
// distinct constants took time in n², on every member, where Redis's
// compiler takes linear time. The parser therefore lets a function name at
// most MaxDirectConsts distinct constants itself; any further constant is
// read from the chunk's constant pool, a table of tables reached through
// the local PoolName (PoolTable builds it): pool[a][b][c], whose indexes are
// three digits in base PoolDigits and count as constants of the function
// too. A search then
// never passes more than MaxDirectConsts+PoolDigits slots, and compiling
// takes time linear in the size of the script. The values are the same
// either way (strings and numbers are values in Lua); a pooled constant
// costs three table reads instead of one load, and only scripts with
// hundreds of distinct constants in one function have any.
//
// Names used as method names (o:name(), function o:name()) are constants
// that cannot be read from elsewhere; they always take a slot of their own,
// up to maxConsts a function, past which the script does not compile.
const (
	// MaxDirectConsts is how many distinct constants a function may name
	// itself.
	MaxDirectConsts = 192
	// PoolDigits is the base of the digits of a pool index.
	PoolDigits = 64
	// PoolName is the local through which a chunk reads its pool.
	PoolName  = "const#"
	maxPooled = PoolDigits * PoolDigits * PoolDigits
	maxConsts = 1024
)

// constKey identifies a constant as gopher-lua compares them: by type and
// value, 0 and -0 alike, and every NaN a constant of its own.
type constKey struct {
	str  string
	num  uint64
	kind uint8
}

const (
	kindString = iota
	kindNumber
	kindNaN
)

func strKey(s string) constKey { return constKey{str: s, kind: kindString} }

func (p *parser) numKey(f float64) constKey {
	switch {
	case f != f:
		p.nans++
		return constKey{num: uint64(p.nans), kind: kindNaN}
	case f == 0:
		f = 0
	}
	return constKey{num: math.Float64bits(f), kind: kindNumber}
}

// room reports whether the current function may name constant k itself,
// recording it when so.
func (p *parser) room(k constKey) bool {
	fs := p.fs
	if _, ok := fs.consts[k]; ok {
		return true
	}
	if len(fs.consts) >= MaxDirectConsts {
		return false
	}
	p.record(k)
	return true
}

// record counts k as a constant of the current function.
func (p *parser) record(k constKey) {
	fs := p.fs
	if fs.consts == nil {
		fs.consts = make(map[constKey]struct{})
	}
	if _, ok := fs.consts[k]; ok {
		return
	}
	if len(fs.consts) >= maxConsts {
		p.lx.fail("constant table overflow", 0)
	}
	fs.consts[k] = struct{}{}
}

// stringConst returns an expression for the string constant s.
func (p *parser) stringConst(s string, line int) ast.Expr {
	if k := strKey(s); !p.room(k) {
		return p.pooled(k, lua.LString(s), line)
	}
	return stringConst(s, line)
}

// numberConst returns an expression for the number constant f.
func (p *parser) numberConst(f float64, line int) ast.Expr {
	if k := p.numKey(f); !p.room(k) {
		return p.pooled(k, lua.LNumber(f), line)
	}
	return numberLiteral(f, line)
}

// folded accounts for the constant gopher-lua makes of e, an arithmetic
// expression that its compiler folds when both operands are numbers
// (constFold): it returns e, or a pooled constant of the folded value when
// the function has no room for it.
func (p *parser) folded(e ast.Expr, line int) ast.Expr {
	f, ok := foldValue(e)
	if !ok {
		return e
	}
	if k := p.numKey(f); !p.room(k) {
		return p.pooled(k, lua.LNumber(f), line)
	}
	return e
}

// foldValue is the value gopher-lua's constFold gives e, if it folds it.
func foldValue(e ast.Expr) (float64, bool) {
	switch x := e.(type) {
	case *ast.NumberExpr:
		f, err := strconv.ParseFloat(x.Value, 64)
		return f, err == nil
	case *ast.UnaryMinusOpExpr:
		f, ok := foldValue(x.Expr)
		return -f, ok
	case *ast.ArithmeticOpExpr:
		a, ok1 := foldValue(x.Lhs)
		b, ok2 := foldValue(x.Rhs)
		if !ok1 || !ok2 {
			return 0, false
		}
		switch x.Operator {
		case "+":
			return a + b, true
		case "-":
			return a - b, true
		case "*":
			return a * b, true
		case "/":
			return a / b, true
		case "^":
			return math.Pow(a, b), true
		}
	}
	return 0, false
}

// global returns the expression that reads or assigns the global name: the
// name itself, or the globals table indexed by a pooled constant.
// A name as long as budget.BytesPerStep or longer is read through _G too, so
// that the weight of the read counts the hashing of the name (weight.go).
func (p *parser) global(name string, line int) ast.Expr {
	var e ast.Expr
	if len(name) < budget.BytesPerStep && p.room(strKey(name)) {
		e = &ast.IdentExpr{Value: name}
	} else {
		g := &ast.IdentExpr{Value: AliasPrefix + "_G"}
		g.SetLine(line)
		e = &ast.AttrGetExpr{Object: g, Key: p.stringConst(name, line)}
	}
	e.SetLine(line)
	return e
}

// pooled returns pool[a][b][c] for the pooled constant v.
func (p *parser) pooled(k constKey, v lua.LValue, line int) ast.Expr {
	i, ok := p.poolIndex[k]
	if !ok {
		if len(p.pool) == maxPooled {
			p.lx.fail("constant table overflow", 0)
		}
		if p.poolIndex == nil {
			p.poolIndex = make(map[constKey]int)
		}
		i = len(p.pool)
		p.pool = append(p.pool, v)
		p.poolIndex[k] = i
	}
	p.fs.pooled = true
	var e ast.Expr = &ast.IdentExpr{Value: PoolName}
	e.SetLine(line)
	for _, d := range [3]int{i / (PoolDigits * PoolDigits), i / PoolDigits % PoolDigits, i % PoolDigits} {
		f := float64(d + 1)
		p.record(p.numKey(f))
		get := &ast.AttrGetExpr{Object: e, Key: numberLiteral(f, line)}
		get.SetLine(line)
		e = get
	}
	return e
}

// digitsFirst puts the pool's digits first in the constant table of a
// function that reads the pool, where gopher-lua's search finds them soonest:
// it adds "if false then local _ = {1, 2, ..., PoolDigits} end" before the
// body, which compiles to code that never runs.
func (p *parser) digitsFirst(body []ast.Stmt) []ast.Stmt {
	if !p.fs.pooled {
		return body
	}
	line := 0
	if len(body) > 0 {
		line = body[0].Line()
	}
	digits := &ast.TableExpr{}
	for d := 1; d <= PoolDigits; d++ {
		digits.Fields = append(digits.Fields, &ast.Field{Value: numberLiteral(float64(d), line)})
	}
	digits.SetLine(line)
	local := &ast.LocalAssignStmt{Names: []string{"_"}, Exprs: []ast.Expr{digits}}
	local.SetLine(line)
	dead := &ast.IfStmt{Condition: &ast.FalseExpr{}, Then: []ast.Stmt{local}}
	dead.Condition.SetLine(line)
	dead.SetLine(line)
	return append([]ast.Stmt{dead}, body...)
}

// PoolTable builds the table a chunk's pooled constants are read from, the
// value of PoolName: nil when the pool is empty.
func PoolTable(L *lua.LState, pool []lua.LValue) lua.LValue {
	if len(pool) == 0 {
		return lua.LNil
	}
	top := L.CreateTable(0, 0)
	for i, v := range pool {
		a, b := i/(PoolDigits*PoolDigits)+1, i/PoolDigits%PoolDigits+1
		mid, ok := top.RawGetInt(a).(*lua.LTable)
		if !ok {
			mid = L.CreateTable(PoolDigits, 0)
			top.RawSetInt(a, mid)
		}
		leaf, ok := mid.RawGetInt(b).(*lua.LTable)
		if !ok {
			leaf = L.CreateTable(PoolDigits, 0)
			mid.RawSetInt(b, leaf)
		}
		leaf.RawSetInt(i%PoolDigits+1, v)
	}
	return top
}

package lua51

import (
	"github.com/lockserver/lockserver/luaexec/internal/budget"
	"github.com/yuin/gopher-lua/ast"
)

// The budget's charge for code: every function call and every loop
// iteration charges, on entry, the weight of the body it is about to run,
// so that a long body costs more than a short one and no single step can
// stand for an unbounded amount of work. The weight of a body is the number
// of operations it holds (statements, calls, table reads and writes,
// arithmetic, comparisons, table constructors and their fields, closures),
// counting every branch of an if whether it runs or not; a loop or function
// nested in it charges its own body when that runs. A string constant that
// an operation hashes or compares weighs its length as bytes do
// (budget.BytesPerStep), so that a megabyte-long field name costs what
// hashing it costs.
//
// What the weight cannot know, the length of a string known only when the
// script runs, is charged by helpers: cmp# for comparisons of two values
// neither of which is a constant, key# for a table read whose key is not a
// constant, setindex# and setfields# for stores, varg# for '...' expanded
// into a list of values.

// bodyWeight is what one run of a body charges: its statements and any
// expressions evaluated with it (a loop's condition), at least 1.
func bodyWeight(body []ast.Stmt, extra ...ast.Expr) int {
	w := 1 + stmtsWeight(body)
	for _, e := range extra {
		w += exprWeight(e)
	}
	return w
}

func stmtsWeight(stmts []ast.Stmt) int {
	w := 0
	for _, s := range stmts {
		w += stmtWeight(s)
	}
	return w
}

func exprsWeight(exprs []ast.Expr) int {
	w := 0
	for _, e := range exprs {
		w += exprWeight(e)
	}
	return w
}

func stmtWeight(s ast.Stmt) int {
	switch x := s.(type) {
	case *ast.AssignStmt:
		return len(x.Lhs) + exprsWeight(x.Lhs) + exprsWeight(x.Rhs)
	case *ast.LocalAssignStmt:
		return 1 + exprsWeight(x.Exprs)
	case *ast.FuncCallStmt:
		return exprWeight(x.Expr)
	case *ast.DoBlockStmt:
		return 1 + stmtsWeight(x.Stmts)
	case *ast.WhileStmt:
		return 1 + exprWeight(x.Condition) // the body charges itself
	case *ast.RepeatStmt:
		return 1
	case *ast.IfStmt:
		return 1 + exprWeight(x.Condition) + stmtsWeight(x.Then) + stmtsWeight(x.Else)
	case *ast.NumberForStmt:
		return 1 + exprWeight(x.Init) + exprWeight(x.Limit) + exprWeight(x.Step)
	case *ast.GenericForStmt:
		return 1 + exprsWeight(x.Exprs)
	case *ast.FuncDefStmt:
		w := 1 + exprWeight(x.Name.Func) + exprWeight(x.Name.Receiver)
		return w + len(x.Name.Method)/budget.BytesPerStep
	case *ast.ReturnStmt:
		return 1 + exprsWeight(x.Exprs)
	}
	return 1
}

func exprWeight(e ast.Expr) int {
	switch x := e.(type) {
	case nil, *ast.NilExpr, *ast.TrueExpr, *ast.FalseExpr, *ast.NumberExpr, *ast.Comma3Expr:
		return 0
	case *ast.StringExpr:
		return len(x.Value) / budget.BytesPerStep
	case *ast.IdentExpr:
		return 0 // a global with a long name is read through _G (see global)
	case *ast.AttrGetExpr:
		return 1 + exprWeight(x.Object) + exprWeight(x.Key)
	case *ast.TableExpr:
		w := 1
		for _, f := range x.Fields {
			w += 1 + exprWeight(f.Key) + exprWeight(f.Value)
		}
		return w
	case *ast.FuncCallExpr:
		w := 1 + exprWeight(x.Func) + exprWeight(x.Receiver) + exprsWeight(x.Args)
		return w + len(x.Method)/budget.BytesPerStep
	case *ast.LogicalOpExpr:
		return 1 + exprWeight(x.Lhs) + exprWeight(x.Rhs)
	case *ast.RelationalOpExpr:
		return 1 + exprWeight(x.Lhs) + exprWeight(x.Rhs)
	case *ast.StringConcatOpExpr:
		return 1 + exprWeight(x.Lhs) + exprWeight(x.Rhs)
	case *ast.ArithmeticOpExpr:
		return 1 + exprWeight(x.Lhs) + exprWeight(x.Rhs)
	case *ast.UnaryMinusOpExpr:
		return exprWeight(x.Expr) // a folded constant
	case *ast.UnaryNotOpExpr:
		return 1 + exprWeight(x.Expr)
	case *ast.UnaryLenOpExpr:
		return 1 + exprWeight(x.Expr)
	case *ast.FunctionExpr:
		return 1 // its body charges itself when called
	}
	return 1
}

// cheapOperand reports whether comparing anything with e, or reading a
// table with e as key, costs at most the weight of e: e is a constant.
func cheapOperand(e ast.Expr) bool {
	switch x := e.(type) {
	case *ast.NilExpr, *ast.TrueExpr, *ast.FalseExpr, *ast.NumberExpr, *ast.StringExpr:
		return true
	case *ast.UnaryMinusOpExpr:
		_, ok := x.Expr.(*ast.NumberExpr)
		return ok
	}
	return false
}

// Operators of cmp#, its third argument, in Lua's order of the comparison
// operators: the engine computes a > b and a >= b as b < a and b <= a, at
// the same distance CmpGt-CmpLt.
const (
	CmpEq = iota
	CmpNe
	CmpLt
	CmpLe
	CmpGt
	CmpGe
)

var cmpOps = map[int]int{opEq: CmpEq, opNe: CmpNe, opLt: CmpLt, opLe: CmpLe, opGt: CmpGt, opGe: CmpGe}

// compare builds lhs op rhs: natively when one side is a constant, else as
// a call of cmp#, which charges for comparing two strings.
func (p *parser) compare(op int, lhs, rhs ast.Expr, line int) ast.Expr {
	if cheapOperand(lhs) || cheapOperand(rhs) {
		e := &ast.RelationalOpExpr{Operator: opText[op], Lhs: lhs, Rhs: rhs}
		e.SetLine(line)
		return e
	}
	return helperCall(HelperCmp, line, lhs, rhs, p.numberConst(float64(cmpOps[op]), line))
}

// chargedKey returns the key of a table read: itself when it is a
// constant, else wrapped in key#, which charges for hashing it.
func chargedKey(key ast.Expr, line int) ast.Expr {
	if cheapOperand(key) {
		return key
	}
	return helperCall(HelperKey, line, key)
}

// storedKey undoes chargedKey for the target of an assignment, which
// setindex# charges.
func storedKey(e ast.Expr) ast.Expr {
	if a, ok := e.(*ast.AttrGetExpr); ok {
		if c, ok := a.Key.(*ast.FuncCallExpr); ok && isHelper(c, HelperKey) {
			a.Key = c.Args[0]
		}
	}
	return e
}

// spread wraps a '...' that ends a list of values (arguments, results, a
// constructor's fields) in varg#, which charges for the values it expands to.
func spread(list []ast.Expr, line int) {
	if n := len(list); n > 0 {
		if d, ok := list[n-1].(*ast.Comma3Expr); ok && !d.AdjustRet {
			call := helperCall(HelperVarg, line, d)
			call.AdjustRet = false
			list[n-1] = call
		}
	}
}

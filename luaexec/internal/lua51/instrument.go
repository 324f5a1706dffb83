package lua51

import (
	"strconv"

	"github.com/lockserver/lockserver/luaexec/internal/clib"
	"github.com/yuin/gopher-lua/ast"
)

// The pieces of instrumentation that statements and expressions share:
// helper calls, the budget's charge at the top of a body, and constants.

// helperCall builds a call of a helper that returns exactly one value.
func helperCall(name string, line int, args ...ast.Expr) *ast.FuncCallExpr {
	fn := &ast.IdentExpr{Value: name}
	fn.SetLine(line)
	call := &ast.FuncCallExpr{Func: fn, Args: args, AdjustRet: true}
	call.SetLine(line)
	return call
}

// withBudget puts a budget charge at the top of a function or loop body,
// carrying the line of the statement it instruments: the body's weight, with
// the expressions evaluated with each run of it (weight.go).
func (p *parser) withBudget(line int, body []ast.Stmt, extra ...ast.Expr) []ast.Stmt {
	call := helperCall(HelperBudget, line, p.numberConst(float64(bodyWeight(body, extra...)), line))
	call.AdjustRet = false
	stmt := &ast.FuncCallStmt{Expr: call}
	stmt.SetLine(line)
	return append([]ast.Stmt{stmt}, body...)
}

// isNumberConst reports whether e is a numeric literal, possibly negated.
func isNumberConst(e ast.Expr) bool {
	switch x := e.(type) {
	case *ast.NumberExpr:
		return true
	case *ast.UnaryMinusOpExpr:
		_, ok := x.Expr.(*ast.NumberExpr)
		return ok
	}
	return false
}

// constString returns the string a constant contributes to a concatenation.
func constString(e ast.Expr) (string, bool) {
	switch x := e.(type) {
	case *ast.StringExpr:
		return x.Value, true
	case *ast.NumberExpr:
		f, _ := strconv.ParseFloat(x.Value, 64)
		return clib.FormatNumber(f), true
	}
	return "", false
}

func stringConst(s string, line int) *ast.StringExpr {
	e := &ast.StringExpr{Value: s}
	e.SetLine(line)
	return e
}

// concat builds lhs .. rhs as one call of the concat helper over all the
// operands of a chain, folding adjacent constants.
func (p *parser) concat(lhs, rhs ast.Expr, line int) ast.Expr {
	var ops []ast.Expr
	if c, ok := rhs.(*ast.FuncCallExpr); ok && isHelper(c, HelperConcat) {
		ops = c.Args
	} else {
		ops = []ast.Expr{rhs}
	}
	if a, ok := constString(lhs); ok {
		if b, ok := constString(ops[0]); ok {
			if len(ops) == 1 {
				return p.stringConst(a+b, line)
			}
			return helperCall(HelperConcat, line, append([]ast.Expr{p.stringConst(a+b, line)}, ops[1:]...)...)
		}
	}
	return helperCall(HelperConcat, line, append([]ast.Expr{lhs}, ops...)...)
}

func isHelper(c *ast.FuncCallExpr, name string) bool {
	id, ok := c.Func.(*ast.IdentExpr)
	return ok && id.Value == name
}

// numberLiteral builds a number constant that gopher-lua's compiler reads
// back to exactly f.
func numberLiteral(f float64, line int) *ast.NumberExpr {
	e := &ast.NumberExpr{Value: strconv.FormatFloat(f, 'g', -1, 64)}
	e.SetLine(line)
	return e
}

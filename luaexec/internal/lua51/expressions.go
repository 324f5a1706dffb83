package lua51

import "github.com/yuin/gopher-lua/ast"

// Expressions as lparser.c parses them, with Lua 5.1's priorities. The
// operators whose semantics or cost gopher-lua's VM does not give as Lua
// 5.1 and the budget need become helper calls.

// expr is an expression being parsed, and what it may be used as.
type expr struct {
	e    ast.Expr
	kind exprKind
}

func (p *parser) exprList() []ast.Expr {
	list := []ast.Expr{p.expr()}
	for p.testNext(',') {
		list = append(list, p.expr())
	}
	return list
}

func (p *parser) expr() ast.Expr {
	e, _ := p.subExpr(0)
	return e
}

func (p *parser) prefixExp() expr {
	switch p.tok() {
	case '(':
		line := p.lx.line
		p.lx.advance()
		e := p.expr()
		p.checkMatch(')', '(', line)
		// Parentheses keep one value and make the expression a value, not a variable.
		switch x := e.(type) {
		case *ast.FuncCallExpr:
			x.AdjustRet = true
		case *ast.Comma3Expr:
			x.AdjustRet = true
		}
		return expr{e: e}
	case tkName:
		line := p.lx.line
		name := p.checkName()
		if p.resolve(name) {
			if !p.aliases.has(AliasPrefix + name) {
				return expr{e: p.global(name, line), kind: exVar}
			}
			name = AliasPrefix + name // read as a local; see Aliases
		}
		id := &ast.IdentExpr{Value: name}
		id.SetLine(line)
		return expr{e: id, kind: exVar}
	}
	p.lx.syntaxError("unexpected symbol")
	return expr{}
}

func (p *parser) primaryExp() expr {
	e := p.prefixExp()
	for {
		switch p.tok() {
		case '.':
			p.lx.advance()
			name := p.checkName()
			if id, ok := e.e.(*ast.IdentExpr); ok && p.aliases.has(id.Value+"."+name) {
				alias := &ast.IdentExpr{Value: id.Value + "." + name} // see Aliases
				alias.SetLine(p.lx.lastLine)
				e = expr{e: alias, kind: exVar}
				continue
			}
			get := &ast.AttrGetExpr{Object: e.e, Key: p.stringConst(name, p.lx.lastLine)}
			get.SetLine(p.lx.lastLine)
			e = expr{e: get, kind: exVar}
		case '[':
			p.lx.advance()
			key := p.expr()
			p.checkNext(']')
			get := &ast.AttrGetExpr{Object: e.e, Key: chargedKey(key, p.lx.lastLine)}
			get.SetLine(p.lx.lastLine)
			e = expr{e: get, kind: exVar}
		case ':':
			p.lx.advance()
			method := p.checkName()
			p.record(strKey(method))
			args, line := p.funcArgs()
			call := &ast.FuncCallExpr{Receiver: e.e, Method: method, Args: args}
			call.SetLine(line)
			e = expr{e: call, kind: exCall}
		case '(', tkString, '{':
			args, line := p.funcArgs()
			call := &ast.FuncCallExpr{Func: e.e, Args: args}
			call.SetLine(line)
			e = expr{e: call, kind: exCall}
		default:
			return e
		}
	}
}

func (p *parser) funcArgs() ([]ast.Expr, int) {
	line := p.lx.line
	switch p.tok() {
	case '(':
		if line != p.lx.lastLine {
			p.lx.syntaxError("ambiguous syntax (function call x new statement)")
		}
		p.lx.advance()
		args := []ast.Expr{}
		if p.tok() != ')' {
			args = p.exprList()
			spread(args, line)
		}
		p.checkMatch(')', '(', line)
		return args, line
	case '{':
		return []ast.Expr{p.constructor()}, line
	case tkString:
		s := p.stringConst(p.lx.t.str, line)
		p.lx.advance()
		return []ast.Expr{s}, line
	}
	p.lx.syntaxError("function arguments expected")
	return nil, 0
}

func (p *parser) simpleExp() ast.Expr {
	line := p.lx.line
	var e ast.Expr
	switch p.tok() {
	case tkNumber:
		e = p.numberConst(p.lx.t.num, line)
	case tkString:
		e = p.stringConst(p.lx.t.str, line)
	case tkNil:
		e = &ast.NilExpr{}
	case tkTrue:
		e = &ast.TrueExpr{}
	case tkFalse:
		e = &ast.FalseExpr{}
	case tkDots:
		if !p.fs.vararg {
			p.lx.syntaxError("cannot use '...' outside a vararg function")
		}
		p.fs.usesDots = true
		e = &ast.Comma3Expr{}
	case '{':
		return p.constructor()
	case tkFunction:
		p.lx.advance()
		return p.body(false, p.lx.line)
	default:
		return p.primaryExp().e
	}
	e.SetLine(line)
	p.lx.advance()
	return e
}

func (p *parser) constructor() ast.Expr {
	line := p.lx.line
	p.checkNext('{')
	t := &ast.TableExpr{Fields: []*ast.Field{}}
	t.SetLine(line)
	for p.tok() != '}' {
		switch p.tok() {
		case tkName:
			p.lx.lookahead()
			if p.lx.ahead.kind != '=' {
				t.Fields = append(t.Fields, &ast.Field{Value: p.expr()})
			} else {
				t.Fields = append(t.Fields, p.recField())
			}
		case '[':
			t.Fields = append(t.Fields, p.recField())
		default:
			t.Fields = append(t.Fields, &ast.Field{Value: p.expr()})
		}
		if !p.testNext(',') && !p.testNext(';') {
			break
		}
	}
	p.checkMatch('}', '{', line)
	if n := len(t.Fields); n > 0 && t.Fields[n-1].Key == nil {
		values := []ast.Expr{t.Fields[n-1].Value}
		spread(values, line)
		t.Fields[n-1].Value = values[0]
	}
	// Fields whose keys are not constants are stored by a helper after the
	// constant ones, for the reason given at assignment. Only the last field
	// of the constructor expands a call or '...' into several values: a
	// value that is last only once the others have moved keeps one.
	var kept []*ast.Field
	var moved []ast.Expr
	for _, f := range t.Fields {
		if f.Key != nil && !isConstKey(f.Key) {
			moved = append(moved, f.Key, oneValue(f.Value))
		} else {
			kept = append(kept, f)
		}
	}
	if len(moved) == 0 {
		return t
	}
	if n := len(kept); n > 0 && kept[n-1] != t.Fields[len(t.Fields)-1] {
		kept[n-1].Value = oneValue(kept[n-1].Value)
	}
	t.Fields = kept
	return helperCall(HelperSetFlds, line, append([]ast.Expr{t}, moved...)...)
}

// oneValue makes e, a call or '...', give one value, as in parentheses.
func oneValue(e ast.Expr) ast.Expr {
	switch x := e.(type) {
	case *ast.FuncCallExpr:
		x.AdjustRet = true
	case *ast.Comma3Expr:
		x.AdjustRet = true
	}
	return e
}

func (p *parser) recField() *ast.Field {
	var key ast.Expr
	if p.tok() == tkName {
		key = p.stringConst(p.checkName(), p.lx.lastLine)
	} else {
		p.lx.advance() // '['
		key = p.expr()
		p.checkNext(']')
	}
	p.checkNext('=')
	return &ast.Field{Key: key, Value: p.expr()}
}

// Operators, with Lua 5.1's priorities.
const (
	opNone = iota
	opAdd
	opSub
	opMul
	opDiv
	opMod
	opPow
	opConcat
	opNe
	opEq
	opLt
	opLe
	opGt
	opGe
	opAnd
	opOr
)

var priority = [...]struct{ left, right int }{
	opAdd: {6, 6}, opSub: {6, 6}, opMul: {7, 7}, opDiv: {7, 7}, opMod: {7, 7},
	opPow: {10, 9}, opConcat: {5, 4},
	opNe: {3, 3}, opEq: {3, 3}, opLt: {3, 3}, opLe: {3, 3}, opGt: {3, 3}, opGe: {3, 3},
	opAnd: {2, 2}, opOr: {1, 1},
}

const unaryPriority = 8

func binaryOp(k int) int {
	switch k {
	case '+':
		return opAdd
	case '-':
		return opSub
	case '*':
		return opMul
	case '/':
		return opDiv
	case '%':
		return opMod
	case '^':
		return opPow
	case tkConcat:
		return opConcat
	case tkNe:
		return opNe
	case tkEq:
		return opEq
	case '<':
		return opLt
	case tkLe:
		return opLe
	case '>':
		return opGt
	case tkGe:
		return opGe
	case tkAnd:
		return opAnd
	case tkOr:
		return opOr
	}
	return opNone
}

var opText = [...]string{
	opAdd: "+", opSub: "-", opMul: "*", opDiv: "/", opMod: "%", opPow: "^",
	opNe: "~=", opEq: "==", opLt: "<", opLe: "<=", opGt: ">", opGe: ">=",
	opAnd: "and", opOr: "or",
}

func (p *parser) subExpr(limit int) (ast.Expr, int) {
	p.enterLevel()
	var e ast.Expr
	switch k := p.tok(); k {
	case tkNot, '-', '#':
		p.lx.advance()
		operand, _ := p.subExpr(unaryPriority)
		line := p.lx.lastLine
		switch k {
		case tkNot:
			e = &ast.UnaryNotOpExpr{Expr: operand}
		case '#':
			if _, ok := operand.(*ast.StringExpr); ok {
				e = &ast.UnaryLenOpExpr{Expr: operand}
			} else {
				e = helperCall(HelperLen, line, operand)
			}
		default:
			if _, ok := operand.(*ast.NumberExpr); ok {
				e = &ast.UnaryMinusOpExpr{Expr: operand} // folded by the compiler, -0 included
			} else {
				e = helperCall(HelperNeg, line, operand)
			}
		}
		e.SetLine(line)
		e = p.folded(e, line)
	default:
		e = p.simpleExp()
	}
	op := binaryOp(p.tok())
	for n := 0; op != opNone && priority[op].left > limit; n++ {
		if n == maxChain/5 {
			p.lx.fail("chunk has too many syntax levels", 0)
		}
		p.lx.advance()
		rhs, next := p.subExpr(priority[op].right)
		line := p.lx.lastLine
		switch op {
		case opConcat:
			e = p.concat(e, rhs, line)
		case opMod:
			e = helperCall(HelperMod, line, e, rhs)
		case opAnd, opOr:
			e = &ast.LogicalOpExpr{Operator: opText[op], Lhs: e, Rhs: rhs}
		case opNe, opEq, opLt, opLe, opGt, opGe:
			e = p.compare(op, e, rhs, line)
		default:
			e = &ast.ArithmeticOpExpr{Operator: opText[op], Lhs: e, Rhs: rhs}
		}
		e.SetLine(line)
		e = p.folded(e, line)
		op = next
	}
	p.leaveLevel()
	return e, op
}

package lua51

import (
	"strconv"

	"github.com/yuin/gopher-lua/ast"
)

// Statements as lparser.c parses them, and the bodies of the functions that
// statements and expressions define. Loops and functions get the budget's
// charge at the top of their bodies, and stores whose keys may be large
// integers go through setindex#.

func (p *parser) chunk() []ast.Stmt {
	p.enterLevel()
	var stmts []ast.Stmt
	for last := false; !last && !blockFollow(p.tok()); {
		var s ast.Stmt
		s, last = p.statement()
		stmts = append(stmts, s)
		p.testNext(';')
	}
	p.leaveLevel()
	return stmts
}

func (p *parser) block() []ast.Stmt {
	p.enterBlock(false)
	stmts := p.chunk()
	p.leaveBlock()
	return stmts
}

func (p *parser) statement() (ast.Stmt, bool) {
	line := p.lx.line
	switch p.tok() {
	case tkIf:
		return p.ifStat(line), false
	case tkWhile:
		return p.whileStat(line), false
	case tkDo:
		p.lx.advance()
		body := p.block()
		p.checkMatch(tkEnd, tkDo, line)
		s := &ast.DoBlockStmt{Stmts: body}
		s.SetLine(line)
		s.SetLastLine(p.lx.lastLine)
		return s, false
	case tkFor:
		return p.forStat(line), false
	case tkRepeat:
		return p.repeatStat(line), false
	case tkFunction:
		return p.funcStat(line), false
	case tkLocal:
		p.lx.advance()
		if p.testNext(tkFunction) {
			return p.localFunc(line), false
		}
		return p.localStat(line), false
	case tkReturn:
		return p.retStat(), true
	case tkBreak:
		p.lx.advance()
		for b := p.fs.block; ; b = b.parent {
			if b == nil {
				p.lx.syntaxError("no loop to break")
			}
			if b.breakable {
				break
			}
		}
		s := &ast.BreakStmt{}
		s.SetLine(line)
		return s, true
	}
	return p.exprStat(), false
}

func (p *parser) testThenBlock(line int) *ast.IfStmt {
	p.lx.advance() // IF or ELSEIF
	cond := p.expr()
	p.checkNext(tkThen)
	s := &ast.IfStmt{Condition: cond, Then: p.block()}
	s.SetLine(line)
	return s
}

func (p *parser) ifStat(line int) ast.Stmt {
	root := p.testThenBlock(line)
	cur := root
	for n := 0; p.tok() == tkElseif; n++ {
		if n == maxChain {
			p.lx.fail("chunk has too many syntax levels", 0)
		}
		next := p.testThenBlock(p.lx.line)
		cur.Else = []ast.Stmt{next}
		cur = next
	}
	if p.testNext(tkElse) {
		cur.Else = p.block()
	}
	p.checkMatch(tkEnd, tkIf, line)
	root.SetLastLine(p.lx.lastLine)
	return root
}

func (p *parser) whileStat(line int) ast.Stmt {
	p.lx.advance()
	cond := p.expr()
	p.enterBlock(true)
	p.checkNext(tkDo)
	body := p.block()
	p.leaveBlock()
	p.checkMatch(tkEnd, tkWhile, line)
	s := &ast.WhileStmt{Condition: cond, Stmts: p.withBudget(line, body, cond)}
	s.SetLine(line)
	s.SetLastLine(p.lx.lastLine)
	return s
}

func (p *parser) repeatStat(line int) ast.Stmt {
	p.enterBlock(true)  // the loop, for break
	p.enterBlock(false) // the scope, which the condition sees
	p.lx.advance()
	body := p.chunk()
	p.checkMatch(tkUntil, tkRepeat, line)
	cond := p.expr()
	p.leaveBlock()
	p.leaveBlock()
	s := &ast.RepeatStmt{Condition: cond, Stmts: p.withBudget(line, body, cond)}
	s.SetLine(line)
	s.SetLastLine(p.lx.lastLine)
	return s
}

func (p *parser) forStat(line int) ast.Stmt {
	p.enterBlock(true)
	p.lx.advance()
	name := p.checkName()
	var s ast.Stmt
	switch p.tok() {
	case '=':
		s = p.forNum(name, line)
	case ',', tkIn:
		s = p.forList(name, line)
	default:
		p.lx.syntaxError("'=' or 'in' expected")
	}
	p.checkMatch(tkEnd, tkFor, line)
	p.leaveBlock()
	s.SetLastLine(p.lx.lastLine)
	return s
}

// forBound wraps a numeric for's bound in its coercing helper unless it is a
// number constant: Lua 5.1 converts numeric strings there, gopher-lua does not.
func forBound(helper string, e ast.Expr, line int) ast.Expr {
	if e == nil || isNumberConst(e) {
		return e
	}
	return helperCall(helper, line, e)
}

func (p *parser) forNum(name string, line int) ast.Stmt {
	p.newLocal("(for index)", 0)
	p.newLocal("(for limit)", 1)
	p.newLocal("(for step)", 2)
	p.newLocal(name, 3)
	p.checkNext('=')
	init := p.expr()
	p.checkNext(',')
	limit := p.expr()
	var step ast.Expr
	if p.testNext(',') {
		step = p.expr()
	} else {
		step = p.numberConst(1, line) // what gopher-lua's compiler adds
	}
	body := p.forBody(1)
	s := &ast.NumberForStmt{
		Name:  name,
		Init:  forBound(HelperForInit, init, line),
		Limit: forBound(HelperForLimit, limit, line),
		Step:  forBound(HelperForStep, step, line),
		Stmts: p.withBudget(line, body),
	}
	s.SetLine(line)
	return s
}

func (p *parser) forList(first string, line int) ast.Stmt {
	p.newLocal("(for generator)", 0)
	p.newLocal("(for state)", 1)
	p.newLocal("(for control)", 2)
	names := []string{first}
	p.newLocal(first, 3)
	for p.testNext(',') {
		n := p.checkName()
		p.newLocal(n, len(names)+3)
		names = append(names, n)
	}
	p.checkNext(tkIn)
	exprs := p.exprList()
	body := p.forBody(len(names))
	s := &ast.GenericForStmt{Names: names, Exprs: exprs, Stmts: p.withBudget(line, body)}
	s.SetLine(line)
	return s
}

func (p *parser) forBody(nvars int) []ast.Stmt {
	p.activate(3)
	p.checkNext(tkDo)
	p.enterBlock(false)
	p.activate(nvars)
	body := p.block()
	p.leaveBlock()
	return body
}

func (p *parser) funcStat(line int) ast.Stmt {
	p.lx.advance()
	// funcname -> NAME {'.' NAME} [':' NAME]
	nameLine := p.lx.line
	name := p.checkName()
	var target ast.Expr = &ast.IdentExpr{Value: name}
	if p.resolve(name) {
		target = p.global(name, nameLine)
	}
	target.SetLine(nameLine)
	fname := &ast.FuncName{}
	for p.tok() == '.' {
		p.lx.advance()
		key := p.stringConst(p.checkName(), p.lx.line)
		get := &ast.AttrGetExpr{Object: target, Key: key}
		get.SetLine(p.lx.line)
		target = get
	}
	method := false
	if p.testNext(':') {
		fname.Receiver = target
		fname.Method = p.checkName()
		p.record(strKey(fname.Method))
		method = true
	} else {
		fname.Func = target
	}
	fn := p.body(method, line)
	s := &ast.FuncDefStmt{Name: fname, Func: fn}
	s.SetLine(line)
	s.SetLastLine(fn.LastLine())
	return s
}

func (p *parser) localFunc(line int) ast.Stmt {
	name := p.checkName()
	p.newLocal(name, 0)
	p.activate(1)
	fn := p.body(false, p.lx.line)
	s := &ast.LocalAssignStmt{Names: []string{name}, Exprs: []ast.Expr{fn}}
	s.SetLine(line)
	s.SetLastLine(fn.LastLine())
	return s
}

func (p *parser) localStat(line int) ast.Stmt {
	var names []string
	for {
		n := p.checkName()
		p.newLocal(n, len(names))
		names = append(names, n)
		if !p.testNext(',') {
			break
		}
	}
	exprs := []ast.Expr{}
	if p.testNext('=') {
		exprs = p.exprList()
	}
	p.activate(len(names))
	s := &ast.LocalAssignStmt{Names: names, Exprs: exprs}
	s.SetLine(p.lx.lastLine)
	return s
}

func (p *parser) exprStat() ast.Stmt {
	first := p.primaryExp()
	if first.kind == exCall {
		s := &ast.FuncCallStmt{Expr: first.e}
		s.SetLine(first.e.Line())
		return s
	}
	var lhs []ast.Expr
	cur := first
	for n := 1; ; n++ {
		if cur.kind != exVar {
			p.lx.syntaxError("syntax error")
		}
		lhs = append(lhs, storedKey(p.unalias(cur.e)))
		if !p.testNext(',') {
			break
		}
		cur = p.primaryExp()
		if n > maxSyntaxLevels-p.level {
			p.errorLimit(p.fs, maxSyntaxLevels-p.level, "variables in assignment")
		}
	}
	p.checkNext('=')
	rhs := p.exprList()
	return assignment(lhs, rhs, p.lx.lastLine)
}

// smallIndex bounds the constant integer keys that are stored natively: a
// store to a larger key may make gopher-lua fill a gap of the array part,
// which setindex# charges.
const smallIndex = 1024

// isConstKey reports whether a key is a constant that cannot make gopher-lua
// fill a large gap of the array part.
func isConstKey(e ast.Expr) bool {
	switch k := e.(type) {
	case *ast.StringExpr:
		return true
	case *ast.NumberExpr:
		f, _ := strconv.ParseFloat(k.Value, 64)
		return f <= smallIndex
	}
	return false
}

// assignment builds lhs = rhs. Stores to t[k] with a key that is not a
// small constant go through the setindex helper: gopher-lua would fill
// the gap up to a large integer key with nils, unbudgeted. With several
// targets, the tables, keys and values are first evaluated into hidden
// locals (in Lua's order: targets left to right, then values) and stored
// from the last target to the first, as Lua 5.1 does.
func assignment(lhs, rhs []ast.Expr, line int) ast.Stmt {
	dynamic := false
	for _, l := range lhs {
		if a, ok := l.(*ast.AttrGetExpr); ok && !isConstKey(a.Key) {
			dynamic = true
		}
	}
	if !dynamic {
		s := &ast.AssignStmt{Lhs: lhs, Rhs: rhs}
		s.SetLine(line)
		return s
	}
	if len(lhs) == 1 && len(rhs) == 1 {
		a := lhs[0].(*ast.AttrGetExpr)
		call := helperCall(HelperSetIndex, line, a.Object, a.Key, rhs[0])
		call.AdjustRet = false
		s := &ast.FuncCallStmt{Expr: call}
		s.SetLine(line)
		return s
	}
	ident := func(name string) ast.Expr {
		id := &ast.IdentExpr{Value: name}
		id.SetLine(line)
		return id
	}
	var targetNames []string
	var targetExprs []ast.Expr
	values := make([]string, len(lhs))
	for i, l := range lhs {
		values[i] = "v#" + strconv.Itoa(i)
		if a, ok := l.(*ast.AttrGetExpr); ok {
			t, k := "t#"+strconv.Itoa(i), "k#"+strconv.Itoa(i)
			targetNames = append(targetNames, t, k)
			targetExprs = append(targetExprs, a.Object, a.Key)
		}
	}
	var stmts []ast.Stmt
	if len(targetNames) > 0 {
		s := &ast.LocalAssignStmt{Names: targetNames, Exprs: targetExprs}
		s.SetLine(line)
		stmts = append(stmts, s)
	}
	vs := &ast.LocalAssignStmt{Names: values, Exprs: rhs}
	vs.SetLine(line)
	stmts = append(stmts, vs)
	for i := len(lhs) - 1; i >= 0; i-- {
		var s ast.Stmt
		if _, ok := lhs[i].(*ast.AttrGetExpr); ok {
			idx := strconv.Itoa(i)
			call := helperCall(HelperSetIndex, line, ident("t#"+idx), ident("k#"+idx), ident(values[i]))
			call.AdjustRet = false
			s = &ast.FuncCallStmt{Expr: call}
		} else {
			s = &ast.AssignStmt{Lhs: []ast.Expr{lhs[i]}, Rhs: []ast.Expr{ident(values[i])}}
		}
		s.SetLine(line)
		stmts = append(stmts, s)
	}
	block := &ast.DoBlockStmt{Stmts: stmts}
	block.SetLine(line)
	block.SetLastLine(line)
	return block
}

func (p *parser) retStat() ast.Stmt {
	p.lx.advance()
	var exprs []ast.Expr
	if !blockFollow(p.tok()) && p.tok() != ';' {
		exprs = p.exprList()
		spread(exprs, p.lx.lastLine)
	}
	s := &ast.ReturnStmt{Exprs: exprs}
	s.SetLine(p.lx.lastLine)
	return s
}

// ---- functions ----

func (p *parser) body(method bool, line int) *ast.FunctionExpr {
	p.lx.extra += functionWeight
	p.lx.checkWork()
	fs := &funcState{parent: p.fs, line: line}
	p.fs = fs
	p.enterBlock(false)
	p.checkNext('(')
	if method {
		p.newLocal("self", 0)
		p.activate(1)
	}
	params := &ast.ParList{Names: []string{}}
	n := 0
	if p.tok() != ')' {
		for {
			switch p.tok() {
			case tkName:
				name := p.checkName()
				p.newLocal(name, n)
				params.Names = append(params.Names, name)
				n++
			case tkDots:
				p.lx.advance()
				p.newLocal("arg", n) // LUA_COMPAT_VARARG's implicit 'arg'
				n++
				params.HasVargs = true
				fs.vararg = true
			default:
				p.lx.syntaxError("<name> or '...' expected")
			}
			if fs.vararg || !p.testNext(',') {
				break
			}
		}
	}
	p.activate(n)
	p.checkNext(')')
	stmts := p.chunk()
	last := p.lx.line
	p.checkMatch(tkEnd, tkFunction, line)
	p.fs = fs.parent
	fn := &ast.FunctionExpr{ParList: params, Stmts: p.withBudget(line, p.digitsFirst(stmts))}
	fn.SetLine(line)
	fn.SetLastLine(last)
	return fn
}

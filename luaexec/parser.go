package luaexec

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/lockserver/lockserver/luaexec/internal/clib"
	lua "github.com/yuin/gopher-lua"
	"github.com/yuin/gopher-lua/ast"
)

// Lua 5.1's limits (luaconf.h, llimits.h), which decide which scripts compile.
const (
	maxSyntaxLevels = 200 // LUAI_MAXCCALLS
	maxLocals       = 200 // LUAI_MAXVARS
	maxUpvalues     = 60  // LUAI_MAXUPVALUES
	// maxChain bounds the chains that Lua 5.1 parses iteratively but that
	// become a deep AST here (a+b+c+..., elseif ...): gopher-lua's compiler
	// recurses over the AST, about 700 bytes of Go stack per level.
	maxChain = 1000
)

// Names of the helpers that instrumented code calls. They are locals of the
// wrapper chunk (see compile.go), reached as upvalues. A '#' cannot appear in
// a Lua name, so no script can name, shadow or reassign them.
const (
	hBudget   = "budget#"    // charges a body's weight; at the top of every function and loop body
	hConcat   = "concat#"    // a .. b .. c, with Lua 5.1's number formatting and a size charge
	hNeg      = "neg#"       // unary minus with Lua 5.1's string coercion
	hMod      = "mod#"       // a % b as Lua 5.1 computes it: a - floor(a/b)*b
	hForInit  = "forinit#"   // numeric for: coerce the initial value as Lua 5.1 does
	hForLimit = "forlimit#"  // numeric for: coerce the limit
	hForStep  = "forstep#"   // numeric for: coerce the step
	hSetIndex = "setindex#"  // t[k] = v where k may be a large integer (see arith.go)
	hSetFlds  = "setfields#" // table constructor fields whose keys are not constants
	hLen      = "len#"       // the length operator, charged for gopher-lua's scans (tables.go)
	hCmp      = "cmp#"       // a comparison of two values neither of which is a constant (weight.go)
	hKey      = "key#"       // the key of a table read that is not a constant (weight.go)
	hVarg     = "varg#"      // '...' expanded into a list of values (weight.go)
)

// helperNames lists the helpers in the order the wrapper chunk receives them.
var helperNames = []string{hBudget, hConcat, hNeg, hMod, hForInit, hForLimit, hForStep, hSetIndex, hSetFlds, hLen, hCmp, hKey, hVarg}

// aliasedGlobals are the globals that scripts read as upvalues of the
// wrapper chunk rather than through the sandbox: every global the VM
// defines. A global read costs two map look-ups behind the read-only proxy
// (its metatable, then the hidden table): a fifth of the instructions of
// Redisson's lock script.
// The values are the same: globals cannot be assigned, KEYS and ARGV are set
// for each script (vm.exec), and the rest never change. A script local of
// the same name shadows the alias as it would the global; an assignment to
// the name is still a store to the globals, refused as before. The alias is
// the name behind aliasPrefix, which no Lua name can contain; funcName
// strips it from the names messages give functions.
var aliasedGlobals = []string{
	"ARGV", "KEYS", "_G", "_VERSION", "assert", "bit", "cjson", "cmsgpack", "collectgarbage",
	"coroutine", "error", "gcinfo", "getmetatable", "ipairs", "load", "loadstring", "math",
	"next", "pairs", "pcall", "rawequal", "rawget", "rawset", "redis", "select", "setmetatable",
	"string", "struct", "table", "tonumber", "tostring", "type", "unpack", "xpcall",
}

// aliasedFields are library functions read as upvalues in the same way when
// a script names them as lib.name, lib being the aliased global: libraries
// are read-only, and these are what lock scripts call.
var aliasedFields = []string{"redis.call", "redis.pcall"}

const aliasPrefix = "g#"

// aliases holds the name of every alias, prefix included.
var aliases = func() map[string]bool {
	m := make(map[string]bool)
	for _, name := range append(aliasedGlobals, aliasedFields...) {
		m[aliasPrefix+name] = true
	}
	return m
}()

// wrapperLocals are the locals of the wrapper chunk: the helpers, then the
// aliases of the globals and of the fields, then the constant pool.
var wrapperLocals = func() []string {
	names := append([]string(nil), helperNames...)
	for _, name := range append(aliasedGlobals, aliasedFields...) {
		names = append(names, aliasPrefix+name)
	}
	return append(names, hPool)
}()

// unalias turns an alias that a script assigns to back into the global or
// the field it names, so that the store goes to the read-only globals or
// library, which refuse it as before.
func (p *parser) unalias(e ast.Expr) ast.Expr {
	id, ok := e.(*ast.IdentExpr)
	if !ok || !aliases[id.Value] {
		return e
	}
	lib, field, isField := strings.Cut(strings.TrimPrefix(id.Value, aliasPrefix), ".")
	if !isField {
		id.Value = lib
		return id
	}
	obj := &ast.IdentExpr{Value: aliasPrefix + lib}
	obj.SetLine(id.Line())
	get := &ast.AttrGetExpr{Object: obj, Key: p.stringConst(field, id.Line())}
	get.SetLine(id.Line())
	return get
}

// exprKind tells statements what an expression may be used as.
type exprKind int

const (
	exOther exprKind = iota
	exVar            // assignable: a name or an indexed expression, not parenthesized
	exCall           // an unparenthesized call: may be a statement
)

type localVar struct{ name string }

// funcState tracks one function being parsed: its locals in scope, its
// upvalues and blocks, for Lua's limits and error messages.
type funcState struct {
	parent   *funcState
	line     int // line where the function was defined; 0 for the main chunk
	actives  []*localVar
	pending  []*localVar
	upvals   []*localVar
	vararg   bool
	usesDots bool
	block    *blockScope
	consts   map[constKey]struct{} // the constants it names itself (see consts.go)
	pooled   bool                  // it reads constants from the pool
}

type blockScope struct {
	parent    *blockScope
	nactive   int
	breakable bool
}

type parser struct {
	lx    *lexer
	fs    *funcState
	level int
	// pool holds the chunk's pooled constants, and poolIndex where each is;
	// nans counts NaN constants, each distinct (see consts.go).
	pool      []lua.LValue
	poolIndex map[constKey]int
	nans      int
}

// parseChunk parses a Lua 5.1 chunk into an instrumented gopher-lua AST. It
// reports whether the chunk uses '...' at its top level, and returns the
// chunk's pooled constants (see consts.go).
func parseChunk(src, chunk string, firstLine, baseLevel, maxWork int) (stmts []ast.Stmt, usesDots bool, pool []lua.LValue, work int, err error) {
	defer func() {
		if r := recover(); r != nil {
			se, ok := r.(*syntaxError)
			if !ok {
				panic(r)
			}
			err = se
		}
	}()
	p := &parser{lx: newLexer(src, chunk, firstLine), level: baseLevel}
	p.lx.maxWork = maxWork
	p.lx.advance() // the first token
	p.fs = &funcState{vararg: true}
	p.enterBlock(false)
	stmts = p.chunk()
	p.check(tkEOS)
	return p.withBudget(firstLine, p.digitsFirst(stmts)), p.fs.usesDots, p.pool, p.lx.work(), nil
}

// ---- scopes ----

func (p *parser) enterLevel() {
	p.level++
	if p.level > maxSyntaxLevels {
		p.lx.fail("chunk has too many syntax levels", 0)
	}
}

func (p *parser) leaveLevel() { p.level-- }

func (p *parser) enterBlock(breakable bool) {
	p.fs.block = &blockScope{parent: p.fs.block, nactive: len(p.fs.actives), breakable: breakable}
}

func (p *parser) leaveBlock() {
	p.fs.actives = p.fs.actives[:p.fs.block.nactive]
	p.fs.block = p.fs.block.parent
}

// errorLimit is Lua's errorlimit: function fs exceeds a limit.
func (p *parser) errorLimit(fs *funcState, limit int, what string) {
	msg := fmt.Sprintf("function at line %d has more than %d %s", fs.line, limit, what)
	if fs.line == 0 {
		msg = fmt.Sprintf("main function has more than %d %s", limit, what)
	}
	p.lx.fail(msg, 0)
}

// newLocal declares the n-th local of a statement; it is in scope after activate.
func (p *parser) newLocal(name string, n int) {
	if len(p.fs.actives)+n+1 > maxLocals {
		p.errorLimit(p.fs, maxLocals, "local variables")
	}
	p.fs.pending = append(p.fs.pending, &localVar{name: name})
}

func (p *parser) activate(n int) {
	p.fs.actives = append(p.fs.actives, p.fs.pending[:n]...)
	p.fs.pending = p.fs.pending[n:]
}

// resolve records the use of name: a local, an upvalue (counted against
// Lua's limit in every function it crosses) or a global. It reports whether
// the name is a global.
func (p *parser) resolve(name string) (global bool) {
	var walk func(fs *funcState) *localVar
	walk = func(fs *funcState) *localVar {
		if fs == nil {
			return nil
		}
		for i := len(fs.actives) - 1; i >= 0; i-- {
			if fs.actives[i].name == name {
				return fs.actives[i]
			}
		}
		v := walk(fs.parent)
		if v == nil {
			return nil
		}
		for _, u := range fs.upvals {
			if u == v {
				return v
			}
		}
		if len(fs.upvals)+1 > maxUpvalues {
			p.errorLimit(fs, maxUpvalues, "upvalues")
		}
		fs.upvals = append(fs.upvals, v)
		return v
	}
	return walk(p.fs) == nil
}

// ---- token helpers ----

func (p *parser) tok() int { return p.lx.t.kind }

func (p *parser) testNext(k int) bool {
	if p.lx.t.kind == k {
		p.lx.advance()
		return true
	}
	return false
}

func (p *parser) errorExpected(k int) {
	p.lx.syntaxError(fmt.Sprintf("'%s' expected", tokenString(k)))
}

func (p *parser) check(k int) {
	if p.lx.t.kind != k {
		p.errorExpected(k)
	}
}

func (p *parser) checkNext(k int) {
	p.check(k)
	p.lx.advance()
}

func (p *parser) checkMatch(what, who, where int) {
	if p.testNext(what) {
		return
	}
	if where == p.lx.line {
		p.errorExpected(what)
	}
	p.lx.syntaxError(fmt.Sprintf("'%s' expected (to close '%s' at line %d)", tokenString(what), tokenString(who), where))
}

func (p *parser) checkName() string {
	p.check(tkName)
	s := p.lx.t.str
	p.lx.advance()
	return s
}

func blockFollow(k int) bool {
	switch k {
	case tkElse, tkElseif, tkEnd, tkUntil, tkEOS:
		return true
	}
	return false
}

// ---- instrumentation ----

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
	call := helperCall(hBudget, line, p.numberConst(float64(bodyWeight(body, extra...)), line))
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
	if c, ok := rhs.(*ast.FuncCallExpr); ok && isHelper(c, hConcat) {
		ops = c.Args
	} else {
		ops = []ast.Expr{rhs}
	}
	if a, ok := constString(lhs); ok {
		if b, ok := constString(ops[0]); ok {
			if len(ops) == 1 {
				return p.stringConst(a+b, line)
			}
			return helperCall(hConcat, line, append([]ast.Expr{p.stringConst(a+b, line)}, ops[1:]...)...)
		}
	}
	return helperCall(hConcat, line, append([]ast.Expr{lhs}, ops...)...)
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

// ---- statements ----

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
		Init:  forBound(hForInit, init, line),
		Limit: forBound(hForLimit, limit, line),
		Step:  forBound(hForStep, step, line),
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

// smallIndex bounds the constant integer keys that are stored natively; see
// maxFreeGap in arith.go.
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
		call := helperCall(hSetIndex, line, a.Object, a.Key, rhs[0])
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
			call := helperCall(hSetIndex, line, ident("t#"+idx), ident("k#"+idx), ident(values[i]))
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

// ---- expressions ----

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
			if !aliases[aliasPrefix+name] {
				return expr{e: p.global(name, line), kind: exVar}
			}
			name = aliasPrefix + name // read as an upvalue; see aliasedGlobals
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
			if id, ok := e.e.(*ast.IdentExpr); ok && aliases[id.Value+"."+name] {
				alias := &ast.IdentExpr{Value: id.Value + "." + name} // see aliasedFields
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
	return helperCall(hSetFlds, line, append([]ast.Expr{t}, moved...)...)
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
				e = helperCall(hLen, line, operand)
			}
		default:
			if _, ok := operand.(*ast.NumberExpr); ok {
				e = &ast.UnaryMinusOpExpr{Expr: operand} // folded by the compiler, -0 included
			} else {
				e = helperCall(hNeg, line, operand)
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
			e = helperCall(hMod, line, e, rhs)
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

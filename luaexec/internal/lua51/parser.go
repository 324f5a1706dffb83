package lua51

import (
	"fmt"

	lua "github.com/yuin/gopher-lua"
)

// Lua 5.1's limits (luaconf.h, llimits.h), which decide which scripts compile.
const (
	maxSyntaxLevels = 200 // LUAI_MAXCCALLS
	maxLocals       = 200 // LUAI_MAXVARS
	maxUpvalues     = 60  // LUAI_MAXUPVALUES
	// maxChain bounds the chains that Lua 5.1 parses iteratively but that
	// become a deep AST here (a+b+c+..., elseif ...): gopher-lua's compiler
	// recurses over the AST, using Go stack for each level.
	maxChain = 1000
)

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

// parser builds the AST of a chunk from the tokens of its lexer.
type parser struct {
	lx      *lexer
	fs      *funcState
	level   int
	aliases *Aliases
	// pool holds the chunk's pooled constants, and poolIndex where each is;
	// nans counts NaN constants, each distinct (see consts.go).
	pool      []lua.LValue
	poolIndex map[constKey]int
	nans      int
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

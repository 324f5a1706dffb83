// Package lua51 is the Lua 5.1 front end of the script engine: Parse reads
// a chunk as Lua 5.1's parser does (llex.c, lparser.c) and builds the AST
// that gopher-lua's compiler takes, with the errors Lua 5.1 gives.
//
// It does not use gopher-lua's own parser, for three reasons: compile errors
// must read exactly as Redis's ("user_script:1: '=' expected near 'x'"),
// `goto` is an ordinary name in Lua 5.1, and nesting must be limited as Lua
// limits it (200 levels) so that no script can exhaust the Go stack of the
// compiler.
//
// The AST is instrumented for the engine that runs it. Where gopher-lua's
// semantics differ from Lua 5.1's (unary minus, %, .., the numeric for's
// bounds) and where an operation's cost is known only at run time (a
// comparison of two strings, a table read or store with a computed key,
// '...' expanded, #), the AST calls a helper (Helpers) instead; every
// function and loop body starts by charging the budget its weight, the
// number of operations it holds (weight.go); the globals in Options.Aliases
// are read as locals; and the constants past the first few hundred of a
// function are read from a pool (consts.go). The caller compiles Body as
// the body of a function that it encloses in one declaring, as locals, the
// helpers, the aliases and PoolName, and binds them.
//
// Parsing is charged as running is: Chunk.Work is the compile work in
// budget steps, and Parse gives up once it passes Options.MaxWork.
package lua51

import (
	"errors"
	"strings"

	lua "github.com/yuin/gopher-lua"
	"github.com/yuin/gopher-lua/ast"
)

// Options tell Parse where a chunk comes from and what it may cost.
type Options struct {
	// Chunk names the chunk in messages ("user_script").
	Chunk string
	// FirstLine is the number of the chunk's first line.
	FirstLine int
	// Level is the nesting of syntax levels the chunk starts at: 0 for a
	// script, 1 for a chunk that loadstring compiles, as Lua counts the
	// call that compiles it.
	Level int
	// MaxWork bounds the compile work, in steps; 0 means no bound.
	MaxWork int
	// Aliases are the globals read as locals; nil means none.
	Aliases *Aliases
}

// Chunk is a parsed chunk.
type Chunk struct {
	// Body is the chunk's statements, instrumented (see the package doc).
	Body []ast.Stmt
	// UsesDots reports whether Body uses '...' outside any function: the
	// function it is compiled as must then be vararg.
	UsesDots bool
	// Pool holds the constants Body reads from the pool (see PoolTable).
	// No function names more than MaxDirectConsts constants itself besides
	// the PoolDigits digits of pool indexes (and method names, which cannot
	// be pooled): gopher-lua's compiler searches a function's constants
	// linearly.
	Pool []lua.LValue
	// Work is what parsing the chunk took, in budget steps.
	Work int
}

// ErrOverBudget is wrapped by the error of a chunk whose compile work
// passes Options.MaxWork.
var ErrOverBudget = errors.New("compile work over budget")

// Parse parses src, a Lua 5.1 chunk. Its error reads as Lua 5.1's, for
// example "user_script:1: '=' expected near 'x'".
func Parse(src string, opts Options) (c Chunk, err error) {
	defer func() {
		if r := recover(); r != nil {
			se, ok := r.(*syntaxError)
			if !ok {
				panic(r)
			}
			c, err = Chunk{}, se
		}
	}()
	p := &parser{lx: newLexer(src, opts.Chunk, opts.FirstLine), level: opts.Level, aliases: opts.Aliases}
	p.lx.maxWork = opts.MaxWork
	p.lx.advance() // the first token
	p.fs = &funcState{vararg: true}
	p.enterBlock(false)
	stmts := p.chunk()
	p.check(tkEOS)
	body := p.withBudget(opts.FirstLine, p.digitsFirst(stmts))
	return Chunk{Body: body, UsesDots: p.fs.usesDots, Pool: p.pool, Work: p.lx.work()}, nil
}

// Names of the helpers that instrumented code calls, which the caller
// binds. A '#' cannot appear in a Lua name, so no script can name, shadow
// or reassign them.
const (
	HelperBudget   = "budget#"    // budget#(w) charges a body's weight w; at the top of every function and loop body
	HelperConcat   = "concat#"    // a .. b .. c, with Lua 5.1's number formatting and a size charge
	HelperNeg      = "neg#"       // unary minus with Lua 5.1's string coercion
	HelperMod      = "mod#"       // a % b as Lua 5.1 computes it: a - floor(a/b)*b
	HelperForInit  = "forinit#"   // numeric for: coerce the initial value as Lua 5.1 does
	HelperForLimit = "forlimit#"  // numeric for: coerce the limit
	HelperForStep  = "forstep#"   // numeric for: coerce the step
	HelperSetIndex = "setindex#"  // setindex#(t, k, v) is t[k] = v where k may be a large integer
	HelperSetFlds  = "setfields#" // setfields#(t, k1, v1, ...) stores a constructor's fields whose keys are not constants, returns t
	HelperLen      = "len#"       // the length operator, to be charged for gopher-lua's scans
	HelperCmp      = "cmp#"       // cmp#(a, b, op): a comparison of two values neither of which is a constant (CmpEq...)
	HelperKey      = "key#"       // key#(k) is the key of a table read that is not a constant
	HelperVarg     = "varg#"      // varg#(...) is '...' expanded into a list of values
)

// Helpers lists every helper.
var Helpers = []string{
	HelperBudget, HelperConcat, HelperNeg, HelperMod, HelperForInit, HelperForLimit, HelperForStep,
	HelperSetIndex, HelperSetFlds, HelperLen, HelperCmp, HelperKey, HelperVarg,
}

// AliasPrefix starts the name of the local that aliases a global, which no
// Lua name can contain: messages that name a function by the variable it
// was read from must strip it.
const AliasPrefix = "g#"

// Aliases are the globals, and the library fields written lib.name, that
// chunks read as locals named AliasPrefix+name (AliasPrefix+"lib.name"),
// which the caller binds to their values: a read of a global behind a
// read-only proxy costs map look-ups, a read of a local none. They must be
// values that never change, globals that cannot be assigned. A local of
// the same name shadows the alias as it would the global, and an
// assignment to the name still stores to the global or field, which the
// caller refuses. They must include _G, through which chunks read globals
// with long names.
type Aliases struct {
	names map[string]bool // the alias of each, prefix included
}

// NewAliases returns the aliases of globals and of fields ("lib.name", lib
// being among globals).
func NewAliases(globals, fields []string) *Aliases {
	a := &Aliases{names: make(map[string]bool)}
	for _, name := range append(append([]string(nil), globals...), fields...) {
		a.names[AliasPrefix+name] = true
	}
	return a
}

// has reports whether name is an alias (prefix included).
func (a *Aliases) has(name string) bool {
	return a != nil && a.names[name]
}

// unalias turns an alias that a script assigns to back into the global or
// the field it names, so that the store goes to the read-only globals or
// library, which refuse it as before.
func (p *parser) unalias(e ast.Expr) ast.Expr {
	id, ok := e.(*ast.IdentExpr)
	if !ok || !p.aliases.has(id.Value) {
		return e
	}
	lib, field, isField := strings.Cut(strings.TrimPrefix(id.Value, AliasPrefix), ".")
	if !isField {
		id.Value = lib
		return id
	}
	obj := &ast.IdentExpr{Value: AliasPrefix + lib}
	obj.SetLine(id.Line())
	get := &ast.AttrGetExpr{Object: obj, Key: p.stringConst(field, id.Line())}
	get.SetLine(id.Line())
	return get
}

package lua51

import (
	"fmt"
	"strings"

	"github.com/lockserver/lockserver/luaexec/internal/budget"
	"github.com/lockserver/lockserver/luaexec/internal/clib"
)

// The lexer reads tokens as Lua 5.1's does (llex.c), and words its errors
// as Lua 5.1 does (see the package doc).

// Token kinds: single characters are their byte value; the rest follow.
const (
	tkAnd = 257 + iota
	tkBreak
	tkDo
	tkElse
	tkElseif
	tkEnd
	tkFalse
	tkFor
	tkFunction
	tkIf
	tkIn
	tkLocal
	tkNil
	tkNot
	tkOr
	tkRepeat
	tkReturn
	tkThen
	tkTrue
	tkUntil
	tkWhile
	tkConcat
	tkDots
	tkEq
	tkGe
	tkLe
	tkNe
	tkNumber
	tkName
	tkString
	tkEOS
)

// tokenNames are luaX_tokens: how messages name the tokens from tkAnd on.
var tokenNames = [...]string{
	"and", "break", "do", "else", "elseif", "end", "false", "for", "function",
	"if", "in", "local", "nil", "not", "or", "repeat", "return", "then", "true",
	"until", "while", "..", "...", "==", ">=", "<=", "~=", "<number>", "<name>",
	"<string>", "<eof>",
}

// reserved maps each reserved word to its token.
var reserved = func() map[string]int {
	m := make(map[string]int)
	for t := tkAnd; t <= tkWhile; t++ {
		m[tokenNames[t-tkAnd]] = t
	}
	return m
}()

const eoz = -1 // end of input, as Lua's EOZ

// token is one lexical token and its semantic value.
type token struct {
	kind int
	str  string  // names and strings
	num  float64 // numbers
}

// syntaxError is a compile error, formatted as Lua formats it. overBudget
// marks the one that stops a chunk too large to compile within its budget.
type syntaxError struct {
	msg        string
	overBudget bool
}

func (e *syntaxError) Error() string { return e.msg }

func (e *syntaxError) Unwrap() error {
	if e.overBudget {
		return ErrOverBudget
	}
	return nil
}

// lexer reads tokens from a chunk.
type lexer struct {
	src      string
	pos      int // index of the byte after current
	current  int // current byte, or eoz
	line     int // line of current (ls->linenumber)
	lastLine int // line of the last token consumed (ls->lastline)
	chunk    string
	buf      []byte // text of the token being read, as Lua's ls->buff
	t        token  // current token
	ahead    token  // lookahead token, kind tkEOS+1 when none
	// The work of compiling what was read so far (see work):
	// tokens, and extra for what the parser counts; maxWork bounds it.
	tokens, extra, maxWork int
}

// Compiling costs the budget, as running does (Chunk.Work): a step for each
// token and for each 16 bytes of source (a long string or comment), and
// functionWeight for each function, whose prototype costs gopher-lua's
// compiler many allocations, and memory for as long as it is kept.
const functionWeight = 256

// work is the compile work of what was read so far.
func (lx *lexer) work() int { return lx.tokens + lx.pos/budget.BytesPerStep + lx.extra }

const noToken = tkEOS + 1

func newLexer(src, chunk string, firstLine int) *lexer {
	lx := &lexer{src: src, line: firstLine, lastLine: firstLine, chunk: chunk}
	lx.ahead.kind = noToken
	lx.next()
	return lx
}

func (lx *lexer) next() {
	if lx.pos < len(lx.src) {
		lx.current = int(lx.src[lx.pos])
		lx.pos++
	} else {
		lx.current = eoz
		lx.pos = len(lx.src) + 1
	}
}

func (lx *lexer) save(c int) { lx.buf = append(lx.buf, byte(c)) }

func (lx *lexer) saveAndNext() {
	lx.save(lx.current)
	lx.next()
}

func (lx *lexer) isNewline() bool { return lx.current == '\n' || lx.current == '\r' }

// fail raises a lexical or syntax error at the current line; with a token,
// "near '<token>'" is added as luaX_lexerror does.
func (lx *lexer) fail(msg string, tok int) {
	msg = fmt.Sprintf("%s:%d: %s", lx.chunk, lx.line, msg)
	if tok != 0 {
		msg = fmt.Sprintf("%s near '%s'", msg, lx.tokenText(tok))
	}
	panic(&syntaxError{msg: msg})
}

// syntaxError raises msg near the current token (luaX_syntaxerror).
func (lx *lexer) syntaxError(msg string) { lx.fail(msg, lx.t.kind) }

// tokenText is txtToken: the text read for names, strings and numbers (up to
// a NUL byte, as C prints it), the token's name otherwise.
func (lx *lexer) tokenText(tok int) string {
	switch tok {
	case tkName, tkString, tkNumber:
		s := string(lx.buf)
		if i := strings.IndexByte(s, 0); i >= 0 {
			s = s[:i]
		}
		return s
	}
	return tokenString(tok)
}

// tokenString is luaX_token2str.
func tokenString(tok int) string {
	if tok < tkAnd {
		if tok < 32 || tok == 127 {
			return fmt.Sprintf("char(%d)", tok)
		}
		return string(rune(tok)) // a single byte: Lua prints it with %c
	}
	return tokenNames[tok-tkAnd]
}

// advance reads the next token (luaX_next).
func (lx *lexer) advance() {
	lx.lastLine = lx.line
	if lx.ahead.kind != noToken {
		lx.t = lx.ahead
		lx.ahead.kind = noToken
		return
	}
	lx.t = lx.lex()
	lx.tokens++
	lx.checkWork()
}

// checkWork stops a chunk whose compile work passes maxWork.
func (lx *lexer) checkWork() {
	if lx.maxWork > 0 && lx.work() > lx.maxWork {
		msg := fmt.Sprintf("%s:%d: script too large to compile within the execution budget of %d steps", lx.chunk, lx.line, lx.maxWork)
		panic(&syntaxError{msg: msg, overBudget: true})
	}
}

// lookahead reads the token after the current one (luaX_lookahead).
func (lx *lexer) lookahead() {
	lx.ahead = lx.lex()
	lx.tokens++
	lx.checkWork()
}

func (lx *lexer) newline() {
	old := lx.current
	lx.next()
	if lx.isNewline() && lx.current != old {
		lx.next()
	}
	lx.line++
}

// skipSep reads [=*[ or ]=*] and returns the number of '=' when the bracket
// closes, or -count-1 when it does not.
func (lx *lexer) skipSep() int {
	count := 0
	s := lx.current
	lx.saveAndNext()
	for lx.current == '=' {
		lx.saveAndNext()
		count++
	}
	if lx.current == s {
		return count
	}
	return -count - 1
}

func (lx *lexer) longString(isString bool, sep int) string {
	lx.saveAndNext() // the second '['
	if lx.isNewline() {
		lx.newline()
	}
	for {
		switch lx.current {
		case eoz:
			if isString {
				lx.fail("unfinished long string", tkEOS)
			}
			lx.fail("unfinished long comment", tkEOS)
		case ']':
			if lx.skipSep() == sep {
				lx.saveAndNext()
				if !isString {
					return ""
				}
				return string(lx.buf[2+sep : len(lx.buf)-(2+sep)])
			}
		case '\n', '\r':
			lx.save('\n')
			lx.newline()
			if !isString {
				lx.buf = lx.buf[:0]
			}
		default:
			if isString {
				lx.saveAndNext()
			} else {
				lx.next()
			}
		}
	}
}

func (lx *lexer) quotedString(del int) string {
	lx.saveAndNext()
	for lx.current != del {
		switch lx.current {
		case eoz:
			lx.fail("unfinished string", tkEOS)
		case '\n', '\r':
			lx.fail("unfinished string", tkString)
		case '\\':
			lx.next()
			var c int
			switch lx.current {
			case 'a':
				c = '\a'
			case 'b':
				c = '\b'
			case 'f':
				c = '\f'
			case 'n':
				c = '\n'
			case 'r':
				c = '\r'
			case 't':
				c = '\t'
			case 'v':
				c = '\v'
			case '\n', '\r':
				lx.save('\n')
				lx.newline()
				continue
			case eoz:
				continue // reported as an unfinished string next round
			default:
				if !clib.IsDigit(byte(lx.current)) {
					lx.saveAndNext() // \\, \", \' and any other character stand for themselves
					continue
				}
				for i := 0; i < 3 && lx.current != eoz && clib.IsDigit(byte(lx.current)); i++ {
					c = 10*c + lx.current - '0'
					lx.next()
				}
				if c > 255 {
					lx.fail("escape sequence too large", tkString)
				}
				lx.save(c)
				continue
			}
			lx.save(c)
			lx.next()
		default:
			lx.saveAndNext()
		}
	}
	lx.saveAndNext()
	return string(lx.buf[1 : len(lx.buf)-1])
}

func (lx *lexer) numeral() float64 {
	for lx.current != eoz && (clib.IsDigit(byte(lx.current)) || lx.current == '.') {
		lx.saveAndNext()
	}
	if lx.current == 'e' || lx.current == 'E' {
		lx.saveAndNext()
		if lx.current == '+' || lx.current == '-' {
			lx.saveAndNext()
		}
	}
	for lx.current != eoz && (clib.IsAlnum(lx.current) || lx.current == '_') {
		lx.saveAndNext()
	}
	f, ok := clib.Str2Number(string(lx.buf))
	if !ok {
		lx.fail("malformed number", tkNumber)
	}
	return f
}

// lex reads one token (llex).
func (lx *lexer) lex() token {
	lx.buf = lx.buf[:0]
	for {
		switch c := lx.current; c {
		case '\n', '\r':
			lx.newline()
		case '-':
			lx.next()
			if lx.current != '-' {
				return token{kind: '-'}
			}
			lx.next()
			if lx.current == '[' {
				sep := lx.skipSep()
				lx.buf = lx.buf[:0]
				if sep >= 0 {
					lx.longString(false, sep)
					lx.buf = lx.buf[:0]
					continue
				}
			}
			for !lx.isNewline() && lx.current != eoz {
				lx.next()
			}
		case '[':
			sep := lx.skipSep()
			if sep >= 0 {
				return token{kind: tkString, str: lx.longString(true, sep)}
			}
			if sep == -1 {
				return token{kind: '['}
			}
			lx.fail("invalid long string delimiter", tkString)
		case '=', '<', '>', '~':
			lx.next()
			if lx.current != '=' {
				return token{kind: c}
			}
			lx.next()
			switch c {
			case '=':
				return token{kind: tkEq}
			case '<':
				return token{kind: tkLe}
			case '>':
				return token{kind: tkGe}
			}
			return token{kind: tkNe}
		case '"', '\'':
			return token{kind: tkString, str: lx.quotedString(c)}
		case '.':
			lx.saveAndNext()
			if lx.current == '.' {
				lx.saveAndNext()
				if lx.current == '.' {
					lx.saveAndNext()
					return token{kind: tkDots}
				}
				return token{kind: tkConcat}
			}
			if lx.current == eoz || !clib.IsDigit(byte(lx.current)) {
				return token{kind: '.'}
			}
			return token{kind: tkNumber, num: lx.numeral()}
		case eoz:
			return token{kind: tkEOS}
		default:
			switch {
			case clib.IsSpace(byte(c)):
				lx.next()
			case clib.IsDigit(byte(c)):
				return token{kind: tkNumber, num: lx.numeral()}
			case clib.IsAlpha(c) || c == '_':
				for lx.current != eoz && (clib.IsAlnum(lx.current) || lx.current == '_') {
					lx.saveAndNext()
				}
				name := string(lx.buf)
				if r, ok := reserved[name]; ok {
					return token{kind: r}
				}
				return token{kind: tkName, str: name}
			default:
				lx.next()
				return token{kind: c}
			}
		}
	}
}

package lualib

import (
	"github.com/lockserver/lockserver/luaexec/internal/clib"
	lua "github.com/yuin/gopher-lua"
)

// A Lua 5.1 pattern matcher (lstrlib.c's match and helpers). gopher-lua's
// has no step limit, so a catastrophic pattern could run for hours; this one
// charges the script's budget as it goes and bounds its recursion.
//
// As in C, the pattern ends at its first NUL byte, and reading the subject
// one past its end yields the NUL that C strings carry.

const (
	maxCaptures   = 32 // LUA_MAXCAPTURES
	capUnfinished = -1
	capPosition   = -2
	// maxMatchDepth bounds the matcher's recursion (one level per optional,
	// repeated or captured item in flight); Lua 5.1 has no bound and
	// overflows the C stack instead.
	maxMatchDepth = 2000
	// matchStepsPerCharge is how many matcher steps cost one budget step.
	matchStepsPerCharge = 4
)

type capture struct {
	init int
	len  int
}

type matchState struct {
	l       *Libs
	L       *lua.LState
	src     string
	pat     string
	level   int
	capture [maxCaptures]capture
	depth   int
	steps   int
}

func newMatchState(l *Libs, L *lua.LState, src, pat string) *matchState {
	for i := 0; i < len(pat); i++ {
		if pat[i] == 0 {
			pat = pat[:i]
			break
		}
	}
	return &matchState{l: l, L: L, src: src, pat: pat}
}

// s returns the subject's byte at i, NUL at its end.
func (ms *matchState) s(i int) int {
	if i < len(ms.src) {
		return int(ms.src[i])
	}
	return 0
}

// p returns the pattern's byte at i, NUL at its end.
func (ms *matchState) p(i int) int {
	if i < len(ms.pat) {
		return int(ms.pat[i])
	}
	return 0
}

func (ms *matchState) step() {
	ms.steps++
	if ms.steps%matchStepsPerCharge == 0 {
		ms.l.budget.Charge(ms.L, 1)
	}
}

func (ms *matchState) fail(msg string) {
	RaiseError(ms.L, "%s", msg)
}

func (ms *matchState) checkCapture(l int) int {
	l -= '1'
	if l < 0 || l >= ms.level || ms.capture[l].len == capUnfinished {
		ms.fail("invalid capture index")
	}
	return l
}

func (ms *matchState) captureToClose() int {
	for level := ms.level - 1; level >= 0; level-- {
		if ms.capture[level].len == capUnfinished {
			return level
		}
	}
	ms.fail("invalid pattern capture")
	return 0
}

func (ms *matchState) classEnd(p int) int {
	c := ms.p(p)
	p++
	switch c {
	case '%':
		if ms.p(p) == 0 {
			ms.fail("malformed pattern (ends with '%')")
		}
		return p + 1
	case '[':
		if ms.p(p) == '^' {
			p++
		}
		for {
			if ms.p(p) == 0 {
				ms.fail("malformed pattern (missing ']')")
			}
			c := ms.p(p)
			p++
			if c == '%' && ms.p(p) != 0 {
				p++
			}
			if ms.p(p) == ']' {
				return p + 1
			}
		}
	}
	return p
}

func isLowerC(c int) bool { return c >= 'a' && c <= 'z' }
func isUpperC(c int) bool { return c >= 'A' && c <= 'Z' }
func isCntrlC(c int) bool { return c < 32 || c == 127 }
func isPunctC(c int) bool {
	return c > 32 && c < 127 && !clib.IsAlnum(c)
}

func matchClass(c, cl int) bool {
	var res bool
	lower := cl
	if isUpperC(cl) {
		lower = cl + 'a' - 'A'
	}
	switch lower {
	case 'a':
		res = clib.IsAlpha(c)
	case 'c':
		res = isCntrlC(c)
	case 'd':
		res = c >= '0' && c <= '9'
	case 'l':
		res = isLowerC(c)
	case 'p':
		res = isPunctC(c)
	case 's':
		res = c == ' ' || c >= '\t' && c <= '\r'
	case 'u':
		res = isUpperC(c)
	case 'w':
		res = clib.IsAlnum(c)
	case 'x':
		res = c < 256 && clib.IsHexDigit(byte(c))
	case 'z':
		res = c == 0
	default:
		return cl == c
	}
	if isLowerC(cl) {
		return res
	}
	return !res
}

// matchBracketClass matches c against the class [...] from p to ec (the ']').
func (ms *matchState) matchBracketClass(c, p, ec int) bool {
	sig := true
	if ms.p(p+1) == '^' {
		sig = false
		p++
	}
	for p++; p < ec; p++ {
		switch {
		case ms.p(p) == '%':
			p++
			if matchClass(c, ms.p(p)) {
				return sig
			}
		case ms.p(p+1) == '-' && p+2 < ec:
			p += 2
			if ms.p(p-2) <= c && c <= ms.p(p) {
				return sig
			}
		case ms.p(p) == c:
			return sig
		}
	}
	return !sig
}

func (ms *matchState) singleMatch(c, p, ep int) bool {
	switch ms.p(p) {
	case '.':
		return true
	case '%':
		return matchClass(c, ms.p(p+1))
	case '[':
		return ms.matchBracketClass(c, p, ep-1)
	}
	return ms.p(p) == c
}

func (ms *matchState) matchBalance(s, p int) int {
	if ms.p(p) == 0 || ms.p(p+1) == 0 {
		ms.fail("unbalanced pattern")
	}
	if ms.s(s) != ms.p(p) {
		return -1
	}
	b, e := ms.p(p), ms.p(p+1)
	cont := 1
	for s++; s < len(ms.src); s++ {
		ms.step()
		switch ms.s(s) {
		case e:
			cont--
			if cont == 0 {
				return s + 1
			}
		case b:
			cont++
		}
	}
	return -1
}

func (ms *matchState) maxExpand(s, p, ep int) int {
	i := 0
	for s+i < len(ms.src) && ms.singleMatch(ms.s(s+i), p, ep) {
		ms.step()
		i++
	}
	for ; i >= 0; i-- {
		if res := ms.match(s+i, ep+1); res != -1 {
			return res
		}
	}
	return -1
}

func (ms *matchState) minExpand(s, p, ep int) int {
	for {
		if res := ms.match(s, ep+1); res != -1 {
			return res
		}
		if s < len(ms.src) && ms.singleMatch(ms.s(s), p, ep) {
			s++
		} else {
			return -1
		}
	}
}

func (ms *matchState) startCapture(s, p, what int) int {
	if ms.level >= maxCaptures {
		ms.fail("too many captures")
	}
	ms.capture[ms.level] = capture{init: s, len: what}
	ms.level++
	res := ms.match(s, p)
	if res == -1 {
		ms.level--
	}
	return res
}

func (ms *matchState) endCapture(s, p int) int {
	l := ms.captureToClose()
	ms.capture[l].len = s - ms.capture[l].init
	res := ms.match(s, p)
	if res == -1 {
		ms.capture[l].len = capUnfinished
	}
	return res
}

func (ms *matchState) matchCapture(s, l int) int {
	l = ms.checkCapture(l)
	c := ms.capture[l]
	if len(ms.src)-s >= c.len && ms.src[c.init:c.init+c.len] == ms.src[s:s+c.len] {
		return s + c.len
	}
	return -1
}

// match returns the end of the match of pattern p at subject position s, or -1.
func (ms *matchState) match(s, p int) int {
	ms.depth++
	if ms.depth > maxMatchDepth {
		ms.fail("pattern too complex")
	}
	res := ms.doMatch(s, p)
	ms.depth--
	return res
}

func (ms *matchState) doMatch(s, p int) int {
	for {
		ms.step()
		switch ms.p(p) {
		case '(':
			if ms.p(p+1) == ')' {
				return ms.startCapture(s, p+2, capPosition)
			}
			return ms.startCapture(s, p+1, capUnfinished)
		case ')':
			return ms.endCapture(s, p+1)
		case 0:
			return s
		case '$':
			if ms.p(p+1) == 0 {
				if s == len(ms.src) {
					return s
				}
				return -1
			}
		case '%':
			switch ms.p(p + 1) {
			case 'b':
				s = ms.matchBalance(s, p+2)
				if s == -1 {
					return -1
				}
				p += 4
				continue
			case 'f':
				p += 2
				if ms.p(p) != '[' {
					ms.fail("missing '[' after '%f' in pattern")
				}
				ep := ms.classEnd(p)
				prev := 0
				if s > 0 {
					prev = ms.s(s - 1)
				}
				if ms.matchBracketClass(prev, p, ep-1) || !ms.matchBracketClass(ms.s(s), p, ep-1) {
					return -1
				}
				p = ep
				continue
			default:
				if c := ms.p(p + 1); c >= '0' && c <= '9' {
					s = ms.matchCapture(s, c)
					if s == -1 {
						return -1
					}
					p += 2
					continue
				}
			}
		}
		// a single-character item, possibly repeated
		ep := ms.classEnd(p)
		m := s < len(ms.src) && ms.singleMatch(ms.s(s), p, ep)
		switch ms.p(ep) {
		case '?':
			if m {
				if res := ms.match(s+1, ep+1); res != -1 {
					return res
				}
			}
			p = ep + 1
		case '*':
			return ms.maxExpand(s, p, ep)
		case '+':
			if !m {
				return -1
			}
			return ms.maxExpand(s+1, p, ep)
		case '-':
			return ms.minExpand(s, p, ep)
		default:
			if !m {
				return -1
			}
			s++
			p = ep
		}
	}
}

// pushCapture pushes capture i of a match from s to e (the whole match when
// there are no captures).
func (ms *matchState) pushCapture(i, s, e int) {
	ms.L.Push(ms.captureValue(i, s, e))
}

func (ms *matchState) captureValue(i, s, e int) lua.LValue {
	if i >= ms.level {
		if i == 0 {
			return lua.LString(ms.src[s:e])
		}
		ms.fail("invalid capture index")
	}
	c := ms.capture[i]
	switch c.len {
	case capUnfinished:
		ms.fail("unfinished capture")
	case capPosition:
		return lua.LNumber(c.init + 1)
	}
	return lua.LString(ms.src[c.init : c.init+c.len])
}

// pushCaptures pushes all captures (or the whole match when wholeIfNone and
// there are none) and returns how many.
func (ms *matchState) pushCaptures(s, e int, wholeIfNone bool) int {
	n := ms.level
	if n == 0 && wholeIfNone {
		n = 1
	}
	for i := 0; i < n; i++ {
		ms.pushCapture(i, s, e)
	}
	return n
}

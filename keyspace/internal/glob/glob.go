// Package glob matches strings against Redis's glob patterns as Redis's
// stringmatchlen does, without its exponential worst case.
package glob

// Match reports whether s matches the glob pattern as Redis's stringmatchlen
// does (KEYS, SCAN MATCH): '*' any run, '?' one byte, "[...]" a class with '^'
// negation, ranges and '\' escapes, '\' escaping outside classes. Malformed
// patterns (an unterminated class, a trailing '\') behave as in Redis.
//
// Stars backtrack only to the most recent star: every other token matches
// exactly one byte, so this finds a match whenever one exists, in time
// O(len(pattern)*len(s)) rather than Redis's exponential worst case.
func Match[S string | []byte](pattern []byte, s S) bool {
	p, i := 0, 0
	starP, starI := -1, -1
	for {
		if p < len(pattern) && pattern[p] == '*' {
			for p < len(pattern) && pattern[p] == '*' {
				p++
			}
			if p == len(pattern) {
				return true
			}
			starP, starI = p, i
			continue
		}
		if p == len(pattern) && i == len(s) {
			return true
		}
		if p < len(pattern) && i < len(s) {
			if n, ok := matchToken(pattern[p:], s[i]); ok {
				p += n
				i++
				continue
			}
		}
		if starP < 0 || starI >= len(s) {
			return false
		}
		starI++
		p, i = starP, starI
	}
}

// matchToken matches the byte c against the token at the start of pattern (not a
// star) and returns the token's length.
func matchToken(pattern []byte, c byte) (int, bool) {
	switch pattern[0] {
	case '?':
		return 1, true
	case '\\':
		if len(pattern) >= 2 {
			return 2, pattern[1] == c
		}
		return 1, c == '\\'
	case '[':
		return matchClass(pattern, c)
	}
	return 1, pattern[0] == c
}

// matchClass matches c against the class at the start of pattern, following
// Redis's loop byte for byte, signed chars in ranges included.
func matchClass(pattern []byte, c byte) (int, bool) {
	p := 1
	not := p < len(pattern) && pattern[p] == '^'
	if not {
		p++
	}
	match := false
	for {
		rest := len(pattern) - p
		switch {
		case rest >= 2 && pattern[p] == '\\':
			p++
			if pattern[p] == c {
				match = true
			}
		case rest > 0 && pattern[p] == ']':
			return p + 1, match != not
		case rest == 0:
			return p, match != not
		case rest >= 3 && pattern[p+1] == '-':
			start, end, v := int8(pattern[p]), int8(pattern[p+2]), int8(c)
			if start > end {
				start, end = end, start
			}
			if v >= start && v <= end {
				match = true
			}
			p += 2
		default:
			if pattern[p] == c {
				match = true
			}
		}
		p++
	}
}

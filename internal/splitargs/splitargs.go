// Package splitargs splits a line into arguments as Redis's sdssplitargs
// does: for inline commands (server) and for a script's shebang line
// (luaexec), which Redis both reads with it.
package splitargs

// Split appends the arguments of line to argv: blanks separate arguments;
// "double quotes" understand \n \r \t \b \a \xHH and \<any>; 'single quotes'
// understand \'; a closing quote must be followed by a blank or the end.
// It reports false, with what it had appended, on unbalanced quotes.
// Arguments are new slices (quoting rewrites bytes), empty but not nil for
// "" and ”.
func Split(argv [][]byte, line []byte) ([][]byte, bool) {
	p := 0
	for {
		for p < len(line) && IsSpace(line[p]) {
			p++
		}
		if p == len(line) {
			return argv, true
		}
		var cur []byte
		inDouble, inSingle := false, false
		for done := false; !done; {
			var c byte
			if p < len(line) {
				c = line[p]
			}
			switch {
			case inDouble:
				switch {
				case c == '\\' && p+3 < len(line) && line[p+1] == 'x' && isHex(line[p+2]) && isHex(line[p+3]):
					cur = append(cur, unhex(line[p+2])<<4|unhex(line[p+3]))
					p += 3
				case c == '\\' && p+1 < len(line):
					p++
					cur = append(cur, unescape(line[p]))
				case c == '"':
					if p+1 < len(line) && !IsSpace(line[p+1]) {
						return argv, false
					}
					done = true
				case p == len(line):
					return argv, false
				default:
					cur = append(cur, c)
				}
			case inSingle:
				switch {
				case c == '\\' && p+1 < len(line) && line[p+1] == '\'':
					p++
					cur = append(cur, '\'')
				case c == '\'':
					if p+1 < len(line) && !IsSpace(line[p+1]) {
						return argv, false
					}
					done = true
				case p == len(line):
					return argv, false
				default:
					cur = append(cur, c)
				}
			default:
				switch {
				case p == len(line) || c == ' ' || c == '\n' || c == '\r' || c == '\t':
					done = true
				case c == '"':
					inDouble = true
				case c == '\'':
					inSingle = true
				default:
					cur = append(cur, c)
				}
			}
			if p < len(line) {
				p++
			}
		}
		if cur == nil {
			cur = []byte{}
		}
		argv = append(argv, cur)
	}
}

// IsSpace is C's isspace in the "C" locale.
func IsSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r'
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func unhex(c byte) byte {
	switch {
	case c <= '9':
		return c - '0'
	case c >= 'a':
		return c - 'a' + 10
	}
	return c - 'A' + 10
}

func unescape(c byte) byte {
	switch c {
	case 'n':
		return '\n'
	case 'r':
		return '\r'
	case 't':
		return '\t'
	case 'b':
		return '\b'
	case 'a':
		return '\a'
	}
	return c
}

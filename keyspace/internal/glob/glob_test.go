package glob

import "testing"

func TestMatch(t *testing.T) {
	cases := []struct {
		pattern, s string
		want       bool
	}{
		{"*", "", true}, {"*", "abc", true}, {"a*", "abc", true}, {"a*c", "abc", true}, {"a*c", "abd", false},
		{"?", "a", true}, {"?", "", false}, {"a?c", "abc", true}, {"[abc]", "b", true}, {"[abc]", "d", false},
		{"[^abc]", "d", true}, {"[^abc]", "a", false}, {"[a-c]x", "bx", true}, {"[c-a]x", "bx", true},
		{"[a-c]", "d", false}, {`\*`, "*", true}, {`\*`, "a", false}, {`[\]]`, "]", true}, {"[abc", "b", true},
		{"[abc", "bb", false}, {`a\`, `a\`, true}, {"*a*a*a*a*a*a*a*a*b", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", false},
		{"h*llo", "heeello", true}, {"h[^e]llo", "hello", false}, {"**", "x", true}, {"a**b", "ab", true},
	}
	for _, c := range cases {
		if got := Match([]byte(c.pattern), c.s); got != c.want {
			t.Errorf("Match(%q, %q) = %v, want %v", c.pattern, c.s, got, c.want)
		}
	}
}

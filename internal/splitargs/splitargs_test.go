package splitargs

import (
	"slices"
	"testing"
)

// Worked examples of Redis's sdssplitargs, as redis-server splits an inline
// command or a script's shebang line.
func TestSplit(t *testing.T) {
	for _, c := range []struct {
		line string
		want []string
		ok   bool
	}{
		{"", nil, true},
		{"  SET\t k \r\n", []string{"SET", "k"}, true},
		{`SET "a b" "\x41\n\t\"\\\q"`, []string{"SET", "a b", "A\n\t\"\\q"}, true},
		{`ECHO "\xZZ"`, []string{"ECHO", "xZZ"}, true},
		{`SET 'it\'s' '\n'`, []string{"SET", "it's", `\n`}, true},
		{`ECHO "" ''`, []string{"ECHO", "", ""}, true},
		{`ECHO "a"b`, nil, false},
		{`ECHO 'a`, nil, false},
		{`ECHO "a`, nil, false},
		{`#!lua flags=no-writes,allow-oom`, []string{"#!lua", "flags=no-writes,allow-oom"}, true},
	} {
		got, ok := Split(nil, []byte(c.line))
		var strs []string
		for _, a := range got {
			if a == nil {
				t.Errorf("%q: a nil argument", c.line)
			}
			strs = append(strs, string(a))
		}
		if ok != c.ok || (ok && !slices.Equal(strs, c.want)) {
			t.Errorf("Split(%q) = %q, %v; want %q, %v", c.line, strs, ok, c.want, c.ok)
		}
	}
}

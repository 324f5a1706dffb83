package luaexec

import (
	"fmt"
	"strings"
	"testing"
)

func zzRepeat(prefix, suffix string, n int, item func(i int) string) string {
	var b strings.Builder
	b.WriteString(prefix)
	for i := 0; i < n; i++ {
		b.WriteString(item(i))
	}
	b.WriteString(suffix)
	return b.String()
}

var zzShapes = map[string]string{
	"distinct-num": zzRepeat("local t = {", "} return #t", 50000, func(i int) string { return fmt.Sprintf("%d,", i) }),
	"same-ident":   zzRepeat("local a = 1 local t = {", "} return #t", 50000, func(i int) string { return "a," }),
	"empty-tables": zzRepeat("local t = {", "} return #t", 50000, func(i int) string { return "{}," }),
	"calls":        zzRepeat("", "return 1", 20000, func(i int) string { return fmt.Sprintf("redis.call('set','k%d','v%d')\n", i, i) }),
	"calls-same":   zzRepeat("", "return 1", 20000, func(i int) string { return "redis.call('set','k','v')\n" }),
	"assign":       zzRepeat("local x = 0 ", "return x", 50000, func(i int) string { return "x=x+1 " }),
	"nested-fn":    zzRepeat("local f ", "return 1", 20000, func(i int) string { return "f=function() end " }),
	"bigstring":    "return '" + strings.Repeat("x", 8<<20) + "'",
	"comment":      "--[[" + strings.Repeat("x", 8<<20) + "]] return 1",
	"ifs":          zzRepeat("local x = 0 ", "return x", 50000, func(i int) string { return "if x then x = 1 end " }),
	"parens":       zzRepeat("local x = 0 ", "return x", 50000, func(i int) string { return "x = ((x)) " }),
}

func BenchmarkZZCompile(b *testing.B) {
	for name, body := range zzShapes {
		b.Run(name, func(b *testing.B) {
			lx := newLexer(body, "x", 1)
			tokens := 0
			for lx.advance(); lx.t.kind != tkEOS; lx.advance() {
				tokens++
			}
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				if _, msg := compileScript("x", body, 0); msg != "" {
					b.Fatal(msg)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(tokens), "ns/token")
			b.ReportMetric(float64(tokens), "tokens")
		})
	}
}

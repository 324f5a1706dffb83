package luaexec

import (
	"os"
	"strings"
	"testing"
	"time"
)

func TestZZScratch(t *testing.T) {
	cases := strings.Split(os.Getenv("ZZ"), "\n@@\n")
	for _, c := range cases {
		if strings.TrimSpace(c) == "" {
			continue
		}
		h := newHarness(t, Options{})
		h.do("SET", "big", strings.Repeat("x", 16<<20))
		h.do("SET", "big2", strings.Repeat("x", 16<<20))
		h.do("SET", "mb", strings.Repeat("x", 1<<20))
		start := time.Now()
		r := show(h.eval(c))
		d := time.Since(start)
		left := h.e.vm.current.steps
		if len(r) > 120 {
			r = r[:120]
		}
		t.Logf("%8.3fs left %8d  %q -> %s", d.Seconds(), left, c, r)
	}
}

package testenv

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
)

// recorder is a test that records how it ended.
type recorder struct {
	testing.TB
	ended string
}

func (r *recorder) Helper() {}
func (r *recorder) Fatalf(format string, args ...any) {
	r.ended = "failed: " + fmt.Sprintf(format, args...)
	runtime.Goexit()
}
func (r *recorder) Skipf(format string, args ...any) {
	r.ended = "skipped: " + fmt.Sprintf(format, args...)
	runtime.Goexit()
}

func run(f func(t testing.TB)) string {
	r := &recorder{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		f(r)
	}()
	<-done
	return r.ended
}

// A missing program skips the test, or fails it when CI is set; a present
// one is found.
func TestNeed(t *testing.T) {
	const none = "no-such-program-lockserver-needs"
	t.Setenv("CI", "")
	if got := run(func(t testing.TB) { Need(t, none) }); !strings.HasPrefix(got, "skipped: ") || !strings.Contains(got, none) {
		t.Errorf("without CI: %q", got)
	}
	t.Setenv("CI", "1")
	if got := run(func(t testing.TB) { Need(t, none) }); !strings.HasPrefix(got, "failed: CI is set and "+none) {
		t.Errorf("with CI: %q", got)
	}
	var path string
	if got := run(func(t testing.TB) { path = Need(t, "go") }); got != "" || !strings.HasSuffix(path, "/go") {
		t.Errorf("go: %q, %q", got, path)
	}
}

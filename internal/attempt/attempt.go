// Package attempt runs a cluster test as attempts, so that it holds when the
// leader changes under it on a busy machine, without hiding a failure.
//
// A test whose point is what a leader does while it leads (answers a
// pipeline in order, counts its replicas, reports itself as the master) runs
// its body with Run, which starts a cluster of its own each time. Each
// cluster the body starts reports its Raft term to Watch. A failed attempt
// fails the test unless the term moved during it, that is, an election the
// test did not cause happened; then the body runs again, at most Max times in
// all. So a broken mechanism fails the test whatever the load (every attempt
// fails, and an attempt without an election fails at once), and an election
// voids only the attempt it happened in.
//
// A test that changes the leader itself calls Own before it does: from then
// on a failure fails the test, election or not. Such tests meet a leader
// change as a client does instead (send again what TRYAGAIN and CLUSTERDOWN
// say was not written, read back after UNKNOWN, find the leader again).
package attempt

import (
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
)

// Max bounds the attempts of a test.
const Max = 4

// T is the testing.TB of one attempt: a failure ends the attempt and is kept
// for Run to judge; cleanups run when the attempt ends; Skip fails.
type T struct {
	testing.TB
	mu       sync.Mutex
	fails    []string
	cleanups []func()
	helpers  map[string]bool // functions that called Helper
	terms    []watched
	own      bool
}

type watched struct {
	what  string
	term  func() uint64
	first uint64
}

func (a *T) Helper() {
	pc, _, _, ok := runtime.Caller(1)
	if !ok {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.helpers[runtime.FuncForPC(pc).Name()] = true
}

// where returns the file:line of the first caller that is not a helper.
func (a *T) where() string {
	pcs := make([]uintptr, 32)
	frames := runtime.CallersFrames(pcs[:runtime.Callers(3, pcs)])
	a.mu.Lock()
	defer a.mu.Unlock()
	for {
		f, more := frames.Next()
		if !a.helpers[f.Function] && !strings.HasPrefix(f.Function, "github.com/lockserver/lockserver/internal/attempt.(*T).") {
			return fmt.Sprintf("%s:%d", f.File[strings.LastIndex(f.File, "/")+1:], f.Line)
		}
		if !more {
			return "?"
		}
	}
}

func (a *T) Errorf(format string, args ...any) {
	msg := a.where() + ": " + fmt.Sprintf(format, args...)
	a.mu.Lock()
	defer a.mu.Unlock()
	a.fails = append(a.fails, msg)
}

func (a *T) Error(args ...any) { a.Errorf("%s", fmt.Sprint(args...)) }

func (a *T) Fatalf(format string, args ...any) {
	a.Errorf(format, args...)
	runtime.Goexit()
}

func (a *T) Fatal(args ...any) { a.Fatalf("%s", fmt.Sprint(args...)) }
func (a *T) FailNow()          { a.Fatalf("FailNow") }
func (a *T) Fail()             { a.Errorf("Fail") }

func (a *T) Failed() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.fails) > 0
}

func (a *T) Cleanup(f func()) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.cleanups = append(a.cleanups, f)
}

// Skip and its kin cannot stop the test from an attempt's goroutine.
func (a *T) Skip(args ...any)                 { a.Fatalf("Skip in an attempt: %s", fmt.Sprint(args...)) }
func (a *T) Skipf(format string, args ...any) { a.Fatalf("Skip in an attempt: "+format, args...) }
func (a *T) SkipNow()                         { a.Fatalf("SkipNow in an attempt") }

// Watch tells the attempt of t, if t is one, how to read the term of a
// cluster it started, once the cluster has its first leader; what names the
// cluster in messages. It does nothing for any other t.
func Watch(t testing.TB, what string, term func() uint64) {
	if a, ok := t.(*T); ok {
		first := term()
		a.mu.Lock()
		defer a.mu.Unlock()
		a.terms = append(a.terms, watched{what, term, first})
	}
}

// Own says that from now on the attempt of t changes the leader itself: a
// failure after this point fails the test, election or not.
func Own(t testing.TB) {
	if a, ok := t.(*T); ok {
		a.mu.Lock()
		defer a.mu.Unlock()
		a.own = true
	}
}

// elected describes the clusters of the attempt whose term moved.
func (a *T) elected() []string {
	a.mu.Lock()
	terms := append([]watched(nil), a.terms...)
	a.mu.Unlock()
	var what []string
	for _, w := range terms {
		if term := w.term(); term != w.first {
			what = append(what, fmt.Sprintf("%s: term %d -> %d", w.what, w.first, term))
		}
	}
	return what
}

// Run runs body until an attempt passes, each on a goroutine of its own with
// a T. An attempt that fails, during which the term of a cluster it watched
// moved before it called Own, is tried again, at most Max times in all; any
// other failure fails t.
func Run(t testing.TB, body func(t testing.TB)) {
	t.Helper()
	for try := 1; ; try++ {
		a := &T{TB: t, helpers: map[string]bool{}}
		var elected []string
		done := make(chan struct{})
		go func() {
			defer close(done)
			defer func() {
				elected = a.elected() // before the cleanups stop the clusters
				for i := len(a.cleanups) - 1; i >= 0; i-- {
					a.cleanups[i]()
				}
			}()
			body(a)
		}()
		<-done
		if !a.Failed() {
			return
		}
		fails := strings.Join(a.fails, "\n")
		if len(elected) == 0 || a.own || try == Max {
			if len(elected) > 0 && !a.own {
				t.Logf("every attempt saw an election (%s)", strings.Join(elected, ", "))
			}
			t.Fatalf("attempt %d:\n%s", try, fails)
			return
		}
		t.Logf("attempt %d failed during an election (%s), trying again:\n%s", try, strings.Join(elected, ", "), fails)
	}
}

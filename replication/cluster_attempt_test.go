package replication

import (
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lockserver/lockserver/keyspace"
)

// How tests hold when the leader changes under them, as it may on a busy
// machine even with the harness's long timeouts.
//
// A test that makes the leader change (stops it, cuts it off) talks to the
// cluster as a client would: it sends again what TRYAGAIN and CLUSTERDOWN say
// was not written (see retry), reads back after UNKNOWN to learn whether a
// write took effect (see set), and finds the leader again rather than keep the
// one it found first.
//
// A test whose point is what a leader does while it leads (holds its state
// machine, counts its replicas, answers a pipeline in order) runs as attempts
// (see stably), each on a cluster of its own. A failed attempt fails the test
// unless an election it did not cause happened during it; then it is tried
// again, a bounded number of times. So a broken mechanism fails the test
// whatever the load, and an election that voids an attempt voids only that one.

// maxAttempts bounds the attempts of a stably test.
const maxAttempts = 4

// attemptT is the testing.TB of one attempt: a failure ends the attempt and
// is kept for stably to judge; cleanups run when the attempt ends.
type attemptT struct {
	testing.TB
	mu       sync.Mutex
	fails    []string
	cleanups []func()
	helpers  map[string]bool // functions that called Helper
	clusters []*testCluster  // the clusters the attempt started
	own      bool            // see ownElections
}

func (a *attemptT) Helper() {
	pc, _, _, ok := runtime.Caller(1)
	if !ok {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.helpers[runtime.FuncForPC(pc).Name()] = true
}

// where returns the file:line of the first caller that is not a helper.
func (a *attemptT) where() string {
	pcs := make([]uintptr, 32)
	frames := runtime.CallersFrames(pcs[:runtime.Callers(3, pcs)])
	a.mu.Lock()
	defer a.mu.Unlock()
	for {
		f, more := frames.Next()
		if !a.helpers[f.Function] && !strings.HasSuffix(f.Function, ".(*attemptT).Fatalf") {
			return fmt.Sprintf("%s:%d", f.File[strings.LastIndex(f.File, "/")+1:], f.Line)
		}
		if !more {
			return "?"
		}
	}
}

func (a *attemptT) Errorf(format string, args ...any) {
	msg := a.where() + ": " + fmt.Sprintf(format, args...)
	a.mu.Lock()
	defer a.mu.Unlock()
	a.fails = append(a.fails, msg)
}

func (a *attemptT) Error(args ...any) { a.Errorf("%s", fmt.Sprint(args...)) }

func (a *attemptT) Fatalf(format string, args ...any) {
	a.Errorf(format, args...)
	runtime.Goexit()
}

func (a *attemptT) Fatal(args ...any) { a.Fatalf("%s", fmt.Sprint(args...)) }
func (a *attemptT) FailNow()          { a.Fatalf("FailNow") }
func (a *attemptT) Fail()             { a.Errorf("Fail") }

func (a *attemptT) Failed() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.fails) > 0
}

func (a *attemptT) Cleanup(f func()) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.cleanups = append(a.cleanups, f)
}

// Skip and its kin cannot stop the test from an attempt's goroutine.
func (a *attemptT) Skip(args ...any) { a.Fatalf("Skip in an attempt: %s", fmt.Sprint(args...)) }
func (a *attemptT) Skipf(format string, args ...any) {
	a.Fatalf("Skip in an attempt: "+format, args...)
}
func (a *attemptT) SkipNow() { a.Fatalf("SkipNow in an attempt") }

// elected reports the clusters of the attempt in which an election happened
// since the cluster's first leader was found.
func (a *attemptT) elected() []string {
	var what []string
	for _, c := range a.clusters {
		if term := c.term(); term != c.firstTerm {
			what = append(what, fmt.Sprintf("term %d -> %d", c.firstTerm, term))
		}
	}
	return what
}

// ownElections says that from now on the attempt of t changes the leader
// itself: a failure after this point fails the test, election or not.
func ownElections(t testing.TB) {
	if a, ok := t.(*attemptT); ok {
		a.mu.Lock()
		a.own = true
		a.mu.Unlock()
	}
}

// stably runs attempt until it passes, on the goroutine of an attemptT. An
// attempt that fails, and during which an election happened in a cluster it
// started before it called ownElections, is tried again, at most
// maxAttempts times in all; any other failure fails t.
func stably(t *testing.T, attempt func(t testing.TB)) {
	t.Helper()
	for try := 1; ; try++ {
		a := &attemptT{TB: t, helpers: map[string]bool{}}
		done := make(chan struct{})
		var elected []string
		go func() {
			defer close(done)
			defer func() {
				elected = a.elected() // before the cleanups close the clusters
				for i := len(a.cleanups) - 1; i >= 0; i-- {
					a.cleanups[i]()
				}
			}()
			attempt(a)
		}()
		<-done
		if !a.Failed() {
			return
		}
		if len(elected) == 0 || a.own || try == maxAttempts {
			if len(elected) > 0 {
				t.Logf("every attempt saw an election (%s)", strings.Join(elected, ", "))
			}
			t.Fatalf("attempt %d:\n%s", try, strings.Join(a.fails, "\n"))
		}
		t.Logf("attempt %d failed during an election (%s), trying again:\n%s", try, strings.Join(elected, ", "), strings.Join(a.fails, "\n"))
	}
}

// term returns the highest term a running node knows: it grows with every
// election (a node cut off from the others does not raise it: its pre-vote
// fails).
func (c *testCluster) term() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	var term uint64
	for _, n := range c.nodes {
		if n.eng != nil {
			term = max(term, n.eng.raft.CurrentTerm())
		}
	}
	return term
}

// notWritten reports whether r says that nothing was written, so that a
// client sends the command again.
func notWritten(r keyspace.Reply) bool {
	return r.Kind == keyspace.KindError && (strings.HasPrefix(r.Str, "TRYAGAIN") || strings.HasPrefix(r.Str, "CLUSTERDOWN"))
}

// isUnknown reports whether r says that the command may or may not
// have taken effect.
func isUnknown(r keyspace.Reply) bool {
	return r.Kind == keyspace.KindError && strings.HasPrefix(r.Str, "UNKNOWN")
}

// retry runs send until its reply is not one that says nothing was written,
// as a client does across an election, for up to testWait.
func (c *testCluster) retry(what string, send func() keyspace.Reply) keyspace.Reply {
	c.t.Helper()
	deadline := time.Now().Add(testWait)
	for {
		r := send()
		if !notWritten(r) {
			return r
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("%s: still %q after %v", what, r.Str, testWait)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// do sends cmd to n as a client connected to n: again while the reply says
// that nothing was written.
func (c *testCluster) do(n *testNode, db int, cmd ...string) keyspace.Reply {
	c.t.Helper()
	return c.retry(strings.Join(cmd, " ")+" on "+n.id, func() keyspace.Reply { return do(n, db, cmd...) })
}

// set writes key through n with SET key value and args, as a client that
// reads back after UNKNOWN: if GET shows the value, the write took effect;
// else it is sent again. Nothing else may write key meanwhile.
func (c *testCluster) set(n *testNode, db int, key, value string, args ...string) keyspace.Reply {
	c.t.Helper()
	cmd := append([]string{"SET", key, value}, args...)
	for {
		r := c.do(n, db, cmd...)
		if !isUnknown(r) {
			return r
		}
		if same(c.do(n, db, "GET", key), keyspace.Bulk(value)) {
			return keyspace.OK
		}
	}
}

// incr runs INCR key through n, which must take key to want, as a client
// that reads back after UNKNOWN: if GET shows want, the INCR took effect; if
// it shows one less, it did not and is sent again. It returns the INCR's
// reply, or want once read back. Nothing else may write key meanwhile.
func (c *testCluster) incr(n *testNode, key string, want int64) keyspace.Reply {
	c.t.Helper()
	for {
		r := c.do(n, 0, "INCR", key)
		if !isUnknown(r) {
			return r
		}
		switch got := c.do(n, 0, "GET", key); {
		case same(got, keyspace.Bulk(fmt.Sprint(want))):
			return keyspace.Int(want)
		case !same(got, keyspace.Bulk(fmt.Sprint(want-1))):
			c.t.Fatalf("INCR %s after UNKNOWN: GET = %+v, want %d or %d", key, got, want-1, want)
		}
	}
}

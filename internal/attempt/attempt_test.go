package attempt

import (
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
)

// recorder is the test Run reports to.
type recorder struct {
	testing.TB
	fatal string
	logs  []string
}

func (r *recorder) Helper() {}
func (r *recorder) Logf(format string, args ...any) {
	r.logs = append(r.logs, fmt.Sprintf(format, args...))
}
func (r *recorder) Fatalf(format string, args ...any) { r.fatal = fmt.Sprintf(format, args...) }

// run runs body through Run with a cluster whose term the body moves by
// calling elect; it returns what Run reported and how many attempts ran.
func run(body func(t testing.TB, try int, elect func())) (*recorder, int) {
	r := &recorder{TB: nil}
	var tries int
	Run(r, func(t testing.TB) {
		tries++
		var term atomic.Uint64
		Watch(t, "the cluster", term.Load)
		body(t, tries, func() { term.Add(1) })
	})
	return r, tries
}

func TestRunFailsAtOnceWithoutAnElection(t *testing.T) {
	r, tries := run(func(t testing.TB, try int, elect func()) {
		helperThatFails(t)
		t.Error("not reached: Fatalf ends the attempt")
	})
	if tries != 1 || !strings.Contains(r.fatal, "attempt 1:") || !strings.Contains(r.fatal, "attempt_test.go:") || !strings.Contains(r.fatal, "wrong") {
		t.Fatalf("%d attempts, reported %q", tries, r.fatal)
	}
	if strings.Contains(r.fatal, "not reached") || strings.Contains(r.fatal, "helperThatFails") {
		t.Fatalf("reported %q", r.fatal)
	}
}

func helperThatFails(t testing.TB) {
	t.Helper()
	t.Fatalf("wrong")
}

func TestRunTriesAgainAfterAnElection(t *testing.T) {
	r, tries := run(func(t testing.TB, try int, elect func()) {
		if try < 3 {
			elect()
			t.Fatalf("failed in attempt %d", try)
		}
	})
	if tries != 3 || r.fatal != "" || len(r.logs) != 2 || !strings.Contains(r.logs[1], "failed in attempt 2") {
		t.Fatalf("%d attempts, reported %q, logged %q", tries, r.fatal, r.logs)
	}
}

func TestRunGivesUpAfterMaxAttempts(t *testing.T) {
	r, tries := run(func(t testing.TB, try int, elect func()) {
		elect()
		t.Errorf("fails every time")
	})
	if tries != Max || !strings.Contains(r.fatal, fmt.Sprintf("attempt %d:", Max)) {
		t.Fatalf("%d attempts, reported %q", tries, r.fatal)
	}
}

func TestRunOwnElectionsDoNotExcuse(t *testing.T) {
	r, tries := run(func(t testing.TB, try int, elect func()) {
		Own(t)
		elect()
		t.Fatalf("fails after its own election")
	})
	if tries != 1 || !strings.Contains(r.fatal, "fails after its own election") {
		t.Fatalf("%d attempts, reported %q", tries, r.fatal)
	}
}

func TestRunCleansUpEachAttempt(t *testing.T) {
	var cleaned []int
	r, tries := run(func(t testing.TB, try int, elect func()) {
		t.Cleanup(func() { cleaned = append(cleaned, try) })
		if try == 1 {
			elect()
			t.FailNow()
		}
		if len(cleaned) != 1 {
			t.Errorf("attempt %d started before attempt 1 was cleaned up", try)
		}
	})
	if tries != 2 || r.fatal != "" || fmt.Sprint(cleaned) != "[1 2]" {
		t.Fatalf("%d attempts, reported %q, cleaned up %v", tries, r.fatal, cleaned)
	}
}

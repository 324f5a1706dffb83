// Package testenv is what tests need of the machine they run on: programs
// such as redis-server, which a test skips without, or fails without when
// CI is set, since CI installs every dependency.
package testenv

import (
	"os"
	"os/exec"
	"testing"
)

// Need returns the path of program, or skips the test (fails it under CI).
func Need(t testing.TB, program string) string {
	t.Helper()
	path, err := exec.LookPath(program)
	if err != nil {
		Missing(t, program+" is not installed (Debian: apt-get install redis-server redis-tools python3-redis)")
	}
	return path
}

// Missing skips the test, or fails it under CI where every dependency must
// be present.
func Missing(t testing.TB, why string) {
	t.Helper()
	if os.Getenv("CI") != "" {
		t.Fatalf("CI is set and %s", why)
	}
	t.Skipf("skipping: %s", why)
}

// Long skips t in the fast tier (go test -short): a test that takes
// seconds, because it waits for elections, restarts members, builds the
// binary or runs a workload. The full tier, which CI runs, runs it.
func Long(t testing.TB) {
	t.Helper()
	if testing.Short() {
		t.Skip("a long test: the full tier (go test without -short) runs it")
	}
}

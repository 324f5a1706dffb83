package compat_test

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/lockserver/lockserver/internal/testenv"
)

// redis-py's Lock, from Debian's python3-redis, driven by
// testdata/redispy_lock.py in a subprocess. The program prints what the
// library reports at each step; its output against lockserver must equal its
// output against redis-server, and both must equal the worked example below.

// redispyLockWant is what redispy_lock.py prints against Redis 7: each line
// follows from redis-py 4.3's lock.py (blocking with timeouts, extend,
// reacquire, thread-local tokens, LockNotOwnedError for a non-owner).
const redispyLockWant = `script flush: True
acquire, not blocking: True
owned: True
ttl within the timeout: True
rival acquire, not blocking: False
rival acquire, blocking_timeout 0.3 s: False
rival owned: False
rival sees it locked: True
extend by 10 s: True
ttl within 10-15 s: True
extend, replacing the ttl with 2 s: True
ttl within 1-2 s: True
reacquire: True
ttl back within the timeout: True
release by a non-owner: LockNotOwnedError
extend by a non-owner: LockNotOwnedError
reacquire by a non-owner: LockNotOwnedError
still owned by the holder: True
another thread: owned: AttributeError
another thread: release: AttributeError
release by the holder: None
release again: LockError
locked after release: False
shared acquire: True
shared released by another thread: None
acquire with a 0.3 s timeout: True
blocking acquire outlasts the lease: True
expired holder: extend: LockNotOwnedError
expired holder: reacquire: LockNotOwnedError
expired holder: release: LockNotOwnedError
new holder owns it: True
new holder release: None
inside with: owned: True
after with: locked: False
contention: 30 entries, at most 1 inside at once
`

// debianPython returns Debian's python3 when it has the redis module. The
// pyenv python3 first on PATH has no redis module, so the path is fixed.
func debianPython(t testing.TB) string {
	t.Helper()
	const python = "/usr/bin/python3"
	if err := exec.Command(python, "-c", "import redis").Run(); err != nil {
		testenv.Missing(t, python+" with the redis module is not installed (Debian: apt-get install python3-redis)")
	}
	return python
}

// runRedispy runs testdata/redispy_lock.py against addr and returns its output.
func runRedispy(t testing.TB, python string, tg clientTarget) string {
	t.Helper()
	host, port, _ := strings.Cut(tg.addr, ":")
	args := []string{"testdata/redispy_lock.py", host, port}
	if tg.password != "" {
		args = append(args, tg.password)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, python, args...)
	cmd.Env = os.Environ()
	if tg.tls != nil {
		cmd.Env = append(cmd.Env, tg.tls.pyEnv()...)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s: redispy_lock.py: %v\n%s", tg.name, err, out)
	}
	return string(out)
}

// compareOutputs compares two programs' outputs line by line.
func compareOutputs(t testing.TB, wantName, want, gotName, got string) {
	t.Helper()
	compareLogs(t, wantName, strings.Split(want, "\n"), gotName, strings.Split(got, "\n"))
}

func TestClientRedispyLock(t *testing.T) {
	python := debianPython(t)
	redisT, ls := redisTarget(t, "s3cret"), lockserverTarget(t, "s3cret")
	want := runRedispy(t, python, redisT)
	compareOutputs(t, "worked example", redispyLockWant, "redis-server", want)
	compareOutputs(t, "redis-server", want, ls.name, runRedispy(t, python, ls))
}

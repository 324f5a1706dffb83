package lockserver_test

import (
	"errors"
	"os/exec"
	"strings"
	"testing"
)

// TestModuleLeavesOutTheBenchClients checks what a library user's go get
// brings: the bench's clients of the systems it measures (etcd's, with gRPC
// and zap) belong to the bench's own module, not to the library's graph.
func TestModuleLeavesOutTheBenchClients(t *testing.T) {
	out, err := exec.Command("go", "list", "-m", "all").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -m all: %v\n%s", err, out)
	}
	for _, line := range strings.Split(string(out), "\n") {
		mod, _, _ := strings.Cut(line, " ")
		for _, bench := range []string{"go.etcd.io/etcd/", "google.golang.org/grpc", "go.uber.org/zap"} {
			if strings.HasPrefix(mod, bench) {
				t.Errorf("the library's module graph holds %s, a dependency of the bench alone", line)
			}
		}
	}
}

// TestBenchModuleIsTidy: the bench is a module of its own that uses this
// checkout through a replace, so every requirement the library gains must be
// added to bench/go.mod too, or the bench does not build ("updates to go.mod
// needed").
func TestBenchModuleIsTidy(t *testing.T) {
	cmd := exec.Command("go", "mod", "tidy", "-diff")
	cmd.Dir = "bench"
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("bench/go.mod is not tidy; run (cd bench && go mod tidy) and commit it: %v\n%s", err, out)
	}
}

// TestREADMEDataDirIsIgnored: the README's cluster keeps its members' data in
// data/a, data/b and data/c of the checkout, which git must not offer to
// commit.
func TestREADMEDataDirIsIgnored(t *testing.T) {
	git, err := exec.LookPath("git")
	if err != nil {
		t.Skip("git is not installed")
	}
	if out, err := exec.Command(git, "rev-parse", "--is-inside-work-tree").Output(); err != nil || strings.TrimSpace(string(out)) != "true" {
		t.Skip("not a git checkout")
	}
	for _, p := range []string{"data/a/raft.db", "data/b/raft.journal", "data/c/snapshots"} {
		err := exec.Command(git, "check-ignore", "-q", p).Run()
		var exit *exec.ExitError
		switch {
		case errors.As(err, &exit) && exit.ExitCode() == 1:
			t.Errorf("git does not ignore %s, where README.md's cluster keeps its data", p)
		case err != nil:
			t.Errorf("git check-ignore %s: %v", p, err)
		}
	}
}

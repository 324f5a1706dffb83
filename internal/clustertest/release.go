package clustertest

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lockserver/lockserver/internal/buildinfo"
	"github.com/lockserver/lockserver/internal/testenv"
)

// PreviousRelease returns a lockserver binary of the release before this
// build (internal/buildinfo's releases.txt), and that release's version:
// the binary LOCKSERVER_PREVIOUS_BINARY names, or one built from the
// release's commit in this git clone. Without either the test is skipped,
// or failed under CI. With -short it is skipped: it starts processes.
func PreviousRelease(t testing.TB) (bin, version string) {
	t.Helper()
	testenv.Long(t)
	var prev buildinfo.Published
	for _, r := range buildinfo.Releases() {
		if v, err := buildinfo.Parse(r.Version); err == nil && v.Less(buildinfo.Current) {
			prev = r
		}
	}
	if prev.Version == "" {
		t.Fatalf("releases.txt names no release before %s", buildinfo.Version)
	}
	if bin := os.Getenv("LOCKSERVER_PREVIOUS_BINARY"); bin != "" {
		return bin, prev.Version
	}
	git, err := exec.LookPath("git")
	if err != nil {
		testenv.Missing(t, "git is not installed, to build "+prev.Version+" (or set LOCKSERVER_PREVIOUS_BINARY)")
	}
	top, err := exec.Command(git, "rev-parse", "--show-toplevel").Output()
	if err != nil {
		testenv.Missing(t, "not a git clone, to build "+prev.Version+" from (or set LOCKSERVER_PREVIOUS_BINARY)")
	}
	repo := strings.TrimSpace(string(top))
	if err := exec.Command(git, "-C", repo, "cat-file", "-e", prev.Commit+"^{commit}").Run(); err != nil {
		testenv.Missing(t, "this clone lacks the commit of "+prev.Version+", "+prev.Commit+" (git fetch --unshallow, or set LOCKSERVER_PREVIOUS_BINARY)")
	}
	src := t.TempDir()
	archive := exec.Command(git, "-C", repo, "archive", "--format=tar", prev.Commit)
	extract := exec.Command("tar", "-x", "-C", src)
	// Each its own: the two run at once.
	var archiveErr, extractErr bytes.Buffer
	archive.Stderr, extract.Stderr = &archiveErr, &extractErr
	if extract.Stdin, err = archive.StdoutPipe(); err != nil {
		t.Fatal(err)
	}
	if err := extract.Start(); err != nil {
		t.Fatal(err)
	}
	if err := archive.Run(); err != nil {
		t.Fatalf("git archive %s: %v\n%s", prev.Commit, err, archiveErr.String())
	}
	if err := extract.Wait(); err != nil {
		t.Fatalf("extract %s: %v\n%s", prev.Commit, err, extractErr.String())
	}
	bin = filepath.Join(t.TempDir(), "lockserver-"+prev.Version)
	build := exec.Command("go", "build", "-o", bin, "./cmd/lockserver")
	build.Dir = src
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build %s: %v\n%s", prev.Version, err, out)
	}
	return bin, prev.Version
}

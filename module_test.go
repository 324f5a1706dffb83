package lockserver_test

import (
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

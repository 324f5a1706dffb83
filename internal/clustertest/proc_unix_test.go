//go:build unix

package clustertest

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// A one-member cluster in a process: it answers once started, leads, does
// not answer while paused and does again once resumed, exits with status 0
// on Stop, and starts again from its data directory with the password it
// was given; its log file holds what each run wrote.
func TestProc(t *testing.T) {
	var pids []int
	p := NewProc(t, Binary(t), "n1", ProcOptions{Password: "secret", PIDs: func(pid int, id string) {
		if id != "n1" {
			t.Errorf("PIDs told of %q", id)
		}
		pids = append(pids, pid)
	}})
	p.Args = p.MemberArgs("--bootstrap", "n1="+p.RaftAddr())
	p.Start(t)
	c := &Cluster[*Proc]{Nodes: []*Proc{p}}
	c.Leader(t)
	ctx := context.Background()
	Eventually(t, "SET", func() error { return p.Client().Set(ctx, "k", "v", 0).Err() })

	p.Pause()
	if _, err := p.Status(ctx); err == nil || !strings.Contains(err.Error(), "paused") {
		t.Fatalf("Status of a paused process = %v, want an error saying so", err)
	}
	p.Resume()
	if st, err := p.Status(ctx); err != nil || st.State != "leader" || st.Leader != "n1" {
		t.Fatalf("Status after Resume = %+v, %v; want the leader", st, err)
	}

	p.Stop(t)
	if _, err := p.Status(ctx); err == nil {
		t.Fatal("a stopped process answered Status")
	}
	p.Start(t)
	Eventually(t, "GET after the restart", func() error { return p.Client().Get(ctx, "k").Err() })
	p.Kill()
	if len(pids) != 4 || pids[0] == 0 || pids[1] != 0 || pids[2] == 0 || pids[3] != 0 {
		t.Errorf("PIDs told %v, want a pid and 0 for each of two runs", pids)
	}
	b, err := os.ReadFile(p.LogPath())
	if err != nil || strings.Count(string(b), "---- start ") != 2 || strings.Count(string(b), "lockserver ready") != 2 {
		t.Errorf("the log of two runs: %v\n%s", err, b)
	}

	p.Wipe(t)
	if _, err := os.Stat(p.Dir()); !os.IsNotExist(err) {
		t.Fatalf("the data directory after Wipe: %v", err)
	}
	p.Args = []string{"--no-such-flag"}
	p.Spawn(t)
	var exit *exec.ExitError
	if err := p.Wait(Wait); !errors.As(err, &exit) || exit.ExitCode() == 0 {
		t.Fatalf("a process given a bad flag: %v, want a failed exit", err)
	}
}

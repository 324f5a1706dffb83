package main

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lockserver/lockserver/internal/freeport"
	"github.com/redis/go-redis/v9"
)

func TestParseFlagsAndEnvironment(t *testing.T) {
	env := map[string]string{
		"LOCKSERVER_ADDR":               "127.0.0.1:7777",
		"LOCKSERVER_MAX_CLIENTS":        "12",
		"LOCKSERVER_PROTO_MAX_BULK_LEN": "1mb",
	}
	cfg, err := parse([]string{"--max-clients", "34", "--log-format", "json", "--maxmemory", "2gb"}, func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	if cfg.opts.Addr != "127.0.0.1:7777" {
		t.Errorf("addr from the environment: got %q", cfg.opts.Addr)
	}
	if cfg.opts.MaxClients != 34 {
		t.Errorf("the command line must win over the environment: got %d, want 34", cfg.opts.MaxClients)
	}
	if cfg.opts.Limits.MaxBulk != 1<<20 {
		t.Errorf("1mb: got %d, want %d", cfg.opts.Limits.MaxBulk, 1<<20)
	}
	if cfg.opts.MaxMemory != 2<<30 {
		t.Errorf("--maxmemory 2gb: got %d", cfg.opts.MaxMemory)
	}
	if cfg.logFormat != "json" {
		t.Errorf("log format: got %q", cfg.logFormat)
	}
}

func TestParseRejectsBadInput(t *testing.T) {
	none := func(string) string { return "" }
	for _, args := range [][]string{
		{"--max-clients", "many"},
		{"--proto-max-bulk-len", "12xb"},
		{"--log-format", "xml"},
		{"--log-level", "loud"},
		{"--procs", "-1"},
		{"stray"},
		{"--no-such-flag"},
	} {
		if _, err := parse(args, none); err == nil {
			t.Errorf("%q: expected an error", args)
		}
	}
	bad := func(k string) string {
		if k == "LOCKSERVER_MAX_CLIENTS" {
			return "lots"
		}
		return ""
	}
	if _, err := parse(nil, bad); err == nil || !strings.Contains(err.Error(), "LOCKSERVER_MAX_CLIENTS") {
		t.Errorf("a bad environment value must be named in the error, got %v", err)
	}
}

func TestProcs(t *testing.T) {
	for _, c := range []struct {
		flag    int
		envSet  bool
		runtime int
		want    int
	}{
		{0, false, 1, 1},  // one CPU
		{0, false, 2, 1},  // two CPUs: one, beside the clients
		{0, false, 8, 8},  // more: all of them
		{0, true, 2, 2},   // GOMAXPROCS=2 asked for two
		{3, false, 2, 3},  // --procs wins
		{2, true, 16, 2},  // over GOMAXPROCS too
		{0, false, 3, 3},  // three CPUs: all
		{1, false, 64, 1}, // a big machine, told one
	} {
		if got := procs(c.flag, c.envSet, c.runtime); got != c.want {
			t.Errorf("procs(flag %d, GOMAXPROCS set %v, runtime %d) = %d, want %d", c.flag, c.envSet, c.runtime, got, c.want)
		}
	}
}

func TestParseSize(t *testing.T) {
	for in, want := range map[string]int64{"1048576": 1048576, "1mb": 1 << 20, "1m": 1000000, "2GB": 2 << 30, "512k": 512000, "3kb": 3072} {
		got, err := parseSize(in)
		if err != nil || got != want {
			t.Errorf("parseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "mb", "-1", "1.5mb", "99999999999gb"} {
		if _, err := parseSize(in); err == nil {
			t.Errorf("parseSize(%q): expected an error", in)
		}
	}
}

// buildBinary builds the binary into a temporary directory; with -short the
// test that needs it is skipped.
func buildBinary(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := filepath.Join(t.TempDir(), "lockserver")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	return bin
}

// TestBinaryServesAndStopsOnSIGTERM builds the binary, runs it, talks to it and
// checks that SIGTERM stops it cleanly (exit status 0, "stopped" logged).
func TestBinaryServesAndStopsOnSIGTERM(t *testing.T) {
	bin := buildBinary(t)
	addr := freeport.MustAddr(t)

	cmd := exec.Command(bin, "--log-format", "json")
	cmd.Env = append(os.Environ(), "LOCKSERVER_ADDR="+addr, "LOCKSERVER_PASSWORD=secret")
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	logs := bufio.NewScanner(stderr)
	if !logs.Scan() || !strings.Contains(logs.Text(), `"msg":"lockserver ready"`) {
		t.Fatalf("expected a JSON 'ready' log line, got %q", logs.Text())
	}

	ctx := context.Background()
	c := redis.NewClient(&redis.Options{Addr: addr, Password: "secret"})
	defer c.Close()
	if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if v, err := c.Get(ctx, "k").Result(); err != nil || v != "v" {
		t.Fatalf("GET: %q, %v", v, err)
	}
	noauth := redis.NewClient(&redis.Options{Addr: addr})
	defer noauth.Close()
	if err := noauth.Get(ctx, "k").Err(); err == nil || !strings.HasPrefix(err.Error(), "NOAUTH") {
		t.Fatalf("without the password: got %v, want NOAUTH", err)
	}

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	var rest strings.Builder
	for logs.Scan() {
		rest.WriteString(logs.Text() + "\n")
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("exit after SIGTERM: %v\n%s", err, rest.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("did not stop within 10s of SIGTERM")
	}
	if !strings.Contains(rest.String(), `"msg":"stopped"`) {
		t.Errorf("expected a 'stopped' log line, got:\n%s", rest.String())
	}
}

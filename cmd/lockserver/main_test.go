package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lockserver/lockserver/internal/buildinfo"
	"github.com/lockserver/lockserver/internal/clustertest"
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
	if cfg.opts.DisableProtectedMode {
		t.Errorf("protected mode is on by default")
	}
	env["LOCKSERVER_ACLFILE"] = "/etc/users.acl"
	if cfg, err := parse(nil, func(k string) string { return env[k] }); err != nil || cfg.opts.ACLFile != "/etc/users.acl" {
		t.Errorf("LOCKSERVER_ACLFILE: %v, %+v", err, cfg)
	}
	env["LOCKSERVER_PROTECTED_MODE"] = "no"
	if cfg, err := parse(nil, func(k string) string { return env[k] }); err != nil || !cfg.opts.DisableProtectedMode {
		t.Errorf("LOCKSERVER_PROTECTED_MODE=no: %v, disabled %v", err, cfg != nil && cfg.opts.DisableProtectedMode)
	}
	if cfg, err := parse([]string{"--protected-mode", "YES"}, func(k string) string { return env[k] }); err != nil || cfg.opts.DisableProtectedMode {
		t.Errorf("--protected-mode YES over the environment's no: %v", err)
	}
}

// A variable named like a flag's that is none (a misspelt setting) is
// named, to be warned of; the flags' own, and other programs', are not.
func TestUnknownEnvironmentVariables(t *testing.T) {
	cfg, err := parse(nil, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	environ := []string{"LOCKSERVER_PASSWORD=x", "LOCKSERVER_PASWORD=y", "LOCKSERVER_CLUSTER_SECRET=z", "HOME=/root", "LOCKSERVER_CLUSTER_SECERT=w", "REDIS_PASSWORD=v"}
	if got, want := unknownEnv(environ, cfg.envNames), []string{"LOCKSERVER_CLUSTER_SECERT", "LOCKSERVER_PASWORD"}; !slices.Equal(got, want) {
		t.Fatalf("unknownEnv = %v, want %v", got, want)
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
		{"--max-clients", "-1"},
		{"--script-budget", "-10"},
		{"--join-timeout", "-1s"},
		{"--heartbeat-timeout", "-1s"},
		{"--election-timeout", "soon"},
		{"--protected-mode", "maybe"},
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
	// The command line wins over the environment, but a bad value there is
	// still a mistake to report, not one to hide.
	for env, args := range map[string][]string{
		"LOCKSERVER_MAXMEMORY":     {"--maxmemory", "1gb"},
		"LOCKSERVER_MAX_CLIENTS":   {"--max-clients", "10"},
		"LOCKSERVER_SCRIPT_BUDGET": {"--script-budget", "1000"},
	} {
		for _, v := range []string{"lots", "-1"} {
			getenv := func(k string) string {
				if k == env {
					return v
				}
				return ""
			}
			if _, err := parse(args, getenv); err == nil || !strings.Contains(err.Error(), env) {
				t.Errorf("%s=%s with %q: got %v, want an error naming %s", env, v, args, err, env)
			}
		}
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

// TestBinaryServesAndStopsOnSIGTERM builds the binary, runs it, talks to it and
// checks that SIGTERM stops it cleanly (exit status 0, "stopped" logged).
func TestBinaryServesAndStopsOnSIGTERM(t *testing.T) {
	bin := clustertest.Binary(t)
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

// runBinary runs the binary with args until it exits (killing it after
// limit) and returns its stdout, its stderr and its exit code.
func runBinary(t *testing.T, bin string, limit time.Duration, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = os.Environ()
	var out, errOut strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("%q was still running after %v:\n%s", args, limit, errOut.String())
	}
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatalf("%q: %v", args, err)
	}
	return out.String(), errOut.String(), cmd.ProcessState.ExitCode()
}

// exitCode is the exit status of a process that Wait or Run returned err
// for, or -1 when err says it did not exit.
func exitCode(err error) int {
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode()
	}
	if err != nil {
		return -1
	}
	return 0
}

// What a new user meets when a start goes wrong, or when they ask for help:
// a help that succeeds, and failures that exit 1 with one line that says why.
func TestBinaryStartsOrSaysWhy(t *testing.T) {
	bin := clustertest.Binary(t)
	t.Run("help", func(t *testing.T) {
		for _, arg := range []string{"--help", "-h"} {
			stdout, stderr, code := runBinary(t, bin, time.Minute, arg)
			if code != 0 || !strings.HasPrefix(stdout, "usage: lockserver") || !strings.Contains(stdout, "-join-timeout") || stderr != "" {
				t.Errorf("%s: exit %d, stdout %q, stderr %q; want exit 0 and the usage on stdout", arg, code, stdout, stderr)
			}
		}
	})
	// fails runs the binary and checks that it exits 1 with one line, after
	// any logs and before any usage, that names the program once and says want.
	fails := func(t *testing.T, want string, args ...string) {
		t.Helper()
		_, stderr, code := runBinary(t, bin, 20*time.Second, args...)
		var said []string
		for _, line := range strings.Split(stderr, "\n") {
			if strings.HasPrefix(line, "lockserver: ") {
				said = append(said, line)
			}
		}
		if code != 1 || len(said) != 1 || strings.HasPrefix(said[0], "lockserver: lockserver:") || !strings.Contains(said[0], want) {
			t.Errorf("%q: exit %d, error lines %q; want exit 1 and one \"lockserver: \" line saying %q\n%s", args, code, said, want, stderr)
		}
	}
	t.Run("address in use", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		fails(t, "listen: listen tcp "+ln.Addr().String(), "--addr", ln.Addr().String())
	})
	t.Run("ACL file", func(t *testing.T) {
		missing := filepath.Join(t.TempDir(), "nosuch.acl")
		fails(t, "ACL file: Error loading ACLs, opening file '"+missing+"': No such file or directory", "--addr", freeport.MustAddr(t), "--aclfile", missing)
		bad := filepath.Join(t.TempDir(), "bad.acl")
		if err := os.WriteFile(bad, []byte("user app on +nosuch\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		fails(t, "ACL file: "+bad+":1: Error in applying operation '+nosuch': Unknown command or category name in ACL. WARNING: ACL errors detected",
			"--addr", freeport.MustAddr(t), "--aclfile", bad)
	})
	t.Run("negative max-clients", func(t *testing.T) {
		fails(t, `invalid value "-1" for flag -max-clients: must be 0 or more`, "--max-clients", "-1")
	})
	t.Run("join nothing", func(t *testing.T) {
		// A port nothing listens on: every attempt is refused until the
		// timeout, well within the 20 s the process is given.
		nobody := freeport.MustAddr(t)
		fails(t, "join via "+nobody+": gave up after 1s (the join timeout)",
			"--addr", freeport.MustAddr(t), "--node-id", "a", "--raft-addr", freeport.MustAddr(t), "--join", nobody, "--join-timeout", "1s")
	})
	t.Run("interrupted while joining", func(t *testing.T) {
		cmd := exec.Command(bin, "--addr", freeport.MustAddr(t), "--node-id", "a", "--raft-addr", freeport.MustAddr(t), "--join", freeport.MustAddr(t), "--join-timeout", "10m")
		stderr, err := cmd.StderrPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		defer cmd.Process.Kill()
		logs := bufio.NewScanner(stderr)
		for logs.Scan() && !strings.Contains(logs.Text(), "join failed") {
		}
		if err := cmd.Process.Signal(os.Interrupt); err != nil {
			t.Fatal(err)
		}
		go io.Copy(io.Discard, stderr)
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			t.Fatal("Ctrl-C did not stop a member waiting to join (its timeout is 10m)")
		}
	})
	t.Run("bootstrap without this member", func(t *testing.T) {
		raft := freeport.MustAddr(t)
		fails(t, "bootstrap: this node, a, is not among the voters; list it too, as a="+raft,
			"--addr", freeport.MustAddr(t), "--node-id", "a", "--raft-addr", raft, "--bootstrap", "b=127.0.0.1:1,c=127.0.0.1:2")
	})
	t.Run("bootstrap naming this member elsewhere", func(t *testing.T) {
		raft := freeport.MustAddr(t)
		fails(t, "the voters name this node, a, at 127.0.0.1:3, but its Raft address is "+raft,
			"--addr", freeport.MustAddr(t), "--node-id", "a", "--raft-addr", raft, "--bootstrap", "a=127.0.0.1:3,b=127.0.0.1:1,c=127.0.0.1:2")
	})
}

// --version prints the release and exits; it is a question, so that a
// LOCKSERVER_VERSION in the environment does not turn a server into it.
func TestVersionFlag(t *testing.T) {
	var out, errs bytes.Buffer
	if err := run([]string{"--version"}, &out, &errs); err != nil {
		t.Fatal(err)
	}
	if got := out.String(); !strings.HasPrefix(got, "lockserver "+buildinfo.Version) || !strings.HasSuffix(got, "\n") {
		t.Errorf("--version printed %q, want a line naming %s", got, buildinfo.Version)
	}
	env := func(name string) string {
		if name == "LOCKSERVER_VERSION" {
			return "true"
		}
		return ""
	}
	if cfg, err := parse(nil, env); err != nil || cfg == nil {
		t.Errorf("with LOCKSERVER_VERSION set, parse = %v, %v; want the server's configuration", cfg, err)
	}
}

// --password-file and --cluster-secret-file read the secrets from files, as
// a mounted secret holds them, less one trailing newline; a flag and its
// file together, a missing file and an empty one are refused.
func TestParseSecretFiles(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	pw, secret, empty := write("pw", "s3cret\n"), write("secret", "0123456789abcdef-secret\r\n"), write("empty", "\n")
	none := func(string) string { return "" }
	cfg, err := parse([]string{"--password-file", pw, "--node-id", "a", "--raft-addr", "127.0.0.1:7000", "--cluster-secret-file", secret}, none)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.opts.Password != "s3cret" || cfg.opts.Cluster.Secret != "0123456789abcdef-secret" {
		t.Fatalf("password %q, cluster secret %q", cfg.opts.Password, cfg.opts.Cluster.Secret)
	}
	env := map[string]string{"LOCKSERVER_PASSWORD_FILE": pw}
	if cfg, err := parse(nil, func(k string) string { return env[k] }); err != nil || cfg.opts.Password != "s3cret" {
		t.Fatalf("LOCKSERVER_PASSWORD_FILE: %v, %q", err, cfg.opts.Password)
	}
	for _, args := range [][]string{
		{"--password", "x", "--password-file", pw},
		{"--password-file", filepath.Join(dir, "missing")},
		{"--password-file", empty},
		{"--node-id", "a", "--raft-addr", "127.0.0.1:7000", "--cluster-secret", "0123456789abcdef-other", "--cluster-secret-file", secret},
	} {
		if _, err := parse(args, none); err == nil {
			t.Errorf("%q: accepted", args)
		}
	}
	env = map[string]string{"LOCKSERVER_PASSWORD": "x"}
	if _, err := parse([]string{"--password-file", pw}, func(k string) string { return env[k] }); err == nil {
		t.Error("LOCKSERVER_PASSWORD with --password-file: accepted")
	}
}

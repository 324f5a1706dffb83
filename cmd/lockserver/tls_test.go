package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lockserver/lockserver/internal/clustertest"
	"github.com/lockserver/lockserver/internal/freeport"
	"github.com/lockserver/lockserver/internal/testcerts"
	"github.com/redis/go-redis/v9"
)

func TestParseTLSFlags(t *testing.T) {
	none := func(string) string { return "" }
	cfg, err := parse([]string{"--tls-port", "6380", "--tls-cert-file", "s.crt", "--tls-key-file", "s.key", "--tls-ca-cert-file", "ca.crt",
		"--tls-protocols", "TLSv1.3", "--tls-ciphers", "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256:TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384"}, none)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.opts.TLSAddr != "127.0.0.1:6380" || cfg.opts.Addr != "127.0.0.1:6379" {
		t.Errorf("--tls-port 6380: TLS on %q, plain on %q", cfg.opts.TLSAddr, cfg.opts.Addr)
	}
	if cfg.tls.minVersion != tls.VersionTLS13 || cfg.tls.maxVersion != tls.VersionTLS13 || cfg.tls.authClients != "yes" {
		t.Errorf("TLSv1.3 only, clients authenticated by default: %+v", cfg.tls)
	}
	if want := []uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256, tls.TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384}; fmt.Sprint(cfg.tls.suites) != fmt.Sprint(want) {
		t.Errorf("suites %v, want %v", cfg.tls.suites, want)
	}
	env := map[string]string{"LOCKSERVER_CLUSTER_SECRET": "from-the-environment-0123"}
	cfg, err = parse([]string{"--addr", "", "--tls-port", "10.0.0.1:6380", "--tls-cert-file", "s.crt", "--tls-key-file", "s.key", "--tls-auth-clients", "no",
		"--node-id", "a", "--raft-addr", "10.0.0.1:7000", "--cluster-token", "prod"}, func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	if o := cfg.opts; o.Addr != "-" || o.TLSAddr != "10.0.0.1:6380" || o.Cluster.Secret != env["LOCKSERVER_CLUSTER_SECRET"] || o.Cluster.Token != "prod" {
		t.Errorf("--addr \"\" with a TLS address, a secret from the environment: %+v", o)
	}
	tlsArgs := []string{"--tls-port", "6380", "--tls-cert-file", "s.crt", "--tls-key-file", "s.key"}
	for _, args := range [][]string{
		{"--addr", ""}, // listening nowhere
		{"--tls-port", "6380"},
		append(tlsArgs, "--tls-auth-clients", "yes"),                              // no CA to check clients against
		append(tlsArgs, "--tls-auth-clients", "maybe", "--tls-ca-cert-file", "c"), // not yes, no or optional
		append(tlsArgs, "--tls-auth-clients", "no", "--tls-protocols", "TLSv1.1"), // too old
		append(tlsArgs, "--tls-auth-clients", "no", "--tls-ciphers", "RC4-SHA"),   // not Go's, not secure
		append(tlsArgs, "--tls-auth-clients", "no", "--tls-ciphersuites", "TLS_AES_128_GCM_SHA256"),
		append(tlsArgs, "--tls-auth-clients", "no", "--tls-port", "port"),
		{"--tls-cert-file", "s.crt", "--tls-key-file", "s.key"},                                                                                            // files for nothing
		{"--cluster-secret", "0123456789abcdef"},                                                                                                           // no --node-id
		{"--node-id", "a", "--raft-addr", "h:1", "--tls-cluster", "yes", "--tls-cert-file", "s.crt", "--tls-key-file", "s.key", "--tls-ca-cert-file", "c"}, // no names
		{"--node-id", "a", "--raft-addr", "h:1", "--tls-cluster", "maybe"},
	} {
		if _, err := parse(args, none); err == nil {
			t.Errorf("%q: expected an error", args)
		}
	}
}

// certDir writes a CA and a server certificate for 127.0.0.1 to a new
// directory, as ca.crt, server.crt and server.key, and returns the CA.
func certDir(t *testing.T, dir string) *testcerts.CA {
	t.Helper()
	ca := testcerts.NewCA(t, "test CA")
	ca.WriteFile(t, dir, "ca.crt")
	ca.Issue(t, testcerts.Options{CommonName: "server"}).WriteFiles(t, dir, "server")
	return ca
}

// tlsClient returns go-redis's TLS settings for a client presenting a
// certificate from issuer and trusting the CAs of roots.
func tlsClient(t *testing.T, issuer *testcerts.CA, roots ...*testcerts.CA) *tls.Config {
	leaf := issuer.Issue(t, testcerts.Options{CommonName: "client"})
	cfg := &tls.Config{ServerName: "127.0.0.1", RootCAs: roots[0].Pool(),
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &leaf.TLS, nil }}
	for _, ca := range roots[1:] {
		cfg.RootCAs.AddCert(ca.Cert)
	}
	return cfg
}

// logWatch is a process's log, read line by line as it is written.
type logWatch struct {
	lines chan string
}

func watchLog(t *testing.T, cmd *exec.Cmd) *logWatch {
	t.Helper()
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	w := &logWatch{lines: make(chan string, 1024)}
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			w.lines <- sc.Text()
		}
		close(w.lines)
	}()
	return w
}

// await waits for a line holding every one of want, and returns it.
func (w *logWatch) await(t *testing.T, want ...string) string {
	t.Helper()
	timeout := time.After(30 * time.Second)
	for {
		select {
		case line, ok := <-w.lines:
			if !ok {
				t.Fatalf("the process ended without a log line holding %q", want)
			}
			found := true
			for _, s := range want {
				found = found && strings.Contains(line, s)
			}
			if found {
				return line
			}
		case <-timeout:
			t.Fatalf("no log line holding %q within 30 s", want)
		}
	}
}

// The binary serves TLS clients only (--addr ""): a client with a
// certificate from the CA is served; one from another CA is refused and the
// log says why; a renewed certificate is served to new connections, once
// its files change and again on SIGHUP, while a connection opened before
// goes on.
func TestBinaryTLSClients(t *testing.T) {
	bin := clustertest.Binary(t)
	dir := t.TempDir()
	ca := certDir(t, dir)
	addr := freeport.MustAddr(t)
	cmd := exec.Command(bin, "--addr", "", "--tls-port", addr, "--tls-cert-file", filepath.Join(dir, "server.crt"),
		"--tls-key-file", filepath.Join(dir, "server.key"), "--tls-ca-cert-file", filepath.Join(dir, "ca.crt"))
	logs := watchLog(t, cmd)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	logs.await(t, "lockserver ready", `addr=""`, "tls_addr="+addr)

	ctx := context.Background()
	client := func(cfg *tls.Config) *redis.Client {
		rdb := redis.NewClient(&redis.Options{Addr: addr, TLSConfig: cfg, MaxRetries: -1, PoolSize: 1})
		t.Cleanup(func() { rdb.Close() })
		return rdb
	}
	first := client(tlsClient(t, ca, ca))
	if err := first.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatalf("SET over TLS: %v", err)
	}
	other := testcerts.NewCA(t, "another CA")
	if err := client(tlsClient(t, other, ca)).Ping(ctx).Err(); err == nil {
		t.Fatal("a client with a certificate from another CA was served")
	}
	logs.await(t, "refused a TLS client", "event=client_refused", "reason=tls", "certificate signed by unknown authority")

	// renew writes a server certificate from a new CA, and returns the CA.
	renew := func(name string) *testcerts.CA {
		next := testcerts.NewCA(t, name)
		leaf := next.Issue(t, testcerts.Options{CommonName: "server"})
		// The key first: the certificate's change is the one noticed last.
		if err := os.WriteFile(filepath.Join(dir, "server.key"), leaf.KeyPEM, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "server.crt"), leaf.CertPEM, 0o600); err != nil {
			t.Fatal(err)
		}
		return next
	}
	servedBy := func(next *testcerts.CA, what string) {
		t.Helper()
		for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			rdb := redis.NewClient(&redis.Options{Addr: addr, TLSConfig: tlsClient(t, ca, next), MaxRetries: -1})
			err := rdb.Get(ctx, "k").Err()
			rdb.Close()
			if err == nil {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: no new connection got the new certificate: %v", what, err)
			}
		}
	}
	servedBy(renew("second CA"), "after the files changed")
	logs.await(t, "TLS certificates read again", "why=\"the files changed\"")
	if got, err := first.Get(ctx, "k").Result(); err != nil || got != "v" {
		t.Fatalf("the connection opened before the renewal: GET = %q, %v", got, err)
	}
	// SIGHUP reads them at once; make the file change look like no change,
	// so that only the signal can be what reads it.
	third := renew("third CA")
	old := time.Now().Add(-time.Hour)
	for _, f := range []string{"server.crt", "server.key"} {
		os.Chtimes(filepath.Join(dir, f), old, old)
	}
	if err := cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	logs.await(t, "TLS certificates read again", "why=SIGHUP")
	servedBy(third, "after SIGHUP")
}

// Three members with their links in mutual TLS (--tls-cluster) and TLS
// clients only: a client writes through a follower and reads on the leader.
// A node with a certificate from another CA cannot join, and is told so at
// once.
func TestBinaryTLSCluster(t *testing.T) {
	bin := clustertest.Binary(t)
	dir := t.TempDir()
	ca := testcerts.NewCA(t, "cluster CA")
	caFile := ca.WriteFile(t, dir, "ca.crt")
	tlsArgs := func(p *clustertest.Proc, issuer *testcerts.CA) []string {
		cert, key := issuer.Issue(t, testcerts.Options{DNSNames: []string{p.ID() + ".lock.test"}}).WriteFiles(t, dir, p.ID())
		return []string{"--addr", "", "--tls-port", p.Addr(), "--tls-cert-file", cert, "--tls-key-file", key, "--tls-ca-cert-file", caFile,
			"--tls-cluster", "yes", "--tls-cluster-names", "*.lock.test"}
	}
	c := clustertest.StartProcs(t, bin, clustertest.ProcClusterOptions{
		Proc: clustertest.ProcOptions{Password: password, TLS: tlsClient(t, ca, ca)},
		Args: func(p *clustertest.Proc) []string { return tlsArgs(p, ca) },
	})
	l := c.Leader(t)
	f := c.Followers(l)[0]
	ctx := context.Background()
	clustertest.Eventually(t, "SET NX through a follower over TLS", func() error {
		return f.Client().SetArgs(ctx, "lock", "owner-1", redis.SetArgs{Mode: "NX", TTL: time.Minute}).Err()
	})
	clustertest.Eventually(t, "GET on the leader", func() error {
		v, err := l.Client().Get(ctx, "lock").Result()
		if err == nil && v != "owner-1" {
			err = fmt.Errorf("lock = %q", v)
		}
		return err
	})

	// A backup over TLS, asked of a follower, with a client certificate:
	// the command finds the leader and dials it with the same settings.
	opCert, opKey := ca.Issue(t, testcerts.Options{CommonName: "operator"}).WriteFiles(t, dir, "operator")
	out := admin(t, bin, true, "backup", "--tls", "--tls-ca-cert-file", caFile, "--tls-cert-file", opCert, "--tls-key-file", opKey,
		"--to", filepath.Join(dir, "tls.lkbackup"), f.Addr())
	if keys, _ := strconv.Atoi(field(t, out, "keys")); keys < 1 {
		t.Fatalf("a backup over TLS holds %d keys, want the lock\n%s", keys, out)
	}

	stranger := clustertest.NewProc(t, bin, "n4", clustertest.ProcOptions{})
	args := append(stranger.MemberArgs("--join", l.RaftAddr()), tlsArgs(stranger, testcerts.NewCA(t, "another CA"))...)
	joined, err := exec.Command(bin, args...).CombinedOutput()
	if code := exitCode(err); code != 1 || !strings.Contains(string(joined), "refused") || !strings.Contains(string(joined), "join via "+l.RaftAddr()) {
		t.Fatalf("a node with another CA's certificate joining: exit %d:\n%s", code, joined)
	}
}

// A member whose Raft address other hosts can reach refuses to start with
// neither a cluster secret nor member TLS, unless told --insecure-cluster.
func TestBinaryRefusesAnOpenCluster(t *testing.T) {
	bin := clustertest.Binary(t)
	// An address of this host that is not loopback: whatever the default
	// route leaves from (no packet is sent).
	c, err := net.Dial("udp", "192.0.2.1:9")
	if err != nil {
		t.Skipf("no non-loopback address: %v", err)
	}
	host := c.LocalAddr().(*net.UDPAddr).IP.String()
	c.Close()
	raft := net.JoinHostPort(host, fmt.Sprint(freeport.MustPort(t)))
	args := []string{"--addr", freeport.MustAddr(t), "--node-id", "a", "--raft-addr", raft}
	_, stderr, code := runBinary(t, bin, 30*time.Second, args...)
	if code != 1 || !strings.Contains(stderr, "is not a loopback address") || !strings.Contains(stderr, "cluster secret") {
		t.Fatalf("a member on %s with no secret: exit %d:\n%s", raft, code, stderr)
	}
	cmd := exec.Command(bin, append(args, "--insecure-cluster")...)
	logs := watchLog(t, cmd)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	logs.await(t, "lockserver ready")
}

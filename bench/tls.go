package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"

	"github.com/lockserver/lockserver/internal/freeport"
	"github.com/lockserver/lockserver/internal/testcerts"
	"github.com/redis/go-redis/v9"
)

// The TLS rows: the same servers with their clients over TLS only (client
// certificates required, Redis's tls-auth-clients yes), and the lockserver
// cluster with its member links in mutual TLS too. Set beside the plain
// rows, they say what TLS costs each: the target is that it costs
// lockserver no more of its throughput than it costs redis-server.

// tlsAt holds the client TLS settings of the servers that serve clients over
// TLS only, by address: every client the bench opens to one (newGoRedis) uses
// them, so that the helpers that take an address reach it as they do the
// others.
var tlsAt sync.Map // address -> *tls.Config

// benchCerts are the certificates of a run: a CA, a certificate for the
// servers (127.0.0.1, and a member name for lockserver's links), and the
// clients' settings.
type benchCerts struct {
	caFile, certFile, keyFile string
	client                    *tls.Config
}

// certs makes the run's certificates once, in its temporary directory.
func (b *bench) certs() (*benchCerts, error) {
	b.certsOnce.Do(func() {
		b.certsVal, b.certsErr = makeBenchCerts(b)
	})
	return b.certsVal, b.certsErr
}

// memberNames is the pattern of the bench cluster's member certificates.
const memberNames = "*.bench.internal"

func makeBenchCerts(b *bench) (*benchCerts, error) {
	dir, err := b.tempDir("tls")
	if err != nil {
		return nil, err
	}
	ca, err := testcerts.MakeCA("bench CA")
	if err != nil {
		return nil, err
	}
	server, err := ca.Make(testcerts.Options{CommonName: "member.bench.internal", DNSNames: []string{"member.bench.internal"}})
	if err != nil {
		return nil, err
	}
	client, err := ca.Make(testcerts.Options{CommonName: "bench client"})
	if err != nil {
		return nil, err
	}
	c := &benchCerts{caFile: filepath.Join(dir, "ca.crt")}
	if c.certFile, c.keyFile, err = server.Write(dir, "server"); err != nil {
		return nil, err
	}
	if _, _, err := client.Write(dir, "client"); err != nil {
		return nil, err
	}
	if err := os.WriteFile(c.caFile, ca.PEM, 0o600); err != nil {
		return nil, err
	}
	c.client = &tls.Config{RootCAs: ca.Pool(), Certificates: []tls.Certificate{client.TLS}, ServerName: "127.0.0.1"}
	return c, nil
}

// tlsOnly marks a TLS-only server's instance: the lock workloads only (redis-benchmark, the held workloads and
// the Go lock package's rows measure the server, which the plain rows do).
func tlsOnly(inst *instance) *instance {
	inst.addr = "" // redis-benchmark reaches plain addresses only
	inst.only = []string{"lock", "setnx"}
	return inst
}

func startRedisTLS(ctx context.Context, b *bench) (*instance, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, skipError{"redis-server is not installed; " + redisInstall}
	}
	c, err := b.certs()
	if err != nil {
		return nil, err
	}
	dir, err := b.tempDir("redis-tls")
	if err != nil {
		return nil, err
	}
	addr, err := freeport.Addr()
	if err != nil {
		return nil, err
	}
	tlsAt.Store(addr, c.client)
	_, port, _ := strings.Cut(addr, ":")
	args := []string{"--port", "0", "--tls-port", port, "--bind", "127.0.0.1", "--dir", dir, "--daemonize", "no",
		"--save", "", "--appendonly", "no",
		"--tls-cert-file", c.certFile, "--tls-key-file", c.keyFile, "--tls-ca-cert-file", c.caFile, "--tls-auth-clients", "yes"}
	m := &member{name: "redis-tls", dir: dir, bin: bin, args: args, addr: addr, data: dir}
	if err := m.start(); err != nil {
		return nil, err
	}
	if err := m.process().waitReady(ctx, pingReady(addr)); err != nil {
		m.stop()
		return nil, fmt.Errorf("redis-server with TLS (is it built with TLS?): %w", err)
	}
	return tlsOnly(serverInstance(addr, []*member{m})), nil
}

// lockserverTLSArgs are a lockserver's flags for TLS clients only at addr,
// and, with members, mutual TLS on its member links.
func lockserverTLSArgs(addr string, c *benchCerts, members bool) []string {
	args := []string{"--addr", "", "--tls-port", addr, "--tls-cert-file", c.certFile, "--tls-key-file", c.keyFile, "--tls-ca-cert-file", c.caFile}
	if members {
		args = append(args, "--tls-cluster", "yes", "--tls-cluster-names", memberNames)
	}
	return args
}

func startLockserverTLS(ctx context.Context, b *bench) (*instance, error) {
	c, err := b.certs()
	if err != nil {
		return nil, err
	}
	inst, err := startLockserverWith(ctx, b, nil, func(addr string) []string {
		tlsAt.Store(addr, c.client)
		return lockserverTLSArgs(addr, c, false)
	})
	if err != nil {
		return nil, err
	}
	return tlsOnly(inst), nil
}

func startLockserverClusterTLS(ctx context.Context, b *bench) (*instance, error) {
	c, err := b.certs()
	if err != nil {
		return nil, err
	}
	inst, err := startLockserverClusterWith(ctx, b, func(addr string) []string {
		tlsAt.Store(addr, c.client)
		return lockserverTLSArgs(addr, c, true)
	})
	if err != nil {
		return nil, err
	}
	return tlsOnly(inst), nil
}

// tlsOptions sets o's TLS settings if its address serves TLS only.
func tlsOptions(o *redis.Options) {
	if cfg, ok := tlsAt.Load(o.Addr); ok && o.Dialer == nil {
		o.TLSConfig = cfg.(*tls.Config).Clone()
	}
}

package compat_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lockserver/lockserver"
	"github.com/lockserver/lockserver/internal/freeport"
	"github.com/lockserver/lockserver/internal/testcerts"
	"github.com/lockserver/lockserver/internal/testenv"
	"github.com/lockserver/lockserver/internal/testlog"
	"github.com/redis/go-redis/v9"
)

// Clients over TLS, as Redis users run them: redis-server with TLS (Debian's
// is built with it) and lockserver with Options.TLS are given the same
// clients with the same certificates (made here, at run time), and must
// answer alike; clients whose certificate the server cannot trust are
// refused by both, and lockserver says why in its log.

// tlsClient is how a client reaches a TLS server: go-redis's settings, and
// the files redis-cli and redis-py read.
type tlsClient struct {
	config                    *tls.Config
	caFile, certFile, keyFile string
}

func (c *tlsClient) cliArgs() []string {
	return []string{"--tls", "--cacert", c.caFile, "--cert", c.certFile, "--key", c.keyFile}
}

func (c *tlsClient) pyEnv() []string {
	return []string{"REDISPY_SSL_CA=" + c.caFile, "REDISPY_SSL_CERT=" + c.certFile, "REDISPY_SSL_KEY=" + c.keyFile}
}

// tlsSetup is one CA with a server certificate and a client's.
type tlsSetup struct {
	ca                        *testcerts.CA
	caFile                    string
	serverCertFile, serverKey string
	server                    *testcerts.Leaf
	client                    *tlsClient
}

func newTLSSetup(t testing.TB) *tlsSetup {
	t.Helper()
	dir := t.TempDir()
	ts := &tlsSetup{ca: testcerts.NewCA(t, "test CA")}
	ts.caFile = ts.ca.WriteFile(t, dir, "ca.crt")
	ts.server = ts.ca.Issue(t, testcerts.Options{CommonName: "server"})
	ts.serverCertFile, ts.serverKey = ts.server.WriteFiles(t, dir, "server")
	ts.client = ts.newClient(t, ts.ca.Issue(t, testcerts.Options{CommonName: "client"}))
	return ts
}

// newClient returns a client presenting leaf, trusting the setup's CA.
func (ts *tlsSetup) newClient(t testing.TB, leaf *testcerts.Leaf) *tlsClient {
	t.Helper()
	c := &tlsClient{caFile: ts.caFile}
	c.certFile, c.keyFile = leaf.WriteFiles(t, t.TempDir(), "client")
	c.config = &tls.Config{RootCAs: ts.ca.Pool(), ServerName: "localhost",
		// Sent whatever CAs the server names, as redis-cli sends its --cert.
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &leaf.TLS, nil }}
	return c
}

// serverConfig is lockserver's Options.TLS: Redis's tls-auth-clients yes.
func (ts *tlsSetup) serverConfig() *tls.Config {
	return &tls.Config{Certificates: []tls.Certificate{ts.server.TLS}, ClientCAs: ts.ca.Pool(), ClientAuth: tls.RequireAndVerifyClientCert}
}

// redisTLSTarget starts redis-server listening for TLS clients only.
func redisTLSTarget(t *testing.T, ts *tlsSetup, password string) clientTarget {
	t.Helper()
	port := freeport.MustPort(t)
	args := []string{"--port", "0", "--tls-port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
		"--dir", t.TempDir(), "--tls-cert-file", ts.serverCertFile, "--tls-key-file", ts.serverKey,
		"--tls-ca-cert-file", ts.caFile, "--tls-auth-clients", "yes"}
	if password != "" {
		args = append(args, "--requirepass", password)
	}
	return clientTarget{name: "redis-server (TLS)", addr: runRedis(t, port, args...), password: password, tls: ts.client}
}

// lockserverTLSTarget starts a standalone lockserver listening for TLS
// clients only, logging to logs.
func lockserverTLSTarget(t *testing.T, ts *tlsSetup, password string, logs *testlog.Buffer) clientTarget {
	t.Helper()
	opts := lockserver.Options{Addr: "-", TLS: ts.serverConfig(), Password: password}
	if logs != nil {
		opts.Logger = slog.New(slog.NewTextHandler(logs, nil))
	}
	s := startLockserver(t, opts)
	return clientTarget{name: "lockserver (TLS)", addr: s.TLSAddr(), password: password, server: s, tls: ts.client}
}

// tlsScenarios runs every client's scenario over TLS against redis-server
// and against the lockserver ls returns, and compares them; run runs a
// scenario (as attempts on a cluster, which an election voids).
func tlsScenarios(t *testing.T, redisT clientTarget, ls func() clientTarget, run func(t *testing.T, body func(t testing.TB))) {
	ctx := context.Background()
	flush := func(t testing.TB) {
		t.Helper()
		for _, tg := range []clientTarget{redisT, ls()} {
			if err := tg.goRedis(t, redis.Options{}).FlushAll(ctx).Err(); err != nil {
				t.Fatalf("%s: FLUSHALL: %v", tg.name, err)
			}
		}
	}
	for _, proto := range []int{2, 3} {
		t.Run(fmt.Sprintf("go-redis RESP%d", proto), func(t *testing.T) {
			run(t, func(t testing.TB) {
				flush(t)
				compareLogsWithGaps(t, redisT.name, goRedisSession(t, redisT, proto), ls().name, goRedisSession(t, ls(), proto))
			})
		})
	}
	t.Run("redsync", func(t *testing.T) {
		run(t, func(t testing.TB) {
			flush(t)
			compareLogs(t, redisT.name, redsyncSession(t, redisT), ls().name, redsyncSession(t, ls()))
		})
	})
	t.Run("redis-py Lock", func(t *testing.T) {
		python := debianPython(t)
		run(t, func(t testing.TB) {
			flush(t)
			compareOutputs(t, redisT.name, runRedispy(t, python, redisT), ls().name, runRedispy(t, python, ls()))
		})
	})
	// These run subtests of their own, which an attempt cannot.
	t.Run("redis-cli", func(t *testing.T) { redisCliScenarios(t, redisT, ls()) })
	pair := func(t testing.TB) *pair {
		return (&pair{t: t, redisAddr: redisT.addr, lockserver: ls().server, tls: ls().tls.config}).connect(t)
	}
	t.Run("lock scripts", func(t *testing.T) { lockScriptSessions(t, pair(t)) })
	t.Run("Redisson", func(t *testing.T) { runRedissonScenarios(t, pair(t), run) })
}

// A standalone lockserver with TLS clients only (Options.Addr "-").
func TestTLSClients(t *testing.T) {
	testenv.Long(t)
	ts := newTLSSetup(t)
	ls := lockserverTLSTarget(t, ts, "", nil)
	tlsScenarios(t, redisTLSTarget(t, ts, ""), func() clientTarget { return ls }, direct)
}

// Through a follower of a three-member cluster whose clients and member
// links are all in TLS.
func TestTLSClientsOnCluster(t *testing.T) {
	testenv.Long(t)
	ts := newTLSSetup(t)
	members := func(i int) *lockserver.MemberTLS {
		leaf := ts.ca.Issue(t, testcerts.Options{DNSNames: []string{fmt.Sprintf("m%d.members.test", i)}})
		return &lockserver.MemberTLS{Names: "*.members.test", Config: func() (*tls.Config, error) {
			return &tls.Config{Certificates: []tls.Certificate{leaf.TLS}, RootCAs: ts.ca.Pool()}, nil
		}}
	}
	c := startClusterWith(t, func(i int, o *lockserver.Options) {
		o.Addr, o.TLS = "-", ts.serverConfig()
		o.Cluster.TLS = members(i)
	})
	follower := func() clientTarget {
		f := c.follower()
		return clientTarget{name: "lockserver TLS cluster follower", addr: f.TLSAddr(), server: f, tls: ts.client}
	}
	tlsScenarios(t, redisTLSTarget(t, ts, ""), follower, c.attempts)
}

// Clients whose certificate the server cannot trust are refused by both
// servers: one from another CA, none where one is required, an expired
// one. lockserver logs each refusal with its reason.
func TestTLSRefusesUntrustedClients(t *testing.T) {
	ts := newTLSSetup(t)
	logs := &testlog.Buffer{}
	servers := []clientTarget{redisTLSTarget(t, ts, ""), lockserverTLSTarget(t, ts, "", logs)}
	other := testcerts.NewCA(t, "another CA")
	noCert := ts.newClient(t, ts.ca.Issue(t, testcerts.Options{}))
	noCert.config.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &tls.Certificate{}, nil }
	for _, tc := range []struct {
		name   string
		client *tlsClient
		log    string
	}{
		{"a certificate from another CA", ts.newClient(t, other.Issue(t, testcerts.Options{CommonName: "stranger"})), "certificate signed by unknown authority"},
		{"no certificate", noCert, "client didn't provide a certificate"},
		{"an expired certificate", ts.newClient(t, ts.ca.Issue(t, testcerts.Options{Expired: true})), "certificate has expired"},
	} {
		for _, tg := range servers {
			tg.tls = tc.client
			rdb := tg.goRedis(t, redis.Options{MaxRetries: -1})
			if err := rdb.Ping(context.Background()).Err(); err == nil {
				t.Errorf("%s: a client with %s was let in", tg.name, tc.name)
			}
		}
		for deadline := time.Now().Add(10 * time.Second); !strings.Contains(logs.String(), tc.log); time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("lockserver's log does not say %q for %s:\n%s", tc.log, tc.name, logs.String())
			}
		}
	}
	if n := strings.Count(logs.String(), "refused a TLS client"); n < 3 {
		t.Fatalf("lockserver logged %d refusals of TLS clients, want 3 or more:\n%s", n, logs.String())
	}
}

package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/lockserver/lockserver"
)

// tlsFlags are Redis's TLS settings, as flags: the files of this server's
// certificate and key and of the CAs it trusts, whether clients must present
// a certificate, and the protocols and TLS 1.2 cipher suites it accepts.
type tlsFlags struct {
	port                   string // Redis's tls-port, or host:port
	certFile, keyFile      string
	caFile, caDir          string
	authClients            string // yes, no or optional
	protocols, ciphers     string
	ciphersuites           string // TLS 1.3's, which Go does not let one choose
	cluster                bool   // member links in mutual TLS too (Redis's tls-cluster)
	clusterNames           string
	minVersion, maxVersion uint16
	suites                 []uint16
}

// check validates the flags and works out the protocol versions and suites.
func (f *tlsFlags) check() error {
	if f.port == "" && !f.cluster {
		if f.certFile != "" || f.keyFile != "" || f.caFile != "" || f.caDir != "" {
			return errors.New("the --tls-* files need --tls-port or --tls-cluster yes")
		}
		return nil
	}
	if f.certFile == "" || f.keyFile == "" {
		return errors.New("TLS needs --tls-cert-file and --tls-key-file")
	}
	switch f.authClients {
	case "yes", "optional":
		if f.port != "" && f.caFile == "" && f.caDir == "" {
			return fmt.Errorf("--tls-auth-clients %s needs the clients' CA: --tls-ca-cert-file or --tls-ca-cert-dir (or --tls-auth-clients no)", f.authClients)
		}
	case "no":
	default:
		return fmt.Errorf("--tls-auth-clients must be yes, no or optional, not %q", f.authClients)
	}
	if f.cluster {
		if f.caFile == "" && f.caDir == "" {
			return errors.New("--tls-cluster yes needs the cluster's CA: --tls-ca-cert-file or --tls-ca-cert-dir")
		}
		if f.clusterNames == "" {
			return errors.New("--tls-cluster yes needs --tls-cluster-names, the pattern of the members' certificate names (e.g. '*.lock.internal'): a certificate the same CA issued to a client must not make it a member")
		}
	}
	if f.ciphersuites != "" {
		return errors.New("--tls-ciphersuites (TLS 1.3) cannot be set: Go chooses TLS 1.3's suites itself, all of them strong; use --tls-protocols TLSv1.2 with --tls-ciphers to choose suites")
	}
	var err error
	if f.minVersion, f.maxVersion, err = parseProtocols(f.protocols); err != nil {
		return err
	}
	f.suites, err = parseCiphers(f.ciphers)
	return err
}

// parseProtocols reads Redis's tls-protocols ("TLSv1.2 TLSv1.3"): the
// versions allowed, which must follow each other. Empty means Go's default
// (TLS 1.2 and 1.3), as Redis's default is.
func parseProtocols(s string) (lowest, highest uint16, err error) {
	versions := map[string]uint16{"tlsv1.2": tls.VersionTLS12, "tlsv1.3": tls.VersionTLS13}
	var got []uint16
	for _, name := range strings.Fields(s) {
		v, ok := versions[strings.ToLower(name)]
		if !ok {
			return 0, 0, fmt.Errorf("--tls-protocols: %q is not TLSv1.2 or TLSv1.3 (older versions are refused)", name)
		}
		got = append(got, v)
	}
	if len(got) == 0 {
		return 0, 0, nil
	}
	return slices.Min(got), slices.Max(got), nil
}

// parseCiphers reads a list of TLS 1.2 cipher suites by their IANA names
// (TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256), separated by colons as Redis's
// tls-ciphers are; only suites Go holds secure are accepted.
func parseCiphers(s string) ([]uint16, error) {
	if s == "" {
		return nil, nil
	}
	var ids []uint16
	for _, name := range strings.FieldsFunc(s, func(r rune) bool { return r == ':' || r == ',' || r == ' ' }) {
		i := slices.IndexFunc(tls.CipherSuites(), func(c *tls.CipherSuite) bool { return c.Name == name })
		if i < 0 {
			return nil, fmt.Errorf("--tls-ciphers: %q is not a secure TLS 1.2 cipher suite Go knows (IANA names, e.g. TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256)", name)
		}
		ids = append(ids, tls.CipherSuites()[i].ID)
	}
	return ids, nil
}

// certFiles holds the certificate, key and CAs that the TLS flags name, and
// reads them again when they change (checked at most every certCheck, on a
// new connection) or when reload is called (SIGHUP). Connections already
// open keep the certificates they began with.
type certFiles struct {
	f   *tlsFlags
	log *slog.Logger

	mu      sync.Mutex
	cur     *certSet
	checked time.Time
}

// certCheck is how often a new connection looks for changed files.
const certCheck = time.Second

// certSet is what the files held when last read.
type certSet struct {
	cert  tls.Certificate
	cas   *x509.CertPool // nil without CA files
	stamp string         // the files' sizes and times, to notice a change
}

// newCertFiles reads the files once: a server does not start with bad ones.
func newCertFiles(f *tlsFlags, log *slog.Logger) (*certFiles, error) {
	c := &certFiles{f: f, log: log}
	set, err := c.read()
	if err != nil {
		return nil, err
	}
	c.cur, c.checked = set, time.Now()
	return c, nil
}

// paths lists the files read: the certificate, the key, the CA file and the
// files of the CA directory.
func (c *certFiles) paths() []string {
	paths := []string{c.f.certFile, c.f.keyFile}
	if c.f.caFile != "" {
		paths = append(paths, c.f.caFile)
	}
	if c.f.caDir != "" {
		entries, _ := os.ReadDir(c.f.caDir)
		for _, e := range entries {
			if e.Type().IsRegular() || e.Type()&os.ModeSymlink != 0 {
				paths = append(paths, filepath.Join(c.f.caDir, e.Name()))
			}
		}
	}
	return paths
}

// stamp describes the files as they are now.
func (c *certFiles) stamp() string {
	var b strings.Builder
	for _, p := range c.paths() {
		if st, err := os.Stat(p); err == nil {
			fmt.Fprintf(&b, "%s %d %d\n", p, st.Size(), st.ModTime().UnixNano())
		}
	}
	return b.String()
}

func (c *certFiles) read() (*certSet, error) {
	stamp := c.stamp()
	cert, err := tls.LoadX509KeyPair(c.f.certFile, c.f.keyFile)
	if err != nil {
		return nil, fmt.Errorf("TLS certificate %s and key %s: %w", c.f.certFile, c.f.keyFile, err)
	}
	set := &certSet{cert: cert, stamp: stamp}
	if c.f.caFile == "" && c.f.caDir == "" {
		return set, nil
	}
	set.cas = x509.NewCertPool()
	if c.f.caFile != "" {
		pem, err := os.ReadFile(c.f.caFile)
		if err != nil {
			return nil, err
		}
		if !set.cas.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("TLS CA file %s holds no PEM certificate", c.f.caFile)
		}
	}
	if c.f.caDir != "" {
		n := 0
		for _, p := range c.paths()[2:] {
			if p == c.f.caFile {
				continue
			}
			if pem, err := os.ReadFile(p); err == nil && set.cas.AppendCertsFromPEM(pem) {
				n++
			}
		}
		if n == 0 && c.f.caFile == "" {
			return nil, fmt.Errorf("TLS CA directory %s holds no PEM certificate", c.f.caDir)
		}
	}
	return set, nil
}

// current returns the files' contents, reading them again if they changed.
// A change that does not read (a certificate written before its key) keeps
// the last good ones, and says so.
func (c *certFiles) current() *certSet {
	c.mu.Lock()
	defer c.mu.Unlock()
	if time.Since(c.checked) >= certCheck {
		c.checked = time.Now()
		if c.stamp() != c.cur.stamp {
			c.loadLocked("the files changed")
		}
	}
	return c.cur
}

// reload reads the files now (SIGHUP).
func (c *certFiles) reload() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.checked = time.Now()
	c.loadLocked("SIGHUP")
}

func (c *certFiles) loadLocked(why string) {
	set, err := c.read()
	if err != nil {
		c.log.Error("kept the TLS certificates in use: reading them again failed", "why", why, "err", err)
		// Not again until the files change once more.
		c.cur.stamp = c.stamp()
		return
	}
	c.cur = set
	c.log.Info("TLS certificates read again", "why", why, "cert", c.f.certFile)
}

// clientConfig is the TLS configuration of the client listener: each
// handshake takes the current certificate and CAs.
func (c *certFiles) clientConfig() *tls.Config {
	auth := map[string]tls.ClientAuthType{
		"yes": tls.RequireAndVerifyClientCert, "optional": tls.VerifyClientCertIfGiven, "no": tls.NoClientCert,
	}[c.f.authClients]
	return &tls.Config{
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			set := c.current()
			return &tls.Config{
				Certificates: []tls.Certificate{set.cert},
				ClientCAs:    set.cas,
				ClientAuth:   auth,
				MinVersion:   max(c.f.minVersion, tls.VersionTLS12),
				MaxVersion:   c.f.maxVersion,
				CipherSuites: c.f.suites,
			}, nil
		},
	}
}

// memberTLS is the member links' TLS: the same certificate, presented to
// both ends, and the CAs as the cluster's.
func (c *certFiles) memberTLS() *lockserver.MemberTLS {
	return &lockserver.MemberTLS{
		Names: c.f.clusterNames,
		Config: func() (*tls.Config, error) {
			set := c.current()
			return &tls.Config{
				Certificates: []tls.Certificate{set.cert},
				RootCAs:      set.cas,
				MinVersion:   c.f.minVersion,
				MaxVersion:   c.f.maxVersion,
				CipherSuites: c.f.suites,
			}, nil
		},
	}
}

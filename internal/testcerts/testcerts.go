// Package testcerts makes the certificates that tests and the bench use, at
// run time, with crypto/x509: a CA, and certificates it issues, valid or
// expired, in memory and as PEM files. No certificate is committed to the
// repository. The functions that take a TB fail it on an error; MakeCA and
// CA.Make return the error instead.
package testcerts

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// CA is a certificate authority.
type CA struct {
	Cert *x509.Certificate
	key  *ecdsa.PrivateKey
	// PEM is the CA's certificate, PEM-encoded.
	PEM []byte
}

// TB is what the functions that fail a test need of it (testing.TB).
type TB interface {
	Helper()
	Fatal(args ...any)
}

// NewCA makes a CA named name, valid from an hour ago for a day.
func NewCA(t TB, name string) *CA {
	t.Helper()
	ca, err := MakeCA(name)
	if err != nil {
		t.Fatal(err)
	}
	return ca
}

// MakeCA is NewCA returning its error.
func MakeCA(name string) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &CA{Cert: cert, key: key, PEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}, nil
}

// Pool returns a pool holding the CA alone.
func (ca *CA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.Cert)
	return p
}

// WriteFile writes the CA's certificate to dir and returns its path.
func (ca *CA) WriteFile(t TB, dir, name string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, ca.PEM, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// Leaf is a certificate that a CA issued, with its key.
type Leaf struct {
	TLS             tls.Certificate
	CertPEM, KeyPEM []byte
}

// Options describe a certificate to issue. The zero value is a certificate
// for 127.0.0.1 and localhost, valid now, for servers and clients alike.
type Options struct {
	CommonName string
	DNSNames   []string
	// Expired makes a certificate whose validity ended an hour ago.
	Expired bool
}

// Issue makes a certificate signed by the CA.
func (ca *CA) Issue(t TB, o Options) *Leaf {
	t.Helper()
	l, err := ca.Make(o)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// Make is Issue returning its error.
func (ca *CA) Make(o Options) (*Leaf, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: o.CommonName},
		DNSNames:     append([]string{"localhost"}, o.DNSNames...),
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(12 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	if o.Expired {
		tmpl.NotBefore, tmpl.NotAfter = time.Now().Add(-2*time.Hour), time.Now().Add(-time.Hour)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.key)
	if err != nil {
		return nil, err
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, err
	}
	l := &Leaf{
		CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM:  pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}),
	}
	if l.TLS, err = tls.X509KeyPair(l.CertPEM, l.KeyPEM); err != nil {
		return nil, err
	}
	return l, nil
}

// WriteFiles writes the certificate and its key to dir as name.crt and
// name.key and returns their paths.
func (l *Leaf) WriteFiles(t TB, dir, name string) (certFile, keyFile string) {
	t.Helper()
	certFile, keyFile, err := l.Write(dir, name)
	if err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile
}

// Write is WriteFiles returning its error.
func (l *Leaf) Write(dir, name string) (certFile, keyFile string, err error) {
	certFile, keyFile = filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key")
	if err := os.WriteFile(certFile, l.CertPEM, 0o600); err != nil {
		return "", "", err
	}
	return certFile, keyFile, os.WriteFile(keyFile, l.KeyPEM, 0o600)
}

// serial is a random serial number; crypto/rand does not fail on Linux.
func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	return n
}

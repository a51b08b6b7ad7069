// Package testcerts makes certificate authorities and certificates for
// tests: a cluster CA, node certificates that serve and identify a node
// (server and client use, 127.0.0.1 and localhost), and client
// certificates. Keys are ECDSA P-256, made fresh for each CA and
// certificate, valid for a day.
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
	"testing"
	"time"
)

// CA is a certificate authority.
type CA struct {
	Cert *x509.Certificate
	Key  *ecdsa.PrivateKey
	// Pool holds Cert alone.
	Pool *x509.CertPool
	// PEM is Cert, PEM-encoded.
	PEM []byte
}

// NewCA makes a CA named name.
func NewCA(t testing.TB, name string) *CA {
	t.Helper()
	key := newKey(t)
	tmpl := &x509.Certificate{
		SerialNumber:          serial(t),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &CA{Cert: cert, Key: key, Pool: pool, PEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// Issued is a certificate the CA signed, with its key.
type Issued struct {
	TLS     tls.Certificate
	CertPEM []byte
	KeyPEM  []byte
}

// Node issues the certificate of a node: server and client use, for
// 127.0.0.1, ::1 and localhost, with name as its common name.
func (ca *CA) Node(t testing.TB, name string) Issued {
	return ca.issue(t, name, []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth})
}

// Client issues a client certificate (client use only).
func (ca *CA) Client(t testing.TB, name string) Issued {
	return ca.issue(t, name, []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth})
}

func (ca *CA) issue(t testing.TB, name string, usage []x509.ExtKeyUsage) Issued {
	t.Helper()
	key := newKey(t)
	tmpl := &x509.Certificate{
		SerialNumber: serial(t),
		Subject:      pkix.Name{CommonName: name},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  usage,
		DNSNames:     []string{"localhost"},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.Key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	return Issued{TLS: pair, CertPEM: certPEM, KeyPEM: keyPEM}
}

// WriteFiles writes the certificate and key of is and the CA's
// certificate as PEM files in dir and returns their paths.
func (ca *CA) WriteFiles(t testing.TB, dir, name string, is Issued) (cert, key, caFile string) {
	t.Helper()
	cert = filepath.Join(dir, name+".crt")
	key = filepath.Join(dir, name+".key")
	caFile = filepath.Join(dir, "ca.crt")
	for p, b := range map[string][]byte{cert: is.CertPEM, key: is.KeyPEM, caFile: ca.PEM} {
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return cert, key, caFile
}

func newKey(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return key
}

func serial(t testing.TB) *big.Int {
	t.Helper()
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

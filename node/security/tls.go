package security

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"os"
)

// LoadTLS reads a node's certificate and key and the cluster CA (PEM
// files) and checks that the certificate chains to the CA for server and
// client use, so that a wrong file is found at start rather than at the
// first connection. Errors wrap ErrTLSFiles.
func LoadTLS(certFile, keyFile, caFile string) (*TLS, error) {
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("%w: certificate %s, key %s: %w", ErrTLSFiles, certFile, keyFile, err)
	}
	caPEM, err := readCredentialFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("%w: CA: %w", ErrTLSFiles, err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, fmt.Errorf("%w: CA %s holds no PEM certificate", ErrTLSFiles, caFile)
	}
	t := &TLS{Certificate: cert, CA: pool}
	if err := t.Check(); err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrTLSFiles, certFile, err)
	}
	return t, nil
}

// Check verifies the node's own certificate against the CA, for both
// uses (peers verify each other both ways).
func (t *TLS) Check() error {
	if t.CA == nil || len(t.Certificate.Certificate) == 0 {
		return errors.New("a certificate and a CA are required")
	}
	leaf, err := x509.ParseCertificate(t.Certificate.Certificate[0])
	if err != nil {
		return err
	}
	for _, use := range []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth} {
		if err := verifyChain(leaf, t.Certificate.Certificate[1:], t.CA, use); err != nil {
			return fmt.Errorf("not valid under the CA for %s use (peers verify each other both ways): %w", usageName(use), err)
		}
	}
	return nil
}

func usageName(u x509.ExtKeyUsage) string {
	if u == x509.ExtKeyUsageServerAuth {
		return "server"
	}
	return "client"
}

// verifyChain verifies leaf, with the intermediates rest (DER; those that
// do not parse are left out), against roots for use; host names are not
// checked.
func verifyChain(leaf *x509.Certificate, rest [][]byte, roots *x509.CertPool, use x509.ExtKeyUsage) error {
	inter := x509.NewCertPool()
	for _, der := range rest {
		if c, err := x509.ParseCertificate(der); err == nil {
			inter.AddCert(c)
		}
	}
	_, err := leaf.Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{use}})
	return err
}

// ClientConfig is the TLS of the client port: TLS 1.3 with the node's
// certificate, and, with VerifyClients, a certificate the CA signed
// required of every client.
func (t *TLS) ClientConfig() *tls.Config {
	c := &tls.Config{Certificates: []tls.Certificate{t.Certificate}, MinVersion: tls.VersionTLS13}
	if t.VerifyClients {
		c.ClientAuth, c.ClientCAs = tls.RequireAndVerifyClientCert, t.CA
	}
	return c
}

// PeerConfigs are the TLS of the peer port and of the peer dials (and of
// SWIM's push-pull, both ways): each side verifies the other's
// certificate against the CA, without a host name (peers are dialled at
// the addresses SWIM gossips).
func (t *TLS) PeerConfigs() (server, dial *tls.Config) {
	server = &tls.Config{Certificates: []tls.Certificate{t.Certificate}, MinVersion: tls.VersionTLS13,
		ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: t.CA}
	dial = &tls.Config{Certificates: []tls.Certificate{t.Certificate}, MinVersion: tls.VersionTLS13,
		// The chain is checked below, against the CA and not against a
		// host name: crypto/tls checks both or neither.
		InsecureSkipVerify: true,
		VerifyConnection: func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return errors.New("security: peer sent no certificate")
			}
			var rest [][]byte
			for _, c := range cs.PeerCertificates[1:] {
				rest = append(rest, c.Raw)
			}
			return verifyChain(cs.PeerCertificates[0], rest, t.CA, x509.ExtKeyUsageServerAuth)
		},
	}
	return server, dial
}

// readCredentialFile reads a file of at most maxCredentialFile bytes.
func readCredentialFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxCredentialFile+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxCredentialFile {
		return nil, fmt.Errorf("%s is larger than %d bytes", path, maxCredentialFile)
	}
	return b, nil
}

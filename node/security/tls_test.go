package security

import (
	"bytes"
	"crypto/tls"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/shoalmq/shoal/internal/testcerts"
)

func TestLoadTLS(t *testing.T) {
	ca := testcerts.NewCA(t, "cluster")
	cert, key, caFile := ca.WriteFiles(t, t.TempDir(), "n1", ca.Node(t, "n1"))
	got, err := LoadTLS(cert, key, caFile)
	if err != nil {
		t.Fatal(err)
	}
	if got.VerifyClients || got.CA == nil || len(got.Certificate.Certificate) != 1 {
		t.Fatalf("loaded %+v", got)
	}
	if err := got.Check(); err != nil {
		t.Fatalf("Check of what LoadTLS loaded: %v", err)
	}
}

// TestLoadTLSRejects: files that cannot be used are refused with
// ErrTLSFiles, saying why.
func TestLoadTLSRejects(t *testing.T) {
	ca, other := testcerts.NewCA(t, "cluster"), testcerts.NewCA(t, "other")
	dir := t.TempDir()
	cert, key, caFile := ca.WriteFiles(t, dir, "n1", ca.Node(t, "n1"))
	clientCert, clientKey, _ := ca.WriteFiles(t, dir, "ops", ca.Client(t, "ops"))
	strange, strangeKey, _ := other.WriteFiles(t, t.TempDir(), "n1", other.Node(t, "n1"))
	write := func(name string, b []byte) string {
		p := filepath.Join(t.TempDir(), name)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	huge := write("huge.crt", append(bytes.Clone(ca.PEM), bytes.Repeat([]byte("\n"), maxCredentialFile)...))
	cases := []struct {
		name, cert, key, ca, want string
	}{
		{"no certificate file", filepath.Join(dir, "none.crt"), key, caFile, "no such file"},
		{"key of another certificate", cert, strangeKey, caFile, "private key does not match"},
		{"no CA file", cert, key, filepath.Join(dir, "none-ca.crt"), "CA: open"},
		{"CA not PEM", cert, key, write("ca.crt", []byte("hello\n")), "holds no PEM certificate"},
		{"CA too large", cert, key, huge, "larger than 1048576 bytes"},
		{"certificate of another CA", strange, strangeKey, caFile, "not valid under the CA for server use"},
		{"certificate for clients only", clientCert, clientKey, caFile, "not valid under the CA for server use"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := LoadTLS(c.cert, c.key, c.ca)
			if got != nil || !errors.Is(err, ErrTLSFiles) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("%+v %v, want ErrTLSFiles with %q", got, err, c.want)
			}
		})
	}
}

// TestTLSCheck: a TLS given in code (not loaded) is checked the same way.
func TestTLSCheck(t *testing.T) {
	ca := testcerts.NewCA(t, "cluster")
	node := ca.Node(t, "n1")
	for name, c := range map[string]struct {
		tls  *TLS
		want string
	}{
		"good":                 {&TLS{Certificate: node.TLS, CA: ca.Pool}, ""},
		"no CA":                {&TLS{Certificate: node.TLS}, "a certificate and a CA are required"},
		"no certificate":       {&TLS{CA: ca.Pool}, "a certificate and a CA are required"},
		"not a certificate":    {&TLS{Certificate: tls.Certificate{Certificate: [][]byte{[]byte("junk")}}, CA: ca.Pool}, "x509"},
		"another CA's":         {&TLS{Certificate: testcerts.NewCA(t, "x").Node(t, "n1").TLS, CA: ca.Pool}, "for server use"},
		"for clients only":     {&TLS{Certificate: ca.Client(t, "n1").TLS, CA: ca.Pool}, "for server use"},
		"other CA, same names": {&TLS{Certificate: node.TLS, CA: testcerts.NewCA(t, "cluster").Pool}, "for server use"},
	} {
		err := c.tls.Check()
		if c.want == "" && err != nil || c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%s: %v, want %q", name, err, c.want)
		}
	}
}

// handshake runs a TLS handshake over loopback TCP between a server and a
// client config and returns each side's error (the server's after it
// read the client's first record, so that a refused client certificate
// shows there).
func handshake(t *testing.T, server, client *tls.Config) (serverErr, clientErr error) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	done := make(chan error, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			done <- err
			return
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		s := tls.Server(c, server)
		if err := s.Handshake(); err != nil {
			done <- err
			return
		}
		_, err = s.Read(make([]byte, 1))
		done <- err
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	cl := tls.Client(c, client)
	clientErr = cl.Handshake()
	if clientErr == nil {
		_, clientErr = cl.Write([]byte{1})
	}
	if clientErr != nil {
		_ = c.Close()
	}
	return <-done, clientErr
}

// TestPeerConfigs: peers of one CA connect both ways without a host name
// to check; a peer of another CA is refused by the listener, and a
// listener of another CA by the dialler.
func TestPeerConfigs(t *testing.T) {
	ca, other := testcerts.NewCA(t, "cluster"), testcerts.NewCA(t, "mallory")
	n1 := &TLS{Certificate: ca.Node(t, "n1").TLS, CA: ca.Pool}
	n2 := &TLS{Certificate: ca.Node(t, "n2").TLS, CA: ca.Pool}
	bad := &TLS{Certificate: other.Node(t, "n9").TLS, CA: ca.Pool} // trusts the cluster CA, signed by another
	srv1, _ := n1.PeerConfigs()
	_, dial2 := n2.PeerConfigs()
	if srv1.MinVersion != tls.VersionTLS13 || dial2.MinVersion != tls.VersionTLS13 {
		t.Fatal("peer TLS below 1.3")
	}
	if sErr, cErr := handshake(t, srv1, dial2); sErr != nil || cErr != nil {
		t.Fatalf("two peers of the CA: listener %v, dialler %v", sErr, cErr)
	}
	srvBad, dialBad := bad.PeerConfigs()
	if sErr, _ := handshake(t, srv1, dialBad); sErr == nil {
		t.Fatal("the peer port took another CA's certificate")
	}
	if _, cErr := handshake(t, srvBad, dial2); cErr == nil {
		t.Fatal("a peer dial took a listener with another CA's certificate")
	}
	// A dial with no certificate at all is refused by the listener.
	if sErr, _ := handshake(t, srv1, &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS13}); sErr == nil {
		t.Fatal("the peer port took a dial with no certificate")
	}
	// The dialler wants a certificate for server use.
	clientOnly := &TLS{Certificate: ca.Client(t, "n3").TLS, CA: ca.Pool}
	srvClientOnly, _ := clientOnly.PeerConfigs()
	if _, cErr := handshake(t, srvClientOnly, dial2); cErr == nil {
		t.Fatal("a peer dial took a listener whose certificate is for client use only")
	}
}

// TestClientConfig: the client port serves TLS 1.3 with the node's
// certificate; it wants a certificate of the CA from clients only with
// VerifyClients.
func TestClientConfig(t *testing.T) {
	ca := testcerts.NewCA(t, "cluster")
	node := &TLS{Certificate: ca.Node(t, "n1").TLS, CA: ca.Pool}
	mine := ca.Client(t, "ops")
	anon := &tls.Config{RootCAs: ca.Pool, ServerName: "localhost"}
	withCert := &tls.Config{RootCAs: ca.Pool, ServerName: "localhost", Certificates: []tls.Certificate{mine.TLS}}
	if sErr, cErr := handshake(t, node.ClientConfig(), anon); sErr != nil || cErr != nil {
		t.Fatalf("a client without a certificate, none asked: server %v, client %v", sErr, cErr)
	}
	if _, cErr := handshake(t, node.ClientConfig(), &tls.Config{RootCAs: testcerts.NewCA(t, "other").Pool, ServerName: "localhost"}); cErr == nil {
		t.Fatal("a client trusting another CA took the node")
	}
	node.VerifyClients = true
	if sErr, cErr := handshake(t, node.ClientConfig(), withCert); sErr != nil || cErr != nil {
		t.Fatalf("a client with a certificate of the CA: server %v, client %v", sErr, cErr)
	}
	if sErr, _ := handshake(t, node.ClientConfig(), anon); sErr == nil {
		t.Fatal("VerifyClients took a client without a certificate")
	}
	otherCert := testcerts.NewCA(t, "other").Client(t, "m")
	if sErr, _ := handshake(t, node.ClientConfig(), &tls.Config{RootCAs: ca.Pool, ServerName: "localhost", Certificates: []tls.Certificate{otherCert.TLS}}); sErr == nil {
		t.Fatal("VerifyClients took a client certificate of another CA")
	}
}

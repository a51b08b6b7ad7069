package client_test

import (
	"crypto/tls"
	"errors"
	"strings"
	"testing"

	"github.com/shoalmq/shoal/client"
	"github.com/shoalmq/shoal/client/clienttest"
	"github.com/shoalmq/shoal/internal/testcerts"
	"github.com/shoalmq/shoal/wire"
)

func TestTokenHandshake(t *testing.T) {
	cl := &clienttest.Cluster{ClusterID: 7, Tokens: []string{"tok-right-0123456789"}, Secret: []byte("the peers' secret")}
	n1, err := cl.Start("n1")
	if err != nil {
		t.Fatal(err)
	}
	n2, err := cl.Start("n2")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	cl.SetOwner("t", "n1")
	c := newClient(t, client.Config{Servers: addrs(n1, n2), Token: "tok-right-0123456789"})
	if _, err := c.Lookup(ctxT(t), "t", false); err != nil {
		t.Fatalf("right token: %v", err)
	}
	// A refused token is refused by every node alike: no retry.
	before := n1.Accepted() + n2.Accepted()
	bad := newClient(t, client.Config{Servers: addrs(n1, n2), Token: "tok-wrong"})
	_, err = bad.Lookup(ctxT(t), "t", false)
	if !errors.Is(err, wire.ErrUnauthorized) || !errors.Is(err, client.ErrHandshake) {
		t.Fatalf("wrong token: %v", err)
	}
	if tried := n1.Accepted() + n2.Accepted() - before; tried != 1 {
		t.Fatalf("a refused token was tried %d times", tried)
	}
}

func TestTokenConfig(t *testing.T) {
	for name, cfg := range map[string]client.Config{
		"token and secret": {Token: "t", Secret: []byte("s")},
		"token too long":   {Token: strings.Repeat("x", wire.MaxTokenLen+1)},
	} {
		cfg.Servers = []string{"127.0.0.1:7101"}
		if _, err := client.New(cfg); !errors.Is(err, client.ErrConfig) {
			t.Errorf("%s: %v, want ErrConfig", name, err)
		}
	}
}

// A client without the secret meets a node that proves it (a node with no
// client tokens): the error says what to set.
func TestTokenClientMeetsSecretNode(t *testing.T) {
	cl := &clienttest.Cluster{ClusterID: 7, Secret: []byte("s")}
	n, err := cl.Start("n1")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	c := newClient(t, client.Config{Servers: addrs(n), Token: "tok", MaxRetries: -1})
	if _, err := c.Lookup(ctxT(t), "t", false); err == nil {
		t.Fatal("a token opened a node that takes the secret")
	}
}

func TestTLS(t *testing.T) {
	ca := testcerts.NewCA(t, "cluster")
	cl := &clienttest.Cluster{ClusterID: 7, TLS: &tls.Config{Certificates: []tls.Certificate{ca.Node(t, "n1").TLS}, MinVersion: tls.VersionTLS13}}
	n, err := cl.Start("n1")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	cl.SetOwner("t", "n1")
	c := newClient(t, client.Config{Servers: addrs(n), TLS: &tls.Config{RootCAs: ca.Pool}})
	if _, err := c.Lookup(ctxT(t), "t", false); err != nil {
		t.Fatalf("TLS lookup: %v", err)
	}
	if _, err := c.Produce(ctxT(t), "t", [][]byte{[]byte("over TLS")}); err != nil {
		t.Fatalf("TLS produce: %v", err)
	}
	// A client that trusts another CA refuses the node; one without TLS
	// gets nothing it can read.
	other := testcerts.NewCA(t, "other")
	wrong := newClient(t, client.Config{Servers: addrs(n), TLS: &tls.Config{RootCAs: other.Pool}, MaxRetries: -1})
	if _, err := wrong.Lookup(ctxT(t), "t", false); !errors.Is(err, client.ErrHandshake) {
		t.Fatalf("another CA: %v", err)
	}
	plain := newClient(t, client.Config{Servers: addrs(n), MaxRetries: -1, DialTimeout: 500 * 1e6})
	if _, err := plain.Lookup(ctxT(t), "t", false); err == nil {
		t.Fatal("plain TCP to a TLS node worked")
	}
}

// TestTLSClientCertificateRefused: a node that wants a client certificate
// refuses one from another CA; the client reports a handshake failure,
// not an unreachable node, and does not retry it elsewhere.
func TestTLSClientCertificateRefused(t *testing.T) {
	ca, other := testcerts.NewCA(t, "cluster"), testcerts.NewCA(t, "other")
	cl := &clienttest.Cluster{ClusterID: 7, TLS: &tls.Config{Certificates: []tls.Certificate{ca.Node(t, "n1").TLS},
		MinVersion: tls.VersionTLS13, ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: ca.Pool}}
	n, err := cl.Start("n1")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	c := newClient(t, client.Config{Servers: addrs(n), TLS: &tls.Config{RootCAs: ca.Pool, Certificates: []tls.Certificate{other.Client(t, "m").TLS}}, MaxRetries: -1})
	if _, err := c.Status(ctxT(t), ""); !errors.Is(err, client.ErrHandshake) {
		t.Fatalf("a refused client certificate: %v", err)
	}
	good := newClient(t, client.Config{Servers: addrs(n), TLS: &tls.Config{RootCAs: ca.Pool, Certificates: []tls.Certificate{ca.Client(t, "ops").TLS}}})
	if _, err := good.Status(ctxT(t), ""); err != nil {
		t.Fatalf("a client certificate of the CA: %v", err)
	}
}

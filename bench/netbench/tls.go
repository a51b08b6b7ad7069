package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/shoalmq/shoal/netio"
)

// TLS for the benchmark: a CA and one certificate for 127.0.0.1, made at
// start into a temporary directory that the server children read (-tls-dir).
// The servers compared with -tls:
//
//	netio-tls  netio with Config.ClientTLS: TLS 1.3 on two goroutines per
//	           connection beside the event loops (what the node runs).
//	tls-proxy  TLS terminated by a goroutine pair per connection and the
//	           plaintext fed to a plain netio over loopback TCP: the other
//	           way to fit TLS to gnet (a socketpair would save a little of
//	           the loopback's cost; gnet cannot adopt one into a server).

// tlsDir is where the certificates are; empty without -tls.
var tlsDir string

const (
	caFile   = "ca.crt"
	certFile = "node.crt"
	keyFile  = "node.key"
)

// makeCerts writes a CA and a node certificate (server and client use,
// 127.0.0.1) into a new temporary directory and returns it.
func makeCerts() (string, error) {
	dir, err := os.MkdirTemp("", "netbench-tls-")
	if err != nil {
		return "", err
	}
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", err
	}
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "netbench CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true, IsCA: true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return "", err
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return "", err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "bench"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return "", err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return "", err
	}
	for name, b := range map[string][]byte{
		caFile:   pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		certFile: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		keyFile:  pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
	} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			return "", err
		}
	}
	return dir, nil
}

// tlsConfigs are the server's and the client's TLS from dir.
func tlsConfigs(dir string) (server, client *tls.Config, err error) {
	pair, err := tls.LoadX509KeyPair(filepath.Join(dir, certFile), filepath.Join(dir, keyFile))
	if err != nil {
		return nil, nil, err
	}
	caPEM, err := os.ReadFile(filepath.Join(dir, caFile))
	if err != nil {
		return nil, nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, nil, errors.New("netbench: no CA certificate")
	}
	server = &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS13,
		ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: pool}
	client = &tls.Config{Certificates: []tls.Certificate{pair}, RootCAs: pool, MinVersion: tls.VersionTLS13, ServerName: "127.0.0.1"}
	return server, client, nil
}

// usesTLS reports whether impl's clients speak TLS.
func usesTLS(impl string) bool { return impl == "netio-tls" || impl == "tls-proxy" }

// dialImpl opens a handshaken client connection to a server of impl.
func dialImpl(impl, addr string) (net.Conn, error) {
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		return nil, err
	}
	if usesTLS(impl) {
		_, cfg, err := tlsConfigs(tlsDir)
		if err != nil {
			_ = nc.Close()
			return nil, err
		}
		tc := tls.Client(nc, cfg)
		if err := tc.Handshake(); err != nil {
			_ = nc.Close()
			return nil, err
		}
		nc = tc
	}
	if _, err := netio.ClientHandshake(nc, benchCluster, nil); err != nil {
		_ = nc.Close()
		return nil, err
	}
	return nc, nil
}

// tlsProxy terminates TLS on its own listener and relays the plaintext of
// each connection to a plain server at backend, over loopback TCP.
func tlsProxy(backend string, cfg *tls.Config) (string, func(), error) {
	ln, err := tls.Listen("tcp", "127.0.0.1:0", cfg)
	if err != nil {
		return "", nil, err
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	conns := map[net.Conn]bool{}
	go func() {
		for {
			front, err := ln.Accept()
			if err != nil {
				return
			}
			back, err := net.Dial("tcp", backend)
			if err != nil {
				_ = front.Close()
				continue
			}
			mu.Lock()
			conns[front], conns[back] = true, true
			mu.Unlock()
			wg.Add(2)
			relay := func(dst, src net.Conn) {
				defer wg.Done()
				buf := make([]byte, 16<<10)
				_, _ = io.CopyBuffer(dst, src, buf)
				_ = dst.Close()
				_ = src.Close()
			}
			go relay(back, front)
			go relay(front, back)
		}
	}()
	stop := func() {
		_ = ln.Close()
		mu.Lock()
		for c := range conns {
			_ = c.Close()
		}
		mu.Unlock()
		wg.Wait()
	}
	return ln.Addr().String(), stop, nil
}

// peerTLSPair is the TLS of the peer case's receiver and sender.
func peerTLSPair() (recv, send *tls.Config, err error) {
	srv, cli, err := tlsConfigs(tlsDir)
	if err != nil {
		return nil, nil, fmt.Errorf("netbench: %w", err)
	}
	return srv, cli, nil
}

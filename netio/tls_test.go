package netio

import (
	"crypto/tls"
	"errors"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shoalmq/shoal/internal/testcerts"
	"github.com/shoalmq/shoal/wire"
)

// peerTLS is the TLS a node of ca's cluster runs its peer links with.
func peerTLS(ca *testcerts.CA, cert testcerts.Issued) (server, dial *tls.Config) {
	server = &tls.Config{Certificates: []tls.Certificate{cert.TLS}, ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: ca.Pool}
	dial = &tls.Config{Certificates: []tls.Certificate{cert.TLS}, RootCAs: ca.Pool, ServerName: "localhost"}
	return server, dial
}

func TestTLSPeerLinks(t *testing.T) {
	ca := testcerts.NewCA(t, "cluster")
	a, _, b, rb := pair(t, func(a, b *Config) {
		a.PeerTLS, a.DialTLS = peerTLS(ca, ca.Node(t, "n1"))
		b.PeerTLS, b.DialTLS = peerTLS(ca, ca.Node(t, "n2"))
		a.Secret, b.Secret = []byte("both"), []byte("both")
	})
	for i := range 300 {
		if err := a.Send("n2", peerFrame(uint64(i), 1000)); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 300 {
		if r := recv(t, rb); r.node != "n1" || seqOf(r) != uint64(i) {
			t.Fatalf("frame %d: from %q seq %d", i, r.node, seqOf(r))
		}
	}
	// Answers come back on the same connection.
	if err := b.Send("n1", peerFrame(7, 8)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the answer", func() bool { return a.Counters().FramesIn.Load() >= 1 })
	if a.Counters().PeerDials.Load() != 1 || b.Counters().PeerDials.Load() != 0 {
		t.Fatalf("dials: %d and %d", a.Counters().PeerDials.Load(), b.Counters().PeerDials.Load())
	}
}

// TestTLSPeerPortRefusesOtherCredentials: the peer port takes only a
// certificate the cluster CA signed: not another CA's, not none, not
// plain TCP.
func TestTLSPeerPortRefusesOtherCredentials(t *testing.T) {
	ca, other := testcerts.NewCA(t, "cluster"), testcerts.NewCA(t, "mallory")
	srvTLS, _ := peerTLS(ca, ca.Node(t, "n2"))
	b := startTransport(t, func() Config {
		c := testConfig("n2", newRecorder(16))
		c.PeerTLS, c.DialTLS = srvTLS, &tls.Config{}
		return c
	}())
	_, wrongDial := peerTLS(ca, other.Node(t, "n1"))
	wrongDial.RootCAs = ca.Pool // it trusts the node; the node does not trust it
	noCert := &tls.Config{RootCAs: ca.Pool, ServerName: "localhost"}
	for name, cfg := range map[string]*tls.Config{"another CA's certificate": wrongDial, "no certificate": noCert} {
		nc, err := tls.Dial("tcp", b.PeerAddr(), cfg)
		if err == nil {
			// TLS 1.3: the client learns of the refusal on its first read.
			_, err = peerHello(nc, "n1")
			_ = nc.Close()
		}
		if err == nil {
			t.Fatalf("%s: the peer port took it", name)
		}
	}
	plain, err := net.Dial("tcp", b.PeerAddr())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := peerHello(plain, "n1"); err == nil {
		t.Fatal("plain TCP: the peer port answered a Hello")
	}
	_ = plain.Close()
	waitFor(t, "three refused TLS handshakes", func() bool { return b.Counters().HandshakeTLS.Load() == 3 })
	if upPeerConns(b) != 0 {
		t.Fatal("a peer connection came up")
	}
	// A node of another CA cannot dial in either, nor accept our dials.
	a := startTransport(t, func() Config {
		c := testConfig("n1", newRecorder(16))
		c.PeerTLS, c.DialTLS = peerTLS(other, other.Node(t, "n1"))
		c.DialTLS.RootCAs = ca.Pool
		return c
	}())
	a.SetPeerAddr("n2", b.PeerAddr())
	if err := a.Send("n2", peerFrame(1, 8)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the dial to fail", func() bool { return a.Counters().PeerDialFailed.Load() >= 1 })
	if upPeerConns(a)+upPeerConns(b) != 0 {
		t.Fatal("a node of another CA got a peer connection")
	}
}

// peerHello sends a peer Hello for node on nc and reads the answer.
func peerHello(nc net.Conn, node string) (wire.Hello, error) {
	m := wire.Hello{Version: wire.ProtocolVersion, Role: wire.RolePeer, ClusterID: testCluster, Generation: 9, NodeID: []byte(node)}
	if _, err := nc.Write(frameOf(wire.KindHello, wire.AppendHello(nil, &m))); err != nil {
		return m, err
	}
	_ = nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	h, payload, err := readFrame(nc)
	if err != nil {
		return m, err
	}
	if h.Kind != wire.KindHello {
		return m, ErrHandshake
	}
	var out wire.Hello
	return out, wire.DecodeHello(payload, &out)
}

func TestTLSClientListener(t *testing.T) {
	ca := testcerts.NewCA(t, "cluster")
	tr := echoServer(t, func(c *Config) {
		c.ClientTLS = &tls.Config{Certificates: []tls.Certificate{ca.Node(t, "n1").TLS}}
	})
	nc, err := tls.Dial("tcp", tr.ClientAddr(), &tls.Config{RootCAs: ca.Pool, ServerName: "localhost"})
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if st := nc.ConnectionState(); st.Version != tls.VersionTLS13 {
		t.Fatalf("TLS version %x", st.Version)
	}
	if _, err := ClientHandshake(nc, testCluster, nil); err != nil {
		t.Fatal(err)
	}
	// Many pipelined frames, some larger than a TLS record.
	var want []byte
	for i := range 50 {
		f := testFrame(wire.KindLookup, uint64(i), make([]byte, i*1000))
		want = append(want, f...)
	}
	if _, err := nc.Write(want); err != nil {
		t.Fatal(err)
	}
	expectEcho(t, nc, want)
	// A client that does not trust the node's CA does not get through;
	// neither does TLS 1.2.
	other := testcerts.NewCA(t, "other")
	if c, err := tls.Dial("tcp", tr.ClientAddr(), &tls.Config{RootCAs: other.Pool, ServerName: "localhost"}); err == nil {
		_ = c.Close()
		t.Fatal("a client trusting another CA connected")
	}
	if c, err := tls.Dial("tcp", tr.ClientAddr(), &tls.Config{RootCAs: ca.Pool, ServerName: "localhost", MaxVersion: tls.VersionTLS12}); err == nil {
		_ = c.Close()
		t.Fatal("TLS 1.2 accepted")
	}
	// Plain TCP on a TLS port is not taken as a Hello.
	plain, err := net.Dial("tcp", tr.ClientAddr())
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	if _, err := ClientHandshake(plain, testCluster, nil); err == nil {
		t.Fatal("plain TCP handshake on the TLS port")
	}
}

func TestClientTokens(t *testing.T) {
	var granted atomic.Value
	rec := newRecorder(16)
	rec.echo = true
	cfg := testConfig("n1", HandlerFunc(func(c *Conn, h wire.Header, f []byte) bool {
		granted.Store(c.Grant())
		return rec.Deliver(c, h, f)
	}))
	cfg.Secret = []byte("the peers' secret")
	cfg.CheckToken = func(tok []byte) (any, bool) { return "reader", string(tok) == "good" }
	tr := startTransport(t, cfg)

	nc, err := net.Dial("tcp", tr.ClientAddr())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	// A good token opens the client port; no cluster secret is asked for.
	if _, err := ClientHandshakeToken(nc, testCluster, []byte("good")); err != nil {
		t.Fatal(err)
	}
	f := testFrame(wire.KindLookup, 3, []byte("x"))
	if _, err := nc.Write(f); err != nil {
		t.Fatal(err)
	}
	expectEcho(t, nc, f)
	if g := granted.Load(); g != "reader" {
		t.Fatalf("grant %v", g)
	}
	// A wrong or missing token is answered Unauthorized, then closed.
	for _, tok := range [][]byte{[]byte("bad"), nil} {
		bad, err := net.Dial("tcp", tr.ClientAddr())
		if err != nil {
			t.Fatal(err)
		}
		_, err = ClientHandshakeToken(bad, testCluster, tok)
		if !errors.Is(err, ErrHandshake) || !errors.Is(err, wire.ErrUnauthorized) {
			t.Fatalf("token %q: %v", tok, err)
		}
		expectClosed(t, bad)
		_ = bad.Close()
	}
	// The cluster secret does not open the client port of a node with
	// tokens: without a token it is refused as above, and with one, a
	// HelloAuth after it is refused too.
	withSecret, err := net.Dial("tcp", tr.ClientAddr())
	if err != nil {
		t.Fatal(err)
	}
	defer withSecret.Close()
	if _, err := ClientHandshake(withSecret, testCluster, cfg.Secret); err == nil {
		t.Fatal("the cluster secret opened the client port")
	}
	expectClosed(t, withSecret)
	both, err := net.Dial("tcp", tr.ClientAddr())
	if err != nil {
		t.Fatal(err)
	}
	defer both.Close()
	if _, err := clientHandshake(both, testCluster, cfg.Secret, []byte("good")); err == nil {
		t.Fatal("the node proved the cluster secret to a client")
	}
	expectClosed(t, both)
	if tr.Counters().HandshakeBadToken.Load() != 3 || tr.Counters().HandshakeBadAuth.Load() != 1 {
		t.Fatalf("bad tokens %d, bad auth %d", tr.Counters().HandshakeBadToken.Load(), tr.Counters().HandshakeBadAuth.Load())
	}
}

// TestClientCredentialDoesNotOpenThePeerPort: neither a client Hello, nor
// a peer Hello carrying a token, nor one without the cluster secret's
// proof gets a peer connection, whatever node id it claims.
func TestClientCredentialDoesNotOpenThePeerPort(t *testing.T) {
	rec := newRecorder(16)
	cfg := testConfig("n1", rec)
	cfg.Secret = []byte("peers only")
	cfg.CheckToken = func(tok []byte) (any, bool) { return "admin", string(tok) == "good" }
	tr := startTransport(t, cfg)
	dial := func() net.Conn {
		nc, err := net.Dial("tcp", tr.PeerAddr())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = nc.Close() })
		return nc
	}
	// A client with a good token on the peer port.
	if _, err := ClientHandshakeToken(dial(), testCluster, []byte("good")); err == nil {
		t.Fatal("a client token opened the peer port")
	}
	// A peer Hello carrying the token (malformed: peers carry none).
	nc := dial()
	m := wire.Hello{Version: wire.ProtocolVersion, Role: wire.RolePeer, ClusterID: testCluster, Generation: 9, NodeID: []byte("n2"), Token: []byte("good")}
	_, _ = nc.Write(frameOf(wire.KindHello, wire.AppendHello(nil, &m)))
	expectClosed(t, nc)
	// A peer Hello claiming n2 with no proof of the secret: the node
	// answers its Hello and waits for HelloAuth; a frame instead closes it.
	nc = dial()
	if _, err := peerHello(nc, "n2"); err != nil {
		t.Fatal(err)
	}
	_, _ = nc.Write(peerFrame(1, 8))
	expectClosed(t, nc)
	select {
	case r := <-rec.frames:
		t.Fatalf("a frame from %q was delivered", r.node)
	case <-time.After(100 * time.Millisecond):
	}
	if upPeerConns(tr) != 0 {
		t.Fatal("a peer connection came up")
	}
	c := tr.Counters()
	if c.HandshakeWrongRole.Load() != 1 || c.HandshakeProtocol.Load() != 1 || c.HandshakeBadAuth.Load() != 1 {
		t.Fatalf("role %d protocol %d auth %d", c.HandshakeWrongRole.Load(), c.HandshakeProtocol.Load(), c.HandshakeBadAuth.Load())
	}
}

func TestPeerTLSConfigIsChecked(t *testing.T) {
	ca := testcerts.NewCA(t, "cluster")
	cert := ca.Node(t, "n1")
	for name, mod := range map[string]func(*Config){
		"peer TLS without client certificates": func(c *Config) {
			c.PeerTLS = &tls.Config{Certificates: []tls.Certificate{cert.TLS}}
			c.DialTLS = &tls.Config{}
		},
		"peer TLS without dial TLS": func(c *Config) {
			c.PeerTLS, _ = peerTLS(ca, cert)
		},
		"client TLS without a certificate": func(c *Config) { c.ClientTLS = &tls.Config{} },
	} {
		c := testConfig("n1", newRecorder(1))
		mod(&c)
		if tr, err := New(c); err == nil {
			_ = tr.Close()
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestPushPullOverTLS(t *testing.T) {
	ca, other := testcerts.NewCA(t, "cluster"), testcerts.NewCA(t, "other")
	srvTLS, srvDial := peerTLS(ca, ca.Node(t, "srv"))
	srv := servePushPull(t, PushPullConfig{NodeID: "srv", ClusterID: 7, TLS: srvTLS, DialTLS: srvDial, Timeout: 5 * time.Second})
	_, dial := peerTLS(ca, ca.Node(t, "a"))
	a, err := ListenPushPull("127.0.0.1:0", PushPullConfig{NodeID: "a", ClusterID: 7, DialTLS: dial})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	got, err := a.Exchange(t.Context(), srv.Addr().String(), []byte("state"))
	if err != nil || string(got) != "re:state" {
		t.Fatalf("exchange: %q %v", got, err)
	}
	for name, cfg := range map[string]*tls.Config{
		"another CA's certificate": func() *tls.Config { _, d := peerTLS(other, other.Node(t, "m")); d.RootCAs = ca.Pool; return d }(),
		"no TLS":                   nil,
	} {
		m, err := ListenPushPull("127.0.0.1:0", PushPullConfig{NodeID: "m", ClusterID: 7, DialTLS: cfg, Timeout: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := m.Exchange(t.Context(), srv.Addr().String(), []byte("state")); err == nil {
			t.Errorf("%s: exchanged", name)
		}
		_ = m.Close()
	}
}

package node

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shoalmq/shoal/client"
	"github.com/shoalmq/shoal/internal/testcerts"
	"github.com/shoalmq/shoal/netio"
	"github.com/shoalmq/shoal/node/security"
	"github.com/shoalmq/shoal/wire"
)

// Tokens of the tests, one per role.
const (
	adminToken = "admin-token-0123456789"
	writeToken = "write-token-0123456789"
	readToken  = "read-token-01234567890"
)

func testTokens() []security.Token {
	return []security.Token{{Value: adminToken, Role: security.RoleAdmin}, {Value: writeToken, Role: security.RoleWrite}, {Value: readToken, Role: security.RoleRead}}
}

// withTokens gives every node the test tokens and a cluster secret.
func withTokens(c *Config) {
	c.Secret = []byte("the peers' secret")
	c.Security.ClientTokens = testTokens()
}

// tokenConn is a raw client connection to addr that proved tok.
type tokenConn struct {
	t  *testing.T
	nc net.Conn
	id uint64
}

func dialToken(t *testing.T, addr, tok string) *tokenConn {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = nc.Close() })
	_ = nc.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := netio.ClientHandshakeToken(nc, 42, []byte(tok)); err != nil {
		t.Fatalf("handshake: %v", err)
	}
	return &tokenConn{t: t, nc: nc}
}

// do sends one request and returns its answer.
func (c *tokenConn) do(kind wire.Kind, payload []byte) (wire.Kind, []byte) {
	c.t.Helper()
	c.id++
	f, start := wire.BeginFrame(nil, kind, c.id)
	f = append(f, payload...)
	f, _ = wire.EndFrame(f, start)
	if _, err := c.nc.Write(f); err != nil {
		c.t.Fatalf("write: %v", err)
	}
	hb := make([]byte, wire.HeaderSize)
	if _, err := ioReadFull(c.nc, hb); err != nil {
		c.t.Fatalf("read: %v", err)
	}
	var h wire.Header
	if err := wire.DecodeHeader(hb, &h); err != nil || h.RequestID != c.id {
		c.t.Fatalf("header %+v: %v", h, err)
	}
	p := make([]byte, h.Length)
	if _, err := ioReadFull(c.nc, p); err != nil {
		c.t.Fatalf("read: %v", err)
	}
	return h.Kind, p
}

func errCode(kind wire.Kind, out []byte) wire.ErrorCode {
	var e wire.Error
	if kind != wire.KindError || wire.DecodeError(out, &e) != nil {
		return 0
	}
	return e.Code
}

// TestTokenRoles: every role against every request kind, over real
// sockets: what the role allows is served, the rest is answered
// Unauthorized, and the connection stays open through refusals.
func TestTokenRoles(t *testing.T) {
	t.Parallel()
	c := startClusterWith(t, 1, withTokens)
	n := c.nodes[0]
	addr, _, _ := n.Addrs()
	admin := dialToken(t, addr, adminToken)
	// A topic for the data requests, owned by the node.
	kind, out := admin.do(wire.KindAssign, wire.AppendAssign(nil, &wire.Assign{Topic: []byte("shared")}))
	var a wire.Assignment
	if kind != wire.KindAssignment || wire.DecodeAssignment(out, &a) != nil {
		t.Fatalf("assign: %v %x", kind, out)
	}
	requests := []struct {
		kind    wire.Kind
		payload func(role string) []byte
		minimum security.Role
	}{
		{wire.KindAssign, func(r string) []byte { return wire.AppendAssign(nil, &wire.Assign{Topic: []byte("new-" + r)}) }, security.RoleAdmin},
		{wire.KindRevoke, func(string) []byte { return wire.AppendRevoke(nil, &wire.Revoke{Topic: []byte("nothing-here")}) }, security.RoleAdmin},
		{wire.KindUpdatePartition, func(string) []byte {
			return wire.AppendUpdatePartition(nil, &wire.UpdatePartition{Topic: []byte("shared"), Partitions: 2})
		}, security.RoleAdmin},
		{wire.KindLookup, func(string) []byte { return wire.AppendLookup(nil, &wire.Lookup{Topic: []byte("shared")}) }, security.RoleRead},
		{wire.KindProduce, func(string) []byte {
			return wire.AppendProduce(nil, &wire.Produce{Topic: []byte("shared"), Epoch: a.Epoch, Records: [][]byte{[]byte("r")}})
		}, security.RoleWrite},
		{wire.KindFetch, func(string) []byte {
			return wire.AppendFetch(nil, &wire.Fetch{Topic: []byte("shared"), Epoch: a.Epoch})
		}, security.RoleRead},
		{wire.KindMembers, func(string) []byte { return nil }, security.RoleRead},
		{wire.KindShards, func(string) []byte { return nil }, security.RoleRead},
		{wire.KindStatus, func(string) []byte { return nil }, security.RoleRead},
		// The operators' requests (an unknown node for those that would
		// change something).
		{wire.KindDrain, func(string) []byte { return wire.AppendAdminNode(nil, &wire.AdminNode{Node: []byte("n9")}) }, security.RoleAdmin},
		{wire.KindUndrain, func(string) []byte { return wire.AppendAdminNode(nil, &wire.AdminNode{Node: []byte("n1")}) }, security.RoleAdmin},
		{wire.KindTransferLeader, func(string) []byte {
			return wire.AppendTransferLeader(nil, &wire.TransferLeader{Shard: 0, Node: []byte("n1")})
		}, security.RoleAdmin},
		{wire.KindRemoveNode, func(string) []byte { return wire.AppendAdminNode(nil, &wire.AdminNode{Node: []byte("n9")}) }, security.RoleAdmin},
	}
	accepted := n.started.Net.Counters().ConnsAccepted.Load()
	for _, tok := range testTokens() {
		conn := dialToken(t, addr, tok.Value)
		for _, rq := range requests {
			kind, out := conn.do(rq.kind, rq.payload(tok.Role.String()))
			refused := errCode(kind, out) == wire.CodeUnauthorized
			if want := tok.Role < rq.minimum; refused != want {
				t.Errorf("%v token, %v: refused %v, want %v (answer %v)", tok.Role, rq.kind, refused, want, kind)
			}
		}
		// Still open after its refusals: a status on the same connection.
		if kind, _ := conn.do(wire.KindStatus, nil); kind != wire.KindStatusInfo {
			t.Fatalf("%v token: connection unusable after refusals: %v", tok.Role, kind)
		}
	}
	if got := n.started.Net.Counters().ConnsAccepted.Load() - accepted; got != 3 {
		t.Fatalf("%d connections for three tokens: a refusal closed one", got)
	}
	if st := n.Stats().Security; st.Unauthorized != 7+8 {
		t.Fatalf("Unauthorized = %d, want 15 (write: 7 admin kinds, read: those and Produce)", st.Unauthorized)
	}
}

// TestClientCredentialsDoNotOpenThePeerPort: a good client token, the
// client role, or a peer Hello with no proof of the secret gets no peer
// connection on a node, whatever node id it claims; and the cluster
// secret does not open the client port of a node with tokens.
func TestClientCredentialsDoNotOpenThePeerPort(t *testing.T) {
	t.Parallel()
	c := startClusterWith(t, 2, withTokens)
	n := c.nodes[0]
	clientAddr, peer, _ := n.Addrs()
	dial := func(addr string) net.Conn {
		nc, err := net.DialTimeout("tcp", addr, 2*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = nc.Close() })
		_ = nc.SetDeadline(time.Now().Add(10 * time.Second))
		return nc
	}
	if _, err := netio.ClientHandshakeToken(dial(peer), 42, []byte(adminToken)); err == nil {
		t.Fatal("an admin token opened the peer port")
	}
	// Claiming n2's id, with the admin token as if it were the secret.
	nc := dial(peer)
	hello := wire.Hello{Version: wire.ProtocolVersion, Role: wire.RolePeer, ClusterID: 42, Generation: 1 << 62, NodeID: []byte("n2")}
	f, start := wire.BeginFrame(nil, wire.KindHello, 0)
	f = wire.AppendHello(f, &hello)
	f, _ = wire.EndFrame(f, start)
	_, _ = nc.Write(f)
	auth, start := wire.BeginFrame(nil, wire.KindHelloAuth, 0)
	auth = wire.AppendHelloAuth(auth, &wire.HelloAuth{Tag: [wire.AuthTagSize]byte(bytes.Repeat([]byte{1}, wire.AuthTagSize))})
	auth, _ = wire.EndFrame(auth, start)
	_, _ = nc.Write(auth)
	buf := make([]byte, 4096)
	for {
		if _, err := nc.Read(buf); err != nil {
			break // closed: refused
		}
	}
	if _, err := netio.ClientHandshake(dial(clientAddr), 42, []byte("the peers' secret")); err == nil {
		t.Fatal("the cluster secret opened the client port of a node with tokens")
	}
	// n2 is still n1's peer: its connection was not taken over.
	cl := clientFor(t, n, client.Config{Token: adminToken})
	if _, err := cl.Assign(ctxFor(t), "still-works", client.AssignOptions{Owner: "n2"}); err != nil {
		t.Fatalf("assign to n2 after the attempts: %v", err)
	}
	ctr := n.started.Net.Counters()
	if ctr.HandshakeWrongRole.Load() != 1 || ctr.HandshakeBadAuth.Load() < 1 || ctr.HandshakeBadToken.Load() != 1 {
		t.Fatalf("wrong role %d, bad auth %d, bad token %d", ctr.HandshakeWrongRole.Load(), ctr.HandshakeBadAuth.Load(), ctr.HandshakeBadToken.Load())
	}
}

// clientFor is clientOf with credentials. A cfg.MaxRetries of its own is
// kept: a client that must be refused (MaxRetries -1) asks once, instead
// of retrying until its context runs out.
func clientFor(t testing.TB, n *Node, cfg client.Config) *client.Client {
	t.Helper()
	addr, _, _ := n.Addrs()
	if cfg.MaxRetries == 0 {
		cfg.MaxRetries = 20
	}
	// A TLS handshake of the race build on a loaded machine can take
	// longer than the default 2 s; a refusal comes as soon as it is made.
	cfg.DialTimeout = 10 * time.Second
	cfg.Servers, cfg.ClusterID, cfg.RequestTimeout, cfg.Logger = []string{addr}, 42, 3*time.Second, testLogger()
	cl, err := client.New(cfg)
	if err != nil {
		t.Fatalf("client: %v", err)
	}
	t.Cleanup(func() { _ = cl.Close() })
	return cl
}

func ctxFor(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// TestTLSCluster: a cluster whose client and peer links are all TLS 1.3
// (certificates made here), with tokens; a node certificate of another CA
// is refused on the peer port, and a client that does not trust the CA
// refuses the node.
func TestTLSCluster(t *testing.T) {
	t.Parallel()
	ca := testcerts.NewCA(t, "cluster")
	certs := map[string]testcerts.Issued{}
	var mu sync.Mutex
	c := startClusterWith(t, 3, func(cfg *Config) {
		withTokens(cfg)
		mu.Lock()
		certs[cfg.ID] = ca.Node(t, cfg.ID)
		cfg.Security.TLS = &security.TLS{Certificate: certs[cfg.ID].TLS, CA: ca.Pool}
		mu.Unlock()
	})
	cl := clientFor(t, c.nodes[1], client.Config{Token: writeToken, TLS: &tls.Config{RootCAs: ca.Pool}})
	admin := clientFor(t, c.nodes[0], client.Config{Token: adminToken, TLS: &tls.Config{RootCAs: ca.Pool}})
	if _, err := admin.Assign(ctxFor(t), "tls-topic", client.AssignOptions{Owner: "n3"}); err != nil {
		t.Fatalf("assign over TLS (forwarded between TLS peers): %v", err)
	}
	if _, err := cl.Produce(ctxFor(t), "tls-topic", [][]byte{[]byte("sealed")}); err != nil {
		t.Fatalf("produce over TLS: %v", err)
	}
	f, err := cl.Fetch(ctxFor(t), "tls-topic", 0, 0)
	if err != nil || len(f.Records) != 1 || string(f.Records[0].Value) != "sealed" {
		t.Fatalf("fetch over TLS: %v %+v", err, f)
	}
	// Another CA's node certificate is refused on the peer port.
	other := testcerts.NewCA(t, "mallory")
	_, peer, _ := c.nodes[0].Addrs()
	bad := other.Node(t, "n9")
	conn, err := tls.Dial("tcp", peer, &tls.Config{Certificates: []tls.Certificate{bad.TLS}, InsecureSkipVerify: true})
	if err == nil {
		_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
		_, err = conn.Read(make([]byte, 1))
		_ = conn.Close()
	}
	if err == nil {
		t.Fatal("the peer port took another CA's certificate")
	}
	waitUntil(t, 5*time.Second, "the refused handshake to be counted", func() bool {
		return c.nodes[0].Stats().Security.TLSHandshakesFailed >= 1
	})
	// A client trusting another CA refuses the node.
	wrong := clientFor(t, c.nodes[0], client.Config{Token: adminToken, TLS: &tls.Config{RootCAs: other.Pool}, MaxRetries: -1})
	if _, err := wrong.Status(ctxFor(t), ""); !errors.Is(err, client.ErrHandshake) {
		t.Fatalf("a client trusting another CA: %v", err)
	}
}

// TestTLSClientCertificates: with VerifyClients the client port wants a
// certificate of the cluster CA from every client, token or not.
func TestTLSClientCertificates(t *testing.T) {
	t.Parallel()
	ca := testcerts.NewCA(t, "cluster")
	c := startClusterWith(t, 1, func(cfg *Config) {
		cfg.Security.TLS = &security.TLS{Certificate: ca.Node(t, cfg.ID).TLS, CA: ca.Pool, VerifyClients: true}
	})
	n := c.nodes[0]
	mine := ca.Client(t, "ops")
	good := clientFor(t, n, client.Config{TLS: &tls.Config{RootCAs: ca.Pool, Certificates: []tls.Certificate{mine.TLS}}})
	if _, err := good.Status(ctxFor(t), ""); err != nil {
		t.Fatalf("with a client certificate: %v", err)
	}
	for name, certs := range map[string][]tls.Certificate{
		"no certificate":           nil,
		"another CA's certificate": {testcerts.NewCA(t, "other").Client(t, "m").TLS},
	} {
		cl := clientFor(t, n, client.Config{TLS: &tls.Config{RootCAs: ca.Pool, Certificates: certs}, MaxRetries: -1})
		if _, err := cl.Status(ctxFor(t), ""); !errors.Is(err, client.ErrHandshake) {
			t.Fatalf("%s: %v, want the node's refusal of the client's TLS", name, err)
		}
	}
}

// TestSwimKeyRotationWithoutFalseDeaths rotates the SWIM key of a running
// 3-node cluster in the documented steps (add the new key as secondary
// everywhere, make it primary everywhere, remove the old one), and checks
// through SWIM's counters that no member was ever suspected, declared dead
// or refused a datagram.
func TestSwimKeyRotationWithoutFalseDeaths(t *testing.T) {
	// Not parallel: any suspicion fails it, and a neighbour test's load
	// can starve a probe into one.
	old, nw := bytes.Repeat([]byte{0x11}, 32), bytes.Repeat([]byte{0x22}, 32)
	c := startClusterWith(t, 3, func(cfg *Config) { cfg.Security.SwimKeys = [][]byte{old} })
	// Joining may have raced the first probes; count from here.
	time.Sleep(time.Second)
	type base struct{ suspicions, dead, auth, replay, failures uint64 }
	before := map[string]base{}
	for _, n := range c.nodes {
		s := n.Stats().Swim.Core
		before[n.ID()] = base{s.Suspicions, s.DeadDeclared, s.DropAuth, s.DropReplay, s.ProbeFailures}
	}
	step := func(what string, keys [][]byte) {
		t.Helper()
		for _, n := range c.nodes {
			if err := n.SetSwimKeys(keys); err != nil {
				t.Fatalf("%s on %s: %v", what, n.ID(), err)
			}
			// Nodes are switched one by one, as an operator would, with
			// probes and gossip flowing in between.
			time.Sleep(300 * time.Millisecond)
		}
		time.Sleep(time.Second) // five probe intervals of the fast preset
	}
	step("add the new key", [][]byte{old, nw})
	step("make it primary", [][]byte{nw, old})
	step("remove the old key", [][]byte{nw})
	for _, n := range c.nodes {
		s := n.Stats().Swim.Core
		b := before[n.ID()]
		if s.Suspicions != b.suspicions || s.DeadDeclared != b.dead || s.DropAuth != b.auth || s.DropReplay != b.replay || s.ProbeFailures != b.failures {
			t.Errorf("%s: suspicions %d→%d, dead %d→%d, auth drops %d→%d, replays %d→%d, probe failures %d→%d", n.ID(),
				b.suspicions, s.Suspicions, b.dead, s.DeadDeclared, b.auth, s.DropAuth, b.replay, s.DropReplay, b.failures, s.ProbeFailures)
		}
		if s.Probes == 0 {
			t.Errorf("%s did not probe", n.ID())
		}
		if st := n.Status(); st.MembersAlive != 3 {
			t.Errorf("%s sees %d members alive", n.ID(), st.MembersAlive)
		}
	}
}

// TestRequestByteBudget: requests whose bytes (decompressed size included)
// would pass MaxRequestBytes are answered Unavailable until earlier ones
// finish.
func TestRequestByteBudget(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	var once sync.Once
	free := func() { once.Do(func() { close(release) }) }
	t.Cleanup(free)
	c := startClusterHooked(t, 1, func(cfg *Config, h *testHooks) {
		cfg.MaxRequestBytes = security.MinRequestBytes
		h.beforeServe = func() { <-release }
	})
	n := c.nodes[0]
	addr, _, _ := n.Addrs()
	// A compressed Produce of 15 MiB of zeros: a few KiB on the wire,
	// 15 MiB once decompressed.
	recs := make([][]byte, 15)
	for i := range recs {
		recs[i] = make([]byte, wire.MaxRecordLen)
	}
	big, start := wire.BeginFrame(nil, wire.KindProduce, 0)
	big = wire.AppendProduce(big, &wire.Produce{Topic: []byte("t"), Epoch: 1, Records: recs})
	big, _ = wire.EndFrame(big, start)
	big, _ = wire.CompressFrame(big, 0, wire.CompressThreshold, nil)
	if len(big) > 1<<20 {
		t.Fatalf("compressed frame of %d bytes", len(big))
	}
	send := func(nc net.Conn, id byte) {
		f := append([]byte(nil), big...)
		f[8] = id // request id
		if _, err := nc.Write(f); err != nil {
			t.Fatal(err)
		}
	}
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	_ = nc.SetDeadline(time.Now().Add(20 * time.Second))
	if _, err := netio.ClientHandshake(nc, 42, nil); err != nil {
		t.Fatal(err)
	}
	send(nc, 1)
	send(nc, 2)
	waitUntil(t, 5*time.Second, "two requests held", func() bool { return n.Stats().Security.RequestBytes > 30<<20 })
	send(nc, 3) // 45 MiB in all: past the 32 MiB budget
	h, p := readAnswer(t, nc)
	if h.RequestID != 3 || errCode(h.Kind, p) != wire.CodeUnavailable {
		t.Fatalf("third request: id %d, %v code %d; want Unavailable", h.RequestID, h.Kind, errCode(h.Kind, p))
	}
	if st := n.Stats().Security; st.RequestBytesRefused != 1 {
		t.Fatalf("RequestBytesRefused = %d", st.RequestBytesRefused)
	}
	free()
	for range 2 {
		readAnswer(t, nc) // NotLeaderForTopic: nobody owns t
	}
	waitUntil(t, 5*time.Second, "the budget to be given back", func() bool { return n.Stats().Security.RequestBytes == 0 })
}

func readAnswer(t *testing.T, nc net.Conn) (wire.Header, []byte) {
	t.Helper()
	hb := make([]byte, wire.HeaderSize)
	if _, err := ioReadFull(nc, hb); err != nil {
		t.Fatalf("read: %v", err)
	}
	var h wire.Header
	if err := wire.DecodeHeader(hb, &h); err != nil {
		t.Fatal(err)
	}
	p := make([]byte, h.Length)
	if _, err := ioReadFull(nc, p); err != nil {
		t.Fatalf("read: %v", err)
	}
	return h, p
}

// TestFetchIsCappedByTheNode: a Fetch asking for more than MaxFetchBytes,
// or for the default (0), gets at most the cap; one asking for less gets
// what it asked.
func TestFetchIsCappedByTheNode(t *testing.T) {
	t.Parallel()
	const capBytes = 64 << 10
	c := startClusterWith(t, 1, func(cfg *Config) { cfg.MaxFetchBytes = capBytes })
	cl := clientOf(t, c.nodes[0])
	if _, err := cl.Assign(ctxFor(t), "capped", client.AssignOptions{}); err != nil {
		t.Fatal(err)
	}
	recs := make([][]byte, 10)
	for i := range recs {
		recs[i] = bytes.Repeat([]byte{byte(i)}, 16<<10)
	}
	if _, err := cl.Produce(ctxFor(t), "capped", recs); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		ask  uint32
		want int
	}{{0, 4}, {1 << 30, 4}, {^uint32(0), 4}, {20 << 10, 1}, {capBytes, 4}} {
		f, err := cl.Fetch(ctxFor(t), "capped", 0, tc.ask)
		if err != nil {
			t.Fatal(err)
		}
		if len(f.Records) != tc.want {
			t.Errorf("asking %d bytes: %d records of 16 KiB, want %d", tc.ask, len(f.Records), tc.want)
		}
	}
}

// TestSecurityConfigIsChecked: bad credentials and limits are refused by
// New with ErrConfig.
func TestSecurityConfigIsChecked(t *testing.T) {
	ca := testcerts.NewCA(t, "cluster")
	serverOnly := ca.Client(t, "n1") // client use only: peers could not dial with it... nor listen
	for name, mut := range map[string]func(*Config){
		"short token": func(c *Config) { c.Security.ClientTokens = []security.Token{{Value: "short", Role: security.RoleRead}} },
		"repeated token": func(c *Config) {
			c.Security.ClientTokens = []security.Token{{Value: adminToken, Role: security.RoleAdmin}, {Value: adminToken, Role: security.RoleRead}}
		},
		"no role":      func(c *Config) { c.Security.ClientTokens = []security.Token{{Value: adminToken, Role: 0}} },
		"bad swim key": func(c *Config) { c.Security.SwimKeys = [][]byte{make([]byte, 7)} },
		"cert of another CA": func(c *Config) {
			c.Security.TLS = &security.TLS{Certificate: testcerts.NewCA(t, "x").Node(t, "n1").TLS, CA: ca.Pool}
		},
		"cert for clients only": func(c *Config) { c.Security.TLS = &security.TLS{Certificate: serverOnly.TLS, CA: ca.Pool} },
		"tiny request budget":   func(c *Config) { c.MaxRequestBytes = 1 << 20 },
		"huge fetch cap":        func(c *Config) { c.MaxFetchBytes = wire.MaxFrame },
	} {
		cfg := nodeConfig("n1", t.TempDir(), nil, 1)
		mut(&cfg)
		if n, err := New(cfg); !errors.Is(err, ErrConfig) {
			if err == nil {
				_ = n.Close()
			}
			t.Errorf("%s: %v, want ErrConfig", name, err)
		}
	}
}

// TestTokenRotation: tokens replaced while the node runs; a removed
// token's open connection is refused from then on, a changed role applies
// at once, a new token opens new connections.
func TestTokenRotation(t *testing.T) {
	t.Parallel()
	c := startClusterWith(t, 1, withTokens)
	n := c.nodes[0]
	addr, _, _ := n.Addrs()
	reader, writer := dialToken(t, addr, readToken), dialToken(t, addr, writeToken)
	const fresh = "fresh-token-0123456789"
	if err := n.SetClientTokens([]security.Token{{Value: adminToken, Role: security.RoleAdmin}, {Value: writeToken, Role: security.RoleRead}, {Value: fresh, Role: security.RoleRead}}); err != nil {
		t.Fatal(err)
	}
	if code := errCode(reader.do(wire.KindStatus, nil)); code != wire.CodeUnauthorized {
		t.Fatalf("removed token: code %d", code)
	}
	if code := errCode(writer.do(wire.KindProduce, wire.AppendProduce(nil, &wire.Produce{Topic: []byte("t"), Epoch: 1, Records: [][]byte{{1}}}))); code != wire.CodeUnauthorized {
		t.Fatalf("write token made read: produce code %d", code)
	}
	if kind, _ := dialToken(t, addr, fresh).do(wire.KindStatus, nil); kind != wire.KindStatusInfo {
		t.Fatalf("new token: %v", kind)
	}
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if _, err := netio.ClientHandshakeToken(nc, 42, []byte(readToken)); !errors.Is(err, wire.ErrUnauthorized) {
		t.Fatalf("removed token at a new handshake: %v", err)
	}
	if err := n.SetClientTokens(nil); err == nil {
		t.Fatal("no tokens at all accepted")
	}
}

// TestInsecureStartWarnsOnce: a node with no secret, no TLS and no tokens
// says so in one warning; one with credentials does not, nor one that
// runs so on purpose (InsecureOK).
func TestInsecureStartWarnsOnce(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		mut  func(*Config)
		want int
	}{
		{"no credentials", func(*Config) {}, 1},
		{"tokens and a secret", withTokens, 0},
		{"insecure on purpose", func(c *Config) { c.Security.InsecureOK = true }, 0},
	} {
		var buf syncBuffer
		startClusterWith(t, 1, func(cfg *Config) {
			cfg.Logger = slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelWarn}))
			tc.mut(cfg)
		})
		if got := strings.Count(buf.String(), "INSECURE"); got != tc.want {
			t.Errorf("%s: %d insecure warnings, want %d:\n%s", tc.name, got, tc.want, buf.String())
		}
		if strings.Contains(buf.String(), adminToken) {
			t.Error("a token was logged")
		}
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

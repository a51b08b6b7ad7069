package security

import (
	"errors"
	"strings"
	"testing"

	"github.com/shoalmq/shoal/wire"
)

// A node without tokens serves every connection; with them, a request is
// served only under a known token whose role allows it, and each refusal
// is counted and says why.
func TestClientsAuthorize(t *testing.T) {
	var none Clients
	if err := none.Init(nil); err != nil || none.On() {
		t.Fatalf("no tokens: %v, on %v", err, none.On())
	}
	if ok, _ := none.Authorize(nil, wire.KindAssign); !ok {
		t.Fatal("a node without tokens refused a connection")
	}
	if _, ok := none.CheckToken([]byte(adminTok)); ok {
		t.Fatal("a node without tokens took a token")
	}
	if err := none.Replace([]Token{{Value: adminTok, Role: RoleAdmin}}); !errors.Is(err, ErrCredentials) {
		t.Fatalf("tokens given to a node started without: %v", err)
	}

	var c Clients
	if err := c.Init([]Token{{Value: adminTok, Role: RoleAdmin}, {Value: readTok, Role: RoleRead}}); err != nil || !c.On() {
		t.Fatalf("init: %v, on %v", err, c.On())
	}
	if g, ok := c.CheckToken([]byte("not-a-token-0123456789")); ok || g != nil {
		t.Fatal("an unknown token was taken")
	}
	admin, ok := c.CheckToken([]byte(adminTok))
	if !ok {
		t.Fatal("the admin token was refused")
	}
	reader, _ := c.CheckToken([]byte(readTok))
	if ok, _ := c.Authorize(admin, wire.KindAssign); !ok {
		t.Fatal("admin refused an assign")
	}
	if ok, why := c.Authorize(nil, wire.KindLookup); ok || why != "this client proved no token" {
		t.Fatalf("no grant: %v, %q", ok, why)
	}
	if ok, why := c.Authorize(reader, wire.KindAssign); ok || !strings.Contains(why, "role may not make") {
		t.Fatalf("read role assigning: %v, %q", ok, why)
	}
	// The read token goes: its open connection is refused from now on.
	if err := c.Replace([]Token{{Value: adminTok, Role: RoleAdmin}}); err != nil {
		t.Fatal(err)
	}
	if ok, why := c.Authorize(reader, wire.KindLookup); ok || why != "this client's token was removed" {
		t.Fatalf("removed token: %v, %q", ok, why)
	}
	if _, ok := c.CheckToken([]byte(readTok)); ok {
		t.Fatal("a removed token was taken")
	}
	if err := c.Replace(nil); !errors.Is(err, ErrCredentials) {
		t.Fatalf("no tokens at all: %v", err)
	}
	if n := c.Unauthorized(); n != 3 {
		t.Fatalf("%d refusals counted, want 3", n)
	}
}

func TestCheck(t *testing.T) {
	if err := Check(&Security{}); err != nil {
		t.Fatal(err)
	}
	if err := Check(&Security{ClientTokens: []Token{{Value: "short", Role: RoleRead}}}); !errors.Is(err, ErrCredentials) {
		t.Fatalf("a short token: %v", err)
	}
	if err := Check(&Security{SwimKeys: [][]byte{[]byte("bad")}}); err == nil || !strings.HasPrefix(err.Error(), "SWIM keys: ") {
		t.Fatalf("a bad SWIM key: %v", err)
	}
}

func TestProofs(t *testing.T) {
	for _, c := range []struct {
		s              Security
		secret         bool
		peers, clients string
	}{
		{Security{}, false, "none", "none"},
		{Security{}, true, "cluster secret", "cluster secret"},
		{Security{ClientTokens: make([]Token, 2)}, true, "cluster secret", "token (2 known)"},
		{Security{TLS: &TLS{VerifyClients: true}}, false, "certificate", "certificate"},
		{Security{TLS: &TLS{VerifyClients: true}, ClientTokens: make([]Token, 1)}, true, "cluster secret and certificate", "token (1 known) and certificate"},
		{Security{TLS: &TLS{}}, false, "certificate", "none"},
	} {
		if peers, clients := Proofs(&c.s, c.secret); peers != c.peers || clients != c.clients {
			t.Errorf("%+v, secret %v: %q, %q; want %q, %q", c.s, c.secret, peers, clients, c.peers, c.clients)
		}
	}
}

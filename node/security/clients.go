package security

import (
	"fmt"
	"strings"
	"sync/atomic"

	"github.com/shoalmq/shoal/wire"
)

// Check checks s: its TLS (TLS.Check), its client tokens (a table can be
// built of them) and its SWIM keys (a keyring can be made of them).
func Check(s *Security) error {
	if s.TLS != nil {
		if err := s.TLS.Check(); err != nil {
			return fmt.Errorf("TLS: %w", err)
		}
	}
	if len(s.ClientTokens) > 0 {
		if _, err := NewTokenTable(s.ClientTokens, nil); err != nil {
			return err
		}
	}
	if len(s.SwimKeys) > 0 {
		if _, err := wire.NewSwimKeyring(s.SwimKeys); err != nil {
			return fmt.Errorf("SWIM keys: %w", err)
		}
	}
	return nil
}

// Clients is a node's client tokens while it runs: the table a client's
// handshake finds its token in, replaced while the node runs, and the
// count of requests refused. The zero value takes no tokens. Its methods
// are safe for concurrent use.
type Clients struct {
	// tokens is the client token table; nil without tokens.
	tokens atomic.Pointer[TokenTable]

	unauthorized atomic.Uint64 // requests refused for their token's role (or, with tokens, for having none)
}

// Init sets the first tokens of a node given toks (none: it takes no
// tokens). Errors are NewTokenTable's; Check finds them first.
func (c *Clients) Init(toks []Token) error {
	if len(toks) == 0 {
		return nil
	}
	tt, err := NewTokenTable(toks, nil)
	if err != nil {
		return err
	}
	c.tokens.Store(tt)
	return nil
}

// On reports whether the node takes client tokens.
func (c *Clients) On() bool { return c.tokens.Load() != nil }

// CheckToken is a client handshake's token check: it returns the token's
// *Grant, which the connection keeps, and whether the token is known and
// not revoked.
func (c *Clients) CheckToken(tok []byte) (any, bool) {
	tt := c.tokens.Load()
	if tt == nil {
		return nil, false
	}
	if g := tt.Find(tok); g != nil && !g.Revoked() {
		return g, true
	}
	return nil, false
}

// Authorize reports whether a client connection whose handshake granted
// grant (CheckToken's; nil or another value for none) may make a request
// of kind; when not, it counts the refusal and says why, for the client.
// Without tokens a connection that proved none is served: the client
// port's credential, if any, was proven.
func (c *Clients) Authorize(grant any, kind wire.Kind) (ok bool, why string) {
	g, _ := grant.(*Grant)
	if g == nil {
		if c.tokens.Load() == nil {
			return true, ""
		}
		// Tokens, and a connection that proved none (not one whose client
		// handshake requires one): refused.
		c.unauthorized.Add(1)
		return false, "this client proved no token"
	}
	revoked, role := g.Revoked(), g.Role()
	if !revoked && role.Allows(kind) {
		return true, ""
	}
	c.unauthorized.Add(1)
	if revoked {
		return false, "this client's token was removed"
	}
	return false, fmt.Sprintf("the %v role may not make %v requests", role, kind)
}

// Replace replaces the tokens of a node that takes tokens: new
// connections need one of toks; open connections whose token is gone are
// refused every request from now on, and those whose token's role changed
// get the new role (NewTokenTable).
func (c *Clients) Replace(toks []Token) error {
	old := c.tokens.Load()
	if old == nil {
		return fmt.Errorf("%w: this node started without client tokens: restart it with them", ErrCredentials)
	}
	tt, err := NewTokenTable(toks, old)
	if err != nil {
		return err
	}
	c.tokens.Store(tt)
	return nil
}

// Unauthorized is the count of requests Authorize refused.
func (c *Clients) Unauthorized() uint64 { return c.unauthorized.Load() }

// Proofs names, for a node's start log, what it asks of its peers and of
// its clients given s and whether it has a cluster secret: "none", or the
// credentials joined by "and".
func Proofs(s *Security, secret bool) (peers, clients string) {
	tlsOn, tokens := s.TLS != nil, len(s.ClientTokens) > 0
	peers = "none"
	switch {
	case secret && tlsOn:
		peers = "cluster secret and certificate"
	case secret:
		peers = "cluster secret"
	case tlsOn:
		peers = "certificate"
	}
	var proofs []string
	switch {
	case tokens:
		proofs = append(proofs, fmt.Sprintf("token (%d known)", len(s.ClientTokens)))
	case secret:
		proofs = append(proofs, "cluster secret")
	}
	if tlsOn && s.TLS.VerifyClients {
		proofs = append(proofs, "certificate")
	}
	clients = "none"
	if len(proofs) > 0 {
		clients = strings.Join(proofs, " and ")
	}
	return peers, clients
}

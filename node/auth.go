package node

import (
	"context"
	"fmt"
	"io"
	"log/slog"

	"github.com/shoalmq/shoal/netio"
	"github.com/shoalmq/shoal/node/security"
	"github.com/shoalmq/shoal/swim"
)

// Who may do what, and how it is proven (docs/security.md):
//
//   - Peers prove the cluster credential: the shared secret (Config.Secret,
//     an HMAC challenge in the handshake), a certificate the cluster CA
//     signed (Security.TLS, mutual TLS on the peer port, the peer dials and
//     push-pull), or both. Only that credential opens the peer port and
//     claims a node id.
//   - Clients prove a token (Security.ClientTokens), whose role decides the
//     requests the node serves them; others are answered Unauthorized and
//     the connection stays open. With tokens the client port neither asks
//     for the cluster secret nor takes it. Without tokens, a node with a
//     secret asks clients for it (the older mode, in which a client holds
//     the peers' credential), and a node with neither serves everyone as
//     admin. The client port may also require a client certificate
//     (TLS.VerifyClients).
//   - SWIM datagrams and push-pulls are sealed with the SWIM keyring
//     (Security.SwimKeys, or a key derived from the secret).
//
// The checks of Config.Security, the client tokens while the node runs
// (Node.sec) and each request's authorization by its token's role are the
// security room's (node/security). Here they are put to work on the
// node's transport, SWIM driver and connections, and a refusal is
// answered on the wire.

// The names of package security that node's users know, forwarded.
type (
	// Security is how a node authenticates and encrypts (Config.Security;
	// security.Security).
	Security = security.Security
	// TLS is a node's certificate and its cluster's CA (security.TLS).
	TLS = security.TLS
	// Role is what a client token allows (security.Role).
	Role = security.Role
	// Token is one client credential and its role (security.Token).
	Token = security.Token
	// SecurityStats counts what the credentials and the request limits
	// refused (security.Stats; node/status fills it).
	SecurityStats = security.Stats
)

// The roles (security.RoleRead...).
const (
	RoleRead  = security.RoleRead
	RoleWrite = security.RoleWrite
	RoleAdmin = security.RoleAdmin
)

// Limits of the credentials (security.MinTokenLen, MaxClientTokens).
const (
	MinTokenLen     = security.MinTokenLen
	MaxClientTokens = security.MaxClientTokens
)

// Errors of the credentials (security.ErrTokenFile...).
var (
	ErrTokenFile   = security.ErrTokenFile
	ErrTLSFiles    = security.ErrTLSFiles
	ErrCredentials = security.ErrCredentials
)

// ParseRole reads a role's name: admin, write or read (security.ParseRole).
func ParseRole(s string) (Role, error) { return security.ParseRole(s) }

// ParseTokens reads a client token file (security.ParseTokens).
func ParseTokens(r io.Reader) ([]Token, error) { return security.ParseTokens(r) }

// LoadTLS reads a node's certificate and key and the cluster CA and checks
// them (security.LoadTLS).
func LoadTLS(certFile, keyFile, caFile string) (*TLS, error) {
	return security.LoadTLS(certFile, keyFile, caFile)
}

// fillSecurity checks Config.Security and the request limits, and sets
// their defaults (Config.fill calls it).
func (c *Config) fillSecurity() error {
	if err := security.Check(&c.Security); err != nil {
		return fmt.Errorf("%w: %w", ErrConfig, err)
	}
	return c.fillLimits()
}

// initSecurity sets up the token table; it runs for every node, started
// or driven, so that a driven node given tokens refuses a connection that
// proved none.
func (n *Node) initSecurity() {
	_ = n.sec.Init(n.cfg.Security.ClientTokens) // checked in fillSecurity
}

// secureTransport puts the node's credentials into the transport's
// config: TLS on both ports and the peer dials, and the client token
// check.
func (n *Node) secureTransport(nc *netio.Config) {
	s := &n.cfg.Security
	if s.TLS != nil {
		nc.ClientTLS = s.TLS.ClientConfig()
		nc.PeerTLS, nc.DialTLS = s.TLS.PeerConfigs()
	}
	if n.sec.On() {
		nc.CheckToken = n.sec.CheckToken
	}
}

// secureSwim puts the SWIM keyring and the push-pull TLS into the SWIM
// driver's config.
func (n *Node) secureSwim(dc *swim.DriverConfig) {
	s := &n.cfg.Security
	dc.Node.Keys = s.SwimKeys
	if s.TLS != nil {
		dc.PushPullTLS, dc.PushPullDialTLS = s.TLS.PeerConfigs()
	}
}

// SetClientTokens replaces the client tokens of a node started with
// tokens: new connections need one of toks; open connections whose token
// is gone are refused every request from now on, and those whose token's
// role changed get the new role.
func (n *Node) SetClientTokens(toks []Token) error {
	if err := n.sec.Replace(toks); err != nil {
		return err
	}
	n.log.Info("client tokens replaced", "tokens", len(toks))
	return nil
}

// SetSwimKeys replaces the SWIM keyring, the primary first (docs/security.md
// has the rotation steps).
func (n *Node) SetSwimKeys(keys [][]byte) error {
	if n.swimDrv == nil {
		return fmt.Errorf("%w: the node is not started (or is driven, without SWIM of its own)", ErrCredentials)
	}
	if err := n.swimDrv.SetKeys(keys); err != nil {
		return fmt.Errorf("%w: %w", ErrCredentials, err)
	}
	n.log.Info("SWIM keys replaced", "keys", len(keys))
	return nil
}

// logSecurity says at start what the node asks of whom; it warns, in one
// line, when it asks nothing of anyone.
func (n *Node) logSecurity() {
	s := &n.cfg.Security
	secret, tlsOn, tokens := len(n.cfg.Secret) > 0, s.TLS != nil, len(s.ClientTokens) > 0
	swimKeys := 0
	if n.swimDrv != nil {
		swimKeys = n.swimDrv.KeyCount()
	}
	if !secret && !tlsOn && !tokens {
		level := slog.LevelWarn
		if s.InsecureOK {
			level = slog.LevelInfo
		}
		n.log.Log(context.Background(), level, "INSECURE: no cluster secret, no TLS and no client tokens: anyone who can reach the client port "+
			"is served every request, anyone who can reach the peer port can join as any node id, and SWIM gossip "+
			"is neither authenticated nor encrypted; see docs/security.md")
		return
	}
	peers, clients := security.Proofs(s, secret)
	n.log.Info("security", "peers", peers, "clients", clients, "tls", tlsOn, "swim_keys", swimKeys)
	if clients == "none" {
		n.log.Warn("the client port serves every request to anyone who reaches it: give client tokens")
	}
	if swimKeys == 0 {
		n.log.Warn("SWIM gossip is neither authenticated nor encrypted: give a SWIM key file or a cluster secret")
	}
}

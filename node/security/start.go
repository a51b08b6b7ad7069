package security

import (
	"context"
	"log/slog"

	"github.com/shoalmq/shoal/netio"
	"github.com/shoalmq/shoal/swim"
)

// Transport puts a node's credentials into its transport's config: TLS on
// both ports and the peer dials, and, when the node takes client tokens,
// the handshake's token check against c.
func Transport(s *Security, c *Clients, nc *netio.Config) {
	if s.TLS != nil {
		nc.ClientTLS = s.TLS.ClientConfig()
		nc.PeerTLS, nc.DialTLS = s.TLS.PeerConfigs()
	}
	if c.On() {
		nc.CheckToken = c.CheckToken
	}
}

// Swim puts a node's SWIM keyring and the push-pull TLS into its SWIM
// driver's config.
func Swim(s *Security, dc *swim.DriverConfig) {
	dc.Node.Keys = s.SwimKeys
	if s.TLS != nil {
		dc.PushPullTLS, dc.PushPullDialTLS = s.TLS.PeerConfigs()
	}
}

// LogStart says at a node's start what it asks of whom, given whether it
// has a cluster secret and how many SWIM keys its driver holds; it warns,
// in one line, when it asks nothing of anyone (at info level when the node
// runs so on purpose, InsecureOK).
func LogStart(log *slog.Logger, s *Security, secret bool, swimKeys int) {
	tlsOn, tokens := s.TLS != nil, len(s.ClientTokens) > 0
	if !secret && !tlsOn && !tokens {
		level := slog.LevelWarn
		if s.InsecureOK {
			level = slog.LevelInfo
		}
		log.Log(context.Background(), level, "INSECURE: no cluster secret, no TLS and no client tokens: anyone who can reach the client port "+
			"is served every request, anyone who can reach the peer port can join as any node id, and SWIM gossip "+
			"is neither authenticated nor encrypted; see docs/security.md")
		return
	}
	peers, clients := Proofs(s, secret)
	log.Info("security", "peers", peers, "clients", clients, "tls", tlsOn, "swim_keys", swimKeys)
	if clients == "none" {
		log.Warn("the client port serves every request to anyone who reaches it: give client tokens")
	}
	if swimKeys == 0 {
		log.Warn("SWIM gossip is neither authenticated nor encrypted: give a SWIM key file or a cluster secret")
	}
}

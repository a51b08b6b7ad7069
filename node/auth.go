package node

import "github.com/shoalmq/shoal/node/security"

// Who may do what, and how it is proven, is the security room's
// (node/security; docs/security.md): the checks of Config.Security, the
// client tokens while the node runs (Node.sec), each request's
// authorization by its token's role, the credentials put on the
// transport and SWIM, and the words of the start log. Here the room is
// given the node's config and driver.

// initSecurity sets up the token table; it runs for every node, started
// or driven, so that a driven node given tokens refuses a connection that
// proved none.
func (n *Node) initSecurity() {
	_ = n.sec.Init(n.cfg.Security.ClientTokens) // checked by Config.Fill
}

// SetClientTokens replaces the client tokens of a node started with
// tokens: new connections need one of toks; open connections whose token
// is gone are refused every request from now on, and those whose token's
// role changed get the new role.
func (n *Node) SetClientTokens(toks []security.Token) error {
	if err := n.sec.Replace(toks); err != nil {
		return err
	}
	n.log.Info("client tokens replaced", "tokens", len(toks))
	return nil
}

// SetSwimKeys replaces the SWIM keyring, the primary first (docs/security.md
// has the rotation steps).
func (n *Node) SetSwimKeys(keys [][]byte) error { return n.started.SetSwimKeys(keys) }

// Package security is how a Shoal node tells who is talking to it and what
// they may do (docs/security.md):
//
//   - Authentication of clients by token: ParseTokens reads a token file
//     ("TOKEN ROLE" lines), and a TokenTable holds the tokens of a node,
//     compared by digest in constant time; the Grant a good token finds is
//     what its connection keeps, so that a role changed, or a token
//     removed, by a new table applies to open connections at once.
//   - Authentication of peers by TLS and the cluster secret: LoadTLS reads
//     a node's certificate, its key and the cluster CA and checks that the
//     certificate chains to the CA for server and client use; TLS gives the
//     configs of the client port, the peer port and the peer dials (peers
//     verify each other against the CA, not a host name). The secret's
//     HMAC challenge itself is the handshake's, in netio.
//   - Authorization by role: Role.Allows says which request kinds a token's
//     role may make.
//   - A node's client tokens while it runs (Clients): the table a client's
//     handshake checks its token against (CheckToken), replaced while the
//     node runs (Replace), each request's authorization by the role its
//     connection was granted (Authorize), and the count of requests
//     refused. Its table is swapped whole under an atomic pointer; it
//     takes no lock.
//   - A node's Security checked before it starts (Check), put into its
//     transport's config (Transport: TLS on both ports and the peer
//     dials, the handshake's token check) and its SWIM driver's (Swim:
//     the keyring, the push-pull TLS), and its start log (LogStart, in
//     the words of Proofs: what it asks of peers and clients, and one
//     warning when it asks nothing of anyone).
//
// # Who proves what
//
//   - Peers prove the cluster credential: the shared secret
//     (node.Config.Secret, an HMAC challenge in the handshake), a
//     certificate the cluster CA signed (Security.TLS, mutual TLS on the
//     peer port, the peer dials and push-pull), or both. Only that
//     credential opens the peer port and claims a node id.
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
// # What it may touch
//
// Nothing of the node: it takes bytes, files, configs, request kinds and
// a logger, and returns decisions (a token's grant, a request's yes or no
// and why, a TLS config, an error) or fills the configs it is handed.
// Package node puts them to work on its connections (answering a refusal
// on the wire), and forwards the names its users know (node.Security,
// node.Token, node.LoadTLS...).
package security

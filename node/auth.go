package node

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync/atomic"

	"github.com/shoalmq/shoal/netio"
	"github.com/shoalmq/shoal/swim"
	"github.com/shoalmq/shoal/wire"
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

// Security is how a node authenticates and encrypts (Config.Security).
// The zero value: no TLS, no client tokens, SWIM keys from Config.Secret.
type Security struct {
	// TLS, when set, makes the client port, the peer port, the peer dials
	// and the push-pull exchanges TLS 1.3 (see TLS).
	TLS *TLS
	// ClientTokens, when set, authenticates clients by token (see Token);
	// SetClientTokens replaces them while the node runs.
	ClientTokens []Token
	// SwimKeys is the SWIM keyring, the primary first (swim.Config.Keys);
	// SetSwimKeys rotates it. Empty: one key derived from Config.Secret,
	// or, without a secret, unsealed SWIM.
	SwimKeys [][]byte
	// InsecureOK says a node without any credential runs so on purpose,
	// where nobody else can reach it (shoal dev, on loopback): the notice
	// that it serves anyone is logged at info level rather than as a
	// warning.
	InsecureOK bool
}

// TLS is a node's certificate and its cluster's CA.
type TLS struct {
	// Certificate identifies the node to clients and to peers: it must be
	// signed by CA, for server and client use (the peer port verifies the
	// dialler's certificate, and the dialler the listener's).
	Certificate tls.Certificate
	// CA holds the cluster CA: the peers' certificates must chain to it
	// (host names are not checked between peers: the CA signs the
	// cluster's nodes and nothing else), and clients' when VerifyClients.
	CA *x509.CertPool
	// VerifyClients makes the client port require a certificate CA signed
	// from every client. Default off: clients prove tokens.
	VerifyClients bool
}

// Errors of the credentials.
var (
	// ErrTokenFile: a client token file line is not "TOKEN ROLE".
	ErrTokenFile = errors.New("node: client token file")
	// ErrTLSFiles: a certificate, key or CA file cannot be used.
	ErrTLSFiles = errors.New("node: TLS files")
	// ErrCredentials: credentials cannot be changed as asked while the
	// node runs.
	ErrCredentials = errors.New("node: credentials")
)

// Limits of the credentials.
const (
	// MinTokenLen is the shortest client token: 16 characters, so that a
	// token is not a word that can be guessed (make them with
	// `openssl rand -base64 24`).
	MinTokenLen = 16
	// MaxClientTokens bounds the tokens of one node: each handshake
	// compares the client's with every one of them.
	MaxClientTokens = 4096
	// maxCredentialFile bounds a token, key, certificate or CA file.
	maxCredentialFile = 1 << 20
)

// Role is what a client token allows.
type Role uint8

const (
	// RoleRead: Lookup, Fetch, Members, Shards, Status.
	RoleRead Role = iota + 1
	// RoleWrite: what RoleRead allows, and Produce.
	RoleWrite
	// RoleAdmin: every request (Assign, Revoke, UpdatePartition, and the
	// operators' Drain, Undrain, TransferLeader, RemoveNode too).
	RoleAdmin
)

func (r Role) String() string {
	switch r {
	case RoleRead:
		return "read"
	case RoleWrite:
		return "write"
	case RoleAdmin:
		return "admin"
	}
	return fmt.Sprintf("Role(%d)", uint8(r))
}

// ParseRole reads a role's name: admin, write or read.
func ParseRole(s string) (Role, error) {
	switch s {
	case "admin":
		return RoleAdmin, nil
	case "write":
		return RoleWrite, nil
	case "read":
		return RoleRead, nil
	}
	// The field is not shown: a line holding two tokens must not print one.
	return 0, errors.New("the role must be admin, write or read")
}

// allows reports whether the role may make a request of kind k.
func (r Role) allows(k wire.Kind) bool {
	switch k {
	case wire.KindLookup, wire.KindFetch, wire.KindMembers, wire.KindShards, wire.KindStatus, wire.KindShardLeaders, wire.KindWatch, wire.KindListTopics:
		return r >= RoleRead
	case wire.KindProduce:
		return r >= RoleWrite
	}
	return r >= RoleAdmin
}

// Token is one client credential and its role.
type Token struct {
	Value string // MinTokenLen to wire.MaxTokenLen printable ASCII characters, no spaces
	Role  Role
}

// ParseTokens reads a client token file: one "TOKEN ROLE" per line, '#'
// starting a comment, blank lines ignored. Errors wrap ErrTokenFile, name
// the line, and never show a token.
func ParseTokens(r io.Reader) ([]Token, error) {
	b, err := io.ReadAll(io.LimitReader(r, maxCredentialFile+1))
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrTokenFile, err)
	}
	if len(b) > maxCredentialFile {
		return nil, fmt.Errorf("%w: larger than %d bytes", ErrTokenFile, maxCredentialFile)
	}
	var toks []Token
	seen := map[string]int{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 0, 4096), maxCredentialFile)
	for line := 1; sc.Scan(); line++ {
		text, _, _ := strings.Cut(sc.Text(), "#")
		f := strings.Fields(text)
		if len(f) == 0 {
			continue
		}
		if len(f) != 2 {
			return nil, fmt.Errorf("%w: line %d: want TOKEN ROLE, got %d fields", ErrTokenFile, line, len(f))
		}
		if err := validateToken(f[0]); err != nil {
			return nil, fmt.Errorf("%w: line %d: %w", ErrTokenFile, line, err)
		}
		role, err := ParseRole(f[1])
		if err != nil {
			return nil, fmt.Errorf("%w: line %d: %w", ErrTokenFile, line, err)
		}
		if prev, ok := seen[f[0]]; ok {
			return nil, fmt.Errorf("%w: line %d: the token of line %d again", ErrTokenFile, line, prev)
		}
		if len(toks) == MaxClientTokens {
			return nil, fmt.Errorf("%w: line %d: more than %d tokens", ErrTokenFile, line, MaxClientTokens)
		}
		seen[f[0]] = line
		toks = append(toks, Token{Value: f[0], Role: role})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrTokenFile, err)
	}
	if len(toks) == 0 {
		return nil, fmt.Errorf("%w: no token in it", ErrTokenFile)
	}
	return toks, nil
}

// validateToken says what is wrong with a token, without showing it.
func validateToken(tok string) error {
	if len(tok) < MinTokenLen || len(tok) > wire.MaxTokenLen {
		return fmt.Errorf("a token of %d characters (want %d to %d)", len(tok), MinTokenLen, wire.MaxTokenLen)
	}
	for i := 0; i < len(tok); i++ {
		if tok[i] <= ' ' || tok[i] > '~' {
			return fmt.Errorf("a token with a character other than printable ASCII at position %d", i+1)
		}
	}
	return nil
}

// LoadTLS reads a node's certificate and key and the cluster CA (PEM
// files) and checks that the certificate chains to the CA for server and
// client use, so that a wrong file is found at start rather than at the
// first connection. Errors wrap ErrTLSFiles.
func LoadTLS(certFile, keyFile, caFile string) (*TLS, error) {
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("%w: certificate %s, key %s: %w", ErrTLSFiles, certFile, keyFile, err)
	}
	caPEM, err := readCredentialFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("%w: CA: %w", ErrTLSFiles, err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, fmt.Errorf("%w: CA %s holds no PEM certificate", ErrTLSFiles, caFile)
	}
	t := &TLS{Certificate: cert, CA: pool}
	if err := t.check(); err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrTLSFiles, certFile, err)
	}
	return t, nil
}

// check verifies the node's own certificate against the CA, for both uses.
func (t *TLS) check() error {
	if t.CA == nil || len(t.Certificate.Certificate) == 0 {
		return errors.New("a certificate and a CA are required")
	}
	leaf, err := x509.ParseCertificate(t.Certificate.Certificate[0])
	if err != nil {
		return err
	}
	for _, use := range []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth} {
		if err := verifyChain(leaf, t.Certificate.Certificate[1:], t.CA, use); err != nil {
			return fmt.Errorf("not valid under the CA for %s use (peers verify each other both ways): %w", usageName(use), err)
		}
	}
	return nil
}

func usageName(u x509.ExtKeyUsage) string {
	if u == x509.ExtKeyUsageServerAuth {
		return "server"
	}
	return "client"
}

func verifyChain(leaf *x509.Certificate, rest [][]byte, roots *x509.CertPool, use x509.ExtKeyUsage) error {
	inter := x509.NewCertPool()
	for _, der := range rest {
		if c, err := x509.ParseCertificate(der); err == nil {
			inter.AddCert(c)
		}
	}
	_, err := leaf.Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{use}})
	return err
}

// clientConfig is the client port's TLS.
func (t *TLS) clientConfig() *tls.Config {
	c := &tls.Config{Certificates: []tls.Certificate{t.Certificate}, MinVersion: tls.VersionTLS13}
	if t.VerifyClients {
		c.ClientAuth, c.ClientCAs = tls.RequireAndVerifyClientCert, t.CA
	}
	return c
}

// peerConfigs are the TLS of the peer port and of the peer dials: each
// side verifies the other's certificate against the CA, without a host
// name (peers are dialled at the addresses SWIM gossips).
func (t *TLS) peerConfigs() (server, dial *tls.Config) {
	server = &tls.Config{Certificates: []tls.Certificate{t.Certificate}, MinVersion: tls.VersionTLS13,
		ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: t.CA}
	dial = &tls.Config{Certificates: []tls.Certificate{t.Certificate}, MinVersion: tls.VersionTLS13,
		// The chain is checked below, against the CA and not against a
		// host name: crypto/tls checks both or neither.
		InsecureSkipVerify: true,
		VerifyConnection: func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return errors.New("node: peer sent no certificate")
			}
			var rest [][]byte
			for _, c := range cs.PeerCertificates[1:] {
				rest = append(rest, c.Raw)
			}
			return verifyChain(cs.PeerCertificates[0], rest, t.CA, x509.ExtKeyUsageServerAuth)
		},
	}
	return server, dial
}

func readCredentialFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxCredentialFile+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxCredentialFile {
		return nil, fmt.Errorf("%s is larger than %d bytes", path, maxCredentialFile)
	}
	return b, nil
}

// --- the node's side ---

// security is the node's state of its credentials and client limits.
type security struct {
	// tokens is the client token table; nil without tokens.
	tokens atomic.Pointer[tokenTable]
	// budget bounds the bytes of the requests not yet answered (limits.go).
	budget byteBudget

	unauthorized atomic.Uint64 // requests refused for their token's role (or, on a node with tokens, for having none)
}

// tokenGrant is what a good token grants a connection. A connection keeps
// its grant: a role changed by SetClientTokens applies to it at once, a
// token removed stops serving it.
type tokenGrant struct {
	digest  [sha256.Size]byte
	role    atomic.Uint32
	revoked atomic.Bool
}

type tokenTable struct {
	grants []*tokenGrant
}

// find returns the grant of tok, comparing its digest with every token's
// in constant time.
func (tt *tokenTable) find(tok []byte) *tokenGrant {
	d := sha256.Sum256(tok)
	var found *tokenGrant
	for _, g := range tt.grants {
		if subtle.ConstantTimeCompare(g.digest[:], d[:]) == 1 {
			found = g
		}
	}
	return found
}

// newTokenTable builds the table of toks, keeping the grants of old whose
// token remains (their role updated) and revoking the others.
func newTokenTable(toks []Token, old *tokenTable) (*tokenTable, error) {
	if len(toks) == 0 || len(toks) > MaxClientTokens {
		return nil, fmt.Errorf("%w: want 1 to %d client tokens, not %d", ErrCredentials, MaxClientTokens, len(toks))
	}
	tt := &tokenTable{}
	kept := map[*tokenGrant]bool{}
	for i, tok := range toks {
		if err := validateToken(tok.Value); err != nil {
			return nil, fmt.Errorf("%w: client token %d: %w", ErrCredentials, i+1, err)
		}
		if tok.Role < RoleRead || tok.Role > RoleAdmin {
			return nil, fmt.Errorf("%w: client token %d: %v", ErrCredentials, i+1, tok.Role)
		}
		d := sha256.Sum256([]byte(tok.Value))
		for _, g := range tt.grants {
			if g.digest == d {
				return nil, fmt.Errorf("%w: client token %d repeats an earlier one", ErrCredentials, i+1)
			}
		}
		var g *tokenGrant
		if old != nil {
			g = old.find([]byte(tok.Value))
		}
		if g == nil {
			g = &tokenGrant{digest: d}
		}
		kept[g] = true
		g.role.Store(uint32(tok.Role))
		tt.grants = append(tt.grants, g)
	}
	if old != nil {
		for _, g := range old.grants {
			if !kept[g] {
				g.revoked.Store(true)
			}
		}
	}
	return tt, nil
}

// fillSecurity checks Config.Security and the request limits, and sets
// their defaults (Config.fill calls it).
func (c *Config) fillSecurity() error {
	s := &c.Security
	if s.TLS != nil {
		if err := s.TLS.check(); err != nil {
			return fmt.Errorf("%w: TLS: %w", ErrConfig, err)
		}
	}
	if len(s.ClientTokens) > 0 {
		if _, err := newTokenTable(s.ClientTokens, nil); err != nil {
			return fmt.Errorf("%w: %w", ErrConfig, err)
		}
	}
	if len(s.SwimKeys) > 0 {
		if _, err := wire.NewSwimKeyring(s.SwimKeys); err != nil {
			return fmt.Errorf("%w: SWIM keys: %w", ErrConfig, err)
		}
	}
	return c.fillLimits()
}

// initSecurity sets up the token table and the request byte budget; it
// runs for every node, started or driven, so that a driven node bounds
// its requests and, given tokens, refuses a connection that proved none.
func (n *Node) initSecurity() {
	if toks := n.cfg.Security.ClientTokens; len(toks) > 0 {
		tt, _ := newTokenTable(toks, nil) // checked in fillSecurity
		n.sec.tokens.Store(tt)
	}
	n.sec.budget.max = n.cfg.MaxRequestBytes
}

// secureTransport puts the node's credentials into the transport's
// config: TLS on both ports and the peer dials, and the client token
// check.
func (n *Node) secureTransport(nc *netio.Config) {
	s := &n.cfg.Security
	if s.TLS != nil {
		nc.ClientTLS = s.TLS.clientConfig()
		nc.PeerTLS, nc.DialTLS = s.TLS.peerConfigs()
	}
	if n.sec.tokens.Load() != nil {
		nc.CheckToken = n.checkToken
	}
}

// checkToken is netio's token check (Config.CheckToken).
func (n *Node) checkToken(tok []byte) (any, bool) {
	tt := n.sec.tokens.Load()
	if tt == nil {
		return nil, false
	}
	if g := tt.find(tok); g != nil && !g.revoked.Load() {
		return g, true
	}
	return nil, false
}

// secureSwim puts the SWIM keyring and the push-pull TLS into the SWIM
// driver's config.
func (n *Node) secureSwim(dc *swim.DriverConfig) {
	s := &n.cfg.Security
	dc.Node.Keys = s.SwimKeys
	if s.TLS != nil {
		dc.PushPullTLS, dc.PushPullDialTLS = s.TLS.peerConfigs()
	}
}

// granted is a connection that carries what its handshake's credential
// granted (netio.Conn.Grant).
type granted interface {
	Grant() any
}

// authorize reports whether the client connection c may make request h;
// when not, it answers Unauthorized (the connection stays open).
func (n *Node) authorize(c Conn, h wire.Header) bool {
	var g *tokenGrant
	if gc, ok := c.(granted); ok {
		g, _ = gc.Grant().(*tokenGrant)
	}
	if g == nil {
		if n.sec.tokens.Load() == nil {
			return true // no client tokens: the client port's credential, if any, was proven
		}
		// Tokens, and a connection that proved none (not one of netio's,
		// whose client handshake requires one): refused.
		n.sec.unauthorized.Add(1)
		if f, err := errorFrame(h.RequestID, &wire.ErrorResponse{Code: wire.CodeUnauthorized, Message: "this client proved no token"}); err == nil {
			_ = c.Write(f)
		}
		return false
	}
	if !g.revoked.Load() && Role(g.role.Load()).allows(h.Kind) {
		return true
	}
	n.sec.unauthorized.Add(1)
	msg := "this client's token was removed"
	if !g.revoked.Load() {
		msg = fmt.Sprintf("the %v role may not make %v requests", Role(g.role.Load()), h.Kind)
	}
	if f, err := errorFrame(h.RequestID, &wire.ErrorResponse{Code: wire.CodeUnauthorized, Message: msg}); err == nil {
		_ = c.Write(f)
	}
	return false
}

// SetClientTokens replaces the client tokens of a node started with
// tokens: new connections need one of toks; open connections whose token
// is gone are refused every request from now on, and those whose token's
// role changed get the new role.
func (n *Node) SetClientTokens(toks []Token) error {
	old := n.sec.tokens.Load()
	if old == nil {
		return fmt.Errorf("%w: this node started without client tokens: restart it with them", ErrCredentials)
	}
	tt, err := newTokenTable(toks, old)
	if err != nil {
		return err
	}
	n.sec.tokens.Store(tt)
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
	peers := "none"
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
	clients := "none"
	if len(proofs) > 0 {
		clients = strings.Join(proofs, " and ")
	}
	n.log.Info("security", "peers", peers, "clients", clients, "tls", tlsOn, "swim_keys", swimKeys)
	if clients == "none" {
		n.log.Warn("the client port serves every request to anyone who reaches it: give client tokens")
	}
	if swimKeys == 0 {
		n.log.Warn("SWIM gossip is neither authenticated nor encrypted: give a SWIM key file or a cluster secret")
	}
}

// SecurityStats counts what the credentials refused.
type SecurityStats struct {
	Unauthorized        uint64 // requests refused for their token's role (or, on a node with tokens, for having none)
	TokensRefused       uint64 // client handshakes with a missing or unknown token
	TLSHandshakesFailed uint64 // TLS handshakes that failed (no or a wrong certificate, not TLS)
	RequestBytes        int64  // bytes of the requests not yet answered (Config.MaxRequestBytes bounds them)
	RequestBytesRefused uint64 // requests refused because they would pass Config.MaxRequestBytes
}

func (n *Node) securityStats() SecurityStats {
	st := SecurityStats{
		Unauthorized:        n.sec.unauthorized.Load(),
		RequestBytes:        n.sec.budget.used.Load(),
		RequestBytesRefused: n.sec.budget.refused.Load(),
	}
	if n.netio != nil {
		c := n.netio.Counters()
		st.TokensRefused, st.TLSHandshakesFailed = c.HandshakeBadToken.Load(), c.HandshakeTLS.Load()
	}
	return st
}

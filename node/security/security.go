package security

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
)

// Security is how a node authenticates and encrypts (node.Config.Security).
// The zero value: no TLS, no client tokens, SWIM keys from the node's
// cluster secret.
type Security struct {
	// TLS, when set, makes the client port, the peer port, the peer dials
	// and the push-pull exchanges TLS 1.3 (see TLS).
	TLS *TLS
	// ClientTokens, when set, authenticates clients by token (see Token);
	// the node's SetClientTokens replaces them while it runs.
	ClientTokens []Token
	// SwimKeys is the SWIM keyring, the primary first (swim.Config.Keys);
	// the node's SetSwimKeys rotates it. Empty: one key derived from the
	// cluster secret (node.Config.Secret), or, without a secret, unsealed
	// SWIM.
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
	ErrTokenFile = errors.New("security: client token file")
	// ErrTLSFiles: a certificate, key or CA file cannot be used.
	ErrTLSFiles = errors.New("security: TLS files")
	// ErrCredentials: credentials cannot be used, or changed, as asked.
	ErrCredentials = errors.New("security: credentials")
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

// Stats counts what a node's credentials and request limits refused
// (node.Stats().Security); the node fills it.
type Stats struct {
	Unauthorized        uint64 // requests refused for their token's role (or, on a node with tokens, for having none)
	TokensRefused       uint64 // client handshakes with a missing or unknown token
	TLSHandshakesFailed uint64 // TLS handshakes that failed (no or a wrong certificate, not TLS)
	RequestBytes        int64  // bytes of the requests not yet answered (node.Config.MaxRequestBytes bounds them)
	RequestBytesRefused uint64 // requests refused because they would pass node.Config.MaxRequestBytes
}

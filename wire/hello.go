package wire

// Role says what the dialling side of a connection is.
type Role uint8

const (
	RoleClient Role = 1 // a client or shoalctl
	RolePeer   Role = 2 // another node
)

// NonceSize and AuthTagSize are the sizes of the handshake's challenge and
// HMAC-SHA256 proof.
const (
	NonceSize   = 16
	AuthTagSize = 32
)

// Hello opens every connection, sent by both sides (KindHello). The
// handshake: the dialler sends Hello with a fresh Nonce; the listener
// answers with its own Hello and Nonce. A client's Hello may carry a
// Token, which a node with client tokens checks before it answers. Without
// a shared secret the connection is then open. With one (between peers,
// and from clients of a node that has no tokens), each side sends
// HelloAuth whose Tag is HMAC-SHA256(secret, the other side's Nonce ‖ its
// own encoded Hello), and the other side checks it before accepting any
// other frame. A Hello with another ClusterID or Version is refused.
type Hello struct {
	Version    uint8 // ProtocolVersion
	Role       Role
	ClusterID  uint64
	Generation uint64 // rises at every start of a node; 0 for clients
	NodeID     []byte // empty for clients; aliases the input
	Nonce      [NonceSize]byte
	// Token is a client's credential (at most MaxTokenLen bytes); empty
	// for peers, and for a client that has none. Aliases the input.
	Token []byte
}

// AppendHello appends m's payload (no frame header).
func AppendHello(dst []byte, m *Hello) []byte {
	dst = append(dst, m.Version, byte(m.Role))
	dst = appendU64(dst, m.ClusterID)
	dst = appendU64(dst, m.Generation)
	dst = appendBytes(dst, m.NodeID)
	dst = append(dst, m.Nonce[:]...)
	return appendBytes(dst, m.Token)
}

// DecodeHello decodes a Hello payload into m. NodeID and Token alias b.
func DecodeHello(b []byte, m *Hello) error {
	r := reader{b: b}
	m.Version = r.u8()
	m.Role = Role(r.u8())
	m.ClusterID = r.u64()
	m.Generation = r.u64()
	m.NodeID = r.bytes(MaxNodeIDLen)
	copy(m.Nonce[:], r.fixed(NonceSize))
	m.Token = r.bytes(MaxTokenLen)
	if err := r.end(); err != nil {
		return err
	}
	if m.Version != ProtocolVersion {
		return ErrVersion
	}
	if m.Role != RoleClient && m.Role != RolePeer {
		return ErrMalformed
	}
	if m.Role == RolePeer && (len(m.NodeID) == 0 || len(m.Token) > 0) {
		return ErrMalformed
	}
	return nil
}

// HelloAuth proves knowledge of the cluster's shared secret (KindHelloAuth).
type HelloAuth struct {
	Tag [AuthTagSize]byte
}

// AppendHelloAuth appends m's payload.
func AppendHelloAuth(dst []byte, m *HelloAuth) []byte { return append(dst, m.Tag[:]...) }

// DecodeHelloAuth decodes a HelloAuth payload into m.
func DecodeHelloAuth(b []byte, m *HelloAuth) error {
	r := reader{b: b}
	copy(m.Tag[:], r.fixed(AuthTagSize))
	return r.end()
}

package netio

import (
	"crypto/hmac"
	"crypto/rand"
	"fmt"
	"io"

	"github.com/shoalmq/shoal/wire"
)

// ClientHandshake runs the client side of the Hello handshake on a blocking
// connection (a net.Conn, or a tls.Conn): it sends a client Hello, reads
// the node's Hello and, with a secret, exchanges and checks HelloAuth. It
// returns the node's Hello (NodeID copied). Tools and benchmarks that speak
// to a node with plain sockets use it.
func ClientHandshake(rw io.ReadWriter, clusterID uint64, secret []byte) (wire.Hello, error) {
	return clientHandshake(rw, clusterID, secret, nil)
}

// ClientHandshakeToken is ClientHandshake for a node that authenticates
// clients by token: the client's Hello carries token, and no secret is
// proven. A refused token is an error matching ErrHandshake and
// wire.ErrUnauthorized.
func ClientHandshakeToken(rw io.ReadWriter, clusterID uint64, token []byte) (wire.Hello, error) {
	return clientHandshake(rw, clusterID, nil, token)
}

func clientHandshake(rw io.ReadWriter, clusterID uint64, secret, token []byte) (wire.Hello, error) {
	var out wire.Hello
	m := wire.Hello{Version: wire.ProtocolVersion, Role: wire.RoleClient, ClusterID: clusterID, Token: token}
	_, _ = rand.Read(m.Nonce[:])
	ours := wire.AppendHello(nil, &m)
	if _, err := rw.Write(frameOf(wire.KindHello, ours)); err != nil {
		return out, fmt.Errorf("netio: handshake: %w", err)
	}
	h, payload, err := readFrame(rw)
	if err != nil {
		return out, err
	}
	if h.Kind == wire.KindError {
		var e wire.Error
		if wire.DecodeError(payload, &e) == nil {
			return out, fmt.Errorf("netio: handshake: %w: %w", ErrHandshake, e.Err())
		}
	}
	if h.Kind != wire.KindHello {
		return out, fmt.Errorf("netio: handshake: got %v: %w", h.Kind, ErrHandshake)
	}
	if err := wire.DecodeHello(payload, &out); err != nil {
		return out, fmt.Errorf("netio: handshake: %w", err)
	}
	out.NodeID = append([]byte(nil), out.NodeID...)
	if out.ClusterID != clusterID || out.Role != wire.RolePeer {
		return out, fmt.Errorf("netio: handshake: cluster %d role %d: %w", out.ClusterID, out.Role, ErrHandshake)
	}
	if len(secret) == 0 {
		return out, nil
	}
	theirs := append([]byte(nil), payload...)
	tag := authTag(secret, out.Nonce[:], ours)
	if _, err := rw.Write(frameOf(wire.KindHelloAuth, tag[:])); err != nil {
		return out, fmt.Errorf("netio: handshake: %w", err)
	}
	h, payload, err = readFrame(rw)
	if err != nil {
		return out, err
	}
	var auth wire.HelloAuth
	if h.Kind != wire.KindHelloAuth || wire.DecodeHelloAuth(payload, &auth) != nil {
		return out, fmt.Errorf("netio: handshake: expected HelloAuth: %w", ErrHandshake)
	}
	want := authTag(secret, m.Nonce[:], theirs)
	if !hmac.Equal(want[:], auth.Tag[:]) {
		return out, fmt.Errorf("netio: handshake: node's HelloAuth did not verify: %w", ErrHandshake)
	}
	return out, nil
}

// readFrame reads one small handshake frame.
func readFrame(r io.Reader) (wire.Header, []byte, error) {
	var h wire.Header
	var hb [wire.HeaderSize]byte
	if _, err := io.ReadFull(r, hb[:]); err != nil {
		return h, nil, fmt.Errorf("netio: handshake: %w", err)
	}
	if err := wire.DecodeHeader(hb[:], &h); err != nil {
		return h, nil, fmt.Errorf("netio: handshake: %w", err)
	}
	if h.Length > maxHelloFrame {
		return h, nil, fmt.Errorf("netio: handshake: %w", wire.ErrTooLarge)
	}
	payload := make([]byte, h.Length)
	if _, err := io.ReadFull(r, payload); err != nil {
		return h, nil, fmt.Errorf("netio: handshake: %w", err)
	}
	return h, payload, nil
}

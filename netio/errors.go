package netio

import (
	"errors"
	"fmt"
)

// Errors returned by the transport. Handshake failures and malformed input
// close the offending connection and are counted (see Counters); they are
// not returned to callers.
var (
	// ErrClosed: the transport or the connection is closed.
	ErrClosed = errors.New("netio: closed")
	// ErrQueueFull: a peer frame did not fit under the peer's byte cap and
	// was dropped.
	ErrQueueFull = errors.New("netio: send queue full")
	// ErrSlowConsumer: a client's outbound queue passed its byte cap; the
	// connection was cut off.
	ErrSlowConsumer = errors.New("netio: slow consumer cut off")
	// ErrUnknownPeer: no address is known for the node and no connection
	// to it is open.
	ErrUnknownPeer = errors.New("netio: unknown peer")
	// ErrBadFrame: a frame given to Send or Write is not one whole wire
	// frame (header, then exactly Length payload bytes).
	ErrBadFrame = errors.New("netio: malformed outbound frame")
	// ErrHandshake: a handshake was refused (wrong cluster, version, role,
	// node or secret).
	ErrHandshake = errors.New("netio: handshake refused")
	// ErrWrongCluster: the other side of a push-pull handshake is in
	// another cluster (its Hello named another cluster id). Wraps
	// ErrHandshake.
	ErrWrongCluster = fmt.Errorf("%w: another cluster id", ErrHandshake)
	// ErrAuthFailed: the other side of a push-pull handshake did not
	// prove the cluster secret, or asked for a proof this side cannot
	// give, or its TLS certificate was refused. Wraps ErrHandshake.
	ErrAuthFailed = fmt.Errorf("%w: not authenticated", ErrHandshake)
)

package client

import "errors"

// Errors of the client itself. Errors a server answered with are
// *wire.ErrorResponse values and match the wire sentinels
// (wire.ErrNotFound, wire.ErrNotLeaderForTopic, …) under errors.Is; the
// errors below say what went wrong on this side of the socket. Every error a
// method returns is wrapped with the operation and, once retries are spent,
// the number of attempts, and keeps the cause for errors.Is/As.
var (
	// ErrConfig: a Config field is invalid.
	ErrConfig = errors.New("client: invalid config")
	// ErrClosed: the client has been closed.
	ErrClosed = errors.New("client: closed")
	// ErrInvalidArgument: a request argument breaks a wire limit (an empty
	// or too long topic, too many or too large records). Nothing was sent.
	ErrInvalidArgument = errors.New("client: invalid argument")
	// ErrUnreachable: a server could not be reached or stopped answering:
	// dial failure, broken connection, or an attempt that outlived
	// Config.RequestTimeout.
	ErrUnreachable = errors.New("client: server unreachable")
	// ErrHandshake: a server refused the handshake or answered it wrongly
	// (another cluster id or protocol version, a wrong shared-secret proof).
	ErrHandshake = errors.New("client: handshake failed")
	// ErrProtocol: a server sent a frame this client cannot accept (a
	// malformed payload, an answer of the wrong kind). The connection is
	// dropped.
	ErrProtocol = errors.New("client: protocol violation")
)

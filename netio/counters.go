package netio

import "sync/atomic"

// Counters are the transport's event counts, safe to read at any time.
type Counters struct {
	ConnsAccepted atomic.Uint64 // inbound TCP connections (client and peer)
	ConnsClosed   atomic.Uint64 // connections closed, for any reason
	ConnsRefused  atomic.Uint64 // inbound connections closed at accept: a listener or address at its limit
	ClientsIdle   atomic.Uint64 // client connections closed after ClientIdleTimeout without a frame

	FramesIn  atomic.Uint64 // frames delivered to the Handler
	FramesOut atomic.Uint64 // frames handed to the socket (keepalives included)

	BadFrames     atomic.Uint64 // bad header or frame over the limit: connection closed
	Overloaded    atomic.Uint64 // client requests answered with the Overloaded frame
	PeerInDropped atomic.Uint64 // peer frames the Handler refused (consumer queue full)

	SlowClientsCut   atomic.Uint64 // clients cut off because their outbound queue passed the cap
	PeerBackpressure atomic.Uint64 // flushes put off because a peer socket's backlog was over the high-water mark
	PeerDead         atomic.Uint64 // peer connections closed after PeerDeadAfter without a byte read
	PeerSendDropped  atomic.Uint64 // outbound peer frames dropped (queue full, peer removed, close)

	HandshakeWrongCluster atomic.Uint64 // Hello with another cluster id
	HandshakeWrongVersion atomic.Uint64 // frame or Hello with another protocol version
	HandshakeWrongRole    atomic.Uint64 // a client on the peer port or a peer on the client port
	HandshakeWrongNode    atomic.Uint64 // the dialled address answered with another node id
	HandshakeBadAuth      atomic.Uint64 // HelloAuth tag did not verify (or a client sent one to a node that takes tokens)
	HandshakeBadToken     atomic.Uint64 // a client's token was missing or not one Config.CheckToken knows
	HandshakeTLS          atomic.Uint64 // TLS handshakes that failed (no or a wrong certificate, not TLS at all)
	HandshakeTimeouts     atomic.Uint64 // no complete handshake within HandshakeTimeout
	HandshakeProtocol     atomic.Uint64 // another frame before the handshake finished

	PeerDials      atomic.Uint64 // outbound dial attempts
	PeerDialFailed atomic.Uint64 // dial or handshake attempts that failed
	PeerConnsUp    atomic.Uint64 // peer connections adopted after a handshake
	PeerDown       atomic.Uint64 // OnPeerDown notifications
	TieBreakClosed atomic.Uint64 // duplicate peer connections closed by the tie-break
	KeepalivesSent atomic.Uint64
}

// HandshakeFailures sums the refused handshakes of every kind.
func (c *Counters) HandshakeFailures() uint64 {
	return c.HandshakeWrongCluster.Load() + c.HandshakeWrongVersion.Load() +
		c.HandshakeWrongRole.Load() + c.HandshakeWrongNode.Load() +
		c.HandshakeBadAuth.Load() + c.HandshakeBadToken.Load() + c.HandshakeTLS.Load() +
		c.HandshakeTimeouts.Load() + c.HandshakeProtocol.Load()
}

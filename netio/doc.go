// Package netio is the only place Shoal touches TCP. It runs gnet/v2 event
// loops for the client listener, the peer listener and the outbound peer
// connections (one per node pair, shared by every shard), frames bytes with
// the wire header, runs the Hello handshake, coalesces writes and applies
// backpressure.
//
// What it must not do: block an event loop, or know what a shard is. Frames
// are handed to a Handler that enqueues them on a bounded queue and returns
// at once; a full queue drops peer frames (raft retransmits) and answers
// client requests with the Config.Overloaded frame.
//
// Reading: a frame is delivered only when all of it is buffered. The
// Handler gets a view of the frame (header and payload) that aliases the
// connection's read buffer and is valid only during the call.
//
// Writing: Conn.Write and Transport.Send copy the frame into a per-connection
// (client) or per-peer queue with a byte cap and wake the event loop once;
// the loop writes everything queued in one system call. A client whose
// queue passes the cap is cut off; a peer frame that does not fit is dropped
// and counted.
//
// Peers: Send dials on demand with gnet's client side, reconnects with
// exponential backoff and jitter while frames wait, and keeps idle
// connections alive with Keepalive frames. When both nodes dial at once the
// connection dialled by the lower node id is kept (a restarted node, seen by
// its higher generation, always replaces its old connection).
package netio

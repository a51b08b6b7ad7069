// Package netio is the only place Shoal touches TCP. It serves the client
// listener, the peer listener and the outbound peer connections (one per
// node pair, shared by every shard) either on gnet/v2 event loops (the
// default) or, with Config.Goroutines, on two goroutines per connection,
// as TLS connections always are; a node runs the second. Either way it
// frames bytes with the wire header, runs the Hello handshake, coalesces
// writes and applies backpressure, with the same code.
//
// What it must not do: block an event loop, or know what a shard is. Frames
// are handed to a Handler that enqueues them on a bounded queue and returns
// at once; a full queue drops peer frames (raft retransmits) and answers
// client requests with the Config.Overloaded frame.
//
// Reading: a frame is delivered only when all of it is buffered. The
// Handler gets a view of the frame (header and payload) that aliases the
// connection's read buffer and is valid only during the call. Each read is
// framed in one pass over gnet's read buffer; only a trailing partial frame
// is copied aside until the rest arrives.
//
// Writing: Conn.Write and Transport.Send copy the frame into a per-connection
// (client) or per-peer queue of reusable chunks with a byte cap, and wake
// the event loop only when no flush is already due (a Handler answering
// inside Deliver never wakes it: the loop flushes when the pass ends). The
// loop writes everything queued with one writev, in steps of about 1 MiB
// for a backlog. Answering with gnet's own Conn.Write from the loop would
// cost one system call per answer. A client whose queue passes the cap is
// cut off; a peer frame that does not fit is dropped and counted.
//
// Limits: each listener takes a bounded number of connections, in all and
// from one IP address; one past a limit is closed as it is accepted. Frames
// before the handshake completes are at most 256 bytes, and a connection
// that has not completed it within HandshakeTimeout is closed; an idle
// client connection is closed after ClientIdleTimeout.
//
// Credentials: peers prove the cluster secret (HelloAuth) or, with TLS, a
// certificate the cluster CA signed, or both; the peer listener takes only
// the peer role. Clients prove the secret too, unless Config.CheckToken is
// set: then a client proves a token in its Hello, the secret is refused
// from clients, and what the token grants rides with the connection
// (Conn.Grant). TLS (1.3 only) is served beside the event loops, by two
// goroutines per connection that share the framing, handshake and send
// queue code of the loops (stream.go).
//
// UDP: ListenUDP's socket for SWIM reads one datagram per system call, or
// with UDPConfig.ReadBatch several per recvmmsg. PushPull carries SWIM's
// full-state exchange over plain TCP, after the same Hello handshake, with
// the state frame read as its bytes arrive and a bound on exchanges served
// at once.
//
// Peers: Send dials on demand (handing the socket to gnet's client side
// on event loops), reconnects with exponential backoff and jitter while
// frames wait, and keeps idle connections alive with Keepalive frames. When both nodes dial at once the
// connection dialled by the lower node id is kept (a restarted node, seen by
// its higher generation, always replaces its old connection).
package netio

//go:build !linux

package rawsock

import "net"

// Sock is the raw view of a socket; only Linux has one here, so elsewhere
// New returns nil and a connection goes through net.Conn.
type Sock struct{}

// New returns nil: no raw sockets on this platform.
func New(net.Conn) *Sock { return nil }

// Read, Write and Writev are never called: New returns no Sock.
func (*Sock) Read([]byte) (int, error)     { panic("rawsock: no raw sockets here") }
func (*Sock) Write([]byte) (int, error)    { panic("rawsock: no raw sockets here") }
func (*Sock) Writev([][]byte) (int, error) { panic("rawsock: no raw sockets here") }

// Wrap returns nc itself.
func Wrap(nc net.Conn) net.Conn { return nc }

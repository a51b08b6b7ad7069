//go:build !linux

package netio

import "net"

// rawSock is the raw view of a socket; only Linux has one here, so
// elsewhere a plain connection goes through net.Conn.
type rawSock struct{}

func newRawSock(net.Conn) *rawSock { return nil }

func (*rawSock) read([]byte) (int, error)     { panic("netio: no raw sockets here") }
func (*rawSock) write([]byte) (int, error)    { panic("netio: no raw sockets here") }
func (*rawSock) writev([][]byte) (int, error) { panic("netio: no raw sockets here") }

package netio

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// UDPConfig sizes the SWIM socket's kernel buffers.
type UDPConfig struct {
	// RecvBuffer and SendBuffer are SO_RCVBUF and SO_SNDBUF in bytes
	// (4 MiB and 1 MiB): a burst of gossip after a join or a failure must
	// not overflow the receive queue while the node is busy. The kernel
	// caps them at net.core.rmem_max / wmem_max; the granted sizes are
	// reported by UDPConn.Buffers.
	RecvBuffer int
	SendBuffer int
	// ReuseAddr sets SO_REUSEADDR, so a restarted node rebinds its port
	// at once (false).
	ReuseAddr bool
}

func (c UDPConfig) withDefaults() UDPConfig {
	if c.RecvBuffer == 0 {
		c.RecvBuffer = 4 << 20
	}
	if c.SendBuffer == 0 {
		c.SendBuffer = 1 << 20
	}
	return c
}

// UDPConn is the SWIM datagram socket: one datagram per read, addresses
// as netip.AddrPort, so the read and write paths allocate nothing.
type UDPConn struct {
	c     *net.UDPConn
	local netip.AddrPort
}

// ErrUDP wraps the socket errors of ListenUDP.
var ErrUDP = errors.New("netio: udp")

// ListenUDP binds a UDP socket at addr ("127.0.0.1:0" picks a port).
func ListenUDP(addr string, cfg UDPConfig) (*UDPConn, error) {
	cfg = cfg.withDefaults()
	lc := net.ListenConfig{Control: func(_, _ string, rc syscall.RawConn) error {
		var serr error
		err := rc.Control(func(fd uintptr) {
			if cfg.ReuseAddr {
				if serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_REUSEADDR, 1); serr != nil {
					return
				}
			}
			if serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUF, cfg.RecvBuffer); serr != nil {
				return
			}
			serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_SNDBUF, cfg.SendBuffer)
		})
		if err != nil {
			return err
		}
		return serr
	}}
	pc, err := lc.ListenPacket(context.Background(), "udp", addr)
	if err != nil {
		return nil, fmt.Errorf("%w: listen %s: %w", ErrUDP, addr, err)
	}
	c := pc.(*net.UDPConn)
	return &UDPConn{c: c, local: c.LocalAddr().(*net.UDPAddr).AddrPort()}, nil
}

// LocalAddr is the bound address.
func (u *UDPConn) LocalAddr() netip.AddrPort { return u.local }

// ReadFrom reads one datagram into b.
func (u *UDPConn) ReadFrom(b []byte) (int, netip.AddrPort, error) {
	return u.c.ReadFromUDPAddrPort(b)
}

// WriteTo sends b as one datagram to addr.
func (u *UDPConn) WriteTo(b []byte, addr netip.AddrPort) error {
	_, err := u.c.WriteToUDPAddrPort(b, addr)
	return err
}

// SetReadDeadline bounds the next ReadFrom (a timeout error is
// os.ErrDeadlineExceeded).
func (u *UDPConn) SetReadDeadline(t time.Time) error { return u.c.SetReadDeadline(t) }

// Buffers reports the receive and send buffer sizes the kernel granted.
func (u *UDPConn) Buffers() (recv, send int, err error) {
	rc, err := u.c.SyscallConn()
	if err != nil {
		return 0, 0, err
	}
	var e1, e2 error
	err = rc.Control(func(fd uintptr) {
		recv, e1 = unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUF)
		send, e2 = unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_SNDBUF)
	})
	return recv, send, errors.Join(err, e1, e2)
}

// Close closes the socket; a blocked ReadFrom returns net.ErrClosed.
func (u *UDPConn) Close() error { return u.c.Close() }

package netio

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
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
	// ReadBatch is how many datagrams one receive system call may take
	// (recvmmsg); ReadFrom then returns them one by one without further
	// calls. 1 reads one datagram per call (recvfrom). Default 1.
	ReadBatch int
}

func (c UDPConfig) withDefaults() UDPConfig {
	if c.RecvBuffer == 0 {
		c.RecvBuffer = 4 << 20
	}
	if c.SendBuffer == 0 {
		c.SendBuffer = 1 << 20
	}
	if c.ReadBatch == 0 {
		c.ReadBatch = 1
	}
	return c
}

// UDPConn is the SWIM datagram socket: one datagram per read, addresses
// as netip.AddrPort, so the read and write paths allocate nothing.
type UDPConn struct {
	c     *net.UDPConn
	local netip.AddrPort

	rmu   sync.Mutex
	batch *recvBatch // nil: one datagram per read
}

// ErrUDP wraps the socket errors of ListenUDP.
var ErrUDP = errors.New("netio: udp")

// ListenUDP binds a UDP socket at addr ("127.0.0.1:0" picks a port).
func ListenUDP(addr string, cfg UDPConfig) (*UDPConn, error) {
	cfg = cfg.withDefaults()
	if cfg.RecvBuffer < 0 || cfg.SendBuffer < 0 || cfg.ReadBatch < 0 || cfg.ReadBatch > maxReadBatch {
		return nil, fmt.Errorf("%w: config: negative buffer size or ReadBatch outside [0, %d]", ErrUDP, maxReadBatch)
	}
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
	u := &UDPConn{c: c, local: c.LocalAddr().(*net.UDPAddr).AddrPort()}
	if cfg.ReadBatch > 1 {
		rc, err := c.SyscallConn()
		if err != nil {
			_ = c.Close()
			return nil, fmt.Errorf("%w: listen %s: %w", ErrUDP, addr, err)
		}
		u.batch = newRecvBatch(rc, cfg.ReadBatch)
	}
	return u, nil
}

// maxReadBatch bounds UDPConfig.ReadBatch (each slot holds a datagram of
// up to wire.MaxDatagram bytes).
const maxReadBatch = 256

// LocalAddr is the bound address.
func (u *UDPConn) LocalAddr() netip.AddrPort { return u.local }

// ReadFrom reads one datagram into b (a longer datagram is cut to
// len(b)). With ReadBatch above 1 it returns the datagrams left from the
// last receive call before making another.
func (u *UDPConn) ReadFrom(b []byte) (int, netip.AddrPort, error) {
	if u.batch == nil {
		return u.c.ReadFromUDPAddrPort(b)
	}
	u.rmu.Lock()
	defer u.rmu.Unlock()
	for u.batch.next == u.batch.n {
		if err := u.batch.fill(); err != nil {
			return 0, netip.AddrPort{}, err
		}
	}
	n, from := u.batch.take(b)
	return n, from, nil
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

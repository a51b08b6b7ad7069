package netio

import (
	"encoding/binary"
	"net"
	"net/netip"
	"strconv"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/shoalmq/shoal/wire"
)

// recvBatch holds the datagrams one recvmmsg read and ReadFrom has not
// returned yet. Every header points at its own name, iovec and slot once,
// at construction, so a refill only resets lengths.
type recvBatch struct {
	rc     syscall.RawConn
	hdrs   []unix.Mmsghdr
	iovs   []unix.Iovec
	names  []unix.RawSockaddrInet6 // large enough for IPv4 and IPv6 names
	bufs   []byte                  // len(hdrs) slots of wire.MaxDatagram
	n      int                     // datagrams in the batch
	next   int                     // the next one to return
	err    error                   // set by the read callback
	readFn func(fd uintptr) bool   // b.read, bound once: a method value per fill would allocate
}

const slotSize = wire.MaxDatagram

func newRecvBatch(rc syscall.RawConn, n int) *recvBatch {
	b := &recvBatch{
		rc:    rc,
		hdrs:  make([]unix.Mmsghdr, n),
		iovs:  make([]unix.Iovec, n),
		names: make([]unix.RawSockaddrInet6, n),
		bufs:  make([]byte, n*slotSize),
	}
	for i := range b.hdrs {
		b.iovs[i].Base = &b.bufs[i*slotSize]
		b.iovs[i].SetLen(slotSize)
		h := &b.hdrs[i].Hdr
		h.Name = (*byte)(unsafe.Pointer(&b.names[i]))
		h.Iov = &b.iovs[i]
		h.SetIovlen(1)
	}
	b.readFn = b.read
	return b
}

// fill reads up to len(hdrs) datagrams with one recvmmsg, waiting in the
// runtime's poller (and so honouring the read deadline) while none is
// queued.
func (b *recvBatch) fill() error {
	for i := range b.hdrs {
		b.hdrs[i].Hdr.Namelen = uint32(unsafe.Sizeof(b.names[i]))
		b.hdrs[i].Hdr.Flags = 0
		b.hdrs[i].Len = 0
	}
	b.n, b.next, b.err = 0, 0, nil
	err := b.rc.Read(b.readFn)
	if err == nil {
		err = b.err
	}
	return err
}

// read is the RawConn.Read callback.
func (b *recvBatch) read(fd uintptr) bool {
	for {
		r, _, e := unix.Syscall6(unix.SYS_RECVMMSG, fd, uintptr(unsafe.Pointer(&b.hdrs[0])),
			uintptr(len(b.hdrs)), unix.MSG_DONTWAIT, 0, 0)
		switch e {
		case 0:
			b.n = int(r)
			return true
		case unix.EINTR:
			continue
		case unix.EAGAIN:
			return false // wait for the socket to become readable
		default:
			b.err = &net.OpError{Op: "recvmmsg", Net: "udp", Err: e}
			return true
		}
	}
}

// take returns the next datagram of the batch copied into p.
func (b *recvBatch) take(p []byte) (int, netip.AddrPort) {
	i := b.next
	b.next++
	m := &b.hdrs[i]
	n := copy(p, b.bufs[i*slotSize:i*slotSize+int(m.Len)])
	return n, sockaddrAddrPort(&b.names[i])
}

// sockaddrAddrPort decodes a socket name filled in by the kernel.
func sockaddrAddrPort(sa *unix.RawSockaddrInet6) netip.AddrPort {
	switch sa.Family {
	case unix.AF_INET:
		sa4 := (*unix.RawSockaddrInet4)(unsafe.Pointer(sa))
		port := binary.BigEndian.Uint16((*[2]byte)(unsafe.Pointer(&sa4.Port))[:])
		return netip.AddrPortFrom(netip.AddrFrom4(sa4.Addr), port)
	case unix.AF_INET6:
		port := binary.BigEndian.Uint16((*[2]byte)(unsafe.Pointer(&sa.Port))[:])
		ip := netip.AddrFrom16(sa.Addr)
		if sa.Scope_id != 0 {
			zone := strconv.FormatUint(uint64(sa.Scope_id), 10)
			if ifi, err := net.InterfaceByIndex(int(sa.Scope_id)); err == nil {
				zone = ifi.Name
			}
			ip = ip.WithZone(zone)
		}
		return netip.AddrPortFrom(ip, port)
	}
	return netip.AddrPort{}
}

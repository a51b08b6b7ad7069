package main

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"runtime"
	"sync/atomic"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/shoalmq/shoal/wire"
)

// epollConn is one connection driven by driveEpoll.
type epollConn struct {
	fd          int
	in          []byte // read buffer; in[:have] holds unparsed bytes
	have        int
	out         []byte
	sent        []int64 // send time of request id%depth
	next        uint64  // id of the next request
	stamped     uint64  // requests below this id have their send time
	answered    uint64  // id of the next answer expected (answers come in order)
	outstanding int
	lat         []int64
	ops         int64
}

// driveEpoll is the load generator with one OS thread: every connection
// non-blocking on one epoll set; per readable connection one read, every
// whole answer replaced by a new request, one write. It does the same
// work per request as driveConn without a goroutine per connection, so
// that the generator takes less of the CPU both servers share with it.
// The connections are taken over (their net.Conn is closed).
func driveEpoll(ncs []net.Conn, depth int, measuring, stop *atomic.Bool) ([][]int64, []int64, error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, nil, err
	}
	defer unix.Close(epfd)
	cs := make([]*epollConn, len(ncs))
	defer func() {
		for _, c := range cs {
			if c != nil {
				_ = unix.Close(c.fd)
			}
		}
	}()
	for i, nc := range ncs {
		fd, err := takeFD(nc)
		if err != nil {
			return nil, nil, err
		}
		c := &epollConn{fd: fd, in: make([]byte, 64<<10), sent: make([]int64, depth), lat: make([]int64, 0, 1<<16)}
		cs[i] = c
		ev := unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(i)}
		if err := unix.EpollCtl(epfd, unix.EPOLL_CTL_ADD, fd, &ev); err != nil {
			return nil, nil, err
		}
		for range depth {
			c.request()
		}
		if err := c.flush(); err != nil {
			return nil, nil, err
		}
	}
	events := make([]unix.EpollEvent, len(cs))
	idle := 0
	for {
		stopping := stop.Load()
		if stopping {
			inflight := 0
			for _, c := range cs {
				inflight += c.outstanding
			}
			if inflight == 0 {
				break
			}
		}
		n, err := unix.EpollWait(epfd, events, 100)
		if err != nil {
			if errors.Is(err, unix.EINTR) {
				continue
			}
			return nil, nil, err
		}
		if n == 0 && stopping {
			if idle++; idle > 50 {
				return nil, nil, errors.New("answers still outstanding 5s after the stop")
			}
		}
		m := measuring.Load()
		for _, ev := range events[:n] {
			c := cs[ev.Fd]
			if err := c.read(depth, m, stopping); err != nil {
				return nil, nil, err
			}
			if err := c.flush(); err != nil {
				return nil, nil, err
			}
		}
	}
	lat := make([][]int64, len(cs))
	ops := make([]int64, len(cs))
	for i, c := range cs {
		lat[i], ops[i] = c.lat, c.ops
	}
	return lat, ops, nil
}

// takeFD duplicates nc's socket and closes nc, leaving the duplicate (non-
// blocking, like the original) to the caller.
func takeFD(nc net.Conn) (int, error) {
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return 0, fmt.Errorf("%T has no file descriptor", nc)
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return 0, err
	}
	var fd int
	var derr error
	if err := rc.Control(func(s uintptr) { fd, derr = unix.Dup(int(s)) }); err != nil {
		return 0, err
	}
	if derr != nil {
		return 0, derr
	}
	_ = nc.Close()
	if err := unix.SetNonblock(fd, true); err != nil {
		_ = unix.Close(fd)
		return 0, err
	}
	return fd, nil
}

// requestFrame is a Lookup request with a zero payload and request id 0;
// request copies it and sets the id (header bytes 8–15).
var requestFrame = func() []byte {
	b, start := wire.BeginFrame(nil, wire.KindLookup, 0)
	b = append(b, make([]byte, payloadSize)...)
	b, _ = wire.EndFrame(b, start)
	return b
}()

func (c *epollConn) request() {
	n := len(c.out)
	c.out = append(c.out, requestFrame...)
	binary.LittleEndian.PutUint64(c.out[n+8:], c.next)
	c.next++
	c.outstanding++
}

// read reads once and answers every whole answer with a new request
// (none once stopping). Every answer in the bytes of one read arrived by
// the time that read returned, so one clock reading times them all.
func (c *epollConn) read(depth int, measuring, stopping bool) error {
	n, err := sysRead(c.fd, c.in[c.have:])
	if err != nil {
		if errors.Is(err, unix.EAGAIN) {
			return nil
		}
		return err
	}
	now := nanotime()
	if n == 0 {
		return errors.New("server closed the connection")
	}
	c.have += n
	buf := c.in[:c.have]
	var h wire.Header
	for len(buf) >= wire.HeaderSize {
		if err := wire.DecodeHeader(buf, &h); err != nil {
			return err
		}
		total := wire.HeaderSize + int(h.Length)
		if total > len(c.in) {
			return fmt.Errorf("answer of %d bytes", total)
		}
		if len(buf) < total {
			break
		}
		if h.Kind != wire.KindAssignment || h.RequestID != c.answered || h.Length != payloadSize {
			return fmt.Errorf("answer %v id %d (want %d) length %d", h.Kind, h.RequestID, c.answered, h.Length)
		}
		c.answered++
		buf = buf[total:]
		c.outstanding--
		if measuring {
			c.lat = append(c.lat, now-c.sent[h.RequestID%uint64(depth)])
			c.ops++
		}
		if !stopping {
			c.request()
		}
	}
	c.have = copy(c.in, buf)
	return nil
}

// flush writes every queued request (a few KiB at most, which the socket
// takes at once). The requests go out in this one write, so they share
// its send time, read just before it.
func (c *epollConn) flush() error {
	if len(c.out) == 0 {
		return nil
	}
	now := nanotime()
	for ; c.stamped < c.next; c.stamped++ {
		c.sent[c.stamped%uint64(len(c.sent))] = now
	}
	for off := 0; off < len(c.out); {
		n, err := sysWrite(c.fd, c.out[off:])
		if err != nil {
			if errors.Is(err, unix.EAGAIN) {
				continue
			}
			return err
		}
		off += n
	}
	c.out = c.out[:0]
	return nil
}

// sysRead and sysWrite make the read and write system calls without telling
// the Go scheduler (entersyscall, exitsyscall): the sockets are non-blocking
// and driveEpoll holds its own OS thread, so a call never blocks anyone.
func sysRead(fd int, p []byte) (int, error) {
	n, _, e := unix.RawSyscall(unix.SYS_READ, uintptr(fd), uintptr(unsafe.Pointer(unsafe.SliceData(p))), uintptr(len(p)))
	if e != 0 {
		return 0, e
	}
	return int(n), nil
}

func sysWrite(fd int, p []byte) (int, error) {
	n, _, e := unix.RawSyscall(unix.SYS_WRITE, uintptr(fd), uintptr(unsafe.Pointer(unsafe.SliceData(p))), uintptr(len(p)))
	if e != 0 {
		return 0, e
	}
	return int(n), nil
}

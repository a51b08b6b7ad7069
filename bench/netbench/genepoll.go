package main

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
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
	reqs        *inflight
	outstanding int
	lat         []int64
	ops         int64
}

// inflight is one connection's outstanding requests. Each has a slot
// (0..depth-1) carried in the low bits of its id, so that an answer finds
// its request in whatever order the server answers (netio-async's workers
// race each other), and an answer to no outstanding request is caught.
type inflight struct {
	bits      uint     // low id bits holding the slot
	seq       uint64   // requests made, the id's high bits
	id        []uint64 // id of the request in each slot
	sent      []int64  // its send time
	busy      []bool   // the slot holds an outstanding request
	free      []int    // slots that do not
	unstamped []int    // slots of requests made since the last stamp
}

func newInflight(depth int) *inflight {
	f := &inflight{
		bits: uint(bits.Len(uint(depth - 1))),
		id:   make([]uint64, depth), sent: make([]int64, depth), busy: make([]bool, depth),
		free: make([]int, depth), unstamped: make([]int, 0, depth),
	}
	for i := range f.free {
		f.free[i] = depth - 1 - i
	}
	return f
}

// add takes a slot for a new request and returns the request's id; the
// caller keeps at most depth outstanding.
func (f *inflight) add() uint64 {
	slot := f.free[len(f.free)-1]
	f.free = f.free[:len(f.free)-1]
	id := f.seq<<f.bits | uint64(slot)
	f.seq++
	f.id[slot], f.busy[slot] = id, true
	f.unstamped = append(f.unstamped, slot)
	return id
}

// stamp sets the send time of the requests added since the last stamp.
func (f *inflight) stamp(now int64) {
	for _, slot := range f.unstamped {
		f.sent[slot] = now
	}
	f.unstamped = f.unstamped[:0]
}

// done ends request id and returns its send time; ok is false when id is
// not outstanding.
func (f *inflight) done(id uint64) (sent int64, ok bool) {
	slot := int(id & (1<<f.bits - 1))
	if slot >= len(f.busy) || !f.busy[slot] || f.id[slot] != id {
		return 0, false
	}
	f.busy[slot] = false
	f.free = append(f.free, slot)
	return f.sent[slot], true
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
		c := &epollConn{fd: fd, in: make([]byte, 64<<10), reqs: newInflight(depth), lat: make([]int64, 0, 1<<16)}
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
			if err := c.read(m, stopping); err != nil {
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
	binary.LittleEndian.PutUint64(c.out[n+8:], c.reqs.add())
	c.outstanding++
}

// read reads once and answers every whole answer with a new request
// (none once stopping). Every answer in the bytes of one read arrived by
// the time that read returned, so one clock reading times them all.
func (c *epollConn) read(measuring, stopping bool) error {
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
		if h.Kind != wire.KindAssignment || h.Length != payloadSize {
			return fmt.Errorf("answer %v with %d payload bytes", h.Kind, h.Length)
		}
		sent, ok := c.reqs.done(h.RequestID)
		if !ok {
			return fmt.Errorf("answer id %d: not an answer to an outstanding request", h.RequestID)
		}
		buf = buf[total:]
		c.outstanding--
		if measuring {
			c.lat = append(c.lat, now-sent)
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
	c.reqs.stamp(nanotime())
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

package netio

import (
	"io"
	"net"
	"os"
	"syscall"
	"unsafe"
)

// A plain connection served by goroutines reads and writes its socket
// with raw system calls, made inside the runtime poller's callbacks
// (syscall.RawConn): the socket is non-blocking, so a read or write never
// sleeps in the kernel, and one that cannot proceed (EAGAIN) hands back
// to the poller, which parks the goroutine until the socket is ready, as
// net.Conn does. What a raw call saves is the runtime's system-call
// bookkeeping: a goroutine in net.Conn's Read or Write marks its P as in a
// system call, and sysmon, finding Ps in calls that last tens of
// microseconds on this kind of VM, keeps waking every 20 µs to hand them
// to other threads, which the returning goroutine must then win back.
// Under linearizable lookups sysmon took 12.9% of the nodes' CPU that way
// (docs/decisions/netio-raw-socket-calls.md).

// rawSock is the raw view of a plain TCP connection's socket.
type rawSock struct {
	rc  syscall.RawConn
	iov []syscall.Iovec // writev's vector, reused (one flush at a time)
}

// newRawSock returns the raw view of nc, or nil when nc has none.
func newRawSock(nc net.Conn) *rawSock {
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return nil
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return nil
	}
	return &rawSock{rc: rc}
}

// sockErr wraps a failed call as net.Conn's Read and Write do.
func sockErr(op string, e syscall.Errno) error {
	return &net.OpError{Op: op, Net: "tcp", Err: os.NewSyscallError(op, e)}
}

// read is net.Conn.Read: at least one byte, or io.EOF once the peer
// closed, or the error (a deadline, a closed connection: the poller's).
func (s *rawSock) read(b []byte) (int, error) {
	if len(b) == 0 {
		return 0, nil
	}
	var n uintptr
	var errno syscall.Errno
	err := s.rc.Read(func(fd uintptr) bool {
		for {
			n, _, errno = syscall.RawSyscall(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)))
			switch errno {
			case syscall.EINTR:
				continue
			case syscall.EAGAIN:
				return false // wait for the socket to be readable
			}
			return true
		}
	})
	switch {
	case err != nil:
		return 0, err
	case errno != 0:
		return 0, sockErr("read", errno)
	case n == 0:
		return 0, io.EOF
	}
	return int(n), nil
}

// write is net.Conn.Write: every byte of b, or the error; n is what was
// written before it.
func (s *rawSock) write(b []byte) (int, error) {
	total := 0
	var errno syscall.Errno
	err := s.rc.Write(func(fd uintptr) bool {
		for total < len(b) {
			r, _, e := syscall.RawSyscall(syscall.SYS_WRITE, fd, uintptr(unsafe.Pointer(&b[total])), uintptr(len(b)-total))
			switch e {
			case 0:
				total += int(r)
			case syscall.EINTR:
			case syscall.EAGAIN:
				return false // wait for room in the socket
			default:
				errno = e
				return true
			}
		}
		return true
	})
	if err != nil {
		return total, err
	}
	if errno != 0 {
		return total, sockErr("write", errno)
	}
	return total, nil
}

// writev is net.Buffers.WriteTo: every byte of bs, or the error; n is
// what was written before it. Partial writes continue where they ended.
func (s *rawSock) writev(bs [][]byte) (int, error) {
	s.iov = s.iov[:0]
	for _, b := range bs {
		if len(b) > 0 {
			v := syscall.Iovec{Base: &b[0]}
			v.SetLen(len(b))
			s.iov = append(s.iov, v)
		}
	}
	defer clear(s.iov) // drop the references to the caller's buffers
	iov := s.iov
	total := 0
	var errno syscall.Errno
	err := s.rc.Write(func(fd uintptr) bool {
		for len(iov) > 0 {
			cnt := min(len(iov), maxIovecs)
			r, _, e := syscall.RawSyscall(syscall.SYS_WRITEV, fd, uintptr(unsafe.Pointer(&iov[0])), uintptr(cnt))
			switch e {
			case 0:
			case syscall.EINTR:
				continue
			case syscall.EAGAIN:
				return false // wait for room in the socket
			default:
				errno = e
				return true
			}
			total += int(r)
			for r > 0 && len(iov) > 0 {
				if l := uintptr(iov[0].Len); r >= l {
					r -= l
					iov = iov[1:]
					continue
				}
				iov[0].Base = (*byte)(unsafe.Add(unsafe.Pointer(iov[0].Base), r))
				iov[0].SetLen(int(uintptr(iov[0].Len) - r))
				r = 0
			}
		}
		return true
	})
	if err != nil {
		return total, err
	}
	if errno != 0 {
		return total, sockErr("writev", errno)
	}
	return total, nil
}

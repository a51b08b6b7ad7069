package rawsock

import (
	"io"
	"net"
	"os"
	"syscall"
	"unsafe"
)

// Sock is the raw view of a plain TCP connection's socket. Its reads and
// writes are not safe for concurrent use with each other's kind: one
// reader and one writer at a time, as a net.Conn's users have anyway.
type Sock struct {
	rc  syscall.RawConn
	iov []syscall.Iovec // Writev's vector, reused
}

// New returns the raw view of nc, or nil unless nc is a *net.TCPConn
// itself: a type wrapping one (to inject faults, say) keeps its own Read
// and Write.
func New(nc net.Conn) *Sock {
	tc, ok := nc.(*net.TCPConn)
	if !ok {
		return nil
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		return nil
	}
	return &Sock{rc: rc}
}

// sockErr wraps a failed call as net.Conn's Read and Write do.
func sockErr(op string, e syscall.Errno) error {
	return &net.OpError{Op: op, Net: "tcp", Err: os.NewSyscallError(op, e)}
}

// written is a write's outcome as net.Conn gives it: the bytes written,
// and the poller's error (a deadline, a closed socket), else the call's.
func written(op string, total int, err error, errno syscall.Errno) (int, error) {
	if err == nil && errno != 0 {
		err = sockErr(op, errno)
	}
	return total, err
}

// Read is net.Conn.Read: at least one byte, or io.EOF once the peer
// closed, or the error (a deadline, a closed connection: the poller's).
func (s *Sock) Read(b []byte) (int, error) {
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
	read()
	return int(n), nil
}

// Write is net.Conn.Write: every byte of b, or the error; n is what was
// written before it.
func (s *Sock) Write(b []byte) (int, error) {
	wrote()
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
	return written("write", total, err, errno)
}

// Writev is net.Buffers.WriteTo: every byte of bs, or the error; n is
// what was written before it. Partial writes continue where they ended.
func (s *Sock) Writev(bs [][]byte) (int, error) {
	s.iov = s.iov[:0]
	for _, b := range bs {
		if len(b) > 0 {
			v := syscall.Iovec{Base: &b[0]}
			v.SetLen(len(b))
			s.iov = append(s.iov, v)
		}
	}
	defer clear(s.iov) // drop the references to the caller's buffers
	wrote()
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
	return written("writev", total, err, errno)
}

// maxIovecs is the most buffers one writev takes (the kernel's IOV_MAX).
const maxIovecs = 1024

// conn is a net.Conn whose Read and Write are the socket's raw calls.
type conn struct {
	net.Conn
	s *Sock
}

func (c *conn) Read(b []byte) (int, error)  { return c.s.Read(b) }
func (c *conn) Write(b []byte) (int, error) { return c.s.Write(b) }

// Wrap returns nc with its Read and Write made raw system calls, or nc
// itself when it has no socket of its own. Deadlines, Close and the rest
// are nc's.
func Wrap(nc net.Conn) net.Conn {
	if s := New(nc); s != nil {
		return &conn{Conn: nc, s: s}
	}
	return nc
}

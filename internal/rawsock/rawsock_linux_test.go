package rawsock

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"syscall"
	"testing"
	"time"
)

// tcpPair returns both ends of a loopback TCP connection.
func tcpPair(t *testing.T) (a, b *net.TCPConn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	acc := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		acc <- c
	}()
	d, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	s := <-acc
	if s == nil {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { _ = d.Close(); _ = s.Close() })
	return d.(*net.TCPConn), s.(*net.TCPConn)
}

// Everything written raw arrives whole and in order, through partial
// writes (a small send buffer and a reader that lags, so writes meet
// EAGAIN and wait in the poller), with more buffers than one writev takes.
func TestRawSockMovesEveryByte(t *testing.T) {
	a, b := tcpPair(t)
	_ = a.SetWriteBuffer(64 << 10)
	_ = b.SetReadBuffer(64 << 10)
	w, r := New(a), New(b)
	if w == nil || r == nil {
		t.Fatal("no raw view of a TCP connection")
	}
	rng := rand.New(rand.NewPCG(1, 2))
	var want []byte
	var bufs [][]byte
	for i := range 3 * maxIovecs {
		p := make([]byte, rng.IntN(300))
		for j := range p {
			p[j] = byte(i + j)
		}
		bufs = append(bufs, p)
		want = append(want, p...)
	}
	big := bytes.Repeat([]byte("0123456789"), 100_000) // 1 MB in one write
	want = append(want, big...)
	got := make(chan []byte, 1)
	go func() {
		var all []byte
		buf := make([]byte, 16<<10)
		time.Sleep(20 * time.Millisecond) // lag, so the writer fills the socket
		for len(all) < len(want) {
			n, err := r.Read(buf)
			all = append(all, buf[:n]...)
			if err != nil {
				break
			}
		}
		got <- all
	}()
	n, err := w.Writev(bufs)
	if err != nil || n != len(want)-len(big) {
		t.Fatalf("writev: %d, %v; want %d", n, err, len(want)-len(big))
	}
	if n, err := w.Write(big); err != nil || n != len(big) {
		t.Fatalf("write: %d, %v", n, err)
	}
	if all := <-got; !bytes.Equal(all, want) {
		t.Fatalf("read %d bytes, want %d; equal prefix %d", len(all), len(want), commonPrefix(all, want))
	}
	for _, v := range w.iov[:cap(w.iov)] {
		if v.Base != nil {
			t.Fatal("writev keeps references to the written buffers")
		}
	}
}

func commonPrefix(a, b []byte) int {
	i := 0
	for i < len(a) && i < len(b) && a[i] == b[i] {
		i++
	}
	return i
}

// The ends of a connection read as net.Conn reports them: io.EOF once
// the peer closed, the poller's errors for a deadline and for a socket
// closed here, and the kernel's for a write to a peer that is gone.
func TestRawSockEndsAsNetConnDoes(t *testing.T) {
	a, b := tcpPair(t)
	ra, rb := New(a), New(b)
	buf := make([]byte, 64)

	_ = b.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
	if _, err := rb.Read(buf); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read past its deadline: %v", err)
	} else if ne, ok := err.(net.Error); !ok || !ne.Timeout() {
		t.Fatalf("a deadline is not a net.Error timeout: %v", err)
	}
	_ = b.SetReadDeadline(time.Time{})

	if n, err := ra.Write([]byte("last words")); n != 10 || err != nil {
		t.Fatalf("write: %d, %v", n, err)
	}
	_ = a.Close()
	if n, err := rb.Read(buf); n != 10 || err != nil || string(buf[:n]) != "last words" {
		t.Fatalf("read: %d %q %v", n, buf[:n], err)
	}
	if n, err := rb.Read(buf); n != 0 || err != io.EOF {
		t.Fatalf("read after the peer closed: %d, %v; want io.EOF", n, err)
	}
	// Writing to a peer that closed fails, at the latest once it reset.
	var werr error
	for range 100 {
		if _, werr = rb.Write(bytes.Repeat([]byte("x"), 1<<16)); werr != nil {
			break
		}
		time.Sleep(time.Millisecond)
	}
	var se *os.SyscallError
	if !errors.As(werr, &se) || !(errors.Is(werr, syscall.EPIPE) || errors.Is(werr, syscall.ECONNRESET)) {
		t.Fatalf("write to a closed peer: %v", werr)
	}
	_ = b.Close()
	if _, err := rb.Read(buf); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("read of a socket closed here: %v", err)
	}
	if _, err := rb.Writev([][]byte{[]byte("x")}); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("writev of a socket closed here: %v", err)
	}
}

// A connection with no socket of its own keeps going through net.Conn;
// a wrapped socket moves bytes both ways and keeps its deadlines.
func TestWrapOnlySockets(t *testing.T) {
	p, q := net.Pipe()
	defer p.Close()
	defer q.Close()
	if New(p) != nil {
		t.Fatal("a pipe has no raw socket")
	}
	if Wrap(p) != p {
		t.Fatal("a pipe was wrapped")
	}
	a, b := tcpPair(t)
	if New(struct{ *net.TCPConn }{a}) != nil {
		t.Fatal("a type wrapping a TCP connection was given raw calls past its own")
	}
	wa, wb := Wrap(a), Wrap(b)
	if _, ok := wa.(*conn); !ok {
		t.Fatal("a TCP connection was not wrapped")
	}
	if n, err := wa.Write([]byte("ping")); n != 4 || err != nil {
		t.Fatalf("write: %d, %v", n, err)
	}
	buf := make([]byte, 8)
	if n, err := io.ReadFull(wb, buf[:4]); n != 4 || err != nil || string(buf[:4]) != "ping" {
		t.Fatalf("read: %q, %v", buf[:n], err)
	}
	_ = wb.SetReadDeadline(time.Now().Add(10 * time.Millisecond))
	if _, err := wb.Read(buf); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read past the deadline set on the wrapper: %v", err)
	}
}

// Under -race, what a goroutine did before writing to a socket happens
// before what the goroutine that read it does next, as with net.Conn (the
// syscall package annotates its calls; race.go annotates the raw ones).
// Without that the race detector fails this test.
func TestRawSockOrdersForTheRaceDetector(t *testing.T) {
	a, b := tcpPair(t)
	w, r := New(a), New(b)
	for _, viaWritev := range []bool{false, true} {
		var shared int
		got := make(chan int)
		go func() {
			buf := make([]byte, 1)
			if _, err := r.Read(buf); err != nil {
				got <- -1
				return
			}
			got <- shared
		}()
		shared = 42
		var err error
		if viaWritev {
			_, err = w.Writev([][]byte{{1}})
		} else {
			_, err = w.Write([]byte{1})
		}
		if err != nil {
			t.Fatal(err)
		}
		if v := <-got; v != 42 {
			t.Fatalf("reader saw %d", v)
		}
	}
}

package netio

import (
	"net"
	"runtime"
	"testing"
)

// A plain link reads and writes raw system calls on a TCP socket, and
// goes through net.Conn on anything else.
func TestPlainLinkRawOnlyOnTCP(t *testing.T) {
	p, q := net.Pipe()
	defer p.Close()
	defer q.Close()
	if l := newPlainLink(p); l.raw != nil {
		t.Fatal("a plain link over a pipe uses raw calls")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	nc, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if l := newPlainLink(nc); l.raw == nil && runtime.GOOS == "linux" {
		t.Fatal("a plain link over TCP does not use raw calls")
	}
}

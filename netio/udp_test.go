package netio

import (
	"bytes"
	"context"
	"errors"
	"net"
	"os"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestUDPRoundTripAndBuffers(t *testing.T) {
	a, err := ListenUDP("127.0.0.1:0", UDPConfig{RecvBuffer: 1 << 20, ReuseAddr: true})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := ListenUDP("127.0.0.1:0", UDPConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if recv, _, err := a.Buffers(); err != nil || recv < 1<<20 {
		t.Fatalf("receive buffer %d (%v), asked 1 MiB", recv, err)
	}
	msg := []byte("swim datagram")
	if err := b.WriteTo(msg, a.LocalAddr()); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 2048)
	if err := a.SetReadDeadline(time.Now().Add(2 * time.Second)); err != nil {
		t.Fatal(err)
	}
	n, from, err := a.ReadFrom(buf)
	if err != nil || !bytes.Equal(buf[:n], msg) || from != b.LocalAddr() {
		t.Fatalf("read %q from %v: %v", buf[:n], from, err)
	}
	_ = a.SetReadDeadline(time.Now().Add(10 * time.Millisecond))
	if _, _, err := a.ReadFrom(buf); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("deadline: %v", err)
	}
	a.Close()
	if _, _, err := a.ReadFrom(buf); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("after close: %v", err)
	}
	if _, err := ListenUDP("256.0.0.1:0", UDPConfig{}); !errors.Is(err, ErrUDP) {
		t.Fatalf("bad address: %v", err)
	}
}

func TestPushPullExchange(t *testing.T) {
	defer goleak.VerifyNone(t)
	srv, err := ListenPushPull("127.0.0.1:0", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		done <- srv.Serve(func(req []byte) ([]byte, error) { return append([]byte("re:"), req...), nil })
	}()
	cli, err := ListenPushPull("127.0.0.1:0", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	reply, err := cli.Exchange(context.Background(), srv.Addr().String(), []byte("state"))
	if err != nil || string(reply) != "re:state" {
		t.Fatalf("reply %q: %v", reply, err)
	}
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("serve: %v", err)
	}
	if _, err := cli.Exchange(context.Background(), srv.Addr().String(), []byte("x")); !errors.Is(err, ErrPushPull) {
		t.Fatalf("closed server: %v", err)
	}
}

package netio

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/shoalmq/shoal/wire"
)

func TestUDPRoundTripAndBuffers(t *testing.T) {
	for _, batch := range []int{1, 16} {
		t.Run(fmt.Sprintf("batch=%d", batch), func(t *testing.T) { testUDPRoundTrip(t, batch) })
	}
}

func testUDPRoundTrip(t *testing.T, batch int) {
	a, err := ListenUDP("127.0.0.1:0", UDPConfig{RecvBuffer: 1 << 20, ReuseAddr: true, ReadBatch: batch})
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

// TestUDPBatchReceive sends more datagrams than one batch holds from two
// sockets, of every size up to the largest, and reads them back whole, in
// each sender's order, with the right source address.
func TestUDPBatchReceive(t *testing.T) {
	rx, err := ListenUDP("127.0.0.1:0", UDPConfig{ReadBatch: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer rx.Close()
	var tx [2]*UDPConn
	for i := range tx {
		if tx[i], err = ListenUDP("127.0.0.1:0", UDPConfig{}); err != nil {
			t.Fatal(err)
		}
		defer tx[i].Close()
	}
	sizes := []int{0, 1, 100, 1400, 9000, wire.MaxDatagram}
	const rounds = 3
	for r := range rounds {
		for i, s := range sizes {
			for k, c := range tx {
				msg := bytes.Repeat([]byte{byte(r*len(sizes) + i), byte(k)}, s/2+1)[:s]
				if err := c.WriteTo(msg, rx.LocalAddr()); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	next := [2]int{}
	buf := make([]byte, wire.MaxDatagram)
	_ = rx.SetReadDeadline(time.Now().Add(5 * time.Second))
	for range 2 * rounds * len(sizes) {
		n, from, err := rx.ReadFrom(buf)
		if err != nil {
			t.Fatalf("read: %v", err)
		}
		k := 0
		if from == tx[1].LocalAddr() {
			k = 1
		} else if from != tx[0].LocalAddr() {
			t.Fatalf("datagram from %v", from)
		}
		seq := next[k]
		next[k]++
		want := bytes.Repeat([]byte{byte(seq), byte(k)}, sizes[seq%len(sizes)]/2+1)[:sizes[seq%len(sizes)]]
		if !bytes.Equal(buf[:n], want) {
			t.Fatalf("sender %d datagram %d: %d bytes, want %d", k, seq, n, len(want))
		}
	}
	// A short buffer takes the datagram's head, as a plain read does.
	if err := tx[0].WriteTo([]byte("0123456789"), rx.LocalAddr()); err != nil {
		t.Fatal(err)
	}
	short := make([]byte, 4)
	if n, _, err := rx.ReadFrom(short); err != nil || string(short[:n]) != "0123" {
		t.Fatalf("short read %q: %v", short[:n], err)
	}
	if _, err := ListenUDP("127.0.0.1:0", UDPConfig{ReadBatch: maxReadBatch + 1}); !errors.Is(err, ErrUDP) {
		t.Fatalf("oversized batch: %v", err)
	}
}

func TestPushPullExchange(t *testing.T) {
	defer goleak.VerifyNone(t, leakOptions...)
	srv, err := ListenPushPull("127.0.0.1:0", PushPullConfig{NodeID: "srv", Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		done <- srv.Serve(func(req []byte) ([]byte, error) { return append([]byte("re:"), req...), nil })
	}()
	cli, err := ListenPushPull("127.0.0.1:0", PushPullConfig{NodeID: "cli", Timeout: time.Second})
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

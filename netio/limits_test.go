package netio

import (
	"net"
	"testing"
	"time"

	"github.com/shoalmq/shoal/wire"
)

// dialFrom connects to addr from the loopback address local (any port).
func dialFrom(t *testing.T, local, addr string) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(local)}}
	nc, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatalf("dial from %s: %v", local, err)
	}
	t.Cleanup(func() { _ = nc.Close() })
	return nc
}

// TestConnectionLimitsPerListenerAndAddress: past MaxClientConnsPerAddr
// from one address, or MaxClientConns in all, an accepted connection is
// closed before anything is read and counted; a closed one gives its slot
// back.
func TestConnectionLimitsPerListenerAndAddress(t *testing.T) {
	tr := echoServer(t, func(c *Config) {
		c.MaxClientConns = 4
		c.MaxClientConnsPerAddr = 3
	})
	addr := tr.ClientAddr()
	var kept []net.Conn
	for range 3 {
		nc := dialFrom(t, "127.0.0.1", addr)
		if _, err := ClientHandshake(nc, testCluster, nil); err != nil {
			t.Fatalf("connection within the limits: %v", err)
		}
		kept = append(kept, nc)
	}
	expectClosed(t, dialFrom(t, "127.0.0.1", addr)) // a fourth from one address
	other := dialFrom(t, "127.0.0.2", addr)
	if _, err := ClientHandshake(other, testCluster, nil); err != nil {
		t.Fatalf("first connection from another address: %v", err)
	}
	expectClosed(t, dialFrom(t, "127.0.0.3", addr)) // the listener is full
	if n := tr.Counters().ConnsRefused.Load(); n != 2 {
		t.Fatalf("ConnsRefused = %d, want 2", n)
	}
	_ = kept[0].Close()
	waitFor(t, "a closed connection to give its slot back", func() bool {
		nc := dialFrom(t, "127.0.0.1", addr)
		_ = nc.SetDeadline(time.Now().Add(2 * time.Second))
		_, err := ClientHandshake(nc, testCluster, nil)
		return err == nil
	})
}

// TestIdleClientsAreClosed: a client connection that sends nothing for
// ClientIdleTimeout is closed and counted, while one that sends keepalives
// stays open.
func TestIdleClientsAreClosed(t *testing.T) {
	tr := echoServer(t, func(c *Config) { c.ClientIdleTimeout = time.Second })
	idle := dialClient(t, tr, nil)
	busy := dialClient(t, tr, nil)
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				if _, err := busy.Write(testFrame(wire.KindKeepalive, 0, nil)); err != nil {
					return
				}
			}
		}
	}()
	expectClosed(t, idle)
	close(stop)
	<-done
	if n := tr.Counters().ClientsIdle.Load(); n != 1 {
		t.Fatalf("ClientsIdle = %d, want 1 (the connection sending keepalives was closed too)", n)
	}
	msg := testFrame(wire.KindStatus, 9, []byte("ping"))
	if _, err := busy.Write(msg); err != nil {
		t.Fatal(err)
	}
	expectEcho(t, busy, msg)
}

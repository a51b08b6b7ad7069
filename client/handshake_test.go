package client_test

import (
	"encoding/binary"
	"errors"
	"io"
	"net"
	"sync"
	"testing"

	"github.com/shoalmq/shoal/client"
	"github.com/shoalmq/shoal/wire"
)

// fakeServer accepts connections on loopback and answers each with
// answer, which reads the client's frames from c as it needs.
func fakeServer(t *testing.T, answer func(c net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				answer(c)
				_, _ = io.Copy(io.Discard, c) // hold it open until the client closes
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return ln.Addr().String()
}

// readClientFrame reads one frame the client sent.
func readClientFrame(r io.Reader) (wire.Header, []byte) {
	var h wire.Header
	hb := make([]byte, wire.HeaderSize)
	if _, err := io.ReadFull(r, hb); err != nil || wire.DecodeHeader(hb, &h) != nil || h.Length > 1024 {
		return h, nil
	}
	p := make([]byte, h.Length)
	_, _ = io.ReadFull(r, p)
	return h, p
}

func frame(kind wire.Kind, payload []byte) []byte {
	b, start := wire.BeginFrame(nil, kind, 0)
	b = append(b, payload...)
	b, _ = wire.EndFrame(b, start)
	return b
}

// TestHandshakeRefusesAServerThatIsNotANode: the client takes a server's
// Hello only from a node of its cluster (role peer, protocol version,
// cluster id) and, with a secret, only with a proof of the secret over its
// own nonce; a Hello declaring a large frame is refused before its bytes
// are read.
func TestHandshakeRefusesAServerThatIsNotANode(t *testing.T) {
	const cluster = 9
	secret := []byte("s3cret")
	nodeHello := func(mod func(*wire.Hello)) []byte {
		m := wire.Hello{Version: wire.ProtocolVersion, Role: wire.RolePeer, ClusterID: cluster, Generation: 1, NodeID: []byte("n1")}
		if mod != nil {
			mod(&m)
		}
		return wire.AppendHello(nil, &m)
	}
	for _, tc := range []struct {
		name   string
		secret []byte
		answer func(c net.Conn)
	}{
		{"a server answering as a client", nil, func(c net.Conn) {
			readClientFrame(c)
			_, _ = c.Write(frame(wire.KindHello, nodeHello(func(m *wire.Hello) { m.Role, m.NodeID = wire.RoleClient, nil })))
		}},
		{"another protocol version", nil, func(c net.Conn) {
			readClientFrame(c)
			p := nodeHello(nil)
			p[0] = wire.ProtocolVersion + 1
			_, _ = c.Write(frame(wire.KindHello, p))
		}},
		{"another cluster", nil, func(c net.Conn) {
			readClientFrame(c)
			_, _ = c.Write(frame(wire.KindHello, nodeHello(func(m *wire.Hello) { m.ClusterID = cluster + 1 })))
		}},
		{"a Hello declaring 16 MiB", nil, func(c net.Conn) {
			readClientFrame(c)
			hdr := make([]byte, wire.HeaderSize)
			hdr[0], hdr[1] = wire.ProtocolVersion, byte(wire.KindHello)
			binary.LittleEndian.PutUint32(hdr[4:], wire.MaxFrame)
			_, _ = c.Write(hdr)
		}},
		{"a wrong proof of the secret", secret, func(c net.Conn) {
			readClientFrame(c)
			_, _ = c.Write(frame(wire.KindHello, nodeHello(nil)))
			readClientFrame(c)
			_, _ = c.Write(frame(wire.KindHelloAuth, make([]byte, wire.AuthTagSize)))
		}},
		{"no proof of the secret", secret, func(c net.Conn) {
			readClientFrame(c)
			_, _ = c.Write(frame(wire.KindHello, nodeHello(nil)))
			readClientFrame(c)
			_, _ = c.Write(frame(wire.KindKeepalive, nil))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addr := fakeServer(t, tc.answer)
			c := newClient(t, client.Config{Servers: []string{addr}, ClusterID: cluster, Secret: tc.secret, MaxRetries: -1})
			_, err := c.Lookup(ctxT(t), "t", false)
			if !errors.Is(err, client.ErrHandshake) && !errors.Is(err, client.ErrProtocol) {
				t.Fatalf("Lookup = %v, want a refused handshake", err)
			}
		})
	}
}

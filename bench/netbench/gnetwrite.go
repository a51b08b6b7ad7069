package main

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/panjf2000/gnet/v2"
	"golang.org/x/sys/unix"

	"github.com/shoalmq/shoal/wire"
)

// gnetWriteServer answers each request with its own gnet Conn.Write from
// inside OnTraffic. It is not netio: it measures what writing straight
// from the event loop costs, since gnet's Write makes a write system call
// whenever its outbound buffer is empty (one per answer) rather than
// gathering the answers of a pass into one.
type gnetWriteServer struct {
	gnet.BuiltinEventEngine
	booted chan gnet.Engine
}

func (s *gnetWriteServer) OnBoot(eng gnet.Engine) gnet.Action {
	s.booted <- eng
	return gnet.None
}

type gnetWriteConn struct{ shook bool }

func (s *gnetWriteServer) OnOpen(c gnet.Conn) ([]byte, gnet.Action) {
	c.SetContext(&gnetWriteConn{})
	return nil, gnet.None
}

func (s *gnetWriteServer) OnTraffic(c gnet.Conn) gnet.Action {
	st := c.Context().(*gnetWriteConn)
	var out [wire.HeaderSize + payloadSize]byte
	for {
		hb, err := c.Peek(wire.HeaderSize)
		if err != nil {
			return gnet.None
		}
		var h wire.Header
		if err := wire.DecodeHeader(hb, &h); err != nil {
			return gnet.Close
		}
		total := wire.HeaderSize + int(h.Length)
		if c.InboundBuffered() < total {
			return gnet.None
		}
		_, _ = c.Discard(total)
		if !st.shook {
			st.shook = true
			if _, err := c.Write(serverHello()); err != nil {
				return gnet.Close
			}
			continue
		}
		if _, err := c.Write(response(out[:0], h.RequestID)); err != nil {
			return gnet.Close
		}
	}
}

// serverHello is the Hello a bench server answers a client's Hello with.
func serverHello() []byte {
	m := wire.Hello{Version: wire.ProtocolVersion, Role: wire.RolePeer, ClusterID: benchCluster, NodeID: []byte("bench")}
	hello, start := wire.BeginFrame(nil, wire.KindHello, 0)
	hello = wire.AppendHello(hello, &m)
	hello, _ = wire.EndFrame(hello, start)
	return hello
}

// runGnetWrite starts the server and returns its address and a stop.
func runGnetWrite() (string, func(), error) {
	s := &gnetWriteServer{booted: make(chan gnet.Engine, 1)}
	errc := make(chan error, 1)
	go func() {
		errc <- gnet.Run(s, "tcp://127.0.0.1:0", gnet.WithNumEventLoop(1), gnet.WithTCPNoDelay(gnet.TCPNoDelay), gnet.WithLogger(quietGnet{}))
	}()
	select {
	case eng := <-s.booted:
		fd, err := eng.Dup()
		if err != nil {
			return "", nil, err
		}
		addr, err := localAddr(fd)
		if err != nil {
			return "", nil, err
		}
		return addr, func() { _ = eng.Stop(stopCtx()) }, nil
	case err := <-errc:
		return "", nil, err
	}
}

func stopCtx() context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	_ = cancel // the context ends by its timeout
	return ctx
}

// localAddr reads the address a listening socket is bound to and closes fd.
func localAddr(fd int) (string, error) {
	defer unix.Close(fd)
	sa, err := unix.Getsockname(fd)
	if err != nil {
		return "", err
	}
	a, ok := sa.(*unix.SockaddrInet4)
	if !ok {
		return "", fmt.Errorf("unexpected socket address %T", sa)
	}
	return net.JoinHostPort(net.IP(a.Addr[:]).String(), strconv.Itoa(a.Port)), nil
}

// quietGnet drops gnet's own log lines (they would go to stdout, where the
// parent reads the address).
type quietGnet struct{}

func (quietGnet) Debugf(string, ...any) {}
func (quietGnet) Infof(string, ...any)  {}
func (quietGnet) Warnf(string, ...any)  {}
func (quietGnet) Errorf(string, ...any) {}
func (quietGnet) Fatalf(string, ...any) {}

package main

import (
	"bufio"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"

	"github.com/shoalmq/shoal/netio"
	"github.com/shoalmq/shoal/wire"
)

const (
	benchCluster = 1
	payloadSize  = 64
)

// response is the answer every server sends: an Assignment frame with a
// 64-byte payload echoing the request id.
func response(dst []byte, reqID uint64) []byte {
	b, start := wire.BeginFrame(dst, wire.KindAssignment, reqID)
	var payload [payloadSize]byte
	b = append(b, payload[:]...)
	b, _ = wire.EndFrame(b, start)
	return b
}

// runServer serves until stdin closes.
func runServer(impl, profile string) error {
	if profile != "" {
		stop, err := startProfile(profile)
		if err != nil {
			return err
		}
		defer stop()
	}
	var addr string
	var stop func()
	name, loops := impl, 0
	if base, n, ok := strings.Cut(impl, ":loops="); ok {
		// A variant with a set number of event loops, e.g. netio:loops=1.
		v, err := strconv.Atoi(n)
		if err != nil {
			return fmt.Errorf("bad server %q", impl)
		}
		name, loops = base, v
	}
	// netio-goroutines and netio-async-goroutines: the same servers on
	// two goroutines per connection (netio.Config.Goroutines), as a node
	// runs.
	name, goroutines := strings.CutSuffix(name, "-goroutines")
	switch name {
	case "netio", "netio-async":
		tr, err := netioServer(name == "netio-async", loops, goroutines, nil)
		if err != nil {
			return err
		}
		addr, stop = tr.ClientAddr(), func() { _ = tr.Close() }
	case "netio-tls", "tls-proxy":
		srvTLS, _, err := tlsConfigs(tlsDir)
		if err != nil {
			return err
		}
		if name == "netio-tls" {
			tr, err := netioServer(false, loops, false, srvTLS)
			if err != nil {
				return err
			}
			addr, stop = tr.ClientAddr(), func() { _ = tr.Close() }
			break
		}
		tr, err := netioServer(false, loops, false, nil)
		if err != nil {
			return err
		}
		a, st, err := tlsProxy(tr.ClientAddr(), srvTLS)
		if err != nil {
			_ = tr.Close()
			return err
		}
		addr, stop = a, func() { st(); _ = tr.Close() }
	case "gnet-write":
		a, st, err := runGnetWrite()
		if err != nil {
			return err
		}
		addr, stop = a, st
	case "net":
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return err
		}
		go netServe(ln)
		addr, stop = ln.Addr().String(), func() { _ = ln.Close() }
	default:
		return fmt.Errorf("unknown server %q", impl)
	}
	fmt.Println(addr)
	_, _ = io.Copy(io.Discard, os.Stdin)
	stop()
	return nil
}

type reply struct {
	c     *netio.Conn
	reqID uint64
}

// netioServer answers inline on the event loop (or reader goroutine), or
// (async) from worker goroutines fed by a bounded queue as the node does;
// with tlsCfg its client port is TLS.
func netioServer(async bool, loops int, goroutines bool, tlsCfg *tls.Config) (*netio.Transport, error) {
	var h netio.HandlerFunc = func(c *netio.Conn, h wire.Header, _ []byte) bool {
		var buf [wire.HeaderSize + payloadSize]byte
		return c.Write(response(buf[:0], h.RequestID)) == nil
	}
	if async {
		queue := make(chan reply, 8192)
		for range runtime.GOMAXPROCS(0) {
			go func() {
				var buf [wire.HeaderSize + payloadSize]byte
				for r := range queue {
					_ = r.c.Write(response(buf[:0], r.reqID))
				}
			}()
		}
		h = func(c *netio.Conn, h wire.Header, _ []byte) bool {
			select {
			case queue <- reply{c, h.RequestID}:
				return true
			default:
				return false
			}
		}
	}
	return netio.New(netio.Config{
		ClusterID:   benchCluster,
		NodeID:      "bench",
		ClientAddr:  "127.0.0.1:0",
		Handler:     h,
		Logger:      quiet(),
		ClientLoops: loops,
		ClientTLS:   tlsCfg,
		Goroutines:  goroutines,
	})
}

// netServe is the baseline: a goroutine per connection, buffered reads,
// and one flush whenever no further request is already buffered.
func netServe(ln net.Listener) {
	for {
		nc, err := ln.Accept()
		if err != nil {
			return
		}
		go func() {
			defer nc.Close()
			_ = netConn(nc)
		}()
	}
}

func netConn(nc net.Conn) error {
	r := bufio.NewReaderSize(nc, 64<<10)
	w := bufio.NewWriterSize(nc, 64<<10)
	// Handshake: read the client's Hello, answer with ours.
	if _, _, err := readFrame(r, nil); err != nil {
		return err
	}
	if _, err := nc.Write(serverHello()); err != nil {
		return err
	}
	var scratch []byte
	var out [wire.HeaderSize + payloadSize]byte
	for {
		h, s, err := readFrame(r, scratch)
		if err != nil {
			return err
		}
		scratch = s
		if _, err := w.Write(response(out[:0], h.RequestID)); err != nil {
			return err
		}
		if r.Buffered() < wire.HeaderSize {
			if err := w.Flush(); err != nil {
				return err
			}
		}
	}
}

// readFrame reads one frame, reusing scratch for the payload.
func readFrame(r *bufio.Reader, scratch []byte) (wire.Header, []byte, error) {
	var h wire.Header
	var hb [wire.HeaderSize]byte
	if _, err := io.ReadFull(r, hb[:]); err != nil {
		return h, scratch, err
	}
	if err := wire.DecodeHeader(hb[:], &h); err != nil {
		return h, scratch, err
	}
	if cap(scratch) < int(h.Length) {
		scratch = make([]byte, h.Length)
	}
	scratch = scratch[:h.Length]
	_, err := io.ReadFull(r, scratch)
	return h, scratch, err
}

// startProfile writes a CPU profile of this process to path until the
// returned stop is called.
func startProfile(path string) (stop func(), err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		_ = f.Close()
		return nil, err
	}
	return func() {
		pprof.StopCPUProfile()
		_ = f.Close()
	}, nil
}

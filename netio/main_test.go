package netio

import (
	"bufio"
	"encoding/binary"
	"io"
	"log/slog"
	"net"
	"os"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/shoalmq/shoal/wire"
)

// gnet's package-level worker pool (ants) is created when gnet is imported
// and keeps its purge and clock goroutines for the life of the process; no
// transport starts or owns them.
var leakOptions = []goleak.Option{
	goleak.IgnoreTopFunction("github.com/panjf2000/ants/v2.(*poolCommon).purgeStaleWorkers"),
	goleak.IgnoreTopFunction("github.com/panjf2000/ants/v2.(*poolCommon).ticktock"),
}

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, leakOptions...) }

const testCluster = 7

// recorder is a Handler that keeps copies of the frames it is given on a
// bounded channel, or echoes them back to clients.
type recorder struct {
	frames chan recorded
	echo   bool
	refuse bool
}

type recorded struct {
	node  string
	h     wire.Header
	frame []byte
}

func newRecorder(n int) *recorder { return &recorder{frames: make(chan recorded, n)} }

func (r *recorder) Deliver(c *Conn, h wire.Header, frame []byte) bool {
	if r.refuse {
		return false
	}
	if r.echo && c.Role() == wire.RoleClient {
		return c.Write(frame) == nil
	}
	select {
	case r.frames <- recorded{node: c.Node(), h: h, frame: append([]byte(nil), frame...)}:
		return true
	default:
		return false
	}
}

func quietLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

// testConfig is a transport on gnet event loops, or with NETIO_GOROUTINES=1
// in the environment on goroutines (Config.Goroutines): make test runs the
// package both ways.
func testConfig(node string, h Handler) Config {
	return Config{
		ClusterID:         testCluster,
		NodeID:            node,
		Generation:        1,
		ClientAddr:        "127.0.0.1:0",
		PeerAddr:          "127.0.0.1:0",
		Handler:           h,
		ClientLoops:       2,
		Goroutines:        os.Getenv("NETIO_GOROUTINES") == "1",
		HandshakeTimeout:  2 * time.Second,
		KeepaliveInterval: 100 * time.Millisecond,
		BackoffMin:        10 * time.Millisecond,
		BackoffMax:        100 * time.Millisecond,
		Logger:            quietLogger(),
	}
}

func startTransport(t *testing.T, cfg Config) *Transport {
	t.Helper()
	tr, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { _ = tr.Close() })
	return tr
}

// testFrame builds a frame of kind with payload.
func testFrame(kind wire.Kind, reqID uint64, payload []byte) []byte {
	b, start := wire.BeginFrame(nil, kind, reqID)
	b = append(b, payload...)
	b, err := wire.EndFrame(b, start)
	if err != nil {
		panic(err)
	}
	return b
}

// dialClient connects to tr's client listener and completes the handshake.
func dialClient(t *testing.T, tr *Transport, secret []byte) net.Conn {
	t.Helper()
	nc, err := net.Dial("tcp", tr.ClientAddr())
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	t.Cleanup(func() { _ = nc.Close() })
	if _, err := ClientHandshake(nc, testCluster, secret); err != nil {
		t.Fatalf("handshake: %v", err)
	}
	return nc
}

// readTestFrame reads one whole frame.
func readTestFrame(r io.Reader) (wire.Header, []byte, error) {
	var h wire.Header
	hb := make([]byte, wire.HeaderSize)
	if _, err := io.ReadFull(r, hb); err != nil {
		return h, nil, err
	}
	if err := wire.DecodeHeader(hb, &h); err != nil {
		return h, nil, err
	}
	p := make([]byte, h.Length)
	_, err := io.ReadFull(r, p)
	return h, p, err
}

// expectClosed waits for the server to close nc.
func expectClosed(t *testing.T, nc net.Conn) {
	t.Helper()
	_ = nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err := io.Copy(io.Discard, bufio.NewReader(nc))
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatalf("connection still open")
	}
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func rawHeader(version uint8, kind wire.Kind, length uint32) []byte {
	b := make([]byte, wire.HeaderSize)
	b[0], b[1] = version, byte(kind)
	binary.LittleEndian.PutUint32(b[4:], length)
	return b
}

// upPeerConns counts the established peer connections of tr.
func upPeerConns(tr *Transport) int {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	n := 0
	for _, c := range tr.conns {
		if c.up.Load() && c.role == wire.RolePeer {
			n++
		}
	}
	return n
}

func ioReadFull(r io.Reader, b []byte) (int, error) { return io.ReadFull(r, b) }

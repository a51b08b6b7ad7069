package world

import (
	"bytes"
	"errors"
	"log/slog"
	"testing"

	"github.com/shoalmq/shoal/netio"
	"github.com/shoalmq/shoal/node/security"
	"github.com/shoalmq/shoal/swim"
	"github.com/shoalmq/shoal/wire"
)

// wrapped counts the SWIM sockets and push-pull transports wrapped.
type wrapped struct{ conns, pushPulls int }

func startConfig(w *wrapped, sec *security.Security) StartConfig {
	return StartConfig{
		ClusterID: 7, NodeID: "n1", Generation: 3, Rack: "r1",
		ClientAddr: "127.0.0.1:0", PeerAddr: "127.0.0.1:0", SwimAddr: "127.0.0.1:0",
		Swim:     swim.LocalConfig(),
		Security: sec, Clients: &security.Clients{},
		Handler:      netio.HandlerFunc(func(*netio.Conn, wire.Header, []byte) bool { return true }),
		WrapConn:     func(pc swim.PacketConn) swim.PacketConn { w.conns++; return pc },
		WrapPushPull: func(pp swim.PushPullTransport) swim.PushPullTransport { w.pushPulls++; return pp },
		Logger:       slog.New(slog.DiscardHandler),
	}
}

// A started node's world binds the transport, then SWIM, which says what
// the node is, where its transport listens and its meta, through the
// test's wraps; both close together.
func TestAStartedWorldListensAndClosesTogether(t *testing.T) {
	var w wrapped
	s, err := Listen(startConfig(&w, &security.Security{}))
	if err != nil {
		t.Fatal(err)
	}
	if s.Net.ClientAddr() == "" || s.Net.PeerAddr() == "" || s.Swim != nil {
		t.Fatalf("transport at %q %q, SWIM %v before JoinSwim", s.Net.ClientAddr(), s.Net.PeerAddr(), s.Swim)
	}
	if err := s.JoinSwim([]byte("meta"), func(swim.Event) {}); err != nil {
		_ = s.Close()
		t.Fatal(err)
	}
	self := s.Swim.Self()
	if self.ID != "n1" || self.Generation != 3 || self.Rack != "r1" || self.ClientAddr != s.Net.ClientAddr() ||
		self.PeerAddr != s.Net.PeerAddr() || self.SwimAddr == "" || !bytes.Equal(self.Meta, []byte("meta")) {
		t.Fatalf("SWIM says %+v", self)
	}
	if w.conns != 1 || w.pushPulls != 1 {
		t.Fatalf("wrapped %d sockets, %d push-pull transports", w.conns, w.pushPulls)
	}
	if s.gossipInterval() != swim.LocalConfig().GossipInterval {
		t.Fatalf("gossip interval %v", s.gossipInterval())
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Net.Send("n2", nil); err == nil {
		t.Fatal("the transport sends after Close")
	}
}

// The SWIM keys are replaced only where SWIM is sealed and runs; a node
// without SWIM of its own has none.
func TestSwimKeysAreReplacedWhereSwimRuns(t *testing.T) {
	var none *Started
	if err := none.SetSwimKeys([][]byte{make([]byte, 32)}); !errors.Is(err, security.ErrCredentials) {
		t.Fatalf("without SWIM: %v", err)
	}
	key := bytes.Repeat([]byte{1}, 32)
	var w wrapped
	s, err := Listen(startConfig(&w, &security.Security{SwimKeys: [][]byte{key}}))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Close() }()
	if err := s.SetSwimKeys([][]byte{key}); !errors.Is(err, security.ErrCredentials) {
		t.Fatalf("before JoinSwim: %v", err)
	}
	if err := s.JoinSwim(nil, func(swim.Event) {}); err != nil {
		t.Fatal(err)
	}
	if err := s.SetSwimKeys([][]byte{bytes.Repeat([]byte{2}, 32), key}); err != nil || s.Swim.KeyCount() != 2 {
		t.Fatalf("replaced: %v, %d keys", err, s.Swim.KeyCount())
	}
	if err := s.SetSwimKeys(nil); !errors.Is(err, security.ErrCredentials) {
		t.Fatalf("an empty keyring: %v", err)
	}
}

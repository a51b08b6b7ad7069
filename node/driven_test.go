package node

import (
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/shoalmq/shoal/node/world"
	"github.com/shoalmq/shoal/swim"
	"github.com/shoalmq/shoal/wire"
)

// A driven node's world for the tests below: no peers, a membership of
// itself, a clock that moves only when the test moves it.
type drivenWorld struct {
	now    time.Time
	timers []drivenTimer
}

type drivenTimer struct {
	at      time.Time
	f       func()
	stopped *bool
}

func (w *drivenWorld) clock() time.Time { return w.now }

func (w *drivenWorld) after(d time.Duration, f func()) func() bool {
	stopped := new(bool)
	w.timers = append(w.timers, drivenTimer{at: w.now.Add(d), f: f, stopped: stopped})
	return func() bool {
		was := *stopped
		*stopped = true
		return !was
	}
}

// spawn is the node's spawned work: it runs at the next advance.
func (w *drivenWorld) spawn(f func()) { w.after(0, f) }

// advance moves the clock by d and runs the timers due by then, and the
// work they spawn.
func (w *drivenWorld) advance(d time.Duration) {
	w.now = w.now.Add(d)
	for ran := true; ran; {
		ran = false
		due := w.timers
		w.timers = nil
		for _, t := range due {
			switch {
			case *t.stopped:
			case t.at.After(w.now):
				w.timers = append(w.timers, t)
			default:
				*t.stopped, ran = true, true
				t.f()
			}
		}
	}
}

type noPeers struct{}

func (noPeers) Send(string, []byte) error  { return nil }
func (noPeers) SetPeerAddr(string, string) {}
func (noPeers) RemovePeer(string)          {}

type aloneMembership struct{ self swim.Member }

func (m aloneMembership) Members() []swim.Member                   { return []swim.Member{m.self} }
func (m aloneMembership) Self() swim.Member                        { return m.self }
func (aloneMembership) AnnounceShardLeader(uint64, string, uint64) {}
func (aloneMembership) SetMetadataVersion(uint64, uint64)          {}
func (aloneMembership) SetMeta([]byte) error                       { return nil }
func (aloneMembership) Join([]string)                              {}

// answers is a client connection as a simulator's: no token grant, and
// the answers kept.
type answers struct{ frames *[][]byte }

func (a answers) Write(f []byte) error {
	*a.frames = append(*a.frames, append([]byte(nil), f...))
	return nil
}
func (answers) Role() wire.Role { return wire.RoleClient }
func (answers) Node() string    { return "" }

func newDrivenNode(t *testing.T, edit func(*Config)) (*Node, *drivenWorld) {
	t.Helper()
	w := &drivenWorld{now: time.Unix(1_000_000, 0)}
	cfg := Config{ID: "d1", DataDir: "/d1", ClientAddr: "d1:1", PeerAddr: "d1:2", SwimAddr: "d1:3",
		BootstrapExpect: 3, Shards: 4, SwimPreset: "fast"}
	if edit != nil {
		edit(&cfg)
	}
	self := swim.Member{ID: "d1", Generation: 1, State: swim.StateAlive, ClientAddr: "d1:1", PeerAddr: "d1:2", SwimAddr: "d1:3"}
	n, err := NewDriven(cfg, world.Runtime{Now: w.clock, After: w.after, Go: w.spawn, Peers: noPeers{}, Swim: aloneMembership{self},
		FS: vfs.NewMem(), Generation: 1, Seed: 1, ClientAddr: "d1:1", PeerAddr: "d1:2"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = n.Close() })
	return n, w
}

func request(kind wire.Kind, id uint64, payload []byte) []byte {
	f, start := wire.BeginFrame(nil, kind, id)
	f = append(f, payload...)
	f, _ = wire.EndFrame(f, start)
	return f
}

func answerOf(t *testing.T, f []byte) (wire.Header, []byte) {
	t.Helper()
	var h wire.Header
	if err := wire.DecodeHeader(f, &h); err != nil {
		t.Fatal(err)
	}
	return h, f[wire.HeaderSize:]
}

// TestDrivenNodeServesClients: a driven node without client tokens serves
// a connection that carries no token grant (a simulator's), and a
// request answered through raft holds its bytes until its answer is
// written, not only until it was handed over.
func TestDrivenNodeServesClients(t *testing.T) {
	n, w := newDrivenNode(t, nil)
	var got [][]byte
	c := answers{&got}

	n.DeliverFrame(c, request(wire.KindStatus, 1, nil))
	w.advance(0) // the request is served as work the node spawned
	if len(got) != 1 {
		t.Fatalf("status: %d answers", len(got))
	}
	if h, _ := answerOf(t, got[0]); h.Kind != wire.KindStatusInfo || h.RequestID != 1 {
		t.Fatalf("status answered %v (request %d)", h.Kind, h.RequestID)
	}
	if b := n.Stats().Security.RequestBytes; b != 0 {
		t.Fatalf("after an answer at once: %d request bytes held", b)
	}

	// Shards is answered by the raft host, which a driven node's caller
	// steps: until Drive, the request is in flight.
	n.DeliverFrame(c, request(wire.KindShards, 2, nil))
	w.advance(0)
	if len(got) != 1 {
		t.Fatalf("shards answered before the host was stepped")
	}
	if b := n.Stats().Security.RequestBytes; b != wire.HeaderSize {
		t.Fatalf("shards in flight: %d request bytes held, want %d", b, wire.HeaderSize)
	}
	n.Drive()
	if len(got) != 2 {
		t.Fatalf("shards: %d answers after Drive", len(got))
	}
	if h, _ := answerOf(t, got[1]); h.Kind != wire.KindShardList || h.RequestID != 2 {
		t.Fatalf("shards answered %v (request %d)", h.Kind, h.RequestID)
	}
	if b := n.Stats().Security.RequestBytes; b != 0 {
		t.Fatalf("after the shards answer: %d request bytes held", b)
	}
	// The request's timeout fires later and answers nothing more.
	w.advance(time.Minute)
	n.Drive()
	if len(got) != 2 || n.Stats().Security.RequestBytes != 0 {
		t.Fatalf("after the timeout: %d answers, %d bytes held", len(got), n.Stats().Security.RequestBytes)
	}
	if st := n.Stats().Security; st.Unauthorized != 0 || st.RequestBytesRefused != 0 {
		t.Fatalf("security counters %+v", st)
	}
}

// TestDrivenNodeWithTokensRefusesTokenless: a driven node given client
// tokens refuses a connection that proved none, rather than serving it as
// a node without tokens would.
func TestDrivenNodeWithTokensRefusesTokenless(t *testing.T) {
	n, _ := newDrivenNode(t, func(c *Config) { c.Security.ClientTokens = testTokens() })
	var got [][]byte
	n.DeliverFrame(answers{&got}, request(wire.KindStatus, 7, nil))
	if len(got) != 1 {
		t.Fatalf("%d answers", len(got))
	}
	h, p := answerOf(t, got[0])
	if h.RequestID != 7 || errCode(h.Kind, p) != wire.CodeUnauthorized {
		t.Fatalf("answered %v code %d (request %d); want Unauthorized", h.Kind, errCode(h.Kind, p), h.RequestID)
	}
	if st := n.Stats().Security; st.Unauthorized != 1 || st.RequestBytes != 0 {
		t.Fatalf("security counters %+v", st)
	}
}

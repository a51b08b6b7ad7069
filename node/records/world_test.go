package records

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/shoalmq/shoal/node/ownership"
	"github.com/shoalmq/shoal/shardstore"
	"github.com/shoalmq/shoal/wire"
)

// A world runs Keepers as a driven node runs its own: on one goroutine,
// their spawned work and the rests of their produces in the order they
// were asked for, their timers when the test moves the clock, and the
// frames between them as work too.
type world struct {
	t     *testing.T
	now   time.Time
	work  []func()
	timer []*timer
	hosts map[string]*host
}

type timer struct {
	at      time.Time
	f       func()
	stopped bool
}

func newWorld(t *testing.T) *world {
	return &world{t: t, now: time.Unix(1_000, 0), hosts: make(map[string]*host)}
}

// run runs the work queued, and the work it queues, until none is left.
func (w *world) run() {
	w.t.Helper()
	for i := 0; len(w.work) > 0; i++ {
		if i == 100_000 {
			w.t.Fatal("work never ends")
		}
		f := w.work[0]
		w.work = w.work[1:]
		f()
	}
}

// advance moves the clock by d, firing the timers due on the way, each
// followed by the work it queued.
func (w *world) advance(d time.Duration) {
	w.t.Helper()
	end := w.now.Add(d)
	for {
		w.run()
		var next *timer
		for _, tm := range w.timer {
			if !tm.stopped && !tm.at.After(end) && (next == nil || tm.at.Before(next.at)) {
				next = tm
			}
		}
		if next == nil {
			break
		}
		next.stopped = true
		w.now = next.at
		next.f()
	}
	w.now = end
	w.run()
}

// host is one node: its Keeper, store and ownership as its Env says them.
type host struct {
	w     *world
	id    string
	k     *Keeper
	store *shardstore.Store

	held     map[string]uint64            // topic → epoch held
	lease    map[string]ownership.Refusal // topic → refusal while held (none: servable)
	released bool                         // gave up every topic (leaving)
	alive    map[string]bool              // peers SWIM here counts alive
	dead     map[string]bool              // peers SWIM declared dead
	sendErr  error
	stopped  bool

	pulls    []wire.RecordsPull // RecordsPull frames sent
	handoffs []string           // OnHandoff calls
	logs     *logBuffer
}

// addHost adds node id to w, with cfg's limits where set.
func (w *world) addHost(id string, cfg Config) *host {
	w.t.Helper()
	st, err := shardstore.Open("/"+id, shardstore.Config{FS: vfs.NewMem()})
	if err != nil {
		w.t.Fatal(err)
	}
	w.t.Cleanup(func() { _ = st.Close() })
	h := &host{w: w, id: id, store: st, held: map[string]uint64{}, lease: map[string]ownership.Refusal{},
		alive: map[string]bool{}, dead: map[string]bool{}, logs: &logBuffer{}}
	cfg.Store, cfg.Env = st, h
	cfg.Logger = slog.New(slog.NewTextHandler(h.logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	if cfg.HandoffTimeout == 0 {
		cfg.HandoffTimeout = 30 * time.Second
	}
	if cfg.PullWait == 0 {
		cfg.PullWait = 500 * time.Millisecond
	}
	if cfg.MaxFetchBytes == 0 {
		cfg.MaxFetchBytes = 1 << 20
	}
	cfg.OnHandoff = func(topic string, epoch uint64, prev string, complete bool) {
		h.handoffs = append(h.handoffs, fmt.Sprintf("%s@%d from %s complete=%v", topic, epoch, prev, complete))
	}
	if h.k, err = New(cfg); err != nil {
		w.t.Fatal(err)
	}
	h.k.SetLease(h)
	h.k.Enable()
	w.hosts[id] = h
	return h
}

func (h *host) Serve(topic []byte, epoch uint64) (ownership.Topic, ownership.Refusal) {
	e, ok := h.held[string(topic)]
	switch {
	case !ok:
		return ownership.Topic{}, ownership.NotHeld
	case h.released:
		return ownership.Topic{Epoch: e}, ownership.Released
	case e != epoch:
		return ownership.Topic{Epoch: e}, ownership.OtherEpoch
	}
	return ownership.Topic{Epoch: e}, h.lease[string(topic)]
}

func (h *host) Holding(topic []byte) (ownership.Topic, bool) {
	e, ok := h.held[string(topic)]
	return ownership.Topic{Epoch: e}, ok
}

func (h *host) HoldingLocked(topic []byte, fn func(ownership.Topic, bool)) {
	e, ok := h.held[string(topic)]
	fn(ownership.Topic{Epoch: e}, ok)
}

func (h *host) PeerAlive(peer string) bool { return h.alive[peer] }
func (h *host) PeerDead(peer string) bool  { return h.dead[peer] }
func (h *host) Now() time.Time             { return h.w.now }
func (h *host) Stopped() bool              { return h.stopped }
func (h *host) Resume(f func())            { h.w.work = append(h.w.work, f) }

func (h *host) Spawn(f func()) bool {
	h.w.work = append(h.w.work, f)
	return true
}

func (h *host) After(d time.Duration, f func()) func() bool {
	tm := &timer{at: h.w.now.Add(d), f: f}
	h.w.timer = append(h.w.timer, tm)
	return func() bool {
		was := !tm.stopped
		tm.stopped = true
		return was
	}
}

// Send takes a RecordsPull to peer, if w has it, as work of its own; the
// chunk it answers with comes back the same way.
func (h *host) Send(peer string, frame []byte) error {
	if h.sendErr != nil {
		return h.sendErr
	}
	var hd wire.Header
	payload := h.w.decodeFrame(frame, &hd)
	var m wire.RecordsPull
	if hd.Kind != wire.KindRecordsPull || wire.DecodeRecordsPull(payload, &m) != nil {
		h.w.t.Fatalf("%s sent a %v frame that does not decode", h.id, hd.Kind)
	}
	h.pulls = append(h.pulls, m)
	if to := h.w.hosts[peer]; to != nil {
		h.w.work = append(h.w.work, func() { to.k.AnswerPull(conn{from: to, to: h}, hd.RequestID, &m) })
	}
	return nil
}

// conn is a peer connection from from to to: what is written on it goes
// to to as a RecordsChunk.
type conn struct{ from, to *host }

func (c conn) Write(frame []byte) error {
	w := c.to.w
	var hd wire.Header
	payload := w.decodeFrame(frame, &hd)
	ch := new(wire.RecordsChunk)
	if hd.Kind != wire.KindRecordsChunk || wire.DecodeRecordsChunk(payload, ch) != nil {
		w.t.Fatalf("%s answered a %v frame that does not decode", c.from.id, hd.Kind)
	}
	w.work = append(w.work, func() { c.to.k.TakeChunk(c.from.id, hd.RequestID, ch) })
	return nil
}

func (w *world) decodeFrame(frame []byte, hd *wire.Header) []byte {
	w.t.Helper()
	if err := wire.DecodeHeader(frame, hd); err != nil {
		w.t.Fatal(err)
	}
	payload, _, err := wire.FramePayload(hd, frame[wire.HeaderSize:], nil)
	if err != nil {
		w.t.Fatal(err)
	}
	return bytes.Clone(payload)
}

// produce asks h to append values to topic at epoch, and returns a
// function that says, once the world ran, how it was answered.
func (h *host) produce(topic string, epoch uint64, s wire.Session, values ...string) func() (wire.ProduceAck, error) {
	m := &wire.Produce{Topic: []byte(topic), Epoch: epoch, Session: s}
	for _, v := range values {
		m.Records = append(m.Records, []byte(v))
	}
	var (
		ack      wire.ProduceAck
		err      error
		answered int
	)
	h.k.Produce(m, func(a wire.ProduceAck, e error) { ack, err = a, e; answered++ })
	return func() (wire.ProduceAck, error) {
		h.w.t.Helper()
		if answered != 1 {
			h.w.t.Fatalf("produce of %v to %s answered %d times", values, topic, answered)
		}
		return ack, err
	}
}

// mustProduce produces values to topic at epoch, runs the world and
// returns the offset acknowledged.
func (h *host) mustProduce(topic string, epoch uint64, s wire.Session, values ...string) uint64 {
	h.w.t.Helper()
	answer := h.produce(topic, epoch, s, values...)
	h.w.run()
	ack, err := answer()
	if err != nil {
		h.w.t.Fatalf("produce %v to %s at %d: %v", values, topic, epoch, err)
	}
	return ack.Offset
}

// log returns topic's records in h's store, as offset:value@epoch.
func (h *host) log(topic string) string {
	h.w.t.Helper()
	var out []string
	if _, err := h.store.ReadRecords([]byte(topic), 0, 1<<20, func(off, epoch uint64, v []byte) bool {
		out = append(out, fmt.Sprintf("%d:%s@%d", off, v, epoch))
		return true
	}); err != nil && !errors.Is(err, shardstore.ErrOffsetOutOfRange) {
		h.w.t.Fatal(err)
	}
	return fmt.Sprint(out)
}

// logBuffer holds what a Keeper logged.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// lines returns the lines logged so far.
func (l *logBuffer) lines() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.DeleteFunc(strings.Split(l.b.String(), "\n"), func(s string) bool { return s == "" })
}

// off is the offset of the i-th record written at epoch.
func off(epoch uint64, i int) uint64 {
	b, err := OffsetBase(epoch)
	if err != nil {
		panic(err)
	}
	return b + uint64(i)
}

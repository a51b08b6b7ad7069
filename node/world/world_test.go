package world

import (
	"errors"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// noPeers and noMembers are parts that are there; Check calls none of
// their methods.
type noPeers struct{ PeerNet }

type noMembers struct{ Membership }

func TestCheckWantsEveryPart(t *testing.T) {
	whole := func() Runtime {
		return Runtime{Now: time.Now, After: func(time.Duration, func()) func() bool { return nil }, Go: func(func()) {},
			Peers: noPeers{}, Swim: noMembers{}, FS: vfs.NewMem(), Generation: 1}
	}
	rt := whole()
	if err := rt.Check(); err != nil {
		t.Fatalf("a whole runtime: %v", err)
	}
	for name, miss := range map[string]func(*Runtime){
		"now":        func(rt *Runtime) { rt.Now = nil },
		"after":      func(rt *Runtime) { rt.After = nil },
		"go":         func(rt *Runtime) { rt.Go = nil },
		"peers":      func(rt *Runtime) { rt.Peers = nil },
		"swim":       func(rt *Runtime) { rt.Swim = nil },
		"fs":         func(rt *Runtime) { rt.FS = nil },
		"generation": func(rt *Runtime) { rt.Generation = 0 },
	} {
		rt := whole()
		miss(&rt)
		if err := rt.Check(); !errors.Is(err, ErrRuntime) {
			t.Fatalf("without %s: %v", name, err)
		}
	}
}

// fakeHost counts its ticks and steps; it has steps rounds to run and
// may hold one back until due.
type fakeHost struct {
	ticks, steps, rounds int
	due                  time.Time
}

func (h *fakeHost) Tick() { h.ticks++ }
func (h *fakeHost) Step() bool {
	h.steps++
	if h.rounds == 0 {
		return false
	}
	h.rounds--
	return true
}
func (h *fakeHost) NextDue() time.Time { return h.due }

func TestDriveTicksWhenDueAndStepsUntilIdle(t *testing.T) {
	var d Drive
	h := &fakeHost{rounds: 2}
	t0 := time.Unix(100, 0)
	const tick = 50 * time.Millisecond
	if next := d.Run(h, t0, tick); !next.Equal(t0.Add(tick)) || h.ticks != 1 || h.steps != 3 {
		t.Fatalf("first run: next %v, %d ticks, %d steps", next, h.ticks, h.steps)
	}
	// Before the tick is due: steps only.
	if next := d.Run(h, t0.Add(tick/2), tick); !next.Equal(t0.Add(tick)) || h.ticks != 1 || h.steps != 4 {
		t.Fatalf("run before the tick: next %v, %d ticks, %d steps", next, h.ticks, h.steps)
	}
	// A round held back for acks makes the host due before its tick.
	h.due = t0.Add(tick / 4 * 3)
	if next := d.Run(h, t0.Add(tick/2), tick); !next.Equal(h.due) {
		t.Fatalf("with a round held back: next %v, want %v", next, h.due)
	}
	h.due = time.Time{}
	if next := d.Run(h, t0.Add(tick), tick); !next.Equal(t0.Add(2*tick)) || h.ticks != 2 {
		t.Fatalf("at the tick: next %v, %d ticks", next, h.ticks)
	}
}

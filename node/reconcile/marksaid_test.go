package reconcile

import (
	"errors"
	"log/slog"
	"testing"

	"github.com/shoalmq/shoal/swim"
	"github.com/shoalmq/shoal/wire"
)

// sayings records what the marks said: each SWIM record set, and each
// rebuild of the view asked for.
type sayings struct {
	metas   [][]byte
	changed int
	fail    error
}

func (s *sayings) SetMeta(meta []byte) error {
	s.metas = append(s.metas, meta)
	return s.fail
}

func (s *sayings) Changed() { s.changed++ }

func saidMarks(st *memStore) (*Marks, *sayings) {
	m := NewMarks("d0", st, false, 1, nil)
	s := &sayings{}
	m.Say(s, slog.New(slog.DiscardHandler))
	return m, s
}

// TestAChangedMarkIsSaidOnce: a drain mark or a removal that changes the
// marks is said in the SWIM record and rebuilds the view; one that changes
// nothing, or that the store refused, says nothing.
func TestAChangedMarkIsSaidOnce(t *testing.T) {
	st := &memStore{}
	m, s := saidMarks(st)
	if err := m.Drain(true); err != nil || len(s.metas) != 1 || s.changed != 1 {
		t.Fatalf("drain: %v, %d records said, %d rebuilds", err, len(s.metas), s.changed)
	}
	var nm wire.NodeMeta
	if err := wire.DecodeNodeMeta(s.metas[0], &nm); err != nil || !nm.Drained {
		t.Fatalf("said %+v (%v)", nm, err)
	}
	if err := m.Drain(true); err != nil || len(s.metas) != 1 || s.changed != 1 {
		t.Fatalf("the same drain again: %v, %d records said, %d rebuilds", err, len(s.metas), s.changed)
	}
	if err := m.Remove("d1", 10); err != nil || len(s.metas) != 2 || s.changed != 2 {
		t.Fatalf("removal: %v, %d records said, %d rebuilds", err, len(s.metas), s.changed)
	}
	if err := m.Remove("d1", 5); err != nil || len(s.metas) != 2 || s.changed != 2 {
		t.Fatalf("an older removal: %v, %d records said, %d rebuilds", err, len(s.metas), s.changed)
	}
	// A record SWIM refused still rebuilds the view: the marks changed.
	s.fail = errors.New("too long")
	if err := m.Drain(false); err != nil || len(s.metas) != 3 || s.changed != 3 {
		t.Fatalf("undrain: %v, %d records said, %d rebuilds", err, len(s.metas), s.changed)
	}
	st.fail = errors.New("disk full")
	if err := m.Drain(true); err == nil || len(s.metas) != 3 || s.changed != 3 {
		t.Fatalf("a drain the store refused: %v, %d records said, %d rebuilds", err, len(s.metas), s.changed)
	}
	if err := m.Remove("d2", 10); err == nil || len(s.metas) != 3 {
		t.Fatalf("a removal the store refused: %v, %d records said", err, len(s.metas))
	}
}

// TestApplyTakesTheMembersRemovals: the removals the members name are
// taken and said in this node's record, without a rebuild (the view is
// being built); the members' drain marks and this node's removal are
// judged.
func TestApplyTakesTheMembersRemovals(t *testing.T) {
	m, s := saidMarks(&memStore{})
	ms := []swim.Member{
		{ID: "d0", State: swim.StateAlive},
		{ID: "d1", State: swim.StateAlive, Meta: metaOf(&wire.NodeMeta{Origin: 1, Drained: true,
			Removed: []wire.RemovedNode{{Node: []byte("d2"), At: 10}}})},
		{ID: "d2", State: swim.StateAlive, Meta: metaOf(&wire.NodeMeta{Origin: 1})},
		{ID: "d3", State: swim.StateAlive, Meta: []byte{0xff}},
	}
	drained, removed := m.Apply(ms)
	if !drained["d1"] || !removed["d2"] || removed["d0"] || m.Removals() != 1 {
		t.Fatalf("drained %v removed %v, %d removals", drained, removed, m.Removals())
	}
	if len(s.metas) != 1 || s.changed != 0 {
		t.Fatalf("%d records said, %d rebuilds", len(s.metas), s.changed)
	}
	// Heard again: nothing new to say.
	m.Apply(ms)
	if len(s.metas) != 1 {
		t.Fatalf("%d records said after the same removals", len(s.metas))
	}
	// This node removed after its origin: out.
	ms[1].Meta = metaOf(&wire.NodeMeta{Origin: 1, Removed: []wire.RemovedNode{{Node: []byte("d0"), At: 10}}})
	if _, removed := m.Apply(ms); !removed["d0"] || !m.Out() {
		t.Fatalf("removed %v, out %v", removed, m.Out())
	}
}

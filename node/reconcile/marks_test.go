package reconcile

import (
	"errors"
	"testing"

	"github.com/shoalmq/shoal/swim"
	"github.com/shoalmq/shoal/wire"
)

func metaOf(m *wire.NodeMeta) []byte { return wire.AppendNodeMeta(nil, m) }

// memStore is a MarkStore in memory, whose writes fail while fail is set.
type memStore struct {
	drained  bool
	removals []Removal
	writes   int
	fail     error
}

func (s *memStore) SaveDrained(d bool) error {
	if s.fail != nil {
		return s.fail
	}
	s.drained = d
	s.writes++
	return nil
}

func (s *memStore) SaveRemovals(rs []Removal) error {
	if s.fail != nil {
		return s.fail
	}
	s.removals = append(s.removals, rs...)
	s.writes++
	return nil
}

// apply is what the node does with its members' records: read them, add
// the removals they name, judge.
func apply(t *testing.T, m *Marks, ms []swim.Member) (drained, removed map[string]bool) {
	t.Helper()
	h := ReadMarks(ms)
	if _, err := m.AddRemovals(h.Removals); err != nil {
		t.Fatal(err)
	}
	drained, removed, _ = m.Judge(ms, h)
	return drained, removed
}

// TestMarksFromMembers: drain marks and removals read from the members'
// metadata, a member out when its store is older than its latest removal,
// back when it comes with a newer one, and out again when removed again.
func TestMarksFromMembers(t *testing.T) {
	st := &memStore{}
	m := NewMarks("d0", st, false, 7, nil)
	members := func(x swim.Member) []swim.Member {
		return []swim.Member{
			{ID: "d0", State: swim.StateAlive},
			{ID: "d1", State: swim.StateAlive},
			{ID: "d2", State: swim.StateAlive, Meta: metaOf(&wire.NodeMeta{Drained: true, Origin: 5,
				Removed: []wire.RemovedNode{{Node: []byte("d3"), At: 100}}})},
			x,
			{ID: "d4", State: swim.StateAlive, Meta: []byte{0xff}}, // does not decode: no marks
		}
	}
	old := swim.Member{ID: "d3", State: swim.StateAlive, Meta: metaOf(&wire.NodeMeta{Origin: 50})}
	if h := ReadMarks(members(old)); len(h.Unreadable) != 1 || h.Unreadable[0].Member != "d4" {
		t.Fatalf("unreadable records %+v", h.Unreadable)
	}
	drained, removed := apply(t, m, members(old))
	if !drained["d2"] || drained["d4"] || !removed["d3"] || removed["d2"] || removed["d1"] || len(drained) != 1 {
		t.Fatalf("drained %v removed %v", drained, removed)
	}
	if m.Removals() != 1 || len(st.removals) != 1 || st.removals[0] != (Removal{Node: "d3", At: 100}) {
		t.Fatalf("%d removals kept, %v written", m.Removals(), st.removals)
	}
	var own wire.NodeMeta
	if err := wire.DecodeNodeMeta(m.Meta(), &own); err != nil || len(own.Removed) != 1 || own.Drained || own.Origin != 7 {
		t.Fatalf("own metadata %+v %v", own, err)
	}
	// Back on a store created after the removal: a new node.
	renewed := swim.Member{ID: "d3", State: swim.StateAlive, Meta: metaOf(&wire.NodeMeta{Origin: 150})}
	if _, removed := apply(t, m, members(renewed)); removed["d3"] {
		t.Fatal("d3 on a new store is still out")
	}
	// Removed again later: the latest removal counts.
	if added, err := m.AddRemovals(map[string]uint64{"d3": 200}); err != nil || !added {
		t.Fatalf("a later removal was not taken: %v %v", added, err)
	}
	if _, removed := apply(t, m, members(renewed)); !removed["d3"] {
		t.Fatal("d3 removed a second time is not out")
	}
	// An older removal heard later changes nothing, nor is written.
	writes := st.writes
	if added, err := m.AddRemovals(map[string]uint64{"d3": 100}); err != nil || added || st.writes != writes {
		t.Fatalf("an older removal was taken: %v %v", added, err)
	}
}

// TestAMemberCountsItsOwnMarksNotItsRecords: this node's own drain mark
// and origin are what its store says, whatever its SWIM record still
// carries; it finds itself removed when a removal later than its origin
// reaches it, and says so once.
func TestAMemberCountsItsOwnMarksNotItsRecords(t *testing.T) {
	m := NewMarks("d0", &memStore{}, true, 50, nil)
	ms := []swim.Member{{ID: "d0", State: swim.StateAlive, Meta: metaOf(&wire.NodeMeta{Origin: 500})}}
	if drained, removed := apply(t, m, ms); !drained["d0"] || removed["d0"] {
		t.Fatalf("drained %v removed %v", drained, removed)
	}
	ms = append(ms, swim.Member{ID: "d1", State: swim.StateAlive, Meta: metaOf(&wire.NodeMeta{Origin: 1,
		Removed: []wire.RemovedNode{{Node: []byte("d0"), At: 100}}})})
	h := ReadMarks(ms)
	if _, err := m.AddRemovals(h.Removals); err != nil {
		t.Fatal(err)
	}
	_, removed, out := m.Judge(ms, h)
	if !removed["d0"] || !out || !m.Out() {
		t.Fatalf("removed %v, out now %v, out %v", removed, out, m.Out())
	}
	if _, _, out := m.Judge(ms, h); out {
		t.Fatal("found itself removed twice")
	}
}

// TestAMarkThatCouldNotBeWrittenIsNotTaken: a drain mark or a removal the
// store refused stays unknown, and is taken at the next try.
func TestAMarkThatCouldNotBeWrittenIsNotTaken(t *testing.T) {
	st := &memStore{fail: errors.New("disk full")}
	m := NewMarks("d0", st, false, 1, nil)
	if changed, err := m.SetDrained(true); err == nil || changed || m.Drained() {
		t.Fatalf("drain mark taken without its write: %v %v", changed, err)
	}
	if added, err := m.AddRemovals(map[string]uint64{"d1": 10}); err == nil || added || m.Removals() != 0 {
		t.Fatalf("removal taken without its write: %v %v", added, err)
	}
	if m.Meta() != nil {
		t.Fatal("metadata says a mark that was not written")
	}
	st.fail = nil
	if changed, err := m.SetDrained(true); err != nil || !changed || !m.Drained() || !st.drained {
		t.Fatalf("drain mark: %v %v", changed, err)
	}
	if changed, err := m.SetDrained(true); err != nil || changed {
		t.Fatalf("the same drain mark again changed it: %v %v", changed, err)
	}
	if added, err := m.AddRemovals(map[string]uint64{"d1": 10, "": 5}); err != nil || !added || m.Removals() != 1 {
		t.Fatalf("removal: %v %v, %d kept", added, err, m.Removals())
	}
}

func TestOwnMetaKeepsTheLatestRemovalsThatFit(t *testing.T) {
	m := NewMarks("d0", &memStore{}, false, 1, nil)
	if m.Meta() != nil {
		t.Fatal("a node without marks sends metadata")
	}
	rs := map[string]uint64{}
	for i := range 40 {
		rs[string(rune('a'+i%26))+string(make([]byte, 40))+string(rune('0'+i/26))] = uint64(1000 + i)
	}
	if _, err := m.AddRemovals(rs); err != nil {
		t.Fatal(err)
	}
	meta := m.Meta()
	var nm wire.NodeMeta
	if err := wire.DecodeNodeMeta(meta, &nm); err != nil || len(meta) > wire.MaxMetaLen {
		t.Fatalf("%d bytes: %v", len(meta), err)
	}
	if len(nm.Removed) == 0 || len(nm.Removed) == 40 {
		t.Fatalf("%d of 40 removals in 512 bytes", len(nm.Removed))
	}
	for i, r := range nm.Removed {
		if r.At < uint64(1000+40-len(nm.Removed)) {
			t.Fatalf("an older removal (%d) kept before a later one", r.At)
		}
		if i > 0 && string(nm.Removed[i-1].Node) >= string(r.Node) {
			t.Fatalf("removals out of node order: %q before %q", nm.Removed[i-1].Node, r.Node)
		}
	}
}

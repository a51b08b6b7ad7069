package node

import (
	"testing"

	"github.com/shoalmq/shoal/swim"
	"github.com/shoalmq/shoal/wire"
)

func metaOf(m *wire.NodeMeta) []byte { return wire.AppendNodeMeta(nil, m) }

// TestMarksFromMembers: drain marks and removals read from the members'
// metadata, a member out when its store is older than its latest removal,
// back when it comes with a newer one, and out again when removed again.
func TestMarksFromMembers(t *testing.T) {
	n, _ := newDrivenNode(t, nil)
	members := func(x swim.Member) []swim.Member {
		return []swim.Member{
			{ID: "d1", State: swim.StateAlive},
			{ID: "d2", State: swim.StateAlive, Meta: metaOf(&wire.NodeMeta{Drained: true, Origin: 5,
				Removed: []wire.RemovedNode{{Node: []byte("d3"), At: 100}}})},
			x,
			{ID: "d4", State: swim.StateAlive, Meta: []byte{0xff}}, // does not decode: no marks
		}
	}
	old := swim.Member{ID: "d3", State: swim.StateAlive, Meta: metaOf(&wire.NodeMeta{Origin: 50})}
	drained, removed := n.applyMarks(members(old))
	if !drained["d2"] || drained["d4"] || !removed["d3"] || removed["d2"] || removed["d1"] || len(drained) != 1 {
		t.Fatalf("drained %v removed %v", drained, removed)
	}
	if n.removedCount() != 1 {
		t.Fatalf("%d removals kept", n.removedCount())
	}
	var own wire.NodeMeta
	if err := wire.DecodeNodeMeta(n.ownMeta(), &own); err != nil || len(own.Removed) != 1 || own.Drained || own.Origin != n.marks.origin {
		t.Fatalf("own metadata %+v %v", own, err)
	}
	// Back on a store created after the removal: a new node.
	renewed := swim.Member{ID: "d3", State: swim.StateAlive, Meta: metaOf(&wire.NodeMeta{Origin: 150})}
	if _, removed := n.applyMarks(members(renewed)); removed["d3"] {
		t.Fatal("d3 on a new store is still out")
	}
	// Removed again later: the latest removal counts.
	if err := n.recordRemoval("d3", 200); err != nil {
		t.Fatal(err)
	}
	if _, removed := n.applyMarks(members(renewed)); !removed["d3"] {
		t.Fatal("d3 removed a second time is not out")
	}
	// An older removal heard later changes nothing.
	if added, err := n.addRemovals(map[string]uint64{"d3": 100}); err != nil || added {
		t.Fatalf("an older removal was taken: %v %v", added, err)
	}
}

func TestOwnMetaKeepsTheLatestRemovalsThatFit(t *testing.T) {
	n, _ := newDrivenNode(t, nil)
	if n.ownMeta() != nil {
		t.Fatal("a node without marks sends metadata")
	}
	rs := map[string]uint64{}
	for i := range 40 {
		rs[string(rune('a'+i%26))+string(make([]byte, 40))+string(rune('0'+i/26))] = uint64(1000 + i)
	}
	if _, err := n.addRemovals(rs); err != nil {
		t.Fatal(err)
	}
	meta := n.ownMeta()
	var nm wire.NodeMeta
	if err := wire.DecodeNodeMeta(meta, &nm); err != nil || len(meta) > wire.MaxMetaLen {
		t.Fatalf("%d bytes: %v", len(meta), err)
	}
	if len(nm.Removed) == 0 || len(nm.Removed) == 40 {
		t.Fatalf("%d of 40 removals in 512 bytes", len(nm.Removed))
	}
	for _, r := range nm.Removed {
		if r.At < uint64(1000+40-len(nm.Removed)) {
			t.Fatalf("an older removal (%d) kept before a later one", r.At)
		}
	}
}

package meta

import (
	"bytes"
	"errors"
	"slices"
	"strings"
	"testing"
)

func sampleState(t testing.TB) *State {
	t.Helper()
	s := New()
	for _, c := range []Command{
		assign("zeta", "n2", 3), assign("alpha", "n1", 0), assign("old", "n3", 0), revoke("old"),
		compactCmd(), assign("mid", "n1", 9), assign("gone", "n2", 0), revoke("gone"), assign("alpha", "n3", 0),
	} {
		mustApply(t, s, c)
	}
	return s
}

func TestSnapshotRoundTrip(t *testing.T) {
	s := sampleState(t)
	b := snapshot(s)
	d, err := DecodeSnapshot(b)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.checkInvariants(); err != nil {
		t.Fatal(err)
	}
	sameSnapshot(t, s, d)
	if !slices.Equal(slices.Collect(d.All()), slices.Collect(s.All())) || d.Floor() != s.Floor() || d.Floor() != 2 {
		t.Fatalf("decoded state differs: floor %d", d.Floor())
	}
	if !slices.Equal(d.Owners(), s.Owners()) {
		t.Fatalf("owners %v, want %v", d.Owners(), s.Owners())
	}
	// The decoded state keeps working: the next epochs continue.
	mustApply(t, d, assign("gone", "n1", 0))
	if a, _ := d.Get([]byte("gone")); a.Epoch != 5 {
		t.Fatalf("re-assign after restore at epoch %d, want 5 (tombstone at 4)", a.Epoch)
	}
	mustApply(t, d, assign("fresh", "n1", 0))
	if a, _ := d.Get([]byte("fresh")); a.Epoch != 3 {
		t.Fatalf("new topic after restore at epoch %d, want floor+1 = 3", a.Epoch)
	}
}

func TestSnapshotIsIndependentOfInsertionOrder(t *testing.T) {
	a, b := New(), New()
	for _, topic := range []string{"c", "a", "b"} {
		mustApply(t, a, assign(topic, "n1", 0))
	}
	for _, topic := range []string{"b", "c", "a"} {
		mustApply(t, b, assign(topic, "n1", 0))
	}
	sameSnapshot(t, a, b)
}

func TestEmptySnapshot(t *testing.T) {
	b := snapshot(New())
	if !bytes.Equal(b, []byte{'S', 'H', 'M', 'S', 1, 0, 0}) {
		t.Fatalf("empty snapshot %v", b)
	}
	s, err := DecodeSnapshot(b)
	if err != nil || s.Count() != 0 || s.Tombstones() != 0 {
		t.Fatalf("decode empty: %v", err)
	}
}

func TestDecodeSnapshotRejects(t *testing.T) {
	rec := func(topic string, state byte, epoch uint64, prev string, rest ...byte) []byte {
		b := appendString(nil, topic)
		b = append(b, state)
		b = appendUvarint(b, epoch)
		b = appendString(b, prev)
		return append(b, rest...)
	}
	head := func(count byte) []byte { return []byte{'S', 'H', 'M', 'S', 1, 0, count} }
	cat := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
	tests := []struct {
		name string
		in   []byte
		want error
	}{
		{"empty", nil, ErrBadSnapshot},
		{"bad magic", []byte{'S', 'H', 'M', 'X', 1, 0, 0}, ErrBadSnapshot},
		{"future version", []byte{'S', 'H', 'M', 'S', 3, 0, 0}, ErrSnapshotVersion},
		{"sessions version without sessions", []byte{'S', 'H', 'M', 'S', 2, 0, 0, 0}, ErrBadSnapshot},
		{"truncated header", []byte{'S', 'H', 'M', 'S', 1, 0}, ErrBadSnapshot},
		{"count larger than the input", head(100), ErrBadSnapshot},
		{"trailing bytes", cat(head(0), []byte{0}), ErrBadSnapshot},
		{"unsorted topics", cat(head(2), rec("b", 2, 1, "n1"), rec("a", 2, 1, "n1")), ErrBadSnapshot},
		{"duplicate topics", cat(head(2), rec("a", 2, 1, "n1"), rec("a", 2, 3, "n1")), ErrBadSnapshot},
		{"empty topic", cat(head(1), rec("", 2, 1, "n1")), ErrEmptyTopic},
		{"unknown state", cat(head(1), rec("a", 3, 1, "n1")), ErrBadSnapshot},
		{"epoch zero", cat(head(1), rec("a", 2, 0, "n1")), ErrBadSnapshot},
		{"previous owner too long", cat(head(1), rec("a", 2, 1, strings.Repeat("n", 65))), ErrBadSnapshot},
		{"active without owner", cat(head(1), rec("a", 1, 1, "", 0, 1)), ErrBadNodeID},
		{"active with zero partitions", cat(head(1), rec("a", 1, 1, "", 2, 'n', '1', 0)), ErrBadPartitions},
		{"active with too many partitions", cat(head(1), rec("a", 1, 1, "", 2, 'n', '1', 0x81, 0x80, 0x04)), ErrBadPartitions},
		{"active with itself as previous owner", cat(head(1), rec("a", 1, 1, "n1", 2, 'n', '1', 1)), ErrBadSnapshot},
		{"non-canonical epoch", cat(head(1), []byte{1, 'a', 2, 0x81, 0x00, 0}), ErrBadSnapshot},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := DecodeSnapshot(tt.in); !errors.Is(err, tt.want) {
				t.Fatalf("err %v, want %v", err, tt.want)
			}
		})
	}
	// The hand-built records above are well formed when valid.
	if _, err := DecodeSnapshot(cat(head(2), rec("a", 1, 1, "n2", 2, 'n', '1', 1), rec("b", 2, 4, ""))); err != nil {
		t.Fatalf("valid hand-built snapshot: %v", err)
	}
}

func TestDecodeSnapshotRejectsEveryTruncation(t *testing.T) {
	b := snapshot(sampleState(t))
	for n := range len(b) {
		if _, err := DecodeSnapshot(b[:n]); err == nil {
			t.Fatalf("%d of %d bytes decoded", n, len(b))
		}
	}
}

func TestRestoreReplacesTheWholeState(t *testing.T) {
	src := sampleState(t)
	dst := New()
	for _, c := range []Command{assign("only-here", "n9", 0), assign("alpha", "n9", 5), revoke("only-here")} {
		mustApply(t, dst, c)
	}
	if err := dst.Restore(snapshot(src)); err != nil {
		t.Fatal(err)
	}
	sameSnapshot(t, dst, src)
	if _, ok := dst.Get([]byte("only-here")); ok || dst.Load("n9") != 0 {
		t.Fatal("restore kept records of the previous state")
	}
	if err := dst.checkInvariants(); err != nil {
		t.Fatal(err)
	}
	// A bad snapshot leaves the state as it was.
	before := snapshot(dst)
	if err := dst.Restore([]byte("garbage")); !errors.Is(err, ErrBadSnapshot) {
		t.Fatalf("restore garbage: %v", err)
	}
	if !bytes.Equal(before, snapshot(dst)) {
		t.Fatal("failed restore changed the state")
	}
}

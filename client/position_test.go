package client

import (
	"errors"
	"maps"
	"testing"

	"github.com/shoalmq/shoal/router"
	"github.com/shoalmq/shoal/wire"
)

func TestPositionRoundTripAndMerge(t *testing.T) {
	a := encodePosition([]wire.ShardPosition{{Shard: 3, Index: 40}, {Shard: 0, Index: 7, Skip: 2}, {Shard: 3, Index: 30}}, 4)
	got, err := decodePosition(a, 4)
	if err != nil {
		t.Fatal(err)
	}
	want := map[uint64]wire.ShardPosition{0: {Shard: 0, Index: 7, Skip: 2}, 3: {Shard: 3, Index: 30}}
	if !maps.Equal(got, want) {
		t.Fatalf("decoded %v, want %v (a shard twice keeps its earliest place)", got, want)
	}
	b := encodePosition([]wire.ShardPosition{{Shard: 1, Index: 9}, {Shard: 2}, {Shard: 3, Index: 12}}, 4)
	m, err := MergePositions(a, b)
	if err != nil {
		t.Fatal(err)
	}
	got, err = decodePosition(m, 4)
	want = map[uint64]wire.ShardPosition{0: {Shard: 0, Index: 7, Skip: 2}, 1: {Shard: 1, Index: 9}, 2: {Shard: 2}, 3: {Shard: 3, Index: 12}}
	if err != nil || !maps.Equal(got, want) {
		t.Fatalf("merged %v, %v; want %v", got, err, want)
	}
	if _, err := decodePosition(a, 8); !errors.Is(err, ErrBadPosition) {
		t.Fatalf("a position of another cluster: %v", err)
	}
	// Pages read across a split: the bound of the shard ids grew.
	grown, err := MergePositions(a, encodePosition([]wire.ShardPosition{{Shard: 6, Index: 2}}, 8))
	if err != nil {
		t.Fatal(err)
	}
	if got, err := decodePosition(grown, 8); err != nil || len(got) != 3 || got[6].Index != 2 {
		t.Fatalf("merged across a split: %v, %v", got, err)
	}
	for _, bad := range []string{"", "!", "AA", "AQ", "AUBA", a + "A", a[:len(a)-1]} {
		if _, err := decodePosition(bad, 0); !errors.Is(err, ErrBadPosition) {
			t.Errorf("%q decodes: %v", bad, err)
		}
	}
}

func TestCursorRoundTrip(t *testing.T) {
	sp := router.ShardSpace(8)
	low, high, _ := sp.Children(5)
	in := listCursor{base: 6, queue: []listItem{{shard: uint64(low), after: []byte("topic-blue")}, {shard: uint64(high), after: []byte("topic-blue")}}}
	c := encodeCursor(in)
	got, err := decodeCursor(c, sp)
	if err != nil || got.base != 6 || len(got.queue) != 2 || got.queue[1].shard != uint64(high) || string(got.queue[0].after) != "topic-blue" {
		t.Fatalf("cursor %q: %+v %v", c, got, err)
	}
	if got, err := decodeCursor("", sp); err != nil || got.base != 0 || got.queue != nil {
		t.Fatalf("empty cursor: %+v %v", got, err)
	}
	bad := []string{"!", "AA", "Ag",
		encodeCursor(listCursor{base: 9}),                                                          // past the bases
		encodeCursor(listCursor{base: 6, queue: []listItem{{shard: 4}}}),                           // a shard of another base
		encodeCursor(listCursor{base: 0, queue: []listItem{{shard: 0}}}),                           // a shard before the first base
		encodeCursor(listCursor{base: 1, queue: []listItem{{shard: 0, after: make([]byte, 256)}}}), // a topic too long
		encodeCursor(listCursor{base: 1, queue: []listItem{{shard: uint64(sp.Capacity())}}}),       // no such shard
		encodeCursor(in) + "A",
	}
	for _, b := range bad {
		if _, err := decodeCursor(b, sp); !errors.Is(err, ErrBadPosition) {
			t.Errorf("%q decodes: %v", b, err)
		}
	}
}

// Any string either is refused or decodes to a position that encodes back
// to itself.
func FuzzDecodePosition(f *testing.F) {
	f.Add(encodePosition([]wire.ShardPosition{{Shard: 0, Index: 7, Skip: 2}, {Shard: 3, Index: 30}}, 4))
	f.Add(encodeCursor(listCursor{base: 4, queue: []listItem{{shard: 3, after: []byte("t")}}}))
	f.Fuzz(func(t *testing.T, s string) {
		if c, err := decodeCursor(s, 8); err == nil && s != "" {
			if again := encodeCursor(c); again != s {
				t.Fatalf("cursor %q re-encodes as %q", s, again)
			}
		}
		m, err := decodePosition(s, 0)
		if err != nil {
			return
		}
		shards, _ := positionShards(s)
		var ps []wire.ShardPosition
		for _, p := range m {
			ps = append(ps, p)
		}
		again, err := decodePosition(encodePosition(ps, shards), shards)
		if err != nil || !maps.Equal(again, m) {
			t.Fatalf("%q: %v, then %v, %v", s, m, again, err)
		}
	})
}

// Changes of one raft index (a command that moved several topics) are
// given one by one, and the position after each names exactly the ones
// given, so that a resume neither repeats nor skips the others.
func TestPositionInsideOneCommand(t *testing.T) {
	c, err := New(Config{Servers: []string{"127.0.0.1:1"}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	w := &Watcher{c: c, pos: map[uint64]wire.ShardPosition{5: {Shard: 5, Index: 10}, 6: {Shard: 6, Index: 3}}, failed: map[string]bool{}}
	ev := wire.WatchEvents{
		Positions: []wire.ShardPosition{{Shard: 5, Index: 20}, {Shard: 6, Index: 9}},
		Events: []wire.WatchEvent{
			{Shard: 5, Index: 12, Seq: 0, Change: wire.ChangeMoved, Topic: []byte("a"), Owner: []byte("n2"), Epoch: 2, Partitions: 1},
			{Shard: 5, Index: 12, Seq: 1, Change: wire.ChangeMoved, Topic: []byte("b"), Owner: []byte("n2"), Epoch: 2, Partitions: 1},
			{Shard: 5, Index: 15, Seq: 0, Change: wire.ChangeRevoked, Topic: []byte("c"), Epoch: 4},
		},
	}
	if err := w.take("127.0.0.1:1", &ev); err != nil {
		t.Fatal(err)
	}
	if w.pos[6].Index != 9 {
		t.Fatalf("a shard without changes is at %+v, want its answered position", w.pos[6])
	}
	want := []wire.ShardPosition{{Shard: 5, Index: 11, Skip: 1}, {Shard: 5, Index: 12}, {Shard: 5, Index: 20}}
	for i, p := range want {
		ch, err := w.Next(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if ch.Topic != string(ev.Events[i].Topic) || w.pos[5] != p {
			t.Fatalf("change %d: %+v, position %+v, want %+v", i, ch, w.pos[5], p)
		}
	}
	if err := w.take("127.0.0.1:1", &wire.WatchEvents{Compacted: []wire.ShardPosition{{Shard: 5, Index: 30}}}); !errors.Is(err, ErrCompacted) || errors.Is(err, ErrWatchTooSlow) {
		t.Fatalf("compacted before the watch started: %v", err)
	}
	w.started = true
	if err := w.take("127.0.0.1:1", &wire.WatchEvents{Compacted: []wire.ShardPosition{{Shard: 5, Index: 30}}}); !errors.Is(err, ErrWatchTooSlow) || !errors.Is(err, ErrCompacted) {
		t.Fatalf("compacted while watching: %v", err)
	}
	if err := w.take("127.0.0.1:1", &wire.WatchEvents{Positions: []wire.ShardPosition{{Shard: 5, Index: 31}},
		Events: []wire.WatchEvent{{Shard: 7, Index: 31, Change: wire.ChangeAssigned, Topic: []byte("x")}}}); !errors.Is(err, ErrProtocol) {
		t.Fatalf("a change of a shard not asked for: %v", err)
	}
}

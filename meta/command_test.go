package meta

import (
	"bytes"
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestCommandRoundTrip(t *testing.T) {
	tests := []struct {
		name string
		cmd  Command
	}{
		{"assign with owner and partitions", assign("orders", "n1", 12)},
		{"assign without owner", assign("orders", "", 0)},
		{"assign with binary topic", Command{Op: OpAssign, Topic: []byte{0, 0xff, '\n'}, Owner: "n1"}},
		{"revoke", revoke("orders")},
		{"update partitions", update("orders", MaxPartitions)},
		{"reassign", reassign("n1", "a", "n2", "b", "n3", "c", "n2")},
		{"reassign with no moves", reassign("n1")},
		{"marker", marker(1 << 60)},
		{"compact", compactCmd()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := AppendCommand([]byte("prefix"), &tt.cmd)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.HasPrefix(b, []byte("prefix")) {
				t.Fatal("AppendCommand overwrote its destination")
			}
			var got Command
			if err := DecodeCommand(b[len("prefix"):], &got); err != nil {
				t.Fatal(err)
			}
			want := tt.cmd
			if len(want.Moves) == 0 {
				want.Moves = nil
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("decoded %+v, want %+v", got, want)
			}
			again, err := AppendCommand(nil, &got)
			if err != nil || !bytes.Equal(again, b[len("prefix"):]) {
				t.Fatalf("re-encoding differs: %x vs %x (%v)", again, b[len("prefix"):], err)
			}
		})
	}
}

// The log format outlives a binary: these bytes must keep decoding to the
// same commands, and new commands encode as version 2.
func TestCommandEncodingIsStable(t *testing.T) {
	withEpoch := reassign("n1", "a", "n2")
	withEpoch.Moves[0].Epoch = 7
	tests := []struct {
		cmd  Command
		want []byte
	}{
		{assign("t", "n1", 300), []byte{2, 1, 1, 't', 2, 'n', '1', 0xac, 0x02}},
		{revoke("t"), []byte{2, 2, 1, 't'}},
		{update("t", 2), []byte{2, 3, 1, 't', 2}},
		{withEpoch, []byte{2, 4, 2, 'n', '1', 1, 1, 'a', 2, 'n', '2', 7}},
		{marker(5), []byte{2, 5, 5}},
		{compactCmd(), []byte{2, 6}},
	}
	for _, tt := range tests {
		got, err := AppendCommand(nil, &tt.cmd)
		if err != nil || !bytes.Equal(got, tt.want) {
			t.Errorf("%s: encoded %v (%v), want %v", tt.cmd.Op, got, err, tt.want)
		}
	}
	// Version 1, written before moves carried epochs.
	v1 := []struct {
		in   []byte
		want Command
	}{
		{[]byte{1, 1, 1, 't', 2, 'n', '1', 0xac, 0x02}, assign("t", "n1", 300)},
		{[]byte{1, 2, 1, 't'}, revoke("t")},
		{[]byte{1, 4, 2, 'n', '1', 1, 1, 'a', 2, 'n', '2'}, reassign("n1", "a", "n2")},
		{[]byte{1, 6}, compactCmd()},
	}
	for _, tt := range v1 {
		var got Command
		if err := DecodeCommand(tt.in, &got); err != nil || !reflect.DeepEqual(got, tt.want) {
			t.Errorf("version 1 %v: decoded %+v (%v), want %+v", tt.in, got, err, tt.want)
		}
	}
}

func TestDecodeCommandRejects(t *testing.T) {
	tests := []struct {
		name string
		in   []byte
		want error
	}{
		{"empty input", nil, ErrBadCommand},
		{"version only", []byte{1}, ErrBadCommand},
		{"unknown version", []byte{3, 1, 1, 't', 0, 0}, ErrBadCommand},
		{"unknown op", []byte{1, 9}, ErrBadCommand},
		{"op zero", []byte{1, 0}, ErrBadCommand},
		{"truncated topic", []byte{1, 2, 5, 't'}, ErrBadCommand},
		{"trailing bytes", []byte{1, 2, 1, 't', 0}, ErrBadCommand},
		{"empty topic", []byte{1, 2, 0}, ErrEmptyTopic},
		{"topic over the limit", append([]byte{1, 2, 0x80, 0x02}, make([]byte, 256)...), ErrBadCommand},
		{"non-canonical varint", []byte{1, 3, 1, 't', 0x82, 0x00}, ErrBadCommand},
		{"varint overflow", []byte{1, 5, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02}, ErrBadCommand},
		{"partitions over the limit", []byte{1, 3, 1, 't', 0x81, 0x80, 0x04}, ErrBadCommand},
		{"update to zero partitions", []byte{1, 3, 1, 't', 0}, ErrBadPartitions},
		{"owner over the limit", append([]byte{1, 1, 1, 't', 65}, make([]byte, 66)...), ErrBadCommand},
		{"move count the input cannot hold", []byte{1, 4, 2, 'n', '1', 0xff, 0x7f}, ErrBadCommand},
		{"move count over the limit", []byte{1, 4, 2, 'n', '1', 0x81, 0x80, 0x01}, ErrBadCommand},
		{"moves out of order", []byte{1, 4, 2, 'n', '1', 2, 1, 'b', 2, 'n', '2', 1, 'a', 2, 'n', '2'}, ErrBadCommand},
		{"duplicate move", []byte{1, 4, 2, 'n', '1', 2, 1, 'a', 2, 'n', '2', 1, 'a', 2, 'n', '3'}, ErrBadCommand},
		{"move to the dead node", []byte{1, 4, 2, 'n', '1', 1, 1, 'a', 2, 'n', '1'}, ErrBadCommand},
		{"reassign of no node", []byte{1, 4, 0, 0}, ErrBadNodeID},
		{"compact in the session version", []byte{3, 6}, ErrBadCommand},
		{"marker in the session version", []byte{3, 5, 7}, ErrBadCommand},
		{"reassign in the session version", []byte{3, 4, 2, 'n', '1', 1, 1, 'a', 2, 'n', '2', 0}, ErrBadCommand},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var c Command
			if err := DecodeCommand(tt.in, &c); !errors.Is(err, tt.want) {
				t.Fatalf("err %v, want %v", err, tt.want)
			}
		})
	}
}

func TestDecodeCommandRejectsEveryTruncation(t *testing.T) {
	for _, cmd := range []Command{assign("topic", "node", 7), update("topic", 3), reassign("n1", "a", "n2", "b", "n3"), marker(1 << 40)} {
		b, err := AppendCommand(nil, &cmd)
		if err != nil {
			t.Fatal(err)
		}
		for n := range len(b) {
			var c Command
			if err := DecodeCommand(b[:n], &c); err == nil {
				t.Fatalf("%s: %d of %d bytes decoded", cmd.Op, n, len(b))
			}
		}
	}
}

func TestDecodeCommandReusesMoves(t *testing.T) {
	cmd := reassign("n1", "a", "n2", "b", "n3")
	b, _ := AppendCommand(nil, &cmd)
	c := Command{Moves: make([]Move, 0, 8)}
	backing := &c.Moves[:1][0]
	if err := DecodeCommand(b, &c); err != nil {
		t.Fatal(err)
	}
	if &c.Moves[0] != backing {
		t.Fatal("decode allocated a new move slice instead of reusing the caller's")
	}
	// A later command of another op leaves no moves behind.
	r := revoke("x")
	b, _ = AppendCommand(nil, &r)
	if err := DecodeCommand(b, &c); err != nil || c.Moves != nil || c.Node != "" {
		t.Fatalf("stale fields after decode: %+v, %v", c, err)
	}
}

func TestAppendCommandRefusesInvalid(t *testing.T) {
	for _, c := range []Command{
		assign("", "n1", 0), assign(strings.Repeat("x", 256), "n1", 0), update("t", 0), {Op: 99},
	} {
		if b, err := AppendCommand(nil, &c); err == nil || len(b) != 0 {
			t.Errorf("%s %q: encoded %v, %v", c.Op, c.Topic, b, err)
		}
	}
}

func TestOpAndStateNames(t *testing.T) {
	for _, tt := range []struct{ got, want string }{
		{OpAssign.String(), "AssignTopic"}, {OpRevoke.String(), "RevokeTopic"},
		{OpUpdatePartition.String(), "UpdatePartition"}, {OpReassignNode.String(), "ReassignNode"},
		{OpMarker.String(), "Marker"}, {OpCompact.String(), "Compact"}, {Op(42).String(), "Op(42)"},
		{Active.String(), "active"}, {Revoked.String(), "revoked"}, {TopicState(9).String(), "TopicState(9)"},
		{EffectOpen.String(), "open"}, {EffectClose.String(), "close"}, {EffectKind(0).String(), "EffectKind(0)"},
	} {
		if tt.got != tt.want {
			t.Errorf("name %q, want %q", tt.got, tt.want)
		}
	}
}

package wire

import (
	"errors"
	"testing"
)

func TestLeaderTableRoundTrip(t *testing.T) {
	roundTrip(t, &LeaderTable{
		Shards:  4,
		Base:    4,
		Nodes:   []LeaderNode{{ID: []byte("n1"), Addr: []byte("127.0.0.1:7101")}, {ID: []byte("n2")}},
		Leaders: []uint32{1, 0, 2, 1},
		Terms:   []uint64{3, 0, 300, 4},
	}, AppendLeaderTableAnswer, DecodeLeaderTableAnswer)
	roundTrip(t, &LeaderTable{}, AppendLeaderTableAnswer, DecodeLeaderTableAnswer)
	// A cluster born with 2 shards whose shard 1 split: ids below 6.
	roundTrip(t, &LeaderTable{
		Shards:  6,
		Base:    2,
		Nodes:   []LeaderNode{{ID: []byte("n1")}},
		Leaders: []uint32{1, 0, 0, 1, 0, 1},
		Terms:   []uint64{3, 0, 0, 2, 0, 2},
	}, AppendLeaderTableAnswer, DecodeLeaderTableAnswer)
}

func TestLeaderTableBad(t *testing.T) {
	check := checkLeaderTableBad(t)
	good := &LeaderTable{Shards: 2, Base: 2, Nodes: []LeaderNode{{ID: []byte("n1")}}, Leaders: []uint32{1, 0}, Terms: []uint64{1, 0}}
	for _, c := range []struct {
		name string
		m    *LeaderTable
		want error
	}{
		{"leader beyond the nodes", &LeaderTable{Shards: 1, Base: 1, Nodes: good.Nodes, Leaders: []uint32{2}, Terms: []uint64{1}}, ErrTooLarge},
		{"empty node id", &LeaderTable{Shards: 1, Base: 1, Nodes: []LeaderNode{{}}, Leaders: []uint32{0}, Terms: []uint64{0}}, ErrMalformed},
		{"too many shards", &LeaderTable{Shards: MaxLeaderTableShards + 1}, ErrTooLarge},
		{"shards beyond the payload", &LeaderTable{Shards: 100, Base: 100, Leaders: []uint32{0}, Terms: []uint64{0}}, ErrTruncated},
	} {
		check(c.name, AppendLeaderTableAnswer(nil, c.m), c.want)
	}
	check("a base of 0", []byte{1, 0, 0, 0, 0}, ErrMalformed)
	check("a base above the shards", []byte{1, 2, 0, 0, 0}, ErrTooLarge)
}

func checkLeaderTableBad(t *testing.T) func(name string, b []byte, want error) {
	return func(name string, b []byte, want error) {
		t.Helper()
		var got LeaderTable
		if err := DecodeLeaderTableAnswer(b, &got); !errors.Is(err, want) {
			t.Errorf("%s: %v, want %v", name, err, want)
		}
		if len(got.Leaders) != 0 || got.Shards != 0 || got.Base != 0 {
			t.Errorf("%s: a failed decode left %+v", name, got)
		}
	}
}

package wire

import (
	"errors"
	"testing"
)

func TestLeaderTableRoundTrip(t *testing.T) {
	roundTrip(t, &LeaderTable{
		Shards:  4,
		Nodes:   []LeaderNode{{ID: []byte("n1"), Addr: []byte("127.0.0.1:7101")}, {ID: []byte("n2")}},
		Leaders: []uint32{1, 0, 2, 1},
		Terms:   []uint64{3, 0, 300, 4},
	}, AppendLeaderTableAnswer, DecodeLeaderTableAnswer)
	roundTrip(t, &LeaderTable{}, AppendLeaderTableAnswer, DecodeLeaderTableAnswer)
}

func TestLeaderTableBad(t *testing.T) {
	good := &LeaderTable{Shards: 2, Nodes: []LeaderNode{{ID: []byte("n1")}}, Leaders: []uint32{1, 0}, Terms: []uint64{1, 0}}
	for _, c := range []struct {
		name string
		m    *LeaderTable
		want error
	}{
		{"leader beyond the nodes", &LeaderTable{Shards: 1, Nodes: good.Nodes, Leaders: []uint32{2}, Terms: []uint64{1}}, ErrTooLarge},
		{"empty node id", &LeaderTable{Shards: 1, Nodes: []LeaderNode{{}}, Leaders: []uint32{0}, Terms: []uint64{0}}, ErrMalformed},
		{"too many shards", &LeaderTable{Shards: MaxLeaderTableShards + 1}, ErrTooLarge},
		{"shards beyond the payload", &LeaderTable{Shards: 100, Leaders: []uint32{0}, Terms: []uint64{0}}, ErrTruncated},
	} {
		var got LeaderTable
		if err := DecodeLeaderTableAnswer(AppendLeaderTableAnswer(nil, c.m), &got); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
		if len(got.Leaders) != 0 || got.Shards != 0 {
			t.Errorf("%s: a failed decode left %+v", c.name, got)
		}
	}
}

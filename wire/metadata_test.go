package wire

import (
	"errors"
	"reflect"
	"testing"
)

func TestMemberRecordsRoundTripAndRejects(t *testing.T) {
	rs := []MemberRecord{
		{ID: []byte("n1"), Rack: []byte("a"), SwimAddr: []byte("127.0.0.1:1"), Generation: 10, Incarnation: 2, State: MemberAlive},
		{ID: []byte("n2"), Rack: []byte("b"), SwimAddr: []byte("127.0.0.1:2"), Generation: 11, State: MemberDead},
		{ID: []byte("n3"), SwimAddr: []byte("127.0.0.1:3"), Generation: 12, Incarnation: 1, State: MemberSuspect},
	}
	b := AppendMemberRecords(nil, rs)
	got, err := DecodeMemberRecords(b, nil)
	if err != nil || !reflect.DeepEqual(got, rs) {
		t.Fatalf("round trip %+v, %v", got, err)
	}
	for n := range len(b) {
		if _, err := DecodeMemberRecords(b[:n], nil); err == nil {
			t.Fatalf("truncated to %d bytes decoded", n)
		}
	}
	one := AppendMemberRecords(nil, rs[:1])
	for name, in := range map[string][]byte{
		"trailing": append(append([]byte(nil), one...), 0),
		"state":    AppendMemberRecords(nil, []MemberRecord{{ID: []byte("x"), State: 9}}),
		"no id":    AppendMemberRecords(nil, []MemberRecord{{State: MemberAlive}}),
		"unsorted": AppendMemberRecords(nil, []MemberRecord{{ID: []byte("b"), State: 1}, {ID: []byte("a"), State: 1}}),
		"count":    {0xff, 0xff, 0x03},
	} {
		if _, err := DecodeMemberRecords(in, nil); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestLeaderTableRoundTripAndRejects(t *testing.T) {
	rows := []LeaderRow{{Shard: 1, Term: 5, Leader: []byte("n1")}, {Shard: 6, Term: 2, Leader: []byte("n3")}}
	b := AppendLeaderTable(nil, rows)
	got, err := DecodeLeaderTable(b, 8, nil)
	if err != nil || !reflect.DeepEqual(got, rows) {
		t.Fatalf("round trip %+v, %v", got, err)
	}
	for name, c := range map[string]struct {
		in  []byte
		max uint64
	}{
		"shard out of range":    {b, 6},
		"empty leader":          {AppendLeaderTable(nil, []LeaderRow{{Shard: 1, Term: 1}}), 8},
		"more rows than shards": {AppendLeaderTable(nil, []LeaderRow{{Shard: 0, Term: 1, Leader: []byte("a")}, {Shard: 1, Term: 1, Leader: []byte("a")}}), 1},
	} {
		if _, err := DecodeLeaderTable(c.in, c.max, nil); err == nil {
			t.Errorf("%s: accepted", name)
		} else if !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrTooLarge) && !errors.Is(err, ErrTruncated) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

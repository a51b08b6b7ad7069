package fuzz

import (
	"bytes"
	"errors"
	"testing"

	"github.com/shoalmq/shoal/wire"
)

func swimSeeds() [][]byte {
	d := &wire.SwimDatagram{
		Header: wire.SwimHeader{ClusterID: 42, Sender: []byte("n1"), Generation: 7},
		Msg:    wire.SwimMessage{Kind: wire.SwimPingReq, Seq: 99, Target: []byte("n2"), Addr: []byte("127.0.0.1:7000")},
		Events: []wire.SwimEvent{
			{Kind: wire.SwimAlive, Node: []byte("n3"), Generation: 3, Incarnation: 1, SwimAddr: []byte("127.0.0.1:7003"), Rack: []byte("r1")},
			{Kind: wire.SwimSuspect, Node: []byte("n4"), Generation: 1, Incarnation: 5, From: []byte("n1")},
			{Kind: wire.SwimDead, Node: []byte("n5"), Generation: 2, From: []byte("n9")},
			{Kind: wire.SwimLeave, Node: []byte("n6"), Generation: 9, Incarnation: 2},
			{Kind: wire.SwimShardLeader, Shard: 1023, Node: []byte("n2"), Term: 17},
			{Kind: wire.SwimMetadataVersion, Node: []byte("n2"), MetaKind: 1, Version: 5},
		},
	}
	a, _ := wire.AppendSwimDatagram(nil, d)
	d.Header.Sealed, d.Header.Recipient, d.Header.KeyID, d.Header.Salt, d.Header.Seq = true, []byte("n2"), 7, 9, 11
	d.Msg = wire.SwimMessage{Kind: wire.SwimAck, Seq: 3}
	b, _ := wire.AppendSwimDatagram(nil, d)
	b = append(b, make([]byte, wire.SwimTagSize)...)
	d.Events = nil
	d.Msg = wire.SwimMessage{Kind: wire.SwimPing, Seq: 1, Target: []byte("x")}
	c, _ := wire.AppendSwimDatagram(nil, d)
	return [][]byte{a, b, c, {0x53, 0x57, 1, 0}}
}

// FuzzSwimDatagram: any input decodes or fails cleanly; what decodes
// re-encodes to the same bytes and decodes to the same value again. A
// sealed one re-encodes to the same header, and never opens under a key
// it was not sealed with.
func FuzzSwimDatagram(f *testing.F) {
	for _, s := range swimSeeds() {
		f.Add(s)
	}
	ring, err := wire.NewSwimKeyring([][]byte{bytes.Repeat([]byte{1}, 32)})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		d := wire.SwimDatagram{Events: make([]wire.SwimEvent, 0, wire.MaxEventsPerDatagram)}
		err := wire.DecodeSwimDatagram(b, &d)
		if errors.Is(err, wire.ErrSealed) {
			off, err := wire.DecodeSwimHeader(b, &d.Header)
			if err != nil {
				t.Fatalf("sealed header does not decode again: %v", err)
			}
			enc, bodyOff := wire.AppendSwimHeader(nil, &d.Header)
			if bodyOff != off || !bytes.Equal(enc, b[:off]) {
				t.Fatalf("sealed header re-encodes differently:\n in %x\nout %x", b[:off], enc)
			}
			d.Header.KeyID = ring.Primary()
			if _, err := ring.Open(nil, b, off, &d.Header); err == nil {
				t.Fatal("a body nobody sealed opened")
			}
			return
		}
		if err != nil {
			return
		}
		enc, _ := wire.AppendSwimDatagram(nil, &d)
		if !bytes.Equal(enc, b) {
			t.Fatalf("re-encoding differs:\n in %x\nout %x", b, enc)
		}
		d2 := wire.SwimDatagram{Events: make([]wire.SwimEvent, 0, wire.MaxEventsPerDatagram)}
		if err := wire.DecodeSwimDatagram(enc, &d2); err != nil {
			t.Fatalf("re-decode: %v", err)
		}
		enc2, _ := wire.AppendSwimDatagram(nil, &d2)
		if !bytes.Equal(enc, enc2) {
			t.Fatal("second round trip differs")
		}
	})
}

// FuzzSwimPushPull: the same property for the push-pull payload.
func FuzzSwimPushPull(f *testing.F) {
	p := &wire.SwimPushPull{
		Header: wire.SwimHeader{ClusterID: 3, Sender: []byte("n1"), Generation: 2},
		Join:   true,
		Members: []wire.SwimPushPullMember{
			{Node: []byte("n1"), Generation: 2, Incarnation: 1, State: wire.SwimStateAlive, SwimAddr: []byte("127.0.0.1:1")},
			{Node: []byte("n2"), Generation: 1, State: wire.SwimStateDead, SwimAddr: []byte("127.0.0.1:2"), Meta: []byte{9}},
		},
		Leaders:  []wire.SwimShardLeaderEntry{{Shard: 5, Leader: []byte("n1"), Term: 3}},
		Versions: []wire.SwimVersionEntry{{Node: []byte("n2"), MetaKind: 2, Version: 8}},
	}
	a, _ := wire.AppendSwimPushPull(nil, p)
	f.Add(a)
	p.Join, p.Partial, p.Digests = false, true, []uint64{1, 2, 3}
	a, _ = wire.AppendSwimPushPull(nil, p)
	f.Add(a)
	f.Fuzz(func(t *testing.T, b []byte) {
		var p wire.SwimPushPull
		if err := wire.DecodeSwimPushPull(b, &p); err != nil {
			return
		}
		enc, _ := wire.AppendSwimPushPull(nil, &p)
		if !bytes.Equal(enc, b) {
			t.Fatalf("re-encoding differs:\n in %x\nout %x", b, enc)
		}
		var p2 wire.SwimPushPull
		if err := wire.DecodeSwimPushPull(enc, &p2); err != nil {
			t.Fatalf("re-decode: %v", err)
		}
	})
}

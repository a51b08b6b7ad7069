package wire

import (
	"bytes"
	"errors"
	"testing"
)

func sampleSwimDatagram() *SwimDatagram {
	return &SwimDatagram{
		Header: SwimHeader{ClusterID: 42, Sender: []byte("n1"), Generation: 7},
		Msg:    SwimMessage{Kind: SwimPingReq, Seq: 99, Target: []byte("n2"), Addr: []byte("127.0.0.1:7000")},
		Events: []SwimEvent{
			{Kind: SwimAlive, Node: []byte("n3"), Generation: 3, Incarnation: 1, SwimAddr: []byte("127.0.0.1:7003"),
				ClientAddr: []byte("127.0.0.1:8003"), PeerAddr: []byte("127.0.0.1:9003"), Rack: []byte("r1"), Meta: []byte{1, 2}},
			{Kind: SwimSuspect, Node: []byte("n4"), Generation: 1, Incarnation: 5, From: []byte("n1")},
			{Kind: SwimDead, Node: []byte("n5"), Generation: 2, Incarnation: 0, From: []byte("n9")},
			{Kind: SwimLeave, Node: []byte("n6"), Generation: 9, Incarnation: 2},
			{Kind: SwimShardLeader, Shard: 1023, Node: []byte("n2"), Term: 17},
			{Kind: SwimMetadataVersion, Node: []byte("n2"), MetaKind: 1, Version: 1 << 40},
		},
	}
}

func TestSwimDatagramRoundTrip(t *testing.T) {
	for _, kind := range []SwimMsgKind{SwimNone, SwimPing, SwimPingReq, SwimAck, SwimNack} {
		d := sampleSwimDatagram()
		d.Msg.Kind = kind
		if kind != SwimPingReq {
			d.Msg.Addr = nil
		}
		if kind != SwimPing && kind != SwimPingReq {
			d.Msg.Target = nil
		}
		if kind == SwimNone {
			d.Msg.Seq = 0
		}
		b, _ := AppendSwimDatagram(nil, d)
		got := SwimDatagram{Events: make([]SwimEvent, 0, MaxEventsPerDatagram)}
		if err := DecodeSwimDatagram(b, &got); err != nil {
			t.Fatalf("%d: %v", kind, err)
		}
		again, _ := AppendSwimDatagram(nil, &got)
		if !bytes.Equal(b, again) {
			t.Fatalf("%d: re-encoding differs", kind)
		}
		if len(got.Events) != len(d.Events) || got.Msg.Seq != d.Msg.Seq {
			t.Fatalf("%d: got %+v", kind, got)
		}
	}
}

func TestSwimDatagramRejects(t *testing.T) {
	good, _ := AppendSwimDatagram(nil, sampleSwimDatagram())
	mut := func(f func(b []byte) []byte) []byte { return f(append([]byte(nil), good...)) }
	cases := []struct {
		name string
		b    []byte
		want error
	}{
		{"empty", nil, ErrTruncated},
		{"magic", mut(func(b []byte) []byte { b[0] = 'X'; return b }), ErrBadMagic},
		{"version", mut(func(b []byte) []byte { b[2] = ProtocolVersion + 1; return b }), ErrVersion},
		{"flags", mut(func(b []byte) []byte { b[3] = 0x80; return b }), ErrBadFlags},
		{"trailing", append(append([]byte(nil), good...), 0), ErrTrailing},
		{"truncated", good[:len(good)-1], ErrTruncated},
		{"too large", make([]byte, MaxDatagram+1), ErrTooLarge},
	}
	for _, c := range cases {
		d := SwimDatagram{Events: make([]SwimEvent, 0, MaxEventsPerDatagram)}
		if err := DecodeSwimDatagram(c.b, &d); !errors.Is(err, c.want) {
			t.Errorf("%s: err %v, want %v", c.name, err, c.want)
		}
	}
	// Every prefix fails cleanly.
	d := SwimDatagram{Events: make([]SwimEvent, 0, MaxEventsPerDatagram)}
	for n := range len(good) {
		if err := DecodeSwimDatagram(good[:n], &d); err == nil {
			t.Fatalf("prefix %d decoded", n)
		}
	}
	// More events than the caller's capacity.
	small := SwimDatagram{Events: make([]SwimEvent, 0, 2)}
	if err := DecodeSwimDatagram(good, &small); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("capacity 2: err %v", err)
	}
	// An unknown event kind.
	h, _ := AppendSwimHeader(nil, &SwimHeader{ClusterID: 1, Sender: []byte("a")})
	h = AppendSwimMessage(h, &SwimMessage{})
	h = append(h, 1, 77, 1, 'x', 0, 0)
	if err := DecodeSwimDatagram(h, &d); !errors.Is(err, ErrUnknownKind) {
		t.Fatalf("unknown event: err %v", err)
	}
}

func TestSwimEventsWithinBudget(t *testing.T) {
	b, _ := AppendSwimHeader(nil, &SwimHeader{ClusterID: 1, Sender: []byte("n1"), Generation: 1})
	b = AppendSwimMessage(b, &SwimMessage{Kind: SwimAck, Seq: 5})
	b, countOff := BeginSwimEvents(b)
	enc := AppendSwimEvent(nil, &SwimEvent{Kind: SwimAlive, Node: bytes.Repeat([]byte("x"), 40), SwimAddr: []byte("127.0.0.1:1")})
	added := 0
	for {
		var ok bool
		b, ok = AppendSwimEventWithin(b, countOff, enc, DatagramBudget)
		if !ok {
			break
		}
		added++
	}
	if len(b) > DatagramBudget || len(b)+len(enc) <= DatagramBudget {
		t.Fatalf("datagram %d bytes with %d-byte events: budget not filled exactly", len(b), len(enc))
	}
	if SwimEventCount(b, countOff) != added {
		t.Fatalf("count %d, added %d", SwimEventCount(b, countOff), added)
	}
	d := SwimDatagram{Events: make([]SwimEvent, 0, MaxEventsPerDatagram)}
	if err := DecodeSwimDatagram(b, &d); err != nil || len(d.Events) != added {
		t.Fatalf("decode: %v, %d events", err, len(d.Events))
	}
	// The count byte caps at MaxEventsPerDatagram even with a huge budget.
	tiny := AppendSwimEvent(nil, &SwimEvent{Kind: SwimLeave, Node: []byte("a")})
	b2, off2 := BeginSwimEvents(nil)
	for range 300 {
		b2, _ = AppendSwimEventWithin(b2, off2, tiny, MaxDatagram)
	}
	if SwimEventCount(b2, off2) != MaxEventsPerDatagram {
		t.Fatalf("count %d", SwimEventCount(b2, off2))
	}
}

// sealedSample is sampleSwimDatagram sealed under key by sender n1.
func sealedSample(t *testing.T, k *SwimKeyring, seq uint64) []byte {
	t.Helper()
	d := sampleSwimDatagram()
	d.Header.Sealed, d.Header.Recipient, d.Header.KeyID, d.Header.Salt, d.Header.Seq = true, []byte("n2"), k.Primary(), 0xfeed, seq
	b, bodyOff := AppendSwimDatagram(nil, d)
	b, err := k.Seal(b, 0, bodyOff, &d.Header)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestSwimKeyringSealOpen(t *testing.T) {
	key := bytes.Repeat([]byte{7}, 32)
	k, err := NewSwimKeyring([][]byte{key})
	if err != nil {
		t.Fatal(err)
	}
	b := sealedSample(t, k, 9)
	var d SwimDatagram
	d.Events = make([]SwimEvent, 0, MaxEventsPerDatagram)
	if err := DecodeSwimDatagram(b, &d); !errors.Is(err, ErrSealed) {
		t.Fatalf("sealed datagram decoded without its key: %v", err)
	}
	var h SwimHeader
	off, err := DecodeSwimHeader(b, &h)
	if err != nil || !h.Sealed || string(h.Recipient) != "n2" || h.Seq != 9 || h.Salt != 0xfeed || h.KeyID != k.Primary() {
		t.Fatalf("header %+v: %v", h, err)
	}
	if bytes.Contains(b, []byte("127.0.0.1:7003")) {
		t.Fatal("the body travels in the clear")
	}
	// A receiver holding the key among others opens it.
	other := bytes.Repeat([]byte{8}, 16)
	r, _ := NewSwimKeyring([][]byte{other, key})
	body, err := r.Open(nil, b, off, &h)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	if err := DecodeSwimBody(body, &d); err != nil || len(d.Events) != 6 || d.Msg.Kind != SwimPingReq {
		t.Fatalf("body: %v %+v", err, d.Msg)
	}
	// Without the key, or with any bit of header or body changed, it does not open.
	lone, _ := NewSwimKeyring([][]byte{other})
	if _, err := lone.Open(nil, b, off, &h); !errors.Is(err, ErrUnknownKey) {
		t.Fatalf("open without the key: %v", err)
	}
	for i := range b {
		c := append([]byte(nil), b...)
		c[i] ^= 0x10
		var ch SwimHeader
		coff, err := DecodeSwimHeader(c, &ch)
		if err != nil || !ch.Sealed {
			continue
		}
		if _, err := r.Open(nil, c, coff, &ch); err == nil {
			t.Fatalf("byte %d changed and the datagram still opens", i)
		}
	}
}

func TestSwimKeyringRefusesBadKeys(t *testing.T) {
	k := bytes.Repeat([]byte{1}, 32)
	for name, keys := range map[string][][]byte{
		"none":     nil,
		"short":    {make([]byte, 15)},
		"odd size": {make([]byte, 20)},
		"repeated": {k, k},
		"too many": make([][]byte, MaxSwimKeys+1),
	} {
		if _, err := NewSwimKeyring(keys); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if SwimKeyID(k) == SwimKeyID(bytes.Repeat([]byte{2}, 32)) {
		t.Fatal("two keys share an id")
	}
}

func TestSwimOpenAllocatesNothing(t *testing.T) {
	k, _ := NewSwimKeyring([][]byte{bytes.Repeat([]byte{3}, 32)})
	b := sealedSample(t, k, 1)
	var h SwimHeader
	off, _ := DecodeSwimHeader(b, &h)
	buf := make([]byte, 0, MaxDatagram)
	if _, err := k.Open(buf, b, off, &h); err != nil {
		t.Fatal(err)
	}
	allocs := testing.AllocsPerRun(100, func() {
		if _, err := DecodeSwimHeader(b, &h); err != nil {
			t.Fatal(err)
		}
		if _, err := k.Open(buf, b, off, &h); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per open", allocs)
	}
}

func TestSwimPushPullRoundTrip(t *testing.T) {
	p := &SwimPushPull{
		Header: SwimHeader{ClusterID: 3, Sender: []byte("n1"), Generation: 2},
		Join:   true,
		Members: []SwimPushPullMember{
			{Node: []byte("n1"), Generation: 2, Incarnation: 1, State: SwimStateAlive, SwimAddr: []byte("127.0.0.1:1"), Rack: []byte("r")},
			{Node: []byte("n2"), Generation: 1, Incarnation: 4, State: SwimStateDead, SwimAddr: []byte("127.0.0.1:2"), Meta: []byte{9}},
		},
		Leaders:  []SwimShardLeaderEntry{{Shard: 5, Leader: []byte("n1"), Term: 3}},
		Versions: []SwimVersionEntry{{Node: []byte("n2"), MetaKind: 2, Version: 8}},
	}
	b, _ := AppendSwimPushPull(nil, p)
	var got SwimPushPull
	if err := DecodeSwimPushPull(b, &got); err != nil {
		t.Fatal(err)
	}
	again, _ := AppendSwimPushPull(nil, &got)
	if !bytes.Equal(b, again) || !got.Join || len(got.Members) != 2 {
		t.Fatalf("round trip differs: %+v", got)
	}
	for n := range len(b) {
		if err := DecodeSwimPushPull(b[:n], &got); err == nil {
			t.Fatalf("prefix %d decoded", n)
		}
	}
	bad := append([]byte(nil), b...)
	// State byte of the first member: out of range.
	i := bytes.LastIndex(bad, []byte("n1\x02\x01"))
	bad[i+4] = 9
	if err := DecodeSwimPushPull(bad, &got); !errors.Is(err, ErrMalformed) {
		t.Fatalf("bad state: err %v", err)
	}
	// Sealed, it opens and decodes to the same state.
	k, _ := NewSwimKeyring([][]byte{bytes.Repeat([]byte{5}, 24)})
	p.Header.Sealed, p.Header.KeyID, p.Header.Seq = true, k.Primary(), 3
	sb, bodyOff := AppendSwimPushPull(nil, p)
	sb, err := k.Seal(sb, 0, bodyOff, &p.Header)
	if err != nil {
		t.Fatal(err)
	}
	if err := DecodeSwimPushPull(sb, &got); !errors.Is(err, ErrSealed) {
		t.Fatalf("sealed push-pull decoded without its key: %v", err)
	}
	off, err := DecodeSwimHeader(sb, &got.Header)
	if err != nil {
		t.Fatal(err)
	}
	body, err := k.Open(nil, sb, off, &got.Header)
	if err != nil {
		t.Fatal(err)
	}
	if err := DecodeSwimPushPullBody(body, &got); err != nil || len(got.Members) != 2 || !got.Join {
		t.Fatalf("opened push-pull: %v %+v", err, got)
	}
}

func TestSwimPushPullDigestsRoundTrip(t *testing.T) {
	p := &SwimPushPull{
		Header:   SwimHeader{ClusterID: 3, Sender: []byte("n1"), Generation: 2},
		Partial:  true,
		Versions: []SwimVersionEntry{{Node: []byte("n2"), MetaKind: 2, Version: 8}},
		Digests:  []uint64{0, 1, 1 << 63},
	}
	b, _ := AppendSwimPushPull(nil, p)
	var got SwimPushPull
	if err := DecodeSwimPushPull(b, &got); err != nil {
		t.Fatal(err)
	}
	if !got.Partial || got.Join || len(got.Digests) != 3 || got.Digests[2] != 1<<63 || len(got.Versions) != 1 {
		t.Fatalf("round trip differs: %+v", got)
	}
	for n := range len(b) {
		if err := DecodeSwimPushPull(b[:n], &got); err == nil {
			t.Fatalf("prefix %d decoded", n)
		}
	}
	// The digests flag with no digests after it is malformed.
	bad, _ := AppendSwimPushPull(nil, &SwimPushPull{Header: p.Header, Partial: true})
	i := len(bad) - 4 // flags, then three empty lists
	bad[i] |= swimPPFlagDigests
	bad = append(bad, 0)
	if err := DecodeSwimPushPull(bad, &got); !errors.Is(err, ErrMalformed) {
		t.Fatalf("empty digests: err %v", err)
	}
	// More digests than a push-pull may carry.
	big := &SwimPushPull{Header: p.Header, Digests: make([]uint64, MaxPushPullDigests+1)}
	b, _ = AppendSwimPushPull(nil, big)
	if err := DecodeSwimPushPull(b, &got); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("too many digests: err %v", err)
	}
	// An unknown flag.
	b, _ = AppendSwimPushPull(nil, &SwimPushPull{Header: p.Header})
	b[len(b)-4] |= 8
	if err := DecodeSwimPushPull(b, &got); !errors.Is(err, ErrBadFlags) {
		t.Fatalf("unknown flag: err %v", err)
	}
}

func TestSwimDecodeAllocatesNothing(t *testing.T) {
	b, _ := AppendSwimDatagram(nil, sampleSwimDatagram())
	d := SwimDatagram{Events: make([]SwimEvent, 0, MaxEventsPerDatagram)}
	allocs := testing.AllocsPerRun(100, func() {
		if err := DecodeSwimDatagram(b, &d); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per decode", allocs)
	}
}

func BenchmarkDecodeSwimDatagram(b *testing.B) {
	buf, _ := AppendSwimDatagram(nil, sampleSwimDatagram())
	d := SwimDatagram{Events: make([]SwimEvent, 0, MaxEventsPerDatagram)}
	b.ReportAllocs()
	b.SetBytes(int64(len(buf)))
	for b.Loop() {
		if err := DecodeSwimDatagram(buf, &d); err != nil {
			b.Fatal(err)
		}
	}
}

// The example in docs/wire-swim.md.
func TestSwimDocExample(t *testing.T) {
	b, _ := AppendSwimDatagram(nil, &SwimDatagram{
		Header: SwimHeader{ClusterID: 42, Sender: []byte("n1"), Generation: 7},
		Msg:    SwimMessage{Kind: SwimPing, Seq: 99, Target: []byte("n2")},
	})
	want := []byte{0x53, 0x57, ProtocolVersion, 0, 0x2a, 0, 0, 0, 0, 0, 0, 0, 2, 'n', '1', 7, 1, 0x63, 2, 'n', '2', 0}
	if !bytes.Equal(b, want) {
		t.Fatalf("got % x\nwant % x", b, want)
	}
}

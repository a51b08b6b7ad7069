package wire

import (
	"bytes"
	"errors"
	"testing"
)

func TestHeaderRoundTrip(t *testing.T) {
	h := Header{Version: ProtocolVersion, Kind: KindProduce, Flags: FlagCompressed, Length: 1234, RequestID: 1<<63 + 5}
	b := AppendHeader(nil, &h)
	if len(b) != HeaderSize {
		t.Fatalf("header size %d, want %d", len(b), HeaderSize)
	}
	var got Header
	if err := DecodeHeader(b, &got); err != nil {
		t.Fatal(err)
	}
	if got != h {
		t.Fatalf("got %+v, want %+v", got, h)
	}
}

func TestHeaderRejects(t *testing.T) {
	good := Header{Version: ProtocolVersion, Kind: KindHello, Length: 10}
	cases := []struct {
		name string
		mut  func(h *Header)
		want error
	}{
		{"version", func(h *Header) { h.Version = ProtocolVersion + 1 }, ErrVersion},
		{"unknown kind", func(h *Header) { h.Kind = 200 }, ErrUnknownKind},
		{"unassigned kind", func(h *Header) { h.Kind = 4 }, ErrUnknownKind},
		{"reserved flag", func(h *Header) { h.Flags = 1 << 9 }, ErrBadFlags},
		{"1 GiB length", func(h *Header) { h.Length = 1 << 30 }, ErrTooLarge},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := good
			c.mut(&h)
			var got Header
			if err := DecodeHeader(AppendHeader(nil, &h), &got); !errors.Is(err, c.want) {
				t.Fatalf("err %v, want %v", err, c.want)
			}
		})
	}
	var got Header
	for n := 0; n < HeaderSize; n++ {
		if err := DecodeHeader(make([]byte, n), &got); !errors.Is(err, ErrTruncated) {
			t.Fatalf("%d bytes: err %v, want ErrTruncated", n, err)
		}
	}
}

func TestBeginEndFrame(t *testing.T) {
	b, start := BeginFrame([]byte("xx"), KindLookup, 9)
	b = append(b, "payload"...)
	b, err := EndFrame(b, start)
	if err != nil {
		t.Fatal(err)
	}
	var h Header
	if err := DecodeHeader(b[2:], &h); err != nil {
		t.Fatal(err)
	}
	if h.Length != 7 || h.Kind != KindLookup || h.RequestID != 9 {
		t.Fatalf("header %+v", h)
	}
	if !bytes.Equal(b[2+HeaderSize:], []byte("payload")) {
		t.Fatal("payload moved")
	}
}

func TestHelloRoundTrip(t *testing.T) {
	m := Hello{Version: ProtocolVersion, Role: RolePeer, ClusterID: 77, Generation: 3, NodeID: []byte("n1")}
	m.Nonce[3] = 9
	b := AppendHello(nil, &m)
	var got Hello
	if err := DecodeHello(b, &got); err != nil {
		t.Fatal(err)
	}
	if got.ClusterID != 77 || got.Generation != 3 || string(got.NodeID) != "n1" || got.Nonce != m.Nonce || got.Role != RolePeer {
		t.Fatalf("got %+v", got)
	}
	for n := 0; n < len(b); n++ {
		if err := DecodeHello(b[:n], &got); err == nil {
			t.Fatalf("truncated at %d decoded", n)
		}
	}
	if err := DecodeHello(append(b, 0), &got); !errors.Is(err, ErrTrailing) {
		t.Fatalf("trailing: %v", err)
	}
}

func TestHelloToken(t *testing.T) {
	c := Hello{Version: ProtocolVersion, Role: RoleClient, ClusterID: 1, Token: []byte("tok-0123456789abcdef")}
	var got Hello
	if err := DecodeHello(AppendHello(nil, &c), &got); err != nil || string(got.Token) != "tok-0123456789abcdef" {
		t.Fatalf("client token: %v %q", err, got.Token)
	}
	// A peer never carries a token: peers prove the cluster credential.
	p := Hello{Version: ProtocolVersion, Role: RolePeer, ClusterID: 1, NodeID: []byte("n1"), Token: []byte("x")}
	if err := DecodeHello(AppendHello(nil, &p), &got); !errors.Is(err, ErrMalformed) {
		t.Fatalf("peer with a token: %v", err)
	}
	c.Token = make([]byte, MaxTokenLen+1)
	if err := DecodeHello(AppendHello(nil, &c), &got); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("token over the limit: %v", err)
	}
}

func TestReaderCountGuardsAllocation(t *testing.T) {
	// A count of a billion elements in a 3-byte input must fail before any
	// caller sizes a slice by it.
	b := appendUvarint(nil, 1<<30)
	r := reader{b: b}
	if n := r.count(1<<31-1, 1); n != 0 || !errors.Is(r.err, ErrTruncated) {
		t.Fatalf("n=%d err=%v", n, r.err)
	}
	r = reader{b: []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}}
	r.uvarint()
	if !errors.Is(r.err, ErrMalformed) {
		t.Fatalf("overlong varint: %v", r.err)
	}
}

func TestKindClasses(t *testing.T) {
	for k := Kind(0); k < 255; k++ {
		classes := 0
		for _, in := range []bool{k.IsClientRequest(), k.IsClientResponse(), k.IsPeer(), k == KindHello || k == KindHelloAuth} {
			if in {
				classes++
			}
		}
		if k.Known() && classes != 1 || !k.Known() && classes != 0 {
			t.Fatalf("%v is in %d classes", k, classes)
		}
	}
}

func TestKindString(t *testing.T) {
	if KindRaftBatch.String() != "RaftBatch" || Kind(250).String() != "Kind(250)" {
		t.Fatal(KindRaftBatch.String(), Kind(250).String())
	}
}

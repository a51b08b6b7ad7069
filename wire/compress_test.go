package wire

import (
	"bytes"
	"errors"
	"testing"

	"github.com/klauspost/compress/s2"
)

func TestCompressFrameRoundTrip(t *testing.T) {
	payload := bytes.Repeat([]byte("raft entry payload "), 1000) // compressible, above the threshold
	dst, start := BeginFrame([]byte("prefix"), KindRaftBatch, 42)
	dst = append(dst, payload...)
	dst, err := EndFrame(dst, start)
	if err != nil {
		t.Fatal(err)
	}
	dst, scratch := CompressFrame(dst, start, CompressThreshold, nil)
	var h Header
	if err := DecodeHeader(dst[start:], &h); err != nil {
		t.Fatal(err)
	}
	if h.Flags&FlagCompressed == 0 || int(h.Length) >= len(payload) || int(h.Length) != len(dst)-start-HeaderSize || h.RequestID != 42 {
		t.Fatalf("header %+v, frame %d bytes", h, len(dst)-start)
	}
	plain, buf, err := FramePayload(&h, dst[start+HeaderSize:], nil)
	if err != nil || !bytes.Equal(plain, payload) {
		t.Fatalf("decompressed %d bytes, err %v", len(plain), err)
	}
	if !bytes.Equal(dst[:start], []byte("prefix")) {
		t.Fatal("bytes before the frame changed")
	}
	// Buffers are reused: a second round allocates nothing.
	if n := testing.AllocsPerRun(5, func() {
		d, st := BeginFrame(dst[:0], KindRaftBatch, 1)
		d = append(d, payload...)
		d, _ = EndFrame(d, st)
		d, scratch = CompressFrame(d, st, CompressThreshold, scratch)
		if _, buf, err = FramePayload(&h, d[HeaderSize:], buf); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Fatalf("%v allocs per compress+decompress with reused buffers", n)
	}
}

func TestCompressFrameLeavesSmallOrIncompressible(t *testing.T) {
	small, start := BeginFrame(nil, KindOpenTopic, 1)
	small = append(small, make([]byte, CompressThreshold)...)
	small, _ = EndFrame(small, start)
	before := bytes.Clone(small)
	if out, _ := CompressFrame(small, start, CompressThreshold, nil); !bytes.Equal(out, before) {
		t.Fatal("a payload at the threshold was compressed")
	}
	random := newGen(1).bytes(10000, 10000)
	f, start := BeginFrame(nil, KindSnapshotChunk, 1)
	f = append(f, random...)
	f, _ = EndFrame(f, start)
	before = bytes.Clone(f)
	if out, _ := CompressFrame(f, start, CompressThreshold, nil); !bytes.Equal(out, before) {
		t.Fatal("an incompressible payload was replaced by a larger one")
	}
}

func TestDecompressRejects(t *testing.T) {
	// A bomb: declares 1 GiB in a few bytes. Refused before allocating.
	bomb := appendUvarint(nil, 1<<30)
	bomb = append(bomb, 0, 0, 0)
	if n := testing.AllocsPerRun(5, func() {
		if _, err := Decompress(nil, bomb); !errors.Is(err, ErrTooLarge) {
			t.Fatalf("bomb: %v", err)
		}
	}); n != 0 {
		t.Fatalf("%v allocs refusing a bomb", n)
	}
	// One byte over MaxFrame declared.
	over := append(appendUvarint(nil, MaxFrame+1), 0)
	if _, err := Decompress(nil, over); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("MaxFrame+1: %v", err)
	}
	ok := s2.Encode(nil, []byte("hello, hello, hello"))
	for n := range len(ok) {
		if _, err := Decompress(nil, ok[:n]); err == nil {
			t.Fatalf("truncated to %d decoded", n)
		}
	}
	if _, err := Decompress(nil, append(bytes.Clone(ok), 1)); err == nil {
		t.Fatal("trailing byte decoded")
	}
	if _, err := Decompress(nil, []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}); !errors.Is(err, ErrMalformed) {
		t.Fatalf("bad length header: %v", err)
	}
	if out, err := Decompress(nil, ok); err != nil || string(out) != "hello, hello, hello" {
		t.Fatalf("%q %v", out, err)
	}
}

package fuzz

import (
	"bytes"
	"testing"

	"github.com/shoalmq/shoal/wire"
)

// FuzzCompressFrame: any payload survives CompressFrame and FramePayload
// unchanged, compressed or not, and the header stays valid.
func FuzzCompressFrame(f *testing.F) {
	f.Add(bytes.Repeat([]byte("entry "), 2000), 4096)
	f.Add([]byte("short"), 0)
	f.Add(make([]byte, 5000), 100)
	var scratch, plainBuf []byte
	f.Fuzz(func(t *testing.T, payload []byte, threshold int) {
		// Large payloads add nothing S2's own fuzzing does not cover and
		// make each execution (and minimization) slow.
		if len(payload) > 16<<10 {
			payload = payload[:16<<10]
		}
		frame, start := wire.BeginFrame([]byte{0xaa}, wire.KindRaftBatch, 3)
		frame = append(frame, payload...)
		frame, err := wire.EndFrame(frame, start)
		if err != nil {
			t.Fatal(err)
		}
		frame, scratch = wire.CompressFrame(frame, start, threshold, scratch)
		var h wire.Header
		if err := wire.DecodeHeader(frame[start:], &h); err != nil {
			t.Fatalf("header after compression: %v", err)
		}
		if int(h.Length) != len(frame)-start-wire.HeaderSize || h.RequestID != 3 || h.Kind != wire.KindRaftBatch {
			t.Fatalf("header %+v for a %d-byte frame", h, len(frame)-start)
		}
		if h.Flags&wire.FlagCompressed != 0 && (len(payload) <= threshold || int(h.Length) >= len(payload)) {
			t.Fatalf("compressed a %d-byte payload (threshold %d) into %d bytes", len(payload), threshold, h.Length)
		}
		var plain []byte
		plain, plainBuf, err = wire.FramePayload(&h, frame[start+wire.HeaderSize:], plainBuf)
		if err != nil || !bytes.Equal(plain, payload) {
			t.Fatalf("payload did not survive: %v", err)
		}
		if frame[0] != 0xaa {
			t.Fatal("bytes before the frame changed")
		}
	})
}

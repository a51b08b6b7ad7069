package shardstore

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestGenerationKeepsItsBytes(t *testing.T) {
	// A generation file as nodes have always written it: the generation
	// as 8 big-endian bytes.
	old := []byte{0x17, 0x9a, 0x3c, 0x5e, 0x01, 0x02, 0x03, 0x04}
	const gen = 0x179a3c5e01020304
	dir := t.TempDir()
	p := filepath.Join(dir, GenerationFile)
	if err := os.WriteFile(p, old, 0o644); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "generation"))
	if err != nil {
		t.Fatal(err)
	}
	if g, err := DecodeGeneration(b); err != nil || g != gen {
		t.Fatalf("DecodeGeneration(%x) = %#x, %v; want %#x", b, g, err, uint64(gen))
	}
	if got := AppendGeneration(nil, gen); !bytes.Equal(got, old) {
		t.Fatalf("AppendGeneration = %x, want %x", got, old)
	}
}

func TestGenerationRoundTrip(t *testing.T) {
	for _, g := range []uint64{0, 1, 1 << 62, math.MaxUint64} {
		if got, err := DecodeGeneration(AppendGeneration(nil, g)); err != nil || got != g {
			t.Errorf("%d: %d, %v", g, got, err)
		}
	}
	for _, bad := range [][]byte{nil, {1, 2, 3, 4, 5, 6, 7}, {1, 2, 3, 4, 5, 6, 7, 8, 9}} {
		if _, err := DecodeGeneration(bad); !errors.Is(err, ErrCorrupt) {
			t.Errorf("DecodeGeneration(%x): %v, want ErrCorrupt", bad, err)
		}
	}
}

// FuzzDecodeGeneration decodes generation files: 8 bytes decode and
// encode back to themselves, anything else fails with ErrCorrupt.
func FuzzDecodeGeneration(f *testing.F) {
	f.Add([]byte{0x17, 0x9a, 0x3c, 0x5e, 0x01, 0x02, 0x03, 0x04})
	f.Add([]byte{})
	f.Add([]byte{1, 2, 3})
	f.Fuzz(func(t *testing.T, b []byte) {
		g, err := DecodeGeneration(b)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) || len(b) == 8 {
				t.Fatalf("%x: %v", b, err)
			}
			return
		}
		if got := AppendGeneration(nil, g); !bytes.Equal(got, b) {
			t.Fatalf("%x decodes to %#x, which encodes to %x", b, g, got)
		}
	})
}

// A generation file as older builds wrote it (8 big-endian bytes) is
// raised above, and rewritten in the same layout.
func TestOldGenerationFileIsRaised(t *testing.T) {
	dir := t.TempDir()
	const old = uint64(1) << 62 // after any start time
	if err := os.WriteFile(filepath.Join(dir, "generation"), binary.BigEndian.AppendUint64(nil, old), 0o644); err != nil {
		t.Fatal(err)
	}
	gen, err := RaiseGeneration(dir, time.Now())
	if err != nil || gen != old+1 {
		t.Fatalf("raised to %d, %v; want %d", gen, err, old+1)
	}
	b, err := os.ReadFile(filepath.Join(dir, "generation"))
	if err != nil || !bytes.Equal(b, binary.BigEndian.AppendUint64(nil, old+1)) {
		t.Fatalf("generation file %x, %v", b, err)
	}
	if err := os.WriteFile(filepath.Join(dir, "generation"), []byte{1, 2, 3}, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := RaiseGeneration(dir, time.Now()); err == nil {
		t.Fatal("a generation file of 3 bytes was taken")
	}
}

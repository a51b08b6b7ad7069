package wire

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"reflect"
	"testing"
)

// roundTrip checks the codec contract on one value: it decodes to an equal
// value, re-encodes to the same bytes, every strict prefix fails, a trailing
// byte is ErrTrailing, and decoding again into the same struct allocates
// nothing.
func roundTrip[T any](t *testing.T, m *T, enc func([]byte, *T) []byte, dec func([]byte, *T) error) {
	t.Helper()
	b := enc(nil, m)
	got := new(T)
	if err := dec(b, got); err != nil {
		t.Fatalf("decode %T: %v", m, err)
	}
	if !reflect.DeepEqual(got, m) {
		t.Fatalf("decode %T:\n got %+v\nwant %+v", m, got, m)
	}
	if again := enc(nil, got); !bytes.Equal(again, b) {
		t.Fatalf("%T re-encodes differently", m)
	}
	for n := range len(b) {
		if err := dec(b[:n], new(T)); err == nil {
			t.Fatalf("%T truncated to %d of %d bytes decoded", m, n, len(b))
		}
	}
	if err := dec(append(b[:len(b):len(b)], 0), new(T)); !errors.Is(err, ErrTrailing) {
		t.Fatalf("%T with a trailing byte: %v", m, err)
	}
	if allocs := testing.AllocsPerRun(10, func() {
		if err := dec(b, got); err != nil {
			t.Fatal(err)
		}
	}); allocs != 0 {
		t.Fatalf("decoding %T into a reused struct: %v allocs", m, allocs)
	}
}

// gen makes random values for property tests. Empty byte strings are nil,
// as decoders return them.
type gen struct{ r *rand.Rand }

func newGen(seed uint64) gen { return gen{rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))} }

func (g gen) u64() uint64 {
	switch g.r.IntN(4) {
	case 0:
		return 0
	case 1:
		return uint64(g.r.IntN(300))
	case 2:
		return 1<<64 - 1 - uint64(g.r.IntN(3))
	}
	return g.r.Uint64()
}

func (g gen) u32(max uint32) uint32 { return uint32(g.u64() % (uint64(max) + 1)) }
func (g gen) bool() bool            { return g.r.IntN(2) == 1 }
func (g gen) n(max int) int         { return g.r.IntN(max + 1) }

func (g gen) bytes(min, max int) []byte {
	n := min + g.r.IntN(max-min+1)
	if n == 0 {
		return nil
	}
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(g.r.Uint32())
	}
	return b
}

func (g gen) topic() []byte  { return g.bytes(1, 40) }
func (g gen) nodeID() []byte { return g.bytes(1, MaxNodeIDLen) }
func (g gen) addr() []byte   { return g.bytes(0, 30) }

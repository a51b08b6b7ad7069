package shardstore

import (
	"bytes"
	"errors"
	"math"
	"testing"
)

// Marks as stores have always held them: a bare uvarint.
var oldMarks = []struct {
	v []byte
	n uint64
}{
	{[]byte{0x00}, 0},
	{[]byte{0x01}, 1},
	{[]byte{0x7f}, 127},
	{[]byte{0xac, 0x02}, 300},
	{[]byte{0x80, 0x80, 0x04}, 1 << 16},
	{[]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}, math.MaxUint64},
}

func TestShardMarksKeepTheirBytes(t *testing.T) {
	for _, m := range oldMarks {
		if got := AppendEpochFloor(nil, m.n); !bytes.Equal(got, m.v) {
			t.Errorf("AppendEpochFloor(%d) = %x, stores hold %x", m.n, got, m.v)
		}
		if got := AppendChangeTrim([]byte("x"), m.n); !bytes.Equal(got[1:], m.v) || got[0] != 'x' {
			t.Errorf("AppendChangeTrim(%d) = %x, stores hold %x", m.n, got, m.v)
		}
		if f, err := DecodeEpochFloor(m.v); err != nil || f != m.n {
			t.Errorf("DecodeEpochFloor(%x) = %d, %v; want %d", m.v, f, err, m.n)
		}
		if f, err := DecodeChangeTrim(m.v); err != nil || f != m.n {
			t.Errorf("DecodeChangeTrim(%x) = %d, %v; want %d", m.v, f, err, m.n)
		}
	}
	// An empty value has always read as 0.
	if f, err := DecodeEpochFloor([]byte{}); err != nil || f != 0 {
		t.Errorf("empty floor: %d, %v", f, err)
	}
	for _, bad := range [][]byte{
		{0x80},       // truncated
		{0x01, 0x00}, // trailing byte
		{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02}, // overflows
	} {
		if _, err := DecodeEpochFloor(bad); !errors.Is(err, ErrCorrupt) {
			t.Errorf("DecodeEpochFloor(%x): %v, want ErrCorrupt", bad, err)
		}
		if _, err := DecodeChangeTrim(bad); !errors.Is(err, ErrCorrupt) {
			t.Errorf("DecodeChangeTrim(%x): %v, want ErrCorrupt", bad, err)
		}
	}
}

func TestShardMarksRoundTrip(t *testing.T) {
	for _, n := range []uint64{0, 1, 127, 128, 1<<35 + 7, math.MaxUint64} {
		if f, err := DecodeEpochFloor(AppendEpochFloor(nil, n)); err != nil || f != n {
			t.Errorf("floor %d: %d, %v", n, f, err)
		}
		if f, err := DecodeChangeTrim(AppendChangeTrim(nil, n)); err != nil || f != n {
			t.Errorf("trim mark %d: %d, %v", n, f, err)
		}
	}
}

// FuzzDecodeShardMarks decodes stored mark values: any bytes decode or
// fail with ErrCorrupt, and what decodes encodes back to the same bytes
// (an empty value aside, which reads as 0).
func FuzzDecodeShardMarks(f *testing.F) {
	for _, m := range oldMarks {
		f.Add(m.v)
	}
	f.Add([]byte{0x80})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		v, err := DecodeEpochFloor(b)
		tv, terr := DecodeChangeTrim(b)
		if v != tv || (err == nil) != (terr == nil) {
			t.Fatalf("floor %d, %v and trim mark %d, %v of the same bytes", v, err, tv, terr)
		}
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("%x: %v, want ErrCorrupt", b, err)
			}
			return
		}
		if len(b) == 0 {
			return
		}
		// A uvarint may carry padding (0x80 0x00 is 0), which binary.Uvarint
		// reads: compare values, not bytes.
		if again, err := DecodeEpochFloor(AppendEpochFloor(nil, v)); err != nil || again != v {
			t.Fatalf("%x: %d re-encoded reads %d, %v", b, v, again, err)
		}
	})
}

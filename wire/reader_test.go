package wire

import (
	"bytes"
	"errors"
	"testing"
)

func TestReaderReadsThePrimitives(t *testing.T) {
	b := appendBytes(appendUvarint([]byte{7}, 300), []byte("abc"))
	b = append(b, 1, 2)
	r := NewReader(b)
	if v := r.U8(); v != 7 {
		t.Fatalf("u8 %d", v)
	}
	if v := r.Uvarint(); v != 300 {
		t.Fatalf("uvarint %d", v)
	}
	if v := r.Bytes(3); string(v) != "abc" {
		t.Fatalf("bytes %q", v)
	}
	if off := r.Offset(); off != len(b)-2 || r.Remaining() != 2 {
		t.Fatalf("offset %d remaining %d", off, r.Remaining())
	}
	if err := r.End(); !errors.Is(err, ErrTrailing) {
		t.Fatalf("end %v", err)
	}
	if v := r.Fixed(2); !bytes.Equal(v, []byte{1, 2}) || r.End() != nil {
		t.Fatalf("fixed %v, end %v", v, r.End())
	}
	if r.U8(); !errors.Is(r.Err(), ErrTruncated) {
		t.Fatalf("read past the end: %v", r.Err())
	}
}

func TestReaderErrorsAreSticky(t *testing.T) {
	for name, tc := range map[string]struct {
		in   []byte
		read func(r *Reader)
		want error
	}{
		"long string": {appendBytes(nil, []byte("abcd")), func(r *Reader) { r.Bytes(3) }, ErrTooLarge},
		"count":       {[]byte{5, 1}, func(r *Reader) { r.Count(10, 1) }, ErrTruncated},
		"max":         {[]byte{11}, func(r *Reader) { r.UvarintMax(10) }, ErrTooLarge},
		"overflow":    {bytes.Repeat([]byte{0xff}, 11), func(r *Reader) { r.Uvarint() }, ErrMalformed},
		"own error":   {[]byte{1}, func(r *Reader) { r.Fail(ErrUnknownKind) }, ErrUnknownKind},
	} {
		r := NewReader(tc.in)
		tc.read(&r)
		if r.U8() != 0 || r.Uvarint() != 0 || r.Bytes(10) != nil || !errors.Is(r.Err(), tc.want) || !errors.Is(r.End(), tc.want) {
			t.Errorf("%s: %v, want %v", name, r.Err(), tc.want)
		}
	}
}

func TestCanonicalReaderRefusesNonMinimalVarints(t *testing.T) {
	padded := []byte{0x81, 0x00} // 1, in two bytes
	for name, read := range map[string]func(r *Reader){
		"uvarint": func(r *Reader) { r.Uvarint() },
		"bytes":   func(r *Reader) { r.Bytes(10) },
		"count":   func(r *Reader) { r.Count(10, 0) },
		"max":     func(r *Reader) { r.UvarintMax(10) },
	} {
		in := append(append([]byte(nil), padded...), 'x')
		lax := NewReader(in)
		read(&lax)
		if lax.Err() != nil {
			t.Errorf("%s: the plain reader refused a padded varint: %v", name, lax.Err())
		}
		strict := NewCanonicalReader(in)
		read(&strict)
		if !errors.Is(strict.Err(), ErrMalformed) {
			t.Errorf("%s: canonical reader accepted a padded varint (%v)", name, strict.Err())
		}
	}
	r := NewCanonicalReader([]byte{0x80, 0x01, 0x00})
	if v := r.Uvarint(); v != 128 || r.Uvarint() != 0 || r.End() != nil {
		t.Fatalf("minimal varints refused: %v", r.Err())
	}
}

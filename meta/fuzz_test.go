package meta

import (
	"bytes"
	"encoding/binary"
	"reflect"
	"testing"
)

func seedCommands() []Command {
	return []Command{
		assign("orders", "n1", 12), assign("t", "", 0), revoke("orders"), update("orders", 4),
		reassign("n1", "a", "n2", "b", "n3"), marker(99), compactCmd(),
	}
}

// Any input either fails to decode or is the canonical encoding of the
// command it decodes to.
func FuzzDecodeCommand(f *testing.F) {
	for _, c := range seedCommands() {
		b, err := AppendCommand(nil, &c)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte{1, 4, 2, 'n', '1', 0xff, 0x7f})
	f.Fuzz(func(t *testing.T, in []byte) {
		var c Command
		if err := DecodeCommand(in, &c); err != nil {
			return
		}
		out, err := AppendCommand(nil, &c)
		if err != nil {
			t.Fatalf("decoded command does not encode: %v", err)
		}
		// Version 1 commands (older logs) decode, and encode as the
		// current version: only current ones must come back byte for byte.
		if in[0] == commandVersion && !bytes.Equal(out, in) {
			t.Fatalf("decode→encode changed the bytes:\n in %x\nout %x", in, out)
		}
		var again Command
		if err := DecodeCommand(out, &again); err != nil || !reflect.DeepEqual(again, c) {
			t.Fatalf("second decode %+v, %v; first %+v", again, err, c)
		}
		// A decoded command applies or is refused; it never panics.
		_ = New().Apply(&c, nil)
	})
}

// Any input either fails to decode or is the canonical snapshot of a state
// that keeps every invariant.
func FuzzDecodeSnapshot(f *testing.F) {
	f.Add(snapshot(New()))
	f.Add(snapshot(sampleState(f)))
	f.Fuzz(func(t *testing.T, in []byte) {
		s, err := DecodeSnapshot(in)
		if err != nil {
			return
		}
		if err := s.checkInvariants(); err != nil {
			t.Fatal(err)
		}
		out := snapshot(s)
		if !bytes.Equal(out, in) {
			t.Fatalf("decode→encode changed the bytes:\n in %x\nout %x", in, out)
		}
		again, err := DecodeSnapshot(out)
		if err != nil {
			t.Fatal(err)
		}
		sameSnapshot(t, s, again)
	})
}

// The input is a log of length-prefixed entries. Applying it keeps every
// invariant, and a replica restored from the snapshot taken half way that
// applies the rest agrees with one that applied everything.
func FuzzApplyLog(f *testing.F) {
	var log []byte
	for _, c := range seedCommands() {
		b, _ := AppendCommand(nil, &c)
		log = binary.AppendUvarint(log, uint64(len(b)))
		log = append(log, b...)
	}
	f.Add(log)
	f.Fuzz(func(t *testing.T, in []byte) {
		var entries [][]byte
		for len(in) > 0 && len(entries) < 256 {
			n, k := binary.Uvarint(in)
			if k <= 0 || n > uint64(len(in)-k) {
				break
			}
			entries = append(entries, in[k:k+int(n)])
			in = in[k+int(n):]
		}
		full := New()
		var late *State
		for i, e := range entries {
			if i == len(entries)/2 {
				var err error
				if late, err = DecodeSnapshot(snapshot(full)); err != nil {
					t.Fatal(err)
				}
			}
			// One replica takes the entry whole, the other decodes it
			// itself: both paths must agree.
			before := snapshot(full)
			err := full.ApplyEntry(e, nil)
			if err != nil && !bytes.Equal(before, snapshot(full)) {
				t.Fatalf("entry %d refused (%v) but changed the state", i, err)
			}
			if late != nil {
				var c Command
				if DecodeCommand(e, &c) == nil {
					_ = late.Apply(&c, nil)
				}
			}
			if err := full.checkInvariants(); err != nil {
				t.Fatal(err)
			}
		}
		if late != nil {
			sameSnapshot(t, full, late)
		}
	})
}

// Any record value either fails to load or is the canonical encoding of
// the record it loads to.
func FuzzLoadRecord(f *testing.F) {
	s := New()
	for _, c := range []Command{assign("a", "n1", 3), assign("b", "n2", 0), revoke("b")} {
		_ = s.Apply(&c, nil)
	}
	for _, t := range []string{"a", "b"} {
		v, _ := s.AppendRecord(nil, t)
		f.Add([]byte(t), v)
	}
	f.Add([]byte("c"), []byte{1, 1, 0, 2, 'n', '1', 0x80})
	f.Fuzz(func(t *testing.T, topic, value []byte) {
		l := NewLoader()
		if l.Add(topic, value) != nil {
			return
		}
		st, err := l.State()
		if err != nil {
			t.Fatal(err)
		}
		out, ok := st.AppendRecord(nil, string(topic))
		if !ok || !bytes.Equal(out, value) {
			t.Fatalf("load→encode changed the bytes:\n in %x\nout %x", value, out)
		}
		if err := st.checkInvariants(); err != nil {
			t.Fatal(err)
		}
	})
}

// Any input either fails to decode or is the encoding of the change it
// decodes to.
func FuzzDecodeChange(f *testing.F) {
	for _, c := range []Change{
		{Kind: ChangeAssigned, Topic: "orders", Owner: "n1", Epoch: 1, Partitions: 12},
		{Kind: ChangeRevoked, Topic: "orders", Epoch: 3},
	} {
		f.Add(AppendChange(nil, &c))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		c, err := DecodeChange(in)
		if err != nil {
			return
		}
		if out := AppendChange(nil, &c); !bytes.Equal(out, in) {
			t.Fatalf("decode→encode changed the bytes:\n in %x\nout %x", in, out)
		}
	})
}

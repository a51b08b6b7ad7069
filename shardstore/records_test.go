package shardstore

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// readAll reads topic from from on as "offset@epoch:value " items.
func readAll(t *testing.T, s *Store, topic string, from uint64) (string, uint64) {
	t.Helper()
	var sb strings.Builder
	next, err := s.ReadRecords([]byte(topic), from, 1<<20, func(off, epoch uint64, v []byte) bool {
		fmt.Fprintf(&sb, "%d@%d:%s ", off, epoch, v)
		return true
	})
	if err != nil {
		t.Fatalf("read %s from %d: %v", topic, from, err)
	}
	return sb.String(), next
}

func TestRecordsKeepTheirEpochAndOffsetsSkipGaps(t *testing.T) {
	fs := vfs.NewMem()
	s := openMem(t, fs, Config{})
	topic := []byte("orders")
	if first, err := s.AppendRecords(topic, 3, 0, [][]byte{[]byte("a"), []byte("b")}, true); first != 0 || err != nil {
		t.Fatalf("append at epoch 3: %d, %v", first, err)
	}
	// A later epoch starts at or above its floor, leaving a gap.
	if first, err := s.AppendRecords(topic, 5, 100, [][]byte{[]byte("c")}, true); first != 100 || err != nil {
		t.Fatalf("append at epoch 5 from 100: %d, %v", first, err)
	}
	// A floor below the high watermark changes nothing.
	if first, err := s.AppendRecords(topic, 5, 7, [][]byte{[]byte("d")}, true); first != 101 || err != nil {
		t.Fatalf("append at epoch 5 from 7: %d, %v", first, err)
	}
	if got, next := readAll(t, s, "orders", 0); got != "0@3:a 1@3:b 100@5:c 101@5:d " || next != 102 {
		t.Fatalf("read: %q next %d", got, next)
	}
	if got, next := readAll(t, s, "orders", 2); got != "100@5:c 101@5:d " || next != 102 {
		t.Fatalf("read from the gap: %q next %d", got, next)
	}
	// An append whose acknowledgement was refused is removed; its offsets
	// are never handed out again, not even after a restart.
	if first, err := s.AppendRecords(topic, 5, 0, [][]byte{[]byte("x"), []byte("y")}, true); first != 102 || err != nil {
		t.Fatalf("append: %d, %v", first, err)
	}
	if err := s.RemoveRecords(topic, 102, 2); err != nil {
		t.Fatal(err)
	}
	if err := s.RemoveRecords(topic, 103, 2); !errors.Is(err, ErrInvalid) {
		t.Fatalf("remove beyond the high watermark: %v", err)
	}
	if got, next := readAll(t, s, "orders", 101); got != "101@5:d " || next != 104 {
		t.Fatalf("read after remove: %q next %d", got, next)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openMem(t, fs, Config{})
	defer s.Close()
	if hwm, err := s.HighWatermark(topic); hwm != 104 || err != nil {
		t.Fatalf("high watermark after reopen: %d, %v", hwm, err)
	}
	if first, err := s.AppendRecords(topic, 5, 0, [][]byte{[]byte("e")}, true); first != 104 || err != nil {
		t.Fatalf("append after reopen: %d, %v", first, err)
	}
	if got, _ := readAll(t, s, "orders", 100); got != "100@5:c 101@5:d 104@5:e " {
		t.Fatalf("read after reopen: %q", got)
	}
}

func TestAStoreOfFormatTwoGetsItsRecordsAtEpochZero(t *testing.T) {
	fs := vfs.NewMem()
	// A version-2 store: records without their epoch.
	s := openMem(t, fs, Config{})
	b := s.db.NewBatch()
	for i, v := range []string{"old-a", "old-b"} {
		if err := b.Set(appendTopicKey(nil, []byte("legacy"), uint64(i)), []byte(v), nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Commit(pebble.Sync); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	f, err := fs.Create(fs.PathJoin("/db", formatFile), vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fmt.Fprintf(f, "%s 2\n", formatMagic); err != nil {
		t.Fatal(err)
	}
	if err := errors.Join(f.Sync(), f.Close()); err != nil {
		t.Fatal(err)
	}
	s = openMem(t, fs, Config{})
	defer s.Close()
	if got, next := readAll(t, s, "legacy", 0); got != "0@0:old-a 1@0:old-b " || next != 2 {
		t.Fatalf("migrated records: %q next %d", got, next)
	}
	if v, err := checkFormat(fs, "/db"); v != FormatVersion || err != nil {
		t.Fatalf("format after migration: %d, %v", v, err)
	}
}

func TestPutRecordsKeepsOffsetsAndEpochs(t *testing.T) {
	s := openMem(t, vfs.NewMem(), Config{})
	defer s.Close()
	topic := []byte("moved")
	if _, err := s.AppendRecords(topic, 1, 0, [][]byte{[]byte("a")}, true); err != nil {
		t.Fatal(err)
	}
	in := []Record{{Offset: 0, Epoch: 1, Value: []byte("a")}, {Offset: 1 << 40, Epoch: 2, Value: []byte("b")}}
	if err := s.PutRecords(topic, in, nil); err != nil {
		t.Fatal(err)
	}
	if got, next := readAll(t, s, "moved", 0); got != "0@1:a 1099511627776@2:b " || next != 1<<40+1 {
		t.Fatalf("after put: %q next %d", got, next)
	}
	if first, err := s.AppendRecords(topic, 3, 2<<40, [][]byte{[]byte("c")}, true); first != 2<<40 || err != nil {
		t.Fatalf("append after put: %d, %v", first, err)
	}
	if err := s.PutRecords(topic, []Record{{Offset: 5}, {Offset: 5}}, nil); !errors.Is(err, ErrInvalid) {
		t.Fatalf("records out of order: %v", err)
	}
}

func TestDeleteRecordsBelowKeepsTheRestAndTheBounds(t *testing.T) {
	fs := vfs.NewMem()
	s := openMem(t, fs, Config{})
	topic := []byte("revoked")
	if _, err := s.AppendRecords(topic, 2, 10, [][]byte{[]byte("a"), []byte("b")}, true); err != nil {
		t.Fatal(err)
	}
	if _, err := s.AppendRecords(topic, 3, 100, [][]byte{[]byte("c")}, true); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteRecordsBelow(topic, 100); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteRecordsBelow(topic, 5); err != nil { // below the first: nothing to do
		t.Fatal(err)
	}
	if got, next := readAll(t, s, "revoked", 0); got != "100@3:c " || next != 101 {
		t.Fatalf("after delete: %q next %d", got, next)
	}
	// Durable: the same after a reopen, and the offsets go on.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openMem(t, fs, Config{})
	defer s.Close()
	if got, next := readAll(t, s, "revoked", 0); got != "100@3:c " || next != 101 {
		t.Fatalf("after reopen: %q next %d", got, next)
	}
	if first, err := s.AppendRecords(topic, 3, 0, [][]byte{[]byte("d")}, true); first != 101 || err != nil {
		t.Fatalf("append after delete: %d, %v", first, err)
	}
}

package node

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/shoalmq/shoal/meta"
	"github.com/shoalmq/shoal/shardstore"
)

// The byte layouts the node keeps on disk are shardstore's; these tests
// hold a store written in the layouts older builds wrote, byte for byte,
// and check that this build reads it and writes the same bytes.

// A shard's epoch floor, as a bare uvarint, is read back at a restart and
// written back in the same layout (the change log's trim mark is
// node/watch's: TestAnOldTrimMarkIsReadAndWrittenAlike).
func TestOldShardMarksAreRead(t *testing.T) {
	st, sm := openTestStore(t)
	const shard = 3
	applyAt(t, st, sm, shard, 5, assignEntry(t, "a", "n1"))
	// Marks as an older build wrote them.
	b := st.NewBatch()
	b.Put(shard, shardstore.EpochFloorKey, []byte{0xac, 0x02}) // 300
	if err := b.Commit(false); err != nil {
		t.Fatal(err)
	}
	fresh := &stateMachine{store: st, shards: make(map[uint64]*shardState)}
	s, err := fresh.shard(shard)
	if err != nil {
		t.Fatal(err)
	}
	if s.st.Floor() != 300 {
		t.Fatalf("floor %d; want 300", s.st.Floor())
	}
	// Written again, from the state: the same bytes.
	b = st.NewBatch()
	b.Delete(shard, shardstore.EpochFloorKey)
	s.putFloor(shard, b)
	if err := b.Commit(false); err != nil {
		t.Fatal(err)
	}
	if got, err := st.Get(shard, shardstore.EpochFloorKey); err != nil || !bytes.Equal(got, []byte{0xac, 0x02}) {
		t.Fatalf("floor written as %x, %v; want ac02", got, err)
	}
	// Bytes that are no uvarint are refused, as they always were.
	b = st.NewBatch()
	b.Put(shard, shardstore.EpochFloorKey, []byte{0x80})
	if err := b.Commit(false); err != nil {
		t.Fatal(err)
	}
	if _, err := (&stateMachine{store: st, shards: make(map[uint64]*shardState)}).shard(shard); !errors.Is(err, meta.ErrBadSnapshot) {
		t.Fatalf("a truncated floor: %v, want meta.ErrBadSnapshot", err)
	}
}

// A generation file as older builds wrote it (8 big-endian bytes) is
// raised above, and rewritten in the same layout.
func TestOldGenerationFileIsRaised(t *testing.T) {
	dir := t.TempDir()
	const old = uint64(1) << 62 // after any start time
	if err := os.WriteFile(filepath.Join(dir, "generation"), binary.BigEndian.AppendUint64(nil, old), 0o644); err != nil {
		t.Fatal(err)
	}
	gen, err := raiseGeneration(dir)
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
	if _, err := raiseGeneration(dir); err == nil {
		t.Fatal("a generation file of 3 bytes was taken")
	}
}

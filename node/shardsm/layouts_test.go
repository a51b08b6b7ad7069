package shardsm

import (
	"bytes"
	"errors"
	"testing"

	"github.com/shoalmq/shoal/meta"
	"github.com/shoalmq/shoal/shardstore"
)

// The byte layouts a shard's state is kept in are shardstore's; this test
// holds marks written in the layouts older builds wrote, byte for byte,
// and checks that this build reads them and writes the same bytes.

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
	fresh := New(Config{Store: st, ChangeLogLen: testLogLen})
	s, err := fresh.shard(shard)
	if err != nil {
		t.Fatal(err)
	}
	if s.State.Floor() != 300 {
		t.Fatalf("floor %d; want 300", s.State.Floor())
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
	if _, err := New(Config{Store: st, ChangeLogLen: testLogLen}).shard(shard); !errors.Is(err, meta.ErrBadSnapshot) {
		t.Fatalf("a truncated floor: %v, want meta.ErrBadSnapshot", err)
	}
}

package node

import (
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"
)

// The byte layouts the node keeps on disk are shardstore's; these tests
// hold a store written in the layouts older builds wrote, byte for byte,
// and check that this build reads it and writes the same bytes (a shard's
// marks: node/shardsm's TestOldShardMarksAreRead).

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

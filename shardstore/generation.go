package shardstore

import (
	"encoding/binary"
	"fmt"
)

// GenerationFile names the file in a node's data directory, beside the
// store's own directory, that holds the node's generation (raised at every
// start): 8 bytes, the generation as a big-endian u64, and nothing else.
const GenerationFile = "generation"

// generationLen is the size of GenerationFile.
const generationLen = 8

// AppendGeneration appends the content of GenerationFile for gen.
func AppendGeneration(dst []byte, gen uint64) []byte {
	return binary.BigEndian.AppendUint64(dst, gen)
}

// DecodeGeneration decodes the content of GenerationFile. Any other size
// than 8 bytes is an error wrapping ErrCorrupt.
func DecodeGeneration(b []byte) (uint64, error) {
	if len(b) != generationLen {
		return 0, fmt.Errorf("shardstore: %w: generation file of %d bytes", ErrCorrupt, len(b))
	}
	return binary.BigEndian.Uint64(b), nil
}

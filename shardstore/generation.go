package shardstore

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"
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

// RaiseGeneration reads dir's GenerationFile, writes a higher value (at
// least now in nanoseconds, so a wiped data directory still rises) and
// fsyncs it, and the directory; it returns the new generation.
func RaiseGeneration(dir string, now time.Time) (uint64, error) {
	p := filepath.Join(dir, GenerationFile)
	var prev uint64
	if b, err := os.ReadFile(p); err == nil {
		if prev, err = DecodeGeneration(b); err != nil {
			return 0, fmt.Errorf("%s: corrupt generation file: %w", p, err)
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return 0, fmt.Errorf("read generation: %w", err)
	}
	gen := max(prev+1, uint64(now.UnixNano()))
	tmp := p + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return 0, fmt.Errorf("write generation: %w", err)
	}
	_, werr := f.Write(AppendGeneration(nil, gen))
	serr := f.Sync()
	cerr := f.Close()
	if err := errors.Join(werr, serr, cerr); err != nil {
		return 0, fmt.Errorf("write generation: %w", err)
	}
	if err := os.Rename(tmp, p); err != nil {
		return 0, fmt.Errorf("write generation: %w", err)
	}
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		_ = d.Close()
	}
	return gen, nil
}

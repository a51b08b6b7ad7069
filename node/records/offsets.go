package records

import (
	"fmt"

	"github.com/shoalmq/shoal/internal/mutant"
)

// Offsets across ownership moves. A topic's owner at epoch e gives its
// records offsets from OffsetBase(e) on: e-1 in the top 24 bits, a count
// in the offsetCountBits below. Epochs only rise, and one owner at a time
// writes each epoch (docs/leases.md), so an offset never names two
// records: not after a move, not after n2→n1→n2, not after a crash of the
// owner, with no message or disk write beyond the append itself. The
// price is sparse offsets: a move leaves a gap that fetches skip.

// offsetCountBits is the width of the count of records within one epoch
// (2^40, about 10^12 records); the epoch takes the bits above it.
const offsetCountBits = 40

// MaxOffsetEpoch is the highest epoch a topic may take records at: epochs
// above it have no offsets left (16,777,216 ownership changes of one
// topic).
const MaxOffsetEpoch = 1 << (64 - offsetCountBits)

// ErrOffsetSpace is wrapped by the refusal of a produce at an epoch above
// MaxOffsetEpoch. Its text is the node's, which clients are answered with.
var ErrOffsetSpace = fmt.Errorf("node: epoch beyond the offset space (max %d)", uint64(MaxOffsetEpoch))

// OffsetBase is the first offset a record written at epoch may take.
func OffsetBase(epoch uint64) (uint64, error) {
	if epoch == 0 || epoch > MaxOffsetEpoch {
		return 0, fmt.Errorf("epoch %d: %w", epoch, ErrOffsetSpace)
	}
	if mutant.On(mutant.OffsetsReused) {
		return 0, nil
	}
	return (epoch - 1) << offsetCountBits, nil
}

package shardstore

import "github.com/shoalmq/shoal/internal/invariants"

// Offsets only grow. In builds with invariants (the invariants tag, or
// -race) the appends check it before they commit and panic with an
// invariants.Violation when it breaks; other builds compile none of it.
// Only DeleteTopic starts a topic's offsets again.

// checkAppend checks an append of n records from offset first on: it
// starts at or above the high watermark and the first retained offset, so
// no offset is handed out twice. t is locked.
func (t *topicLog) checkAppend(topic []byte, first uint64, n int) {
	switch {
	case n <= 0:
		invariants.Failf("shardstore: topic %q: an append of %d records", topic, n)
	case first < t.next:
		invariants.Failf("shardstore: topic %q: records appended from offset %d, below the high watermark %d", topic, first, t.next)
	case first < t.start:
		invariants.Failf("shardstore: topic %q: records appended from offset %d, below the first retained offset %d", topic, first, t.start)
	}
}

// checkWatermark checks a move of the high watermark to next: it never
// goes back. t is locked.
func (t *topicLog) checkWatermark(topic []byte, next uint64) {
	if next < t.next {
		invariants.Failf("shardstore: topic %q: the high watermark would go back from %d to %d", topic, t.next, next)
	}
}

//go:build invariants || race

package shardstore

import (
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/shoalmq/shoal/internal/invariants/invariantstest"
)

// An append that would hand out an offset again, or move the high
// watermark back, is stopped before it commits.
func TestOffsetsOnlyGrow(t *testing.T) {
	s := openMem(t, vfs.NewMem(), Config{})
	defer s.Close()
	topic := []byte("orders")
	if _, err := s.AppendRecords(topic, 1, 0, [][]byte{[]byte("a"), []byte("b")}, false); err != nil {
		t.Fatal(err)
	}
	if err := s.TrimTopic(topic, 1); err != nil {
		t.Fatal(err)
	}
	tl, err := s.topicLocked(topic)
	if err != nil {
		t.Fatal(err)
	}
	b := s.db.NewBatch()
	defer b.Close()
	defer tl.mu.Unlock()
	// A faulty append that starts at an offset already handed out.
	invariantstest.MustViolate(t, "records appended from offset 1, below the high watermark 2", func() {
		_ = s.commitAppend(b, tl, topic, 1, 1, false)
	})
	tl.next = 0 // as if the watermark had been lost
	invariantstest.MustViolate(t, "below the first retained offset 1", func() { tl.checkAppend(topic, 0, 1) })
	tl.next = 2
	invariantstest.MustViolate(t, "an append of 0 records", func() { tl.checkAppend(topic, 2, 0) })
	invariantstest.MustViolate(t, "the high watermark would go back from 2 to 1", func() { tl.checkWatermark(topic, 1) })
}

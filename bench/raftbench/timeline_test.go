package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
)

func TestTimelineRows(t *testing.T) {
	tl := newTimeline(&cluster{}, 2)
	ms := func(n int64) int64 { return n * int64(time.Millisecond) }
	// Client 0: three proposals in the first row, one in the third.
	tl.ends[0] = []int64{ms(10), ms(50), ms(99), ms(250)}
	tl.lats[0] = []int64{ms(4), ms(8), ms(6), ms(30)}
	// Client 1: one in the first row, one past the window (dropped).
	tl.ends[1] = []int64{ms(20), ms(400)}
	tl.lats[1] = []int64{ms(2), ms(1)}
	tl.samples = []timelineSample{
		{at: 0, gcs: 7, flushes: 1},
		{at: 110 * time.Millisecond, gcs: 8, flushes: 1},
		{at: 220 * time.Millisecond, gcs: 8, flushes: 3, compcs: 1},
	}
	path := filepath.Join(t.TempDir(), "tl.tsv")
	if err := tl.write(path, 300*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	want := []string{
		"t_ms\tcommits\tp50_ms\tp99_ms\tmax_ms\tgc_cycles\tflushes\tcompactions",
		"0\t4\t6.0\t8.0\t8.0\t0\t0\t0",
		"100\t0\t0.0\t0.0\t0.0\t1\t0\t0",
		"200\t1\t30.0\t30.0\t30.0\t0\t2\t1",
		"300\t0\t0.0\t0.0\t0.0\t0\t0\t0",
	}
	if len(lines) != len(want) {
		t.Fatalf("rows:\n%s\nwant %d lines", b, len(want))
	}
	for i := range want {
		if lines[i] != want[i] {
			t.Errorf("row %d = %q, want %q", i, lines[i], want[i])
		}
	}
}

func TestWALFSTimesOnlyLogFiles(t *testing.T) {
	dir := t.TempDir()
	fs := newWALFS()
	for _, name := range []string{"000001.log", "000002.sst", "MANIFEST-000001"} {
		f, err := fs.Create(filepath.Join(dir, name), vfs.WriteCategoryUnspecified)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.Write([]byte("x")); err != nil {
			t.Fatal(err)
		}
		if err := f.SyncData(); err != nil {
			t.Fatal(err)
		}
		if err := f.Sync(); err != nil {
			t.Fatal(err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if n := fs.syncs.Load(); n != 2 {
		t.Fatalf("timed syncs = %d, want 2 (the .log file's SyncData and Sync)", n)
	}
	if fs.nanos.Load() <= 0 {
		t.Fatal("no sync time recorded")
	}
}

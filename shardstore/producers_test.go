package shardstore

import (
	"bytes"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/shoalmq/shoal/wire"
)

// once appends records as a produce of session (id, seq, floor).
func once(t *testing.T, s *Store, topic string, epoch uint64, id, seq, floor uint64, values ...string) (wire.ProducerAnswer, bool, error) {
	t.Helper()
	recs := make([][]byte, len(values))
	for i, v := range values {
		recs[i] = []byte(v)
	}
	return s.AppendRecordsOnce([]byte(topic), epoch, 0, recs, wire.Session{ID: id, Seq: seq, Floor: floor}, true)
}

// mustOnce is once that must succeed with the answer at offset, dup or not.
func mustOnce(t *testing.T, s *Store, topic string, epoch uint64, id, seq, floor uint64, wantOffset uint64, wantDup bool, values ...string) {
	t.Helper()
	a, dup, err := once(t, s, topic, epoch, id, seq, floor, values...)
	if err != nil || a.Offset != wantOffset || dup != wantDup || a.Seq != seq || int(a.Count) != len(values) {
		t.Fatalf("produce %d of session %d: %+v dup %v, %v; want offset %d dup %v", seq, id, a, dup, err, wantOffset, wantDup)
	}
}

func TestARetriedProduceIsAppendedOnceWithItsFirstAnswer(t *testing.T) {
	s := openMem(t, vfs.NewMem(), Config{})
	defer s.Close()
	mustOnce(t, s, "orders", 2, 7, 1, 0, 0, false, "a", "b")
	// The first answer was lost: the retry gets it, at the epoch it was
	// appended at, and nothing is appended again.
	a, dup, err := once(t, s, "orders", 3, 7, 1, 0, "a", "b")
	if err != nil || !dup || a.Offset != 0 || a.Epoch != 2 {
		t.Fatalf("retry: %+v dup %v, %v", a, dup, err)
	}
	if got, next := readAll(t, s, "orders", 0); got != "0@2:a 1@2:b " || next != 2 {
		t.Fatalf("after the retry: %q next %d", got, next)
	}
	// A retry with other records is a client's mistake.
	if _, _, err := once(t, s, "orders", 2, 7, 1, 0, "a"); !errors.Is(err, ErrInvalid) {
		t.Fatalf("retry with one record of two: %v", err)
	}
	// Produces without a session and of other sessions go on as before.
	if first, err := s.AppendRecords([]byte("orders"), 2, 0, [][]byte{[]byte("plain")}, true); first != 2 || err != nil {
		t.Fatalf("plain append: %d, %v", first, err)
	}
	mustOnce(t, s, "orders", 2, 8, 1, 0, 3, false, "other")
	// Out of order: seq 3 lands before seq 2; both are first attempts.
	mustOnce(t, s, "orders", 2, 7, 3, 1, 4, false, "d")
	mustOnce(t, s, "orders", 2, 7, 2, 1, 5, false, "c")
	mustOnce(t, s, "orders", 2, 7, 3, 1, 4, true, "d")
	// The floor says seq 1 is finished: its answer is dropped, and a copy
	// of it that still comes is refused, not appended.
	if _, _, err := once(t, s, "orders", 2, 7, 1, 0, "a", "b"); !errors.Is(err, ErrProducerExpired) {
		t.Fatalf("a produce below the floor: %v", err)
	}
	if hw, _ := s.HighWatermark([]byte("orders")); hw != 6 {
		t.Fatalf("high watermark %d, want 6", hw)
	}
	if _, _, err := s.AppendRecordsOnce([]byte("orders"), 2, 0, [][]byte{nil}, wire.Session{ID: 7, Seq: 4, Floor: 4}, true); !errors.Is(err, ErrInvalid) {
		t.Fatalf("a seq at its own floor: %v", err)
	}
}

func TestProducerSessionsSurviveARestart(t *testing.T) {
	dir := t.TempDir()
	open := func() *Store {
		s, err := Open(dir, Config{Logger: quietLogger()})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	s := open()
	mustOnce(t, s, "orders", 1, 7, 1, 0, 0, false, "a")
	mustOnce(t, s, "orders", 1, 9, 4, 2, 1, false, "b", "c")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open()
	defer s.Close()
	mustOnce(t, s, "orders", 1, 7, 1, 0, 0, true, "a")
	mustOnce(t, s, "orders", 1, 9, 4, 2, 1, true, "b", "c")
	if _, _, err := once(t, s, "orders", 1, 9, 2, 0, "x"); !errors.Is(err, ErrProducerExpired) {
		t.Fatalf("below the floor after a restart: %v", err)
	}
	mustOnce(t, s, "orders", 1, 7, 2, 1, 3, false, "d")
	if got, _ := readAll(t, s, "orders", 0); got != "0@1:a 1@1:b 2@1:c 3@1:d " {
		t.Fatalf("after the restart: %q", got)
	}
}

func TestARemovedAppendIsAppendedAgainOnRetry(t *testing.T) {
	s := openMem(t, vfs.NewMem(), Config{})
	defer s.Close()
	mustOnce(t, s, "orders", 1, 7, 1, 0, 0, false, "a", "b")
	// Its acknowledgement was refused: the records and the answer go.
	if err := s.RemoveRecords([]byte("orders"), 0, 2); err != nil {
		t.Fatal(err)
	}
	mustOnce(t, s, "orders", 2, 7, 1, 0, 2, false, "a", "b")
	if got, _ := readAll(t, s, "orders", 0); got != "2@2:a 3@2:b " {
		t.Fatalf("after the retry: %q", got)
	}
	// A deleted topic forgets its sessions with its records.
	if err := s.DeleteTopic([]byte("orders")); err != nil {
		t.Fatal(err)
	}
	mustOnce(t, s, "orders", 3, 7, 1, 0, 0, false, "a", "b")
}

func TestProducerSessionsMoveWithTheRecords(t *testing.T) {
	from := openMem(t, vfs.NewMem(), Config{})
	defer from.Close()
	to := openMem(t, vfs.NewMem(), Config{})
	defer to.Close()
	// The new owner held the topic before: it keeps what it knew of
	// session 8, and takes the previous owner's newer state of 7.
	mustOnce(t, to, "orders", 1, 8, 1, 0, 0, false, "old")
	mustOnce(t, to, "orders", 1, 7, 1, 0, 1, false, "a")
	if err := from.PutRecords([]byte("orders"), []Record{{Offset: 0, Epoch: 1, Value: []byte("old")}, {Offset: 1, Epoch: 1, Value: []byte("a")}}, nil); err != nil {
		t.Fatal(err)
	}
	mustOnce(t, from, "orders", 2, 7, 2, 1, 2, false, "b")
	ps, err := from.Producers([]byte("orders"))
	if err != nil || len(ps) != 1 || ps[0].ID != 7 || ps[0].Floor != 1 || len(ps[0].Answers) != 1 {
		t.Fatalf("producers: %+v, %v", ps, err)
	}
	recs := []Record{{Offset: 2, Epoch: 2, Value: []byte("b")}}
	if err := to.PutRecords([]byte("orders"), recs, ps); err != nil {
		t.Fatal(err)
	}
	mustOnce(t, to, "orders", 3, 7, 2, 1, 2, true, "b")
	mustOnce(t, to, "orders", 3, 8, 1, 0, 0, true, "old")
	if _, _, err := once(t, to, "orders", 3, 7, 1, 0, "a"); !errors.Is(err, ErrProducerExpired) {
		t.Fatalf("below the merged floor: %v", err)
	}
	mustOnce(t, to, "orders", 3, 7, 3, 2, 3, false, "c")
}

func TestProducerStateIsBounded(t *testing.T) {
	s := openMem(t, vfs.NewMem(), Config{})
	defer s.Close()
	// One session with more produces in flight than it keeps answers of:
	// the lowest is dropped, and a retry of it refused.
	for seq := uint64(1); seq <= wire.MaxProducerAnswers+1; seq++ {
		mustOnce(t, s, "busy", 1, 7, seq, 0, seq-1, false, "x")
	}
	if _, _, err := once(t, s, "busy", 1, 7, 1, 0, "x"); !errors.Is(err, ErrProducerExpired) {
		t.Fatalf("retry of a dropped answer: %v", err)
	}
	mustOnce(t, s, "busy", 1, 7, 2, 0, 1, true, "x")

	// More sessions than a topic keeps: the least recently used goes.
	for id := uint64(1); id <= wire.MaxProducers; id++ {
		if _, _, err := s.AppendRecordsOnce([]byte("crowded"), 1, 0, [][]byte{nil}, wire.Session{ID: id, Seq: 1}, false); err != nil {
			t.Fatal(err)
		}
	}
	mustOnce(t, s, "crowded", 1, 1, 1, 0, 0, true, "") // session 1 used again: 2 is the oldest now
	mustOnce(t, s, "crowded", 1, 5000, 1, 0, wire.MaxProducers, false, "")
	ps, err := s.Producers([]byte("crowded"))
	if err != nil || len(ps) != wire.MaxProducers || ps[0].ID != 1 || ps[1].ID != 3 {
		t.Fatalf("%d producers from %d, %d: %v", len(ps), ps[0].ID, ps[1].ID, err)
	}
	// What the bound costs (see producers.go): a retry of the dropped
	// session is taken for a first attempt.
	mustOnce(t, s, "crowded", 1, 2, 1, 0, wire.MaxProducers+1, false, "")

	// A session with no answer left goes before a less recently used one.
	done := &wire.Producer{ID: 1, Used: 10}
	live := &wire.Producer{ID: 2, Used: 5, Answers: []wire.ProducerAnswer{{Seq: 1, Count: 1}}}
	if !dropFirst(done, live) || dropFirst(live, done) {
		t.Fatal("a finished session is not dropped first")
	}
}

func TestCopiesOfOneProduceRacingAppendOnce(t *testing.T) {
	s := openMem(t, vfs.NewMem(), Config{})
	defer s.Close()
	const copies = 16
	var wg sync.WaitGroup
	answers := make([]wire.ProducerAnswer, copies)
	dups := make([]bool, copies)
	for i := range copies {
		wg.Go(func() {
			var err error
			answers[i], dups[i], err = s.AppendRecordsOnce([]byte("t"), 1, 0, [][]byte{[]byte("v")}, wire.Session{ID: 3, Seq: 1}, true)
			if err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	firsts := 0
	for i := range copies {
		if !dups[i] {
			firsts++
		}
		if answers[i] != answers[0] {
			t.Fatalf("copy %d answered %+v, copy 0 %+v", i, answers[i], answers[0])
		}
	}
	if hw, _ := s.HighWatermark([]byte("t")); firsts != 1 || hw != 1 {
		t.Fatalf("%d first attempts, high watermark %d", firsts, hw)
	}
}

func TestCorruptProducerStateIsReported(t *testing.T) {
	fs := vfs.NewMem()
	s := openMem(t, fs, Config{})
	mustOnce(t, s, "t", 1, 7, 1, 0, 0, false, "v")
	if err := s.db.Set(appendProducerKey(nil, []byte("t"), 7), []byte{valueVersion, 5, 0, 0, 1, 3, 1, 0, 1}, nil); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openMem(t, fs, Config{})
	defer s.Close()
	if _, err := s.HighWatermark([]byte("t")); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("an answer below its floor loaded: %v", err)
	}
}

// BenchmarkAppendSession is the store's share of an append of one 100-byte
// record, not synced (so that the CPU shows, not the disk), with no
// producer session and with one of 16 sessions taking turns.
func BenchmarkAppendSession(b *testing.B) {
	for _, mode := range []string{"without", "with"} {
		b.Run(mode, func(b *testing.B) {
			s := openMem(b, vfs.NewMem(), Config{})
			defer s.Close()
			topic, recs := []byte("bench"), [][]byte{make([]byte, 100)}
			b.ReportAllocs()
			for i := range b.N {
				var err error
				if mode == "without" {
					_, err = s.AppendRecords(topic, 1, 0, recs, false)
				} else {
					seq := uint64(i/16 + 1)
					_, _, err = s.AppendRecordsOnce(topic, 1, 0, recs, wire.Session{ID: uint64(i%16 + 1), Seq: seq, Floor: seq - 1}, false)
				}
				if err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// FuzzDecodeProducer feeds arbitrary bytes to the decoder of a producer
// session's value: it fails with ErrCorrupt naming the key, or yields a
// session that re-encodes to the same bytes.
func FuzzDecodeProducer(f *testing.F) {
	f.Add(appendProducerValue(nil, &wire.Producer{ID: 7, Floor: 2, Forgot: 3, Used: 9, Answers: []wire.ProducerAnswer{{Seq: 4, Epoch: 1, Offset: 8, Count: 2}}}))
	f.Add([]byte{valueVersion, 5, 0, 0, 1, 3, 1, 0, 1})
	key := appendProducerKey(nil, []byte("t"), 7)
	f.Fuzz(func(t *testing.T, v []byte) {
		p, err := decodeProducer(key, v)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), `topic "t" producer 7`) {
				t.Fatalf("error %v does not name the key or wrap ErrCorrupt", err)
			}
			return
		}
		if got := appendProducerValue(nil, p); !bytes.Equal(got, v) {
			t.Fatalf("decoded %x re-encodes to %x", v, got)
		}
	})
}

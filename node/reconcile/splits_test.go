package reconcile

import (
	"testing"
	"time"
)

func TestSplitterWaitsOutTheWindow(t *testing.T) {
	s := NewSplitter(SplitConfig{Topics: 100, Window: time.Second, Every: time.Millisecond})
	t0 := time.Unix(1000, 0)
	hot := []SplitSample{{Shard: 3, Splittable: true, Topics: 150}, {Shard: 4, Splittable: true, Topics: 50}}
	for i := range 10 {
		if id, _, ok := s.Plan(t0.Add(time.Duration(i)*100*time.Millisecond), hot, 8, 8, 3); ok {
			t.Fatalf("split %d after %d ms over, before the window", id, i*100)
		}
	}
	id, why, ok := s.Plan(t0.Add(time.Second), hot, 8, 8, 3)
	if !ok || id != 3 || why != SplitTopics {
		t.Fatalf("after the window: %d %v %v, want shard 3 for topics", id, why, ok)
	}
}

func TestSplitterForgetsABurst(t *testing.T) {
	s := NewSplitter(SplitConfig{Topics: 100, Window: time.Second, Every: time.Millisecond})
	t0 := time.Unix(1000, 0)
	over := []SplitSample{{Shard: 1, Splittable: true, Topics: 150}}
	under := []SplitSample{{Shard: 1, Splittable: true, Topics: 90}}
	s.Plan(t0, over, 8, 8, 3)
	s.Plan(t0.Add(900*time.Millisecond), under, 8, 8, 3)
	if _, _, ok := s.Plan(t0.Add(1100*time.Millisecond), over, 8, 8, 3); ok {
		t.Fatal("split a shard that fell under its threshold within the window")
	}
	if _, _, ok := s.Plan(t0.Add(2100*time.Millisecond), over, 8, 8, 3); !ok {
		t.Fatal("no split a window after it went over again")
	}
}

func TestSplitterMeasuresTheRate(t *testing.T) {
	s := NewSplitter(SplitConfig{Rate: 1000, Window: time.Second, Every: time.Millisecond})
	t0 := time.Unix(1000, 0)
	var applied uint64
	var got []uint32
	for i := range 30 {
		applied += 200 // 2,000 a second at 100 ms a sample
		if id, why, ok := s.Plan(t0.Add(time.Duration(i)*100*time.Millisecond), []SplitSample{
			{Shard: 7, Splittable: true, Applied: applied},
			{Shard: 9, Splittable: true, Applied: uint64(i) * 10},
		}, 8, 8, 3); ok {
			if why != SplitRate {
				t.Fatalf("reason %v, want rate", why)
			}
			got = append(got, id)
		}
	}
	if len(got) == 0 || got[0] != 7 {
		t.Fatalf("splits %v, want shard 7 (2,000/s against 1,000) and never 9 (100/s)", got)
	}
	for _, id := range got {
		if id == 9 {
			t.Fatalf("split the cold shard: %v", got)
		}
	}
}

func TestSplitterIsPacedAndBounded(t *testing.T) {
	s := NewSplitter(SplitConfig{Topics: 10, Window: time.Millisecond, Every: time.Second, MaxShards: 16})
	t0 := time.Unix(1000, 0)
	hot := []SplitSample{{Shard: 1, Splittable: true, Topics: 50}, {Shard: 2, Splittable: true, Topics: 60}}
	s.Plan(t0, hot, 8, 8, 3)
	id, _, ok := s.Plan(t0.Add(10*time.Millisecond), hot, 8, 8, 3)
	if !ok || id != 2 {
		t.Fatalf("first split %d %v, want the hotter shard 2", id, ok)
	}
	if _, _, ok := s.Plan(t0.Add(500*time.Millisecond), hot[:1], 8, 9, 3); ok {
		t.Fatal("a second split within Every")
	}
	if _, _, ok := s.Plan(t0.Add(1100*time.Millisecond), hot[:1], 8, 9, 3); !ok {
		t.Fatal("no split once Every passed")
	}
	if _, _, ok := s.Plan(t0.Add(5*time.Second), hot[:1], 8, 16, 3); ok {
		t.Fatal("split at MaxShards")
	}
	unsplittable := []SplitSample{{Shard: 1, Splittable: false, Topics: 50}}
	if _, _, ok := s.Plan(t0.Add(10*time.Second), unsplittable, 8, 9, 3); ok {
		t.Fatal("split a shard at the smallest range")
	}
}

func TestSplitterFollowsTheMembers(t *testing.T) {
	s := NewSplitter(SplitConfig{PerMember: 2, Every: time.Second})
	t0 := time.Unix(1000, 0)
	// A base of 4: depth 0 holds ids 0-3, depth 1 ids 4-11, depth 2 12-27.
	led := []SplitSample{
		{Shard: 12, Depth: 2, Splittable: true},
		{Shard: 3, Depth: 0, Splittable: true},
		{Shard: 2, Depth: 0, Splittable: true},
	}
	if _, _, ok := s.Plan(t0, led, 4, 6, 2); ok {
		t.Fatal("split with two shards per member already")
	}
	// Three members want six shards: the base halved once, eight.
	id, why, ok := s.Plan(t0, led, 4, 6, 3)
	if !ok || id != 2 || why != SplitMembers {
		t.Fatalf("with 6 shards for 3 members: %d %v %v, want the widest, lowest shard 2", id, why, ok)
	}
	// Every range at the members' depth: none splits, whatever the count.
	if _, _, ok := s.Plan(t0.Add(2*time.Second), led[:1:1], 4, 5, 3); ok {
		t.Fatal("split a shard at the members' depth")
	}
	if _, _, ok := s.Plan(t0.Add(4*time.Second), []SplitSample{{Shard: 5, Depth: 1, Splittable: true}}, 4, 7, 3); ok {
		t.Fatal("split a shard at the members' depth")
	}
}

func TestMemberDepth(t *testing.T) {
	for _, c := range []struct{ base, want, depth int }{
		{8, 6, 0}, {8, 8, 0}, {8, 9, 1}, {8, 18, 2}, {8, 30, 2}, {8, 33, 3}, {2, 9, 3}, {1024, 18, 0}, {8, 0, 0},
	} {
		if got := MemberDepth(c.base, c.want); got != c.depth {
			t.Errorf("MemberDepth(%d, %d) = %d, want %d", c.base, c.want, got, c.depth)
		}
	}
}

func TestSplitConfigValidate(t *testing.T) {
	for _, c := range []SplitConfig{
		{Topics: -1, Window: time.Second, Every: time.Second},
		{Bytes: -1, Window: time.Second, Every: time.Second},
		{Bytes: 10, Every: time.Second},
		{Topics: 10, Every: time.Second},
		{Rate: 10, Window: time.Second},
		{PerMember: 2},
	} {
		if c.Validate() == nil {
			t.Errorf("%+v accepted", c)
		}
	}
	for _, c := range []SplitConfig{{}, {PerMember: 2, Every: time.Second}, {Topics: 1, Rate: 1, Window: 1, Every: 1, MaxShards: 1}} {
		if err := c.Validate(); err != nil {
			t.Errorf("%+v refused: %v", c, err)
		}
	}
}

// A shard of few topics but many bytes (long names, tombstones) splits on
// its size, the larger ratio naming the reason.
func TestSplitterWeighsTheBytes(t *testing.T) {
	s := NewSplitter(SplitConfig{Topics: 100, Bytes: 1 << 20, Window: time.Second, Every: time.Millisecond})
	t0 := time.Unix(1000, 0)
	led := []SplitSample{
		{Shard: 2, Splittable: true, Topics: 120, Bytes: 10 << 10}, // 1.2 of its topics
		{Shard: 5, Splittable: true, Topics: 10, Bytes: 3 << 20},   // 3 of its bytes
		{Shard: 6, Splittable: true, Topics: 10, Bytes: 512 << 10},
	}
	s.Plan(t0, led, 8, 8, 3)
	id, why, ok := s.Plan(t0.Add(time.Second), led, 8, 8, 3)
	if !ok || id != 5 || why != SplitBytes || why.String() != "bytes" {
		t.Fatalf("%d %v %v, want shard 5 for its bytes", id, why, ok)
	}
	id, why, ok = s.Plan(t0.Add(2*time.Second), led[:1], 8, 9, 3)
	if !ok || id != 2 || why != SplitTopics {
		t.Fatalf("%d %v %v, want shard 2 for its topics", id, why, ok)
	}
	if _, _, ok := s.Plan(t0.Add(3*time.Second), led[2:], 8, 10, 3); ok {
		t.Fatal("split a shard under both thresholds")
	}
}

package reconcile

import (
	"cmp"
	"errors"
	"fmt"
	"time"
)

// Automatic splits: the leader of a shard is its local controller, and
// splits it when it holds too many topics, grows too large or takes too
// many writes, each
// held above its threshold for a window, or when the cluster has fewer
// shards than its members call for (docs/shards.md). The Splitter
// decides; the Driver samples the shards this node leads and proposes the
// split it names.

// SplitConfig sets when a shard leader splits its shard on its own. The
// zero value splits nothing.
type SplitConfig struct {
	// Topics: a shard holding more active topics than this is over. 0:
	// no limit.
	Topics int
	// Bytes: a shard larger than this in the store (its records, tombstones
	// included: meta.State.Bytes) is over. 0: no limit.
	Bytes int64
	// Rate: a shard applying more commands a second than this, measured
	// between two samples, is over. 0: no limit.
	Rate float64
	// Window is how long a shard must stay over before it splits, so that
	// a burst splits nothing. Required when Topics or Rate is set.
	Window time.Duration
	// PerMember: a leader splits each shard it leads whose range is wider
	// than the cluster's base shards halved until there are at least
	// PerMember times its live members of them, so that shards, and with
	// them leaderships, follow the nodes. The ranges so made are all of
	// one width, and carry alike. 0: off.
	PerMember int
	// Every: this node starts at most one split per Every. Required when
	// any trigger is set.
	Every time.Duration
	// MaxShards: no split once the cluster has this many live shards. 0:
	// the shard space's capacity alone bounds them.
	MaxShards int
}

// On reports whether any trigger is set.
func (c SplitConfig) On() bool { return c.Topics > 0 || c.Bytes > 0 || c.Rate > 0 || c.PerMember > 0 }

// Validate reports a trigger without the pacing it needs.
func (c SplitConfig) Validate() error {
	switch {
	case c.Topics < 0 || c.Bytes < 0 || c.Rate < 0 || c.PerMember < 0 || c.MaxShards < 0:
		return fmt.Errorf("reconcile: split thresholds must not be negative: %+v", c)
	case (c.Topics > 0 || c.Bytes > 0 || c.Rate > 0) && c.Window <= 0:
		return errors.New("reconcile: a split threshold needs a positive window")
	case c.On() && c.Every <= 0:
		return errors.New("reconcile: automatic splits need a positive pacing (Every)")
	}
	return nil
}

// SplitSample is what a leader reads of one shard it leads.
type SplitSample struct {
	Shard uint32
	// Depth is how many splits the shard's range descends from its base
	// shard (router.ShardSpace.Range); Splittable whether it may split
	// again.
	Depth      int
	Splittable bool
	// Topics is its count of active topics, Bytes its size in the store
	// (meta.State.Bytes); Applied counts the commands its replica here
	// has applied, ever (only differences are used).
	Topics  int
	Bytes   int64
	Applied uint64
}

// SplitReason says why a Splitter chose a shard.
type SplitReason uint8

const (
	SplitTopics  SplitReason = iota + 1 // over Topics for Window
	SplitRate                           // over Rate for Window
	SplitMembers                        // wider than PerMember·members shards of one width
	SplitBytes                          // over Bytes for Window
)

func (r SplitReason) String() string {
	switch r {
	case SplitTopics:
		return "topics"
	case SplitRate:
		return "rate"
	case SplitMembers:
		return "members"
	case SplitBytes:
		return "bytes"
	}
	return "unknown"
}

// Splitter decides the automatic splits of the shards one node leads. Not
// safe for concurrent use: the Driver's pass owns it.
type Splitter struct {
	cfg    SplitConfig
	shards map[uint32]*splitTrack
	last   time.Time // when this node last started a split
	seen   uint64    // Plan calls, to drop the shards no longer led
}

// splitTrack is one led shard's history between samples.
type splitTrack struct {
	applied uint64
	at      time.Time
	over    time.Time // since when it has been over; zero when not
	seen    uint64
	rate    float64
}

// NewSplitter returns a Splitter for cfg (validated by the caller).
func NewSplitter(cfg SplitConfig) *Splitter {
	return &Splitter{cfg: cfg, shards: make(map[uint32]*splitTrack)}
}

// Plan takes the samples of every shard this node leads at now, with the
// cluster's base shard count, live shards and members, and returns the
// shard to split, if one is due and the pacing allows. A shard that is sampled for the first
// time, or again after a pass without it, starts its window anew. After a
// split is returned the caller proposes it; Plan counts it as started.
func (s *Splitter) Plan(now time.Time, samples []SplitSample, base, liveShards, members int) (shard uint32, why SplitReason, ok bool) {
	s.seen++
	var best *SplitSample
	var bestScore float64
	for i := range samples {
		sm := &samples[i]
		t := s.shards[sm.Shard]
		if t == nil {
			t = &splitTrack{applied: sm.Applied, at: now}
			s.shards[sm.Shard] = t
		} else if dt := now.Sub(t.at); dt > 0 {
			t.rate = float64(sm.Applied-t.applied) / dt.Seconds()
			t.applied, t.at = sm.Applied, now
		}
		t.seen = s.seen
		over, score, reason := s.over(sm, t)
		switch {
		case !over:
			t.over = time.Time{}
			continue
		case t.over.IsZero():
			t.over = now
		}
		if !sm.Splittable || now.Sub(t.over) < s.cfg.Window {
			continue
		}
		if best == nil || score > bestScore {
			best, bestScore, why = sm, score, reason
		}
	}
	for k, t := range s.shards {
		if t.seen != s.seen {
			delete(s.shards, k)
		}
	}
	if s.cfg.MaxShards > 0 && liveShards >= s.cfg.MaxShards {
		return 0, 0, false
	}
	if !s.last.IsZero() && now.Sub(s.last) < s.cfg.Every {
		return 0, 0, false
	}
	if best == nil && s.cfg.PerMember > 0 {
		// The widest splittable shard this node leads above the members'
		// depth, the lowest id among equals: every leader splits its
		// own, at its own pace. Halving every range down to one depth,
		// rather than the widest ones until the count is reached, keeps
		// the ranges of one width: 20 shards of a base of 8 would be 12
		// of a sixteenth of the keys and 8 of a thirty-second, and the
		// leaders of the wide ones would carry twice the load.
		want := MemberDepth(base, s.cfg.PerMember*members)
		for i := range samples {
			sm := &samples[i]
			if sm.Splittable && sm.Depth < want && (best == nil || cmp.Or(cmp.Compare(sm.Depth, best.Depth), cmp.Compare(sm.Shard, best.Shard)) < 0) {
				best, why = sm, SplitMembers
			}
		}
	}
	if best == nil {
		return 0, 0, false
	}
	s.last = now
	if t := s.shards[best.Shard]; t != nil {
		t.over = time.Time{}
	}
	return best.Shard, why, true
}

// over reports whether a sampled shard is over a threshold, by how
// much (the largest of its ratios to the thresholds), and which one.
func (s *Splitter) over(sm *SplitSample, t *splitTrack) (over bool, score float64, why SplitReason) {
	if s.cfg.Topics > 0 {
		score, why = float64(sm.Topics)/float64(s.cfg.Topics), SplitTopics
	}
	if s.cfg.Bytes > 0 {
		if r := float64(sm.Bytes) / float64(s.cfg.Bytes); r > score {
			score, why = r, SplitBytes
		}
	}
	if s.cfg.Rate > 0 {
		if r := t.rate / s.cfg.Rate; r > score {
			score, why = r, SplitRate
		}
	}
	return score > 1, score, why
}

// MemberDepth returns the depth to which base shards are halved for at
// least want shards of one width: the least d with base·2^d ≥ want.
func MemberDepth(base, want int) int {
	d := 0
	for base > 0 && base<<d < want && d < 62 {
		d++
	}
	return d
}

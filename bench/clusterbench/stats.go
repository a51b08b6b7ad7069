//go:build linux

package main

import (
	"math"
	"slices"
	"time"
)

// percentile is the nearest-rank p-th percentile (0 < p <= 100) of xs: the
// smallest value at least p% of the values are at or below. It does not
// change xs; an empty xs gives 0.
func percentile(xs []time.Duration, p float64) time.Duration {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	rank := int(math.Ceil(p / 100 * float64(len(s))))
	rank = min(max(rank, 1), len(s))
	return s[rank-1]
}

// ack is one acknowledged produce: when its answer came, at which epoch,
// and when its request was sent.
type ack struct {
	end   time.Time
	epoch uint64
	start time.Time
}

// firstStartedAfter is the end of the first acknowledged produce whose
// request was sent after since, and whether there is one. A request sent
// before a fault may be answered after it by the node the fault hit;
// one sent after the fault ended shows the topic writable again.
func firstStartedAfter(acks []ack, since time.Time) (time.Time, bool) {
	var first time.Time
	found := false
	for _, a := range acks {
		if a.start.After(since) && (!found || a.end.Before(first)) {
			first, found = a.end, true
		}
	}
	return first, found
}

// firstAbove is the end of the first acknowledged produce at an epoch
// above epoch, and whether there is one.
func firstAbove(acks []ack, epoch uint64) (time.Time, bool) {
	var first time.Time
	found := false
	for _, a := range acks {
		if a.epoch > epoch && (!found || a.end.Before(first)) {
			first, found = a.end, true
		}
	}
	return first, found
}

// longestGap is the unwritable window around the fault at t0: the longest
// time between two acknowledged produces, counted from the last one that
// ended at or before t0 (or from t0, if none did) up to stop, when the
// producers stopped (so a topic never written again after t0 shows the
// whole time). acks may be in any order.
func longestGap(acks []ack, t0, stop time.Time) time.Duration {
	from, before := t0, false
	var ends []time.Time
	for _, a := range acks {
		switch {
		case !a.end.After(t0):
			if !before || a.end.After(from) {
				from, before = a.end, true
			}
		case a.end.Before(stop):
			ends = append(ends, a.end)
		}
	}
	ends = append(ends, from, stop)
	slices.SortFunc(ends, time.Time.Compare)
	var worst time.Duration
	for i := 1; i < len(ends); i++ {
		worst = max(worst, ends[i].Sub(ends[i-1]))
	}
	return worst
}

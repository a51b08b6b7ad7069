package metasync

import (
	"slices"
	"time"

	"github.com/shoalmq/shoal/internal/invariants"
)

// pullState is the pull of one kind in flight.
type pullState struct {
	peer     string // "" when none is in flight
	want     uint64 // the version that caused it
	deadline time.Time
	tried    []string // peers asked since the pull began
}

// pull is a pull to send; announced when a peer announced a newer
// version than this node's.
type pull struct {
	kind      kind
	peer      string
	announced bool
}

// tracker decides which pulls to send: at once to a peer announcing a
// newer version, to another peer when one does not answer within timeout,
// every kind from a random live peer every interval (which bounds
// staleness when announcements are lost), and until the first full sync
// every kind from any live peer. Time is passed in; it does no I/O and is
// not safe for concurrent use.
type tracker struct {
	timeout, interval time.Duration
	pulls             [numKinds]pullState
	heard             [numKinds]map[string]uint64 // peer → highest version announced
	synced            [numKinds]bool
	lastFull          time.Time
}

func newTracker(timeout, interval time.Duration) tracker {
	t := tracker{timeout: timeout, interval: interval}
	for k := range t.heard {
		t.heard[k] = make(map[string]uint64)
	}
	return t
}

// fullySynced reports whether every kind was merged from a peer once.
func (t *tracker) fullySynced() bool {
	return t.synced[kMembers] && t.synced[kRing] && t.synced[kLeaders]
}

// announce records that peer holds version v of kind k; have is this
// node's. It returns whether to pull from peer now.
func (t *tracker) announce(k kind, peer string, v, have uint64, now time.Time) bool {
	if v > t.heard[k][peer] {
		t.heard[k][peer] = v
	}
	if v <= have {
		return false
	}
	p := &t.pulls[k]
	if p.peer != "" && now.Before(p.deadline) {
		p.want = max(p.want, v)
		return false
	}
	t.start(k, peer, v, now)
	return true
}

func (t *tracker) start(k kind, peer string, want uint64, now time.Time) {
	p := &t.pulls[k]
	if p.peer == "" {
		p.tried = p.tried[:0]
	}
	p.peer, p.want, p.deadline = peer, max(p.want, want), now.Add(t.timeout)
	if !slices.Contains(p.tried, peer) {
		p.tried = append(p.tried, peer)
	}
}

// merged records that a push of kind k from a peer was merged and that
// this node now holds version have.
func (t *tracker) merged(k kind, have uint64) {
	t.synced[k] = true
	if p := &t.pulls[k]; have >= p.want {
		*p = pullState{tried: p.tried[:0]}
	}
}

// forget drops what a gone member announced.
func (t *tracker) forget(peer string) {
	for k := range t.heard {
		delete(t.heard[k], peer)
	}
}

// due returns the pulls to send at now. have holds this node's versions,
// peers the live members other than this node (sorted), intn a random
// source.
func (t *tracker) due(now time.Time, have Versions, peers []string, intn func(int) int) []pull {
	if len(peers) == 0 {
		return nil
	}
	var out []pull
	full := now.Sub(t.lastFull) >= t.interval
	for k := range numKinds {
		p := &t.pulls[k]
		switch {
		case p.peer != "" && have.get(k) >= p.want && t.synced[k]:
			*p = pullState{tried: p.tried[:0]}
		case p.peer != "" && !now.Before(p.deadline):
			// No answer in time (or the answer was not enough): another
			// peer, preferably one that announced the wanted version.
			peer := t.fallback(k, peers, intn)
			t.start(k, peer, p.want, now)
			out = append(out, pull{kind: k, peer: peer, announced: p.want > 0})
			continue
		}
		if p.peer == "" && (full || !t.synced[k]) {
			peer := peers[intn(len(peers))]
			t.start(k, peer, 0, now)
			out = append(out, pull{kind: k, peer: peer})
		}
	}
	if full {
		t.lastFull = now
	}
	if invariants.Enabled {
		t.checkDue(now, peers, out)
	}
	return out
}

func (t *tracker) fallback(k kind, peers []string, intn func(int) int) string {
	p := &t.pulls[k]
	var best string
	var bestV uint64
	for _, id := range peers {
		if v := t.heard[k][id]; v >= p.want && v > bestV && !slices.Contains(p.tried, id) {
			best, bestV = id, v
		}
	}
	if best != "" {
		return best
	}
	var fresh []string
	for _, id := range peers {
		if !slices.Contains(p.tried, id) {
			fresh = append(fresh, id)
		}
	}
	if len(fresh) == 0 {
		p.tried = p.tried[:0]
		fresh = peers
	}
	return fresh[intn(len(fresh))]
}

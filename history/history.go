// Package history records what clients of a cluster saw, and checks it
// against the promises Shoal makes about topic ownership:
//
//   - one owner at a time: no write is acknowledged at epoch e for a
//     request that began after a write at a higher epoch of the same topic
//     had been acknowledged (its acknowledgement had reached a client);
//   - epochs never go backwards: an acknowledged answer of a request that
//     began after another answer about the same topic had completed names
//     an epoch at least as high;
//   - no acknowledged assignment is lost: the final state of every topic
//     is at or above the epoch of every acknowledged assign or revoke, and
//     a topic seen gone after an acknowledged assign (its final state, or
//     an answer saying it is not assigned) was revoked in between, by a
//     revoke acknowledged at a higher epoch or one whose outcome is
//     unknown, either begun before the topic was seen gone;
//   - the records (CheckRecords): no offset of a topic names two records,
//     and an acknowledged record is there when its owner at that epoch is
//     fetched from later.
//
// The cluster tests, the process tests and the simulator record into it;
// times are whatever clock the recorder uses (real or virtual), as long as
// it is one clock for the whole history.
package history

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/shoalmq/shoal/internal/enum"
)

// Kind is a client operation.
type Kind uint8

const (
	Produce Kind = iota + 1
	Fetch
	Assign
	Revoke
	Lookup // a linearizable lookup
)

var kindNames = enum.New("Kind", map[Kind]string{
	Produce: "produce", Fetch: "fetch", Assign: "assign", Revoke: "revoke", Lookup: "lookup",
})

func (k Kind) String() string { return kindNames.Name(k) }

// Op is one client request as its client saw it: when it was sent, when
// its answer came back, and what the answer said. An operation with no
// answer (a timeout, an unreachable node) is not recorded as acknowledged.
type Op struct {
	Client     string
	Kind       Kind
	Topic      string
	Start, End time.Time
	// OK: the request was acknowledged. Epoch and Node are the answer's
	// (for Revoke: the epoch the revocation committed at; for Produce,
	// Offset is the first record's offset).
	OK     bool
	Epoch  uint64
	Node   string
	Offset uint64
	Err    string
	// Unknown: not acknowledged, and what it did is unknown: no answer
	// came, or an error that does not say the request did nothing. It may
	// have taken effect, or may yet, at any time after Start. A failed
	// operation that is not Unknown was refused: it did nothing.
	Unknown bool
	// NotFound: the answer refused the request because the topic is not
	// assigned (a lookup's, a revoke's or an update's).
	NotFound bool
	// Records are an acknowledged produce's records, at their offsets and
	// epoch, or those an acknowledged fetch returned; a fetch read every
	// record of its node's log from From up to Next.
	Records    []Record
	From, Next uint64
}

// Record is one record of a topic's log.
type Record struct {
	Offset, Epoch uint64
	Value         string
}

func (o *Op) String() string {
	if !o.OK {
		outcome := "refused"
		if o.Unknown {
			outcome = "outcome unknown"
		}
		return fmt.Sprintf("%s %s %s failed, %s (%s) [%s .. %s]", o.Client, o.Kind, o.Topic, outcome, o.Err, o.Start.Format("15:04:05.000000"), o.End.Format("15:04:05.000000"))
	}
	return fmt.Sprintf("%s %s %s at epoch %d by %s [%s .. %s]", o.Client, o.Kind, o.Topic, o.Epoch, o.Node, o.Start.Format("15:04:05.000000"), o.End.Format("15:04:05.000000"))
}

// Recorder collects operations; it is safe for concurrent use.
type Recorder struct {
	mu  sync.Mutex
	ops []Op
}

// Add records one finished operation.
func (r *Recorder) Add(op Op) {
	r.mu.Lock()
	r.ops = append(r.ops, op)
	r.mu.Unlock()
}

// Ops returns a copy of what was recorded.
func (r *Recorder) Ops() []Op {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.ops)
}

// Final is a topic's state at the end of a run, read with a linearizable
// lookup once the faults stopped: its epoch, or Gone when it is not
// assigned; At is when the answer came (zero: after every operation).
type Final struct {
	Epoch uint64
	Gone  bool
	At    time.Time
}

// Violation is a broken promise, with the operations that show it.
type Violation struct {
	Rule string
	Ops  []Op
}

func (v Violation) String() string {
	var b strings.Builder
	b.WriteString(v.Rule)
	for i := range v.Ops {
		b.WriteString("\n    ")
		b.WriteString(v.Ops[i].String())
	}
	return b.String()
}

// Check checks ops, and, when final is not nil, the final state of every
// topic in it. It returns every violation found (one per offending
// operation), with the earlier operation that makes it one.
func Check(ops []Op, final map[string]Final) []Violation {
	byTopic := make(map[string][]Op) // acknowledged
	all := make(map[string][]Op)
	for _, o := range ops {
		if o.OK {
			byTopic[o.Topic] = append(byTopic[o.Topic], o)
		}
		all[o.Topic] = append(all[o.Topic], o)
	}
	topics := make([]string, 0, len(byTopic))
	for t := range byTopic {
		topics = append(topics, t)
	}
	slices.Sort(topics)
	var out []Violation
	for _, t := range topics {
		out = append(out, checkTopic(byTopic[t])...)
		if final != nil {
			out = append(out, checkFinal(t, all[t], final)...)
		}
	}
	return out
}

// checkTopic sweeps one topic's acknowledged operations in the order they
// began, keeping the highest epoch of those that had completed before:
// the write or answer that comes below it broke a promise.
func checkTopic(ops []Op) []Violation {
	byEnd := slices.Clone(ops)
	slices.SortFunc(byEnd, func(a, b Op) int { return a.End.Compare(b.End) })
	byStart := slices.Clone(ops)
	slices.SortFunc(byStart, func(a, b Op) int { return a.Start.Compare(b.Start) })
	var out []Violation
	var high Op // the completed answer with the highest epoch so far
	var highWrite Op
	done := 0
	for _, o := range byStart {
		for done < len(byEnd) && byEnd[done].End.Before(o.Start) {
			c := byEnd[done]
			if c.Epoch > high.Epoch {
				high = c
			}
			if c.Kind == Produce && c.Epoch > highWrite.Epoch {
				highWrite = c
			}
			done++
		}
		switch {
		case o.Kind == Produce && o.Epoch < highWrite.Epoch:
			out = append(out, Violation{Rule: fmt.Sprintf("two owners: a write acknowledged at epoch %d after one at epoch %d had completed", o.Epoch, highWrite.Epoch), Ops: []Op{highWrite, o}})
		case o.Kind != Revoke && o.Epoch < high.Epoch:
			out = append(out, Violation{Rule: fmt.Sprintf("epoch went backwards: %s answered epoch %d after an answer at epoch %d had completed", o.Kind, o.Epoch, high.Epoch), Ops: []Op{high, o}})
		}
	}
	return out
}

// checkFinal checks that no acknowledged assign or revoke of topic was
// lost; ops are every operation of topic, answered or not.
func checkFinal(topic string, ops []Op, final map[string]Final) []Violation {
	f, ok := final[topic]
	var out []Violation
	for _, o := range ops {
		if !o.OK || (o.Kind != Assign && o.Kind != Revoke) {
			continue
		}
		switch {
		case !ok:
			out = append(out, Violation{Rule: fmt.Sprintf("assignment lost: %s has no final state", topic), Ops: []Op{o}})
		case !f.Gone && f.Epoch < o.Epoch:
			out = append(out, Violation{Rule: fmt.Sprintf("assignment lost: %s ends at epoch %d, below an acknowledged %d", topic, f.Epoch, o.Epoch), Ops: []Op{o}})
		case o.Kind == Assign:
			if v, lost := goneUnrevoked(topic, o, ops, f); lost {
				out = append(out, v)
			}
		}
	}
	return out
}

// goneUnrevoked checks the acknowledged assign a against the first time
// its topic was seen gone after it: an answer of the shard's leader (to a
// linearizable lookup or a revoke) saying the topic is not assigned, to a
// request begun after a completed, or else the final state.
// A revoke explains that only if it could have taken effect after a and
// before the topic was seen gone: one acknowledged at a higher epoch, or
// one whose outcome is unknown (it may take effect at any time after it
// was sent), begun before the answer that saw the topic gone. A revoke
// refused (not found) did nothing, and explains nothing.
func goneUnrevoked(topic string, a Op, ops []Op, f Final) (Violation, bool) {
	var seen *Op // the answer that saw the topic gone first
	for i := range ops {
		o := &ops[i]
		if o.NotFound && (o.Kind == Lookup || o.Kind == Revoke) && o.Start.After(a.End) && (seen == nil || o.End.Before(seen.End)) {
			seen = o
		}
	}
	var by time.Time // the revoke must have begun before this (zero: any time)
	switch {
	case seen != nil:
		by = seen.End
	case f.Gone:
		by = f.At
	default:
		return Violation{}, false
	}
	for _, o := range ops {
		if o.Kind != Revoke || !(o.OK && o.Epoch > a.Epoch || o.Unknown) {
			continue
		}
		if by.IsZero() || o.Start.Before(by) {
			return Violation{}, false
		}
	}
	if seen != nil {
		return Violation{Rule: fmt.Sprintf("assignment lost: %s was not found after an acknowledged assign at epoch %d, and no revoke begun before could have removed it", topic, a.Epoch), Ops: []Op{a, *seen}}, true
	}
	return Violation{Rule: fmt.Sprintf("assignment lost: %s is gone, and no revoke after the acknowledged assign at epoch %d could have removed it", topic, a.Epoch), Ops: []Op{a}}, true
}

// Summary counts a history's operations per kind and outcome, and the
// acknowledged epochs per topic, for a test's log.
func Summary(ops []Op) string {
	type key struct {
		kind Kind
		ok   bool
	}
	counts := map[key]int{}
	for _, o := range ops {
		counts[key{o.Kind, o.OK}]++
	}
	keys := make([]key, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b key) int {
		if c := cmp.Compare(a.kind, b.kind); c != 0 {
			return c
		}
		if a.ok == b.ok {
			return 0
		}
		if a.ok {
			return -1
		}
		return 1
	})
	var b strings.Builder
	for i, k := range keys {
		if i > 0 {
			b.WriteString(", ")
		}
		state := "acknowledged"
		if !k.ok {
			state = "failed"
		}
		fmt.Fprintf(&b, "%d %s %s", counts[k], k.kind, state)
	}
	return b.String()
}

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
//     is at or above the epoch of every acknowledged assign or revoke.
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

func (k Kind) String() string {
	switch k {
	case Produce:
		return "produce"
	case Fetch:
		return "fetch"
	case Assign:
		return "assign"
	case Revoke:
		return "revoke"
	case Lookup:
		return "lookup"
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// Op is one client request as its client saw it: when it was sent, when
// its answer came back, and what the answer said. An operation with no
// answer (a timeout, an unreachable node) is not recorded as acknowledged.
type Op struct {
	Client     string
	Kind       Kind
	Topic      string
	Start, End time.Time
	// OK: the request was acknowledged. Epoch and Node are the answer's
	// (for Revoke: the epoch the revocation committed at).
	OK     bool
	Epoch  uint64
	Node   string
	Offset uint64
	Err    string
}

func (o *Op) String() string {
	if !o.OK {
		return fmt.Sprintf("%s %s %s failed (%s) [%s .. %s]", o.Client, o.Kind, o.Topic, o.Err, o.Start.Format("15:04:05.000000"), o.End.Format("15:04:05.000000"))
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
// assigned.
type Final struct {
	Epoch uint64
	Gone  bool
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
	byTopic := make(map[string][]Op)
	unanswered := make(map[string][]Op) // revokes whose outcome is unknown
	for _, o := range ops {
		switch {
		case o.OK:
			byTopic[o.Topic] = append(byTopic[o.Topic], o)
		case o.Kind == Revoke:
			unanswered[o.Topic] = append(unanswered[o.Topic], o)
		}
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
			out = append(out, checkFinal(t, byTopic[t], unanswered[t], final)...)
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

// checkFinal checks that no acknowledged assign or revoke of topic is
// above its final state; unanswered are its revokes with no answer.
func checkFinal(topic string, ops, unanswered []Op, final map[string]Final) []Violation {
	f, ok := final[topic]
	var out []Violation
	for _, o := range ops {
		if o.Kind != Assign && o.Kind != Revoke {
			continue
		}
		switch {
		case !ok:
			out = append(out, Violation{Rule: fmt.Sprintf("assignment lost: %s has no final state", topic), Ops: []Op{o}})
		case o.Kind == Assign && f.Gone && len(unanswered) == 0 && !revokedAfter(ops, o):
			out = append(out, Violation{Rule: fmt.Sprintf("assignment lost: %s is gone, and no acknowledged revoke came after", topic), Ops: []Op{o}})
		case !f.Gone && f.Epoch < o.Epoch:
			out = append(out, Violation{Rule: fmt.Sprintf("assignment lost: %s ends at epoch %d, below an acknowledged %d", topic, f.Epoch, o.Epoch), Ops: []Op{o}})
		}
	}
	return out
}

// revokedAfter reports whether an acknowledged revoke came after the
// acknowledged assign a. (A revoke with no answer may have taken effect
// at any time after it was sent: a raft entry in an old leader's log can
// commit long after its client gave up, so checkFinal lets it explain a
// gone topic too.)
func revokedAfter(ops []Op, a Op) bool {
	return slices.ContainsFunc(ops, func(o Op) bool { return o.Kind == Revoke && o.Epoch > a.Epoch })
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

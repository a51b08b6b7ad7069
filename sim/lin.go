package sim

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"
)

// Linearizability of each topic's assignments: assigns, revokes and
// linearizable lookups, checked with porcupine against a model of one
// topic's record. The cluster also moves topics on its own (the owner of a
// topic dies), which no client asked for: the model lets an active topic's
// epoch rise, with any owner, between client operations, but never fall,
// never change owner within an epoch, and never touch an inactive topic.

type linKind uint8

const (
	linAssign linKind = iota + 1
	linRevoke
	linLookup
	linUpdate
)

// linOp is an operation and its outcome: for an assign, the named owner
// ("" lets the leader choose), the partitions asked for a new topic (0:
// the default) and the answer (gotOwner, epoch, gotParts); for a revoke,
// found and the epoch it committed at; for a lookup, found and the answer;
// for an update of the partition count, parts, found, and refused when
// the answer refused to shrink the count. unknown: no answer came; it may
// or may not have taken effect.
type linOp struct {
	kind     linKind
	owner    string
	parts    uint32
	found    bool
	refused  bool
	gotOwner string
	gotParts uint32
	epoch    uint64
	unknown  bool
}

// linState is a topic's record as far as the clients can know it. owner
// "" with active set means "some owner", parts 0 "some count"; epochAtLeast
// that the epoch is a lower bound (an unanswered revoke may have committed
// later than the last known epoch).
type linState struct {
	exists, active bool
	owner          string
	parts          uint32
	epoch          uint64
	epochAtLeast   bool
}

type linEntry struct {
	op          linOp
	start, end  time.Time
	client, seq int
	// write names an unanswered write by its session (zero otherwise):
	// resolve gives it the answer a replica applied, if one did.
	write writeKey
}

// linLog collects the operations of every topic.
type linLog struct {
	byTopic map[string][]linEntry
	seq     int
}

func newLinLog() *linLog { return &linLog{byTopic: make(map[string][]linEntry)} }

// add records op on topic, called at start and answered at end (done
// false: never answered).
func (l *linLog) add(topic string, op linOp, start, end time.Time, done bool) {
	l.addWrite(topic, op, start, end, done, writeKey{})
}

// addWrite is add of a write, named by its session (zero: not known).
func (l *linLog) addWrite(topic string, op linOp, start, end time.Time, done bool, key writeKey) {
	l.seq++
	if !done {
		end = time.Unix(0, math.MaxInt64)
	}
	l.byTopic[topic] = append(l.byTopic[topic], linEntry{op: op, start: start, end: end, seq: l.seq, write: key})
}

// resolve settles the unanswered writes by what the replicas applied
// (answered): a write a replica answered is the write with that answer,
// returned when it was first applied (its effect was visible from then
// on); one answered with an error changed nothing, and one no replica
// answered by the end of the run never took effect. Both are dropped.
// Without this, every unanswered write may take effect at any point after
// it was sent, or never, and a topic with twenty-odd of them makes the
// search explode. It returns how many writes it settled.
func (l *linLog) resolve(answered map[writeKey]answeredWrite) int {
	n := 0
	for t, ents := range l.byTopic {
		out := ents[:0]
		for _, e := range ents {
			if !e.op.unknown || e.write == (writeKey{}) {
				out = append(out, e)
				continue
			}
			n++
			aw, ok := answered[e.write]
			if !ok || aw.err != nil {
				continue
			}
			a := aw.a
			switch e.op.kind {
			case linAssign:
				e.op = linOp{kind: linAssign, owner: e.op.owner, parts: e.op.parts, found: true, gotOwner: a.Owner, gotParts: a.Partitions, epoch: a.Epoch}
			case linUpdate:
				e.op = linOp{kind: linUpdate, parts: e.op.parts, found: true, gotOwner: a.Owner, gotParts: a.Partitions, epoch: a.Epoch}
			case linRevoke:
				e.op = linOp{kind: linRevoke, found: true, epoch: a.Epoch}
			default:
				out = append(out, e)
				continue
			}
			e.end = aw.at
			out = append(out, e)
		}
		l.byTopic[t] = out
	}
	return n
}

// defaultParts is the partition count of a topic assigned without one.
const defaultParts = 1

func linStep(st linState, op linOp) []linState {
	switch op.kind {
	case linLookup:
		if !op.found {
			if st.active {
				return nil
			}
			return []linState{st}
		}
		return observe(st, op.gotOwner, op.epoch, op.gotParts)
	case linAssign:
		newParts := op.parts
		if newParts == 0 {
			newParts = defaultParts
		}
		if op.unknown {
			out := []linState{st}
			if st.active {
				if op.owner != "" && op.owner != st.owner {
					next := st
					next.owner, next.epoch = op.owner, st.epoch+1
					out = append(out, next)
				}
				return out
			}
			return append(out, linState{exists: true, active: true, owner: op.owner, parts: newParts, epoch: st.epoch + 1, epochAtLeast: true})
		}
		if op.owner != "" && op.gotOwner != op.owner {
			return nil
		}
		if st.active {
			if op.epoch == st.epoch && op.owner != "" && st.owner != "" && st.owner != op.owner {
				return nil // a different named owner moves the topic
			}
			return observe(st, op.gotOwner, op.epoch, op.gotParts)
		}
		// A new record starts above the shard's epoch floor, which may be
		// above the last epoch the clients saw.
		if op.epoch <= st.epoch || op.gotParts != newParts {
			return nil
		}
		return []linState{{exists: true, active: true, owner: op.gotOwner, parts: newParts, epoch: op.epoch}}
	case linUpdate:
		if op.unknown {
			out := []linState{st}
			if st.active && (st.parts == 0 || op.parts >= st.parts) {
				next := st
				next.parts = op.parts
				out = append(out, next)
			}
			return out
		}
		switch {
		case !op.found:
			if st.active {
				return nil
			}
			return []linState{st}
		case op.refused:
			if !st.active || (st.parts != 0 && op.parts >= st.parts) {
				return nil
			}
			return []linState{st}
		}
		if !st.active || (st.parts != 0 && op.parts < st.parts) || op.gotParts != op.parts {
			return nil
		}
		next := st
		next.parts = 0 // observe takes the count from the answer
		return observe(next, op.gotOwner, op.epoch, op.gotParts)
	case linRevoke:
		if op.unknown {
			out := []linState{st}
			if st.active {
				out = append(out, linState{exists: true, epoch: st.epoch + 1, epochAtLeast: true})
			}
			return out
		}
		if !op.found {
			if st.exists && st.active {
				return nil
			}
			return []linState{st}
		}
		if st.active {
			if op.epoch <= st.epoch {
				return nil
			}
			return []linState{{exists: true, epoch: op.epoch}}
		}
		if !st.exists || (op.epoch != st.epoch && !(st.epochAtLeast && op.epoch >= st.epoch)) {
			return nil
		}
		return []linState{{exists: true, epoch: op.epoch}}
	}
	return nil
}

// observe takes an answer naming owner at epoch with parts partitions for
// an active topic: the same epoch must name the same owner, and the count
// is the one known; a later epoch may name any owner (the cluster moved
// the topic meanwhile).
func observe(st linState, owner string, epoch uint64, parts uint32) []linState {
	switch {
	case !st.active || epoch < st.epoch:
		return nil
	case epoch == st.epoch && st.owner != "" && st.owner != owner:
		return nil
	case st.parts != 0 && parts != st.parts:
		return nil
	}
	return []linState{{exists: true, active: true, owner: owner, parts: parts, epoch: epoch}}
}

var linModel = porcupine.NondeterministicModel{
	Init: func() []any { return []any{linState{}} },
	Step: func(state, input, _ any) []any {
		next := linStep(state.(linState), input.(linOp))
		out := make([]any, len(next))
		for i, s := range next {
			out[i] = s
		}
		return out
	},
	Equal: func(a, b any) bool { return a.(linState) == b.(linState) },
	DescribeOperation: func(input, _ any) string {
		return input.(linOp).String()
	},
}

// check checks every topic's operations; it returns an account of each
// topic whose history is not linearizable, and the topics the checker ran
// out of time on.
func (l *linLog) check(timeout time.Duration) (bad []string, unknown []string) {
	model := linModel.ToModel()
	for _, t := range slices.Sorted(maps.Keys(l.byTopic)) {
		ents := l.byTopic[t]
		ops := make([]porcupine.Operation, len(ents))
		for i, e := range ents {
			ops[i] = porcupine.Operation{ClientId: e.client, Input: e.op, Call: e.start.UnixNano(), Output: nil, Return: e.end.UnixNano()}
		}
		res, info := porcupine.CheckOperationsVerbose(model, ops, timeout)
		switch res {
		case porcupine.Illegal:
			bad = append(bad, fmt.Sprintf("the assignments of %s are not linearizable\n%s", t, explain(ents, &info)))
		case porcupine.Unknown:
			unknown = append(unknown, t)
		}
	}
	return bad, unknown
}

// explain names the first operation (by start) that the longest partial
// linearization could not take, with the operations around it.
func explain(ents []linEntry, info *porcupine.LinearizationInfo) string {
	var longest []int
	for _, part := range info.PartialLinearizations() {
		for _, lin := range part {
			if len(lin) > len(longest) {
				longest = lin
			}
		}
	}
	done := make(map[int]bool, len(longest))
	for _, i := range longest {
		done[i] = true
	}
	order := make([]int, len(ents))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return ents[a].start.Compare(ents[b].start) })
	stuck := -1
	for k, i := range order {
		if !done[i] {
			stuck = k
			break
		}
	}
	if stuck < 0 {
		return "    (no partial linearization to show)"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "    %d of %d operations linearize; the first that does not is marked:", len(longest), len(ents))
	for k := max(0, stuck-10); k < min(len(order), stuck+6); k++ {
		e := ents[order[k]]
		mark := " "
		if k == stuck {
			mark = ">"
		}
		end := "no answer"
		if e.end.UnixNano() != math.MaxInt64 {
			end = fmt.Sprintf("%.6fs", secs(e.end))
		}
		fmt.Fprintf(&b, "\n    %s [%.6fs .. %s] %s", mark, secs(e.start), end, e.op)
	}
	return b.String()
}

func (o linOp) String() string {
	var b strings.Builder
	switch o.kind {
	case linAssign:
		fmt.Fprintf(&b, "assign owner=%q parts=%d", o.owner, o.parts)
	case linRevoke:
		b.WriteString("revoke")
	case linLookup:
		b.WriteString("lookup")
	case linUpdate:
		fmt.Fprintf(&b, "update parts=%d", o.parts)
	}
	switch {
	case o.unknown:
		b.WriteString(" -> unknown")
	case o.refused:
		b.WriteString(" -> refused")
	case !o.found:
		b.WriteString(" -> not found")
	case o.kind == linRevoke:
		fmt.Fprintf(&b, " -> epoch %d", o.epoch)
	default:
		fmt.Fprintf(&b, " -> %s@%d parts=%d", o.gotOwner, o.epoch, o.gotParts)
	}
	return b.String()
}

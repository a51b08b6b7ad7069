package history

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"github.com/shoalmq/shoal/internal/enum"
)

// The records as the clients saw them. Every record an owner acknowledged
// was synced to its log first, at offsets no one else hands out: the owner
// at epoch e writes from (e-1)·2^40 on, and its offsets only rise. So:
//
//   - no offset of a topic names two records: every produce acknowledged
//     and every record fetched agree on each offset's epoch and value;
//   - a fetch from the node that acknowledged a record, at the same epoch,
//     begun after the acknowledgement came, that read the record's offset,
//     returns it;
//   - so does one at a later epoch from that node (the topic moved away
//     and back), unless a revoke came in between: a revoked topic's
//     records are deleted by its owner (a loss of its own kind, Revoked,
//     from any node).
//
// A fetch from another node at a later epoch reads that node's log: the
// record is there only if a handoff copied it. What a handoff leaves out
// (the previous owner crashed or was silent, the pull was cut short;
// docs/ownership.md, "Records across ownership moves") is lost by design:
// CheckRecords counts those losses (NotHandedOver) instead of failing
// them.

// LossKind is why a record a later fetch did not return may be missing
// without a broken promise.
type LossKind uint8

const (
	// NotHandedOver: the fetch was served by another node, at a later
	// epoch, which never got the record from its owner, and no revoke
	// came in between.
	NotHandedOver LossKind = iota + 1
	// Revoked: the fetch was served at a later epoch, after a revoke that
	// may have deleted the topic's records (acknowledged at an epoch in
	// between, or with an unknown outcome, begun before the fetch ended).
	Revoked
)

var lossKindNames = enum.New("LossKind", map[LossKind]string{
	NotHandedOver: "not handed over", Revoked: "revoked",
})

func (k LossKind) String() string { return lossKindNames.Name(k) }

// Loss is an acknowledged record a later fetch read the offset of and did
// not return, for a reason that breaks no promise.
type Loss struct {
	Kind   LossKind
	Record Record
	// Produce acknowledged the record; Fetch did not return it.
	Produce, Fetch Op
}

// RecordStats sums up what CheckRecords compared.
type RecordStats struct {
	// Acked counts the acknowledged records; Read those a later fetch
	// read the offset of; Found those a later fetch returned.
	Acked, Read, Found int
	// Lost counts, per kind, the records that a later fetch did not
	// return for that reason (a record may count under both kinds).
	Lost map[LossKind]int
}

func (s RecordStats) String() string {
	return fmt.Sprintf("%d records acknowledged, %d read by a later fetch, %d found; lost as documented: %d not handed over to a new owner, %d deleted by a revoke",
		s.Acked, s.Read, s.Found, s.Lost[NotHandedOver], s.Lost[Revoked])
}

// reads reports whether fetch f read offset off: it reads its node's log
// from From up to Next, and to the end of it when Next is MaxUint64.
func (f *Op) reads(off uint64) bool { return f.From <= off && off < f.Next }

// Handoff is a record pull that ended complete: Node, which holds Topic at
// Epoch, copied every record of Prev's log (node.Config.OnHandoff).
type Handoff struct {
	Topic, Node, Prev string
	Epoch             uint64
	At                time.Time
}

// CheckRecords checks the records of ops' produces and fetches (see the
// rules above); handoffs are the complete record pulls, which narrow the
// losses a move may excuse: a record its owner acknowledged is never
// missing at a node whose complete pull from that owner began its epoch. It returns a violation for each offset that names two
// records and for each acknowledged record missing where it must be
// found (the first fetch that shows it), the losses that break no promise,
// and the counts.
func CheckRecords(ops []Op, handoffs []Handoff) ([]Violation, []Loss, RecordStats) {
	type key struct {
		topic  string
		offset uint64
	}
	type seen struct {
		rec Record
		op  Op
	}
	byTopic := make(map[string][]Op)
	for _, o := range ops {
		byTopic[o.Topic] = append(byTopic[o.Topic], o)
	}
	topics := make([]string, 0, len(byTopic))
	for t := range byTopic {
		topics = append(topics, t)
	}
	slices.Sort(topics)
	var out []Violation
	var losses []Loss
	stats := RecordStats{Lost: make(map[LossKind]int)}
	at := make(map[key]seen)
	twice := make(map[key]bool)
	for _, t := range topics {
		tops := byTopic[t]
		slices.SortStableFunc(tops, func(a, b Op) int { return a.Start.Compare(b.Start) })
		var produces, fetches []Op
		for _, o := range tops {
			if !o.OK {
				continue
			}
			switch o.Kind {
			case Produce:
				produces = append(produces, o)
			case Fetch:
				fetches = append(fetches, o)
			default:
				continue
			}
			for _, r := range o.Records {
				k := key{t, r.Offset}
				s, ok := at[k]
				switch {
				case !ok:
					at[k] = seen{r, o}
				case s.rec != r && !twice[k]:
					twice[k] = true
					out = append(out, Violation{Rule: fmt.Sprintf("two records at one offset: %s offset %d is %q at epoch %d and %q at epoch %d", t, r.Offset, s.rec.Value, s.rec.Epoch, r.Value, r.Epoch), Ops: []Op{s.op, o}})
				}
			}
		}
		// What each fetch returned, by offset.
		got := make([]map[uint64]bool, len(fetches))
		for i, f := range fetches {
			got[i] = make(map[uint64]bool, len(f.Records))
			for _, r := range f.Records {
				got[i][r.Offset] = true
			}
		}
		for _, p := range produces {
			for _, r := range p.Records {
				stats.Acked++
				read, found, broken := false, false, false
				lost := make(map[LossKind]bool)
				for i := range fetches {
					f := &fetches[i]
					if !f.Start.After(p.End) || f.Epoch < p.Epoch || !f.reads(r.Offset) {
						continue
					}
					read = true
					if got[i][r.Offset] {
						found = true // what it holds there, the offset check compared
						continue
					}
					kind, ok := missing(p, f, tops, handoffs)
					if !ok {
						if !broken {
							broken = true
							out = append(out, Violation{Rule: fmt.Sprintf("acknowledged record lost: %s offset %d (%q at epoch %d, acknowledged by %s) not returned by a later fetch from %s at epoch %d", t, r.Offset, r.Value, r.Epoch, p.Node, f.Node, f.Epoch), Ops: []Op{p, *f}})
						}
						continue
					}
					if !lost[kind] {
						lost[kind] = true
						stats.Lost[kind]++
						losses = append(losses, Loss{Kind: kind, Record: r, Produce: p, Fetch: *f})
					}
				}
				if read {
					stats.Read++
					if found {
						stats.Found++
					}
				}
			}
		}
	}
	slices.SortStableFunc(losses, func(a, b Loss) int {
		return cmp.Or(cmp.Compare(a.Produce.Topic, b.Produce.Topic), cmp.Compare(a.Record.Offset, b.Record.Offset))
	})
	return out, losses, stats
}

// missing says why the acknowledged produce p's record may be missing from
// the later fetch f, which read its offset (ok false: it may not be);
// tops are every operation of the topic.
func missing(p Op, f *Op, tops []Op, handoffs []Handoff) (LossKind, bool) {
	if f.Epoch == p.Epoch {
		// The record's own tenure: one node holds a topic at an epoch,
		// and what it acknowledged it synced.
		return 0, false
	}
	for _, o := range tops {
		if o.Kind == Revoke && (o.OK && o.Epoch > p.Epoch && o.Epoch <= f.Epoch || o.Unknown) && o.Start.Before(f.End) {
			return Revoked, true
		}
	}
	if f.Node != p.Node {
		for _, h := range handoffs {
			if h.Topic == p.Topic && h.Node == f.Node && h.Epoch == f.Epoch && h.Prev == p.Node && p.Epoch < h.Epoch {
				// The fetch's node copied the whole log of the record's
				// owner when it took the topic at this epoch.
				return 0, false
			}
		}
		return NotHandedOver, true
	}
	return 0, false
}

package ownership

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"

	"github.com/shoalmq/shoal/internal/ddtest"
	"github.com/shoalmq/shoal/meta"
	"github.com/shoalmq/shoal/node/duty"
	"github.com/shoalmq/shoal/wire"
)

// TestSpec runs the scenarios of testdata/*.txt: the ownership protocol's
// specification, written as the messages one or more owners (Holders) and
// a shard leader (duty.Leader) exchange, with what each does. Times are
// offsets from a fixed instant (at=1.5s). The verbs:
//
//	open [node=n1] topic=T shard=S term=R epoch=E [partitions=P]
//	close [node=n1] topic=T shard=S term=R epoch=E
//	    an OpenTopic or CloseTopic reaches the node; the node's durable
//	    floors are kept here as its caller keeps them.
//	round [node=n1] at=D [leaders=(S:L, ...)] [version=V]
//	fresh-round [node=n1] at=D [leaders=(S:L, ...)]
//	    the node builds a lease round (fresh: of newly held shards alone);
//	    shards are led by L unless leaders says otherwise (L=- : unknown).
//	reply [node=n1] from=L seq=N [matched] [granted]
//	grant S term=R [listed T@E ...]
//	refuse S leader=L term=R
//	    the answer of leader L to round N, one grant or refusal a line.
//	serve [node=n1] at=D topic=T epoch=E
//	held [node=n1] at=D
//	    what the node serves at D, and its leases.
//	release [node=n1]
//	restart [node=n1]
//	    the node gives up its topics; the node restarts from what it made
//	    durable.
//	leader won shard=S term=R at=D
//	leader confirm shard=S at=D
//	leader grant shard=S to=P at=D
//	leader move topic=T shard=S from=P to=Q epoch=E at=D
//	leader due at=D [deliver] [drop=(P, ...)]
//	    the shard leader L (duty.Leader): it leads S at R since D, its
//	    state current and its leadership confirmed then; a quorum
//	    confirms it again at D; it computes a grant of S for P at D (or
//	    says it cannot); it applies the move of T from P to Q at epoch E
//	    at D; it lists the messages due at D and, with deliver, hands
//	    them to the holders and their acks back, but those to the nodes
//	    of drop, which are lost.
func TestSpec(t *testing.T) {
	ddtest.Run(t, "testdata/*.txt", func(t *testing.T) ddtest.Handler { return newWorld(t).run })
}

type specNode struct {
	h *Holder
	// durable: what the node wrote of the Changes (held topics, floors).
	held   map[string]Topic
	floors map[string]uint64
}

type world struct {
	nodes  map[string]*specNode
	leader *duty.Leader
	grants map[string]time.Time // leader: last grant computed per node
}

func newWorld(t *testing.T) *world {
	l, err := duty.New(duty.Config{Self: 1, Lease: leaseLen, ConfirmFresh: 400 * time.Millisecond, MaxDrift: 0.01, Resend: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return &world{nodes: make(map[string]*specNode), leader: l, grants: make(map[string]time.Time)}
}

func (w *world) node(t *testing.T, name string) *specNode {
	n := w.nodes[name]
	if n == nil {
		h, err := New(Config{Lease: leaseLen})
		if err != nil {
			t.Fatal(err)
		}
		n = &specNode{h: h, held: make(map[string]Topic), floors: make(map[string]uint64)}
		w.nodes[name] = n
	}
	return n
}

func atStr(at time.Time) string {
	if at.IsZero() {
		return "never"
	}
	return at.Sub(ddtest.T0).String()
}

func (w *world) run(t *testing.T, td *datadriven.TestData) string {
	a := ddtest.ArgsOf(t, td)
	n := w.node(t, a.Str("node", "n1"))
	var out strings.Builder
	switch td.Cmd {
	case "open":
		m := &wire.OpenTopic{Topic: []byte(a.Str("topic", "")), Shard: a.NumOr("shard", 0), Term: a.NumOr("term", 0),
			Epoch: a.NumOr("epoch", 0), Partitions: uint32(a.NumOr("partitions", 1))}
		st, e, ch := n.h.Open(m, n.floors[string(m.Topic)])
		fmt.Fprintf(&out, "%s epoch=%d\n", status(st), e)
		n.write(&out, ch)
	case "close":
		m := &wire.CloseTopic{Topic: []byte(a.Str("topic", "")), Shard: a.NumOr("shard", 0), Term: a.NumOr("term", 0),
			Epoch: a.NumOr("epoch", 0)}
		st, f, ch := n.h.Close(m, n.floors[string(m.Topic)])
		fmt.Fprintf(&out, "%s floor=%d\n", status(st), f)
		n.write(&out, ch)
	case "round", "fresh-round":
		at := a.Time("at")
		leaderOf := leadersOf(a)
		var seq uint64
		var asks map[string]*Ask
		var released, ok bool
		if td.Cmd == "round" {
			seq, asks, released = n.h.Round(at, leaderOf, a.NumOr("version", 0))
			ok = true
		} else {
			seq, asks, ok = n.h.FreshRound(at, leaderOf)
		}
		if !ok {
			return "nothing to ask\n"
		}
		fmt.Fprintf(&out, "round %d at %s", seq, atStr(at))
		if released {
			out.WriteString(", released")
		}
		out.WriteString("\n")
		for _, leader := range slices.Sorted(maps.Keys(asks)) {
			n.describeAsk(&out, leader, asks[leader])
		}
	case "reply":
		r := &wire.LeaseReply{Seq: a.NumOr("seq", 0), HeldMatched: a.Has("matched"), HeldGranted: a.Has("granted")}
		for _, line := range ddtest.Lines(td.Input) {
			f := strings.Fields(line)
			la := ddtest.FieldArgs(t, f[2:])
			shard, err := strconv.ParseUint(f[1], 10, 64)
			if err != nil {
				t.Fatalf("%s: %v", line, err)
			}
			switch f[0] {
			case "grant":
				g := wire.LeaseGrant{Shard: shard, Term: la.NumOr("term", 0)}
				if i := slices.Index(f, "listed"); i >= 0 {
					g.Listed = true
					for _, te := range f[i+1:] {
						topic, e, _ := strings.Cut(te, "@")
						epoch, _ := strconv.ParseUint(e, 10, 64)
						g.Topics = append(g.Topics, wire.TopicEpoch{Topic: []byte(topic), Epoch: epoch})
					}
				}
				r.Grants = append(r.Grants, g)
			case "refuse":
				r.Refused = append(r.Refused, wire.LeaseRefusal{Shard: shard, Leader: []byte(la.Str("leader", "")), Term: la.NumOr("term", 0)})
			default:
				t.Fatalf("unknown reply line %q", line)
			}
		}
		ch, refused, again := n.h.Reply(a.Str("from", "L"), r)
		n.write(&out, ch)
		for _, rf := range refused {
			fmt.Fprintf(&out, "refused shard %d: leader %s at term %d\n", rf.Shard, rf.Leader, rf.Term)
		}
		if again {
			out.WriteString("again: nothing granted, the next round lists\n")
		}
		if out.Len() == 0 {
			out.WriteString("ok\n")
		}
	case "serve":
		at := a.Time("at")
		tp, r := n.h.Serve(at, []byte(a.Str("topic", "")), a.NumOr("epoch", 0))
		fmt.Fprintf(&out, "%s", r)
		if r != NotHeld && r != Released {
			fmt.Fprintf(&out, " (held at epoch %d)", tp.Epoch)
		}
		out.WriteString("\n")
	case "held":
		n.describeHeld(&out, a.Time("at"))
	case "release":
		n.h.Release()
		out.WriteString("ok\n")
	case "restart":
		h, err := New(Config{Lease: leaseLen})
		if err != nil {
			t.Fatal(err)
		}
		n.h = h
		for _, topic := range slices.Sorted(maps.Keys(n.held)) {
			h.Load(topic, n.held[topic])
			fmt.Fprintf(&out, "loaded %s\n", heldStr(topic, n.held[topic]))
		}
		if out.Len() == 0 {
			out.WriteString("nothing held\n")
		}
	case "leader":
		return w.runLeader(t, td, a)
	default:
		t.Fatalf("unknown verb %q", td.Cmd)
	}
	return out.String()
}

func (w *world) runLeader(t *testing.T, td *datadriven.TestData, a ddtest.Args) string {
	if len(td.CmdArgs) == 0 {
		t.Fatal("leader: which?")
	}
	l := w.leader
	var out strings.Builder
	switch verb := td.CmdArgs[0].Key; verb {
	case "won":
		at, shard, term := a.Time("at"), a.NumOr("shard", 0), a.NumOr("term", 0)
		l.Won(at, shard, term)
		l.Current(shard, term)
		l.Confirm(shard, term, at)
		fmt.Fprintf(&out, "leads shard %d at term %d since %s\n", shard, term, atStr(at))
	case "confirm":
		at, shard := a.Time("at"), a.NumOr("shard", 0)
		term, _ := l.Leads(shard)
		l.Confirm(shard, term, at)
		fmt.Fprintf(&out, "confirmed shard %d at term %d at %s\n", shard, term, atStr(at))
	case "grant":
		// The leader computes a grant for a node (node/lease records
		// when, for the fences).
		at := a.Time("at")
		shard := a.NumOr("shard", 0)
		term, ok := l.CanGrant(at, shard)
		if !ok {
			fmt.Fprintf(&out, "cannot grant shard %d at %s\n", shard, atStr(at))
			break
		}
		w.grants[a.Str("to", "")] = at
		fmt.Fprintf(&out, "grants shard %d at term %d to %s at %s\n", shard, term, a.Str("to", ""), atStr(at))
	case "move":
		at := a.Time("at")
		from, to, topic, epoch := a.Str("from", ""), a.Str("to", ""), a.Str("topic", ""), a.NumOr("epoch", 0)
		l.Effects(at, a.NumOr("shard", 0), []meta.Effect{
			{Kind: meta.EffectClose, Node: from, Topic: topic, Epoch: epoch, Partitions: 1},
			{Kind: meta.EffectOpen, Node: to, Topic: topic, Epoch: epoch, Partitions: 1, Prev: from},
		}, func(node string) time.Time { return w.grants[node] })
		fmt.Fprintf(&out, "owes close %s@%d to %s, open %s@%d to %s\n", topic, epoch, from, topic, epoch, to)
		if g := w.grants[from]; !g.IsZero() {
			c := l.Config()
			fmt.Fprintf(&out, "fence on %s: until %s (last grant %s + %v)\n", from, atStr(g.Add(c.OwnGrantWait())), atStr(g), c.OwnGrantWait())
		}
	case "due":
		at := a.Time("at")
		due := l.Due(at, func(string) bool { return false })
		if len(due) == 0 {
			out.WriteString("nothing due\n")
		}
		for _, r := range due {
			kind := "close"
			if r.Open {
				kind = "open"
			}
			fmt.Fprintf(&out, "%s %s@%d to %s", kind, r.Topic, r.Epoch, r.Node)
			if slices.Contains(a.Vals("drop"), r.Node) {
				out.WriteString(": lost\n")
				continue
			}
			if !a.Has("deliver") {
				out.WriteString("\n")
				continue
			}
			n := w.node(t, r.Node)
			var st wire.TopicStatus
			var e uint64
			var ch []Change
			if r.Open {
				st, e, ch = n.h.Open(&wire.OpenTopic{Topic: []byte(r.Topic), Shard: r.Shard, Term: r.Term, Epoch: r.Epoch, Partitions: r.Partitions}, n.floors[r.Topic])
			} else {
				st, e, ch = n.h.Close(&wire.CloseTopic{Topic: []byte(r.Topic), Shard: r.Shard, Term: r.Term, Epoch: r.Epoch}, n.floors[r.Topic])
			}
			fmt.Fprintf(&out, ": %s %d\n", status(st), e)
			var sub strings.Builder
			n.write(&sub, ch)
			for _, line := range ddtest.Lines(sub.String()) {
				fmt.Fprintf(&out, "  %s: %s\n", r.Node, line)
			}
			l.Ack(r.Node, r.ReqID, &wire.TopicAck{Topic: []byte(r.Topic), Epoch: e, Status: st})
		}
		if next, ok := l.Next(); ok && next.IsZero() {
			out.WriteString("next look: at once\n")
		} else if ok {
			fmt.Fprintf(&out, "next look at %s\n", atStr(next))
		}
	default:
		t.Fatalf("unknown leader verb %q", verb)
	}
	return out.String()
}

// write applies changes to the node's durable state, as its caller does,
// and prints them, by topic (a grant's changes come in map order).
func (n *specNode) write(out *strings.Builder, changes []Change) {
	changes = slices.Clone(changes)
	slices.SortStableFunc(changes, func(a, b Change) int { return strings.Compare(a.Topic, b.Topic) })
	for _, c := range changes {
		switch {
		case c.Put:
			n.held[c.Topic] = c.Held
			fmt.Fprintf(out, "put %s\n", heldStr(c.Topic, c.Held))
		case c.Drop:
			delete(n.held, c.Topic)
			fmt.Fprintf(out, "drop %s\n", c.Topic)
		}
		if c.Floor != 0 {
			n.floors[c.Topic] = max(n.floors[c.Topic], c.Floor)
			fmt.Fprintf(out, "floor %s=%d\n", c.Topic, c.Floor)
		}
	}
}

func heldStr(topic string, t Topic) string {
	return fmt.Sprintf("%s@%d partitions=%d shard=%d", topic, t.Epoch, t.Partitions, t.Shard)
}

// describeAsk prints what a round asks of a leader: the topics behind each
// listed digest (checked against what the node holds), or the summary
// alone.
func (n *specNode) describeAsk(out *strings.Builder, leader string, a *Ask) {
	switch {
	case a.Requests == nil:
		fmt.Fprintf(out, "ask %s: summary of %d shard(s) alone\n", leader, a.Held.Count)
		return
	case a.Held.Count == 0:
		fmt.Fprintf(out, "ask %s: no summary (a fresh round), listed:\n", leader)
	default:
		fmt.Fprintf(out, "ask %s: summary of %d shard(s), listed:\n", leader, a.Held.Count)
	}
	byShard := map[uint64][]string{}
	digests := map[uint64]uint64{}
	n.h.Each(func(topic string, t Topic) {
		byShard[t.Shard] = append(byShard[t.Shard], fmt.Sprintf("%s@%d", topic, t.Epoch))
		digests[t.Shard] ^= meta.TopicDigest(topic, t.Epoch)
	})
	for _, q := range a.Requests {
		ts := byShard[q.Shard]
		slices.Sort(ts)
		check := ""
		if q.Digest != digests[q.Shard] {
			check = fmt.Sprintf(" (digest %x is not of what is held)", q.Digest)
		}
		fmt.Fprintf(out, "  shard %d: %s%s\n", q.Shard, strings.Join(ts, " "), check)
	}
}

// describeHeld prints every held topic with whether it is served at its
// epoch at at, and the lease of each shard.
func (n *specNode) describeHeld(out *strings.Builder, at time.Time) {
	var topics []string
	shards := map[uint64]bool{}
	n.h.Each(func(topic string, t Topic) {
		topics = append(topics, topic)
		shards[t.Shard] = true
	})
	slices.Sort(topics)
	if len(topics) == 0 {
		out.WriteString("nothing held\n")
	}
	for _, topic := range topics {
		t, _ := n.h.Get([]byte(topic))
		_, r := n.h.Serve(at, []byte(topic), t.Epoch)
		fmt.Fprintf(out, "%s: %s\n", heldStr(topic, t), r)
	}
	for _, s := range slices.Sorted(maps.Keys(shards)) {
		if exp := n.h.LeaseExpiry(s); exp.IsZero() {
			fmt.Fprintf(out, "lease of shard %d: none\n", s)
		} else {
			fmt.Fprintf(out, "lease of shard %d: until %s\n", s, atStr(exp))
		}
	}
}

func leadersOf(a ddtest.Args) func(uint64) (string, bool) {
	m := map[uint64]string{}
	for _, v := range a.Vals("leaders") {
		s, l, _ := strings.Cut(v, ":")
		shard, _ := strconv.ParseUint(s, 10, 64)
		m[shard] = l
	}
	return func(shard uint64) (string, bool) {
		l, ok := m[shard]
		if !ok {
			return "L", true
		}
		return l, l != "-"
	}
}

func status(st wire.TopicStatus) string {
	switch st {
	case wire.TopicDone:
		return "done"
	case wire.TopicStaleTerm:
		return "refused: stale term"
	case wire.TopicBelowFloor:
		return "refused: below floor"
	}
	return fmt.Sprintf("status %d", st)
}

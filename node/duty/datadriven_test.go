package duty

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
	"github.com/shoalmq/shoal/wire"
)

// TestSpec runs the scenarios of testdata/*.txt: the shard leader's half
// of the ownership protocol, as what this node (raft id 1) is told and
// what it then owes, grants and sends. Lease 1s, ConfirmFresh 400ms,
// MaxDrift 1%, Resend 200ms; so OwnGrantWait is 1.0212s and
// NewLeaderWait 1.4293s. Times are offsets from a fixed instant (at=1.5s).
// The verbs:
//
//	won shard=S term=R at=D          this node became S's leader at R
//	current shard=S term=R           its state of S holds every entry
//	                                 committed before R
//	confirm shard=S term=R at=D      a quorum showed it led S at R at D
//	voters shard=S in=(1,2,3) [out=(...)]
//	lost shard=S
//	lead shard=S term=R at=D         won, current, confirmed at D, voters
//	                                 1, 2, 3
//	can-grant shard=S at=D           may it grant leases on S at D
//	grant-all at=D                   may it grant every led shard at D
//	vouch-round seq=N at=D           what a vouch round asks each voter
//	vouched from=V seq=N [shards=(S, ...)] [all]
//	effects shard=S at=D [last-grant=(node:D, ...)]
//	    the RPCs of commands S applied, one a line:
//	    open NODE TOPIC@EPOCH [fresh] [prev=NODE] | close NODE TOPIC@EPOCH [revoked]
//	resend shard=S                   a new leader's messages for the active
//	    topics, one a line: TOPIC@EPOCH owner=NODE [prev=NODE] [partitions=N]
//	take-up shard=S term=R at=D      it became current there at D: its
//	                                 predecessors' messages are owed again
//	verified shard=S term=R node=N   N's lease request showed it holds what
//	                                 the state gives it in S
//	verified-led node=N [stale]      N's lease round summary matched over
//	                                 every led shard, read at the current
//	                                 leaderships (stale: before the last
//	                                 change of them)
//	resends-due at=D                 the shards whose resend is due at D
//	due at=D [gone=(NODE, ...)]      the messages to send at D
//	ack from=NODE topic=T [to=NODE] [epoch=E] [status=done|stale-term|below-floor]
//	    NODE's answer to the last message sent to `to` (default: NODE)
//	    about T; epoch defaults to the message's
//	settled shard=S term=R topic=T epoch=E at=D [fresh]
//	released node=N | holding node=N
//	state                            messages owed, fences
//	window n=N                       at most N messages in flight to a node
//	next                             when Due has work next
func TestSpec(t *testing.T) {
	ddtest.Run(t, "testdata/*.txt", func(t *testing.T) ddtest.Handler {
		s := &spec{l: newLeader(t), sent: map[string]RPC{}}
		return s.run
	})
}

type spec struct {
	l    *Leader
	sent map[string]RPC // the last message sent per node and topic
}

func (s *spec) run(t *testing.T, td *datadriven.TestData) string {
	a := ddtest.ArgsOf(t, td)
	l := s.l
	var out strings.Builder
	switch td.Cmd {
	case "next":
		switch at, ok := l.Next(); {
		case !ok:
			out.WriteString("nothing queued\n")
		case at.IsZero():
			out.WriteString("at once\n")
		default:
			fmt.Fprintf(&out, "at %v\n", at.Sub(ddtest.T0))
		}
	case "window":
		l.cfg.Window = int(a.Num("n"))
	case "won":
		l.Won(a.Time("at"), a.Num("shard"), a.Num("term"))
	case "current":
		l.Current(a.Num("shard"), a.Num("term"))
	case "confirm":
		l.Confirm(a.Num("shard"), a.Num("term"), a.Time("at"))
	case "voters":
		l.SetVoters(a.Num("shard"), a.Nums("in"), a.Nums("out"))
	case "lost":
		l.Lost(a.Num("shard"))
	case "lead":
		leading(l, a.Num("shard"), a.Num("term"), a.Time("at"))
	case "can-grant":
		term, ok := l.CanGrant(a.Time("at"), a.Num("shard"))
		switch {
		case ok:
			fmt.Fprintf(&out, "grants at term %d\n", term)
		case term != 0:
			fmt.Fprintf(&out, "cannot grant (leads at term %d)\n", term)
		default:
			out.WriteString("cannot grant (does not lead)\n")
		}
	case "grant-all":
		v := l.Version()
		terms := l.LedTerms()
		if l.GrantAll(a.Time("at"), v) {
			fmt.Fprintf(&out, "grants all %d led shard(s)\n", len(terms))
		} else {
			out.WriteString("cannot grant all at once\n")
		}
	case "vouch-round":
		asks := l.VouchRound(a.Time("at"), a.Num("seq"))
		if len(asks) == 0 {
			out.WriteString("nothing to ask\n")
		}
		for _, v := range slices.Sorted(maps.Keys(asks)) {
			ask := asks[v]
			fmt.Fprintf(&out, "voter %d: summary of %d led shard(s)", v, ask.Led.Count)
			if ask.Vouch == nil {
				out.WriteString(" alone\n")
				continue
			}
			out.WriteString(", vouch for")
			for _, st := range ask.Vouch {
				fmt.Fprintf(&out, " %d@%d", st.Shard, st.Term)
			}
			out.WriteString("\n")
		}
	case "vouched":
		if l.Vouched(a.Num("from"), a.Num("seq"), a.Nums("shards"), a.Has("all")) {
			out.WriteString("again: vouched for nothing, the next round lists\n")
		}
	case "effects":
		grants := map[string]time.Time{}
		for _, v := range a.Vals("last-grant") {
			node, at, _ := strings.Cut(v, ":")
			grants[node] = ddtest.At(t, at)
		}
		var effs []meta.Effect
		for _, line := range ddtest.Lines(td.Input) {
			effs = append(effs, parseEffect(t, line))
		}
		l.Effects(a.Time("at"), a.Num("shard"), effs, func(node string) time.Time { return grants[node] })
	case "take-up":
		l.TakeUp(a.Time("at"), a.Num("shard"), a.Num("term"))
	case "verified":
		l.Verified(a.Num("shard"), a.Num("term"), a.Str("node", ""))
	case "verified-led":
		v := l.Version()
		if a.Has("stale") {
			v--
		}
		if !l.VerifiedLed(v, a.Str("node", "")) {
			out.WriteString("leaderships changed since: not recorded\n")
		}
	case "resends-due":
		due := l.ResendsDue(a.Time("at"))
		if len(due) == 0 {
			out.WriteString("none due\n")
		}
		for _, p := range due {
			fmt.Fprintf(&out, "shard %d at term %d; verified: %s\n", p.Shard, p.Term, strings.Join(slices.Sorted(maps.Keys(p.Verified)), " "))
		}
	case "resend":
		var as []meta.Assignment
		for _, line := range ddtest.Lines(td.Input) {
			f := strings.Fields(line)
			topic, epoch := topicEpoch(t, f[0])
			la := ddtest.FieldArgs(t, f[1:])
			as = append(as, meta.Assignment{Topic: topic, Epoch: epoch, Owner: la.Str("owner", ""), Previous: la.Str("prev", ""),
				Partitions: uint32(la.NumOr("partitions", 1)), State: meta.Active})
		}
		l.Resend(a.Num("shard"), as)
	case "due":
		due := l.Due(a.Time("at"), func(n string) bool { return slices.Contains(a.Vals("gone"), n) })
		if len(due) == 0 {
			out.WriteString("nothing due\n")
		}
		for _, r := range due {
			s.sent[r.Node+"/"+r.Topic] = r
			fmt.Fprintf(&out, "%s (shard %d, term %d", describe(&r), r.Shard, r.Term)
			if r.Prev != "" {
				fmt.Fprintf(&out, ", prev %s", r.Prev)
			}
			if r.Revoked {
				out.WriteString(", revoked")
			}
			out.WriteString(")\n")
		}
	case "ack":
		from := a.Str("from", "")
		to := a.Str("to", from)
		topic := a.Str("topic", "")
		r, ok := s.sent[to+"/"+topic]
		if !ok {
			t.Fatalf("nothing sent to %s about %s", to, topic)
		}
		epoch := r.Epoch
		if a.Has("epoch") {
			epoch = a.Num("epoch")
		}
		st := map[string]wire.TopicStatus{"done": wire.TopicDone, "stale-term": wire.TopicStaleTerm, "below-floor": wire.TopicBelowFloor}[a.Str("status", "done")]
		l.Ack(from, r.ReqID, &wire.TopicAck{Topic: []byte(topic), Epoch: epoch, Status: st})
	case "settled":
		settled, wait, leads := l.Settled(a.Time("at"), a.Num("shard"), a.Num("term"), a.Str("topic", ""), a.Num("epoch"), a.Has("fresh"))
		switch {
		case !leads:
			out.WriteString("not leading at that term\n")
		case settled:
			out.WriteString("settled\n")
		default:
			fmt.Fprintf(&out, "not settled: at most %v to wait\n", wait)
		}
	case "released":
		l.Released(a.Str("node", ""))
	case "holding":
		l.Holding(a.Str("node", ""))
	case "state":
		fmt.Fprintf(&out, "owes %d message(s); %d earlier owner(s) not yet fenced\n", l.Pending(), l.Fences())
		for _, shard := range slices.Sorted(maps.Keys(l.led)) {
			fmt.Fprintf(&out, "shard %d: holds back an open: %v\n", shard, l.HoldsBack(shard))
		}
	default:
		t.Fatalf("unknown verb %q", td.Cmd)
	}
	if out.Len() == 0 {
		return "ok\n"
	}
	return out.String()
}

func parseEffect(t *testing.T, line string) meta.Effect {
	f := strings.Fields(line)
	if len(f) < 3 {
		t.Fatalf("effect %q", line)
	}
	topic, epoch := topicEpoch(t, f[2])
	e := meta.Effect{Node: f[1], Topic: topic, Epoch: epoch, Partitions: 1}
	la := ddtest.FieldArgs(t, f[3:])
	switch f[0] {
	case "open":
		e.Kind = meta.EffectOpen
		e.Fresh = la.Has("fresh")
		e.Prev = la.Str("prev", "")
	case "close":
		e.Kind = meta.EffectClose
		e.Revoked = la.Has("revoked")
	default:
		t.Fatalf("effect %q", line)
	}
	return e
}

func topicEpoch(t *testing.T, s string) (string, uint64) {
	topic, e, ok := strings.Cut(s, "@")
	epoch, err := strconv.ParseUint(e, 10, 64)
	if !ok || err != nil {
		t.Fatalf("topic@epoch %q", s)
	}
	return topic, epoch
}

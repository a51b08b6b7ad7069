package duty

import (
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"

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
//	    topics, one a line: TOPIC@EPOCH owner=NODE [prev=NODE]
//	due at=D [gone=(NODE, ...)]      the messages to send at D
//	ack from=NODE topic=T [to=NODE] [epoch=E] [status=done|stale-term|below-floor]
//	    NODE's answer to the last message sent to `to` (default: NODE)
//	    about T; epoch defaults to the message's
//	settled shard=S term=R topic=T epoch=E at=D [fresh]
//	released node=N | holding node=N
//	state                            messages owed, fences
func TestSpec(t *testing.T) {
	files, err := filepath.Glob("testdata/*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no scenarios: %v", err)
	}
	for _, path := range files {
		t.Run(strings.TrimSuffix(filepath.Base(path), ".txt"), func(t *testing.T) {
			l := newLeader(t)
			s := &spec{l: l, sent: map[string]RPC{}}
			datadriven.RunTest(t, path, func(t *testing.T, td *datadriven.TestData) string {
				return s.run(t, td)
			})
		})
	}
}

// specT0 is the instant the scenarios' times count from.
var specT0 = time.Unix(1_000_000, 0)

type spec struct {
	l    *Leader
	sent map[string]RPC // the last message sent per node and topic
}

type args map[string][]string

func argsOf(td *datadriven.TestData) args {
	a := args{}
	for _, c := range td.CmdArgs {
		a[c.Key] = c.Vals
	}
	return a
}

func (a args) str(key, def string) string {
	if v, ok := a[key]; ok && len(v) > 0 {
		return v[0]
	}
	return def
}

func (a args) has(key string) bool { _, ok := a[key]; return ok }

func (a args) num(t *testing.T, key string) uint64 {
	s := a.str(key, "")
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		t.Fatalf("%s=%q: %v", key, s, err)
	}
	return n
}

func (a args) nums(t *testing.T, key string) []uint64 {
	var out []uint64
	for _, v := range a[key] {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("%s: %v", key, err)
		}
		out = append(out, n)
	}
	return out
}

func parseAt(t *testing.T, s string) time.Time {
	d, err := time.ParseDuration(s)
	if err != nil {
		t.Fatalf("time %q: %v", s, err)
	}
	return specT0.Add(d)
}

func (a args) at(t *testing.T) time.Time {
	if !a.has("at") {
		t.Fatal("at= required")
	}
	return parseAt(t, a.str("at", ""))
}

func (s *spec) run(t *testing.T, td *datadriven.TestData) string {
	a := argsOf(td)
	l := s.l
	var out strings.Builder
	switch td.Cmd {
	case "won":
		l.Won(a.at(t), a.num(t, "shard"), a.num(t, "term"))
	case "current":
		l.Current(a.num(t, "shard"), a.num(t, "term"))
	case "confirm":
		l.Confirm(a.num(t, "shard"), a.num(t, "term"), a.at(t))
	case "voters":
		l.SetVoters(a.num(t, "shard"), a.nums(t, "in"), a.nums(t, "out"))
	case "lost":
		l.Lost(a.num(t, "shard"))
	case "lead":
		leading(l, a.num(t, "shard"), a.num(t, "term"), a.at(t))
	case "can-grant":
		term, ok := l.CanGrant(a.at(t), a.num(t, "shard"))
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
		if l.GrantAll(a.at(t), v) {
			fmt.Fprintf(&out, "grants all %d led shard(s)\n", len(terms))
		} else {
			out.WriteString("cannot grant all at once\n")
		}
	case "vouch-round":
		asks := l.VouchRound(a.at(t), a.num(t, "seq"))
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
		if l.Vouched(a.num(t, "from"), a.num(t, "seq"), a.nums(t, "shards"), a.has("all")) {
			out.WriteString("again: vouched for nothing, the next round lists\n")
		}
	case "effects":
		grants := map[string]time.Time{}
		for _, v := range a["last-grant"] {
			node, at, _ := strings.Cut(v, ":")
			grants[node] = parseAt(t, at)
		}
		var effs []meta.Effect
		for _, line := range lines(td.Input) {
			effs = append(effs, parseEffect(t, line))
		}
		l.Effects(a.at(t), a.num(t, "shard"), effs, func(node string) time.Time { return grants[node] })
	case "resend":
		var as []meta.Assignment
		for _, line := range lines(td.Input) {
			f := strings.Fields(line)
			topic, epoch := topicEpoch(t, f[0])
			la := kv(f[1:])
			as = append(as, meta.Assignment{Topic: topic, Epoch: epoch, Owner: la["owner"], Previous: la["prev"], Partitions: 1, State: meta.Active})
		}
		l.Resend(a.num(t, "shard"), as)
	case "due":
		due := l.Due(a.at(t), func(n string) bool { return slices.Contains(a["gone"], n) })
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
		from := a.str("from", "")
		to := a.str("to", from)
		topic := a.str("topic", "")
		r, ok := s.sent[to+"/"+topic]
		if !ok {
			t.Fatalf("nothing sent to %s about %s", to, topic)
		}
		epoch := r.Epoch
		if a.has("epoch") {
			epoch = a.num(t, "epoch")
		}
		st := map[string]wire.TopicStatus{"done": wire.TopicDone, "stale-term": wire.TopicStaleTerm, "below-floor": wire.TopicBelowFloor}[a.str("status", "done")]
		l.Ack(from, r.ReqID, &wire.TopicAck{Topic: []byte(topic), Epoch: epoch, Status: st})
	case "settled":
		settled, wait, leads := l.Settled(a.at(t), a.num(t, "shard"), a.num(t, "term"), a.str("topic", ""), a.num(t, "epoch"), a.has("fresh"))
		switch {
		case !leads:
			out.WriteString("not leading at that term\n")
		case settled:
			out.WriteString("settled\n")
		default:
			fmt.Fprintf(&out, "not settled: at most %v to wait\n", wait)
		}
	case "released":
		l.Released(a.str("node", ""))
	case "holding":
		l.Holding(a.str("node", ""))
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
	la := kv(f[3:])
	switch f[0] {
	case "open":
		e.Kind = meta.EffectOpen
		_, e.Fresh = la["fresh"]
		e.Prev = la["prev"]
	case "close":
		e.Kind = meta.EffectClose
		_, e.Revoked = la["revoked"]
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

func kv(fields []string) map[string]string {
	m := map[string]string{}
	for _, f := range fields {
		k, v, _ := strings.Cut(f, "=")
		m[k] = v
	}
	return m
}

func lines(s string) []string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	return out
}

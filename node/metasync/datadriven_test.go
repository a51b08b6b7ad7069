package metasync

import (
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"

	"github.com/shoalmq/shoal/internal/ddtest"
	"github.com/shoalmq/shoal/router"
	"github.com/shoalmq/shoal/swim"
	"github.com/shoalmq/shoal/wire"
)

// TestTrackerSpec runs the scenarios of testdata/tracker/*.txt: which
// pulls a node decides to send to keep its copies of the cluster metadata
// (membership, ring, shard leaders) current. Times are offsets from a
// fixed instant (at=1.5s). The verbs:
//
//	tracker timeout=D interval=D    a new tracker (1s and 10s unless said)
//	announce kind=K peer=P version=V have=H at=D
//	    P announces version V of K (members, ring or leaders); this node
//	    has H: pull from P now?
//	merged kind=K have=H            a push of K was merged; this node now
//	                                has H
//	forget peer=P                   P is gone
//	due at=D [have=(K:V, ...)] [peers=(P, ...)] [pick=(i, ...)]
//	    the pulls to send at D, with this node's versions and the live
//	    peers; a random choice among n peers takes the next pick mod n
//	    (0 when none is left)
//	state                           each kind: synced, the pull in flight
func TestTrackerSpec(t *testing.T) {
	ddtest.Run(t, "testdata/tracker/*.txt", func(*testing.T) ddtest.Handler {
		tr := newTracker(time.Second, 10*time.Second)
		return func(t *testing.T, td *datadriven.TestData) string { return runTrackerSpec(t, td, &tr) }
	})
}

// specArgs are a directive's arguments, with the kinds and picks of this
// package's scenarios.
type specArgs struct {
	ddtest.Args
	t *testing.T
}

func argsOf(t *testing.T, td *datadriven.TestData) specArgs {
	return specArgs{Args: ddtest.ArgsOf(t, td), t: t}
}

func (a specArgs) at() time.Time { return ddtest.T0.Add(a.Dur("at", 0)) }

func (a specArgs) kind() kind {
	if k, ok := kindNames.Parse(a.Str("kind", "")); ok {
		return k
	}
	a.t.Fatalf("kind=%q", a.Str("kind", ""))
	return 0
}

// picks is a random source that takes the next of the directive's picks
// mod n (0 when none is left).
func (a specArgs) picks() func(int) int {
	picks := a.Vals("pick")
	return func(n int) int {
		if len(picks) == 0 {
			return 0
		}
		p, err := strconv.Atoi(picks[0])
		if err != nil {
			a.t.Fatalf("pick %q: %v", picks[0], err)
		}
		picks = picks[1:]
		return p % n
	}
}

func runTrackerSpec(t *testing.T, td *datadriven.TestData, tr *tracker) string {
	a := argsOf(t, td)
	var out strings.Builder
	switch td.Cmd {
	case "tracker":
		*tr = newTracker(a.Dur("timeout", time.Second), a.Dur("interval", 10*time.Second))
	case "announce":
		k, peer := a.kind(), a.Str("peer", "")
		if tr.announce(k, peer, a.Num("version"), a.Num("have"), a.at()) {
			fmt.Fprintf(&out, "pull %s from %s\n", k, peer)
		} else {
			out.WriteString("no pull\n")
		}
	case "merged":
		tr.merged(a.kind(), a.Num("have"))
	case "forget":
		tr.forget(a.Str("peer", ""))
	case "due":
		var have Versions
		for _, v := range a.Vals("have") {
			name, ver, _ := strings.Cut(v, ":")
			n, err := strconv.ParseUint(ver, 10, 64)
			if err != nil {
				t.Fatalf("have %q: %v", v, err)
			}
			switch name {
			case kMembers.String():
				have.Membership = n
			case kRing.String():
				have.Ring = n
			case kLeaders.String():
				have.ShardLeaders = n
			default:
				t.Fatalf("have %q: no such kind", v)
			}
		}
		reqs := tr.due(a.at(), have, a.Vals("peers"), a.picks())
		if len(reqs) == 0 {
			out.WriteString("no pull\n")
		}
		for _, r := range reqs {
			fmt.Fprintf(&out, "pull %s from %s\n", r.kind, r.peer)
		}
	case "state":
		for k := range numKinds {
			p := &tr.pulls[k]
			fmt.Fprintf(&out, "%s: synced %v", k, tr.synced[k])
			if p.peer != "" {
				fmt.Fprintf(&out, "; pulling from %s for version %d until %s, asked %s",
					p.peer, p.want, p.deadline.Sub(ddtest.T0), strings.Join(p.tried, " "))
			}
			if heard := tr.heard[k]; len(heard) > 0 {
				out.WriteString("; heard")
				for _, peer := range slices.Sorted(maps.Keys(heard)) {
					fmt.Fprintf(&out, " %s@%d", peer, heard[peer])
				}
			}
			out.WriteString("\n")
		}
		if tr.fullySynced() {
			out.WriteString("fully synced\n")
		}
	default:
		t.Fatalf("unknown verb %q", td.Cmd)
	}
	if out.Len() == 0 {
		return "ok\n"
	}
	return out.String()
}

// TestSyncSpec runs the scenarios of testdata/driver/*.txt: node n1's side
// of the sync (Sync) against a SWIM, peers, a clock and a random source
// the scenario plays, with a shard-leader table of 8 shards: the versions
// it holds, the frames it sends and answers, what it asks of SWIM. Times
// are offsets from a fixed instant (at=1.5s), at which the node started.
// A member is written ID[:STATE][:gN][:iN][:rRACK]: alive, generation 1,
// incarnation 1 and rack r1 unless said; its SWIM address is ID:7946. A
// leader row is SHARD:NODE@TERM. The verbs:
//
//	sync [seeds=(A, ...)] [bucket=R] a new Sync for n1 (pull timeout 1s,
//	                                 interval 10s) given SWIM seeds A, its
//	                                 pulls' buckets of R records (32)
//	swim M ...                       SWIM's member list here becomes M ...
//	observe                          the view changed: Observe SWIM's list
//	leader shard=S node=N term=T     SWIM told this node of S's leader
//	cut peer=P | heal peer=P         frames to P fail, or go again
//	announce kind=K peer=P version=V [at=D]
//	                                 SWIM: P holds version V of K
//	tick [live=(P, ...)] [dead=(P, ...)] [at=D] [pick=(i, ...)]
//	                                 the event loop's tick; a random choice
//	                                 among n takes the next pick mod n
//	push from=P kind=K version=V [form=same|delta]
//	     (members=(M, ...) [all=(M, ...)] | table=(ROW, ...) | data=HEX)
//	                                 P pushed its copy of K: all of it, none
//	                                 (same: it is this node's) or the part
//	                                 given (delta); a member list's digest
//	                                 is that of all (members unless said)
//	pull from=P kind=K have=H [id=N] [members=(M, ...) | table=(ROW, ...)] [buckets=R]
//	                                 P pulls K in request N, its copy the
//	                                 one given (empty unless said), with
//	                                 its buckets of R records if said: the
//	                                 answer
//	synced [live=(P, ...)] at=D      is the node synced, or alone
//	versions | stats
//
// Below each, what the Sync did: the frames it sent, what it asked of
// SWIM, a push it merged or refused (and why), then its versions when the
// verb may change them.
func TestSyncSpec(t *testing.T) {
	ddtest.Run(t, "testdata/driver/*.txt", func(t *testing.T) ddtest.Handler {
		env := &specEnv{t: t, cut: map[string]bool{}}
		s := env.newSync(t, nil, 0)
		return func(t *testing.T, td *datadriven.TestData) string {
			env.t = t
			return env.run(t, td, &s)
		}
	})
}

// specEnv is the Env a scenario plays: it writes what the Sync does to
// out.
type specEnv struct {
	t       *testing.T
	now     time.Time
	members []swim.Member
	leaders *router.LeaderTable
	cut     map[string]bool
	intn    func(int) int
	out     strings.Builder
}

func (e *specEnv) newSync(t *testing.T, seeds []string, bucket int) *Sync {
	e.leaders = router.NewLeaderTable(8)
	e.now = ddtest.T0
	log := slog.New(slog.NewTextHandler(&e.out, &slog.HandlerOptions{
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey {
				return slog.Attr{}
			}
			return a
		},
	}))
	s, err := New(Config{Self: "n1", Seeds: seeds, PullTimeout: time.Second, Interval: 10 * time.Second,
		Leaders: e.leaders, Env: e, Logger: log, BucketRecords: bucket})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func (e *specEnv) Send(peer string, frame []byte) error {
	if e.cut[peer] {
		fmt.Fprintf(&e.out, "send to %s failed: %s\n", peer, describeFrame(e.t, frame))
		return errors.New("cut")
	}
	fmt.Fprintf(&e.out, "send to %s: %s\n", peer, describeFrame(e.t, frame))
	return nil
}

func (e *specEnv) Members() []swim.Member { return slices.Clone(e.members) }

func (e *specEnv) Join(seeds []string) {
	fmt.Fprintf(&e.out, "swim joins %s\n", strings.Join(seeds, " "))
}

func (e *specEnv) SetMetadataVersion(k, v uint64) {
	kk, _ := kindOf(k)
	fmt.Fprintf(&e.out, "swim says %s %d\n", kk, v)
}

func (e *specEnv) Now() time.Time { return e.now }

func (e *specEnv) IntN(n int) int {
	if e.intn == nil {
		return 0
	}
	return e.intn(n)
}

func (e *specEnv) Merged() { e.out.WriteString("merged\n") }

func (e *specEnv) run(t *testing.T, td *datadriven.TestData, s **Sync) string {
	a := argsOf(t, td)
	e.out.Reset()
	e.now, e.intn = a.at(), a.picks()
	versions := false
	switch td.Cmd {
	case "sync":
		*s = e.newSync(t, a.Vals("seeds"), int(a.NumOr("bucket", 0)))
	case "swim":
		e.members = e.members[:0]
		for _, c := range td.CmdArgs {
			e.members = append(e.members, parseMember(t, c.Key))
		}
		slices.SortFunc(e.members, func(a, b swim.Member) int { return strings.Compare(a.ID, b.ID) })
	case "observe":
		(*s).Observe(e.Members())
		versions = true
	case "leader":
		if _, err := e.leaders.Update(uint32(a.Num("shard")), a.Str("node", ""), a.Num("term")); err != nil {
			t.Fatal(err)
		}
		versions = true
	case "cut", "heal":
		e.cut[a.Str("peer", "")] = td.Cmd == "cut"
	case "announce":
		k := a.Str("kind", "")
		kk := uint64(0)
		if n, err := strconv.ParseUint(k, 10, 64); err == nil {
			kk = n
		} else {
			kk = uint64(wireKinds[a.kind()])
		}
		(*s).Announced(kk, a.Str("peer", ""), a.Num("version"))
	case "tick":
		dead := map[string]bool{}
		for _, id := range a.Vals("dead") {
			dead[id] = true
		}
		(*s).Tick(a.Vals("live"), dead)
	case "push":
		k := a.kind()
		m := wire.MetadataPush{Kind: wireKinds[k], Version: a.Num("version")}
		switch a.Str("form", "full") {
		case "same":
			m.Form = wire.PushSame
		case "delta":
			m.Form = wire.PushDelta
		}
		all := a.Vals("all")
		if all == nil {
			all = a.Vals("members")
		}
		if m.Form == wire.PushSame && all == nil {
			for _, sm := range e.members {
				all = append(all, memberString(&recordsOf([]swim.Member{sm})[0]))
			}
		}
		if k != kLeaders {
			md, rd := wire.MembershipDigests(recordsOf(parseMembers(t, all)))
			m.Digest = md
			if k == kRing {
				m.Digest = rd
			}
		}
		switch {
		case m.Form == wire.PushSame:
		case a.Vals("members") != nil:
			m.Data = wire.AppendMemberRecords(nil, recordsOf(parseMembers(t, a.Vals("members"))))
		case a.Vals("table") != nil:
			m.Data = wire.AppendLeaderTable(nil, parseRows(t, a.Vals("table")))
		default:
			b, err := hex.DecodeString(a.Str("data", ""))
			if err != nil {
				t.Fatalf("data: %v", err)
			}
			m.Data = b
		}
		(*s).MergePush(a.Str("from", ""), wire.AppendMetadataPush(nil, &m))
		versions = true
	case "pull":
		var id uint64
		if a.Str("id", "") != "" {
			id = a.Num("id")
		}
		k, per := wireKinds[a.kind()], int(a.NumOr("buckets", 0))
		var p wire.MetadataPull
		if a.Vals("table") != nil {
			p = leaderTable(parseRows(t, a.Vals("table"))).pull(k, a.Num("have"), per)
		} else {
			p = members(recordsOf(parseMembers(t, a.Vals("members")))).pull(k, a.Num("have"), per)
		}
		f := (*s).AnswerPull(id, wire.AppendMetadataPull(nil, &p))
		if f == nil {
			e.out.WriteString("no answer\n")
		} else {
			fmt.Fprintf(&e.out, "answer: %s\n", describeFrame(t, f))
		}
	case "synced":
		fmt.Fprintf(&e.out, "%v\n", (*s).Synced(a.Vals("live"), ddtest.T0))
	case "versions":
		versions = true
	case "stats":
		st := (*s).Stats()
		fmt.Fprintf(&e.out, "pulls %d, merges %d\n", st.Pulls, st.Merges)
	default:
		t.Fatalf("unknown verb %q", td.Cmd)
	}
	if versions {
		v := (*s).Versions()
		fmt.Fprintf(&e.out, "versions: members %d, ring %d, leaders %d\n", v.Membership, v.Ring, v.ShardLeaders)
	}
	if e.out.Len() == 0 {
		return "ok\n"
	}
	return e.out.String()
}

// parseMember reads ID[:STATE][:gN][:iN][:rRACK].
func parseMember(t *testing.T, s string) swim.Member {
	parts := strings.Split(s, ":")
	m := swim.Member{ID: parts[0], Generation: 1, Incarnation: 1, State: swim.StateAlive, Rack: "r1", SwimAddr: parts[0] + ":7946"}
	for _, p := range parts[1:] {
		switch {
		case p == "alive", p == "suspect", p == "dead", p == "left":
			for st := swim.StateAlive; st <= swim.StateLeft; st++ {
				if st.String() == p {
					m.State = st
				}
			}
		case len(p) > 1 && (p[0] == 'g' || p[0] == 'i'):
			n, err := strconv.ParseUint(p[1:], 10, 64)
			if err != nil {
				t.Fatalf("member %q: %v", s, err)
			}
			if p[0] == 'g' {
				m.Generation = n
			} else {
				m.Incarnation = n
			}
		case len(p) > 1 && p[0] == 'r':
			m.Rack = p[1:]
		default:
			t.Fatalf("member %q: %q?", s, p)
		}
	}
	return m
}

func parseMembers(t *testing.T, vs []string) []swim.Member {
	var ms []swim.Member
	for _, v := range vs {
		ms = append(ms, parseMember(t, v))
	}
	slices.SortFunc(ms, func(a, b swim.Member) int { return strings.Compare(a.ID, b.ID) })
	return ms
}

func parseRows(t *testing.T, vs []string) []wire.LeaderRow {
	var rows []wire.LeaderRow
	for _, v := range vs {
		rows = append(rows, parseRow(t, v))
	}
	return rows
}

// memberString writes a member list's record as parseMember reads it.
func memberString(r *wire.MemberRecord) string {
	s := string(r.ID)
	if st := swim.State(r.State); st != swim.StateAlive {
		s += ":" + st.String()
	}
	if r.Generation != 1 {
		s += ":g" + strconv.FormatUint(r.Generation, 10)
	}
	if r.Incarnation != 1 {
		s += ":i" + strconv.FormatUint(r.Incarnation, 10)
	}
	if string(r.Rack) != "r1" {
		s += ":r" + string(r.Rack)
	}
	return s
}

// parseRow reads SHARD:NODE@TERM.
func parseRow(t *testing.T, s string) wire.LeaderRow {
	shard, rest, _ := strings.Cut(s, ":")
	node, term, _ := strings.Cut(rest, "@")
	sh, err1 := strconv.ParseUint(shard, 10, 64)
	tm, err2 := strconv.ParseUint(term, 10, 64)
	if err1 != nil || err2 != nil {
		t.Fatalf("row %q", s)
	}
	return wire.LeaderRow{Shard: sh, Leader: []byte(node), Term: tm}
}

// describeFrame writes a MetadataPull or MetadataPush frame.
func describeFrame(t *testing.T, f []byte) string {
	var h wire.Header
	if err := wire.DecodeHeader(f, &h); err != nil || int(h.Length) != len(f)-wire.HeaderSize {
		t.Fatalf("frame: %v (length %d of %d)", err, h.Length, len(f)-wire.HeaderSize)
	}
	payload := f[wire.HeaderSize:]
	switch h.Kind {
	case wire.KindMetadataPull:
		var m wire.MetadataPull
		if err := wire.DecodeMetadataPull(payload, &m); err != nil {
			t.Fatal(err)
		}
		k, _ := kindOf(uint64(m.Kind))
		if len(m.Buckets) > 0 {
			return fmt.Sprintf("pull %s, have %d, buckets %d", k, m.Have, len(m.Buckets))
		}
		return fmt.Sprintf("pull %s, have %d", k, m.Have)
	case wire.KindMetadataPush:
		var m wire.MetadataPush
		if err := wire.DecodeMetadataPush(payload, &m); err != nil {
			t.Fatal(err)
		}
		k, _ := kindOf(uint64(m.Kind))
		head := fmt.Sprintf("push %s at version %d in request %d:", k, m.Version, h.RequestID)
		switch m.Form {
		case wire.PushSame:
			return head + " same"
		case wire.PushDelta:
			head += " delta"
		}
		var items []string
		if k == kLeaders {
			rows, err := wire.DecodeLeaderTable(m.Data, 8, nil)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range rows {
				items = append(items, fmt.Sprintf("%d:%s@%d", r.Shard, r.Leader, r.Term))
			}
		} else {
			rs, err := wire.DecodeMemberRecords(m.Data, nil)
			if err != nil {
				t.Fatal(err)
			}
			for i := range rs {
				items = append(items, memberString(&rs[i]))
			}
		}
		return fmt.Sprintf("%s (%s)", head, strings.Join(items, ", "))
	}
	t.Fatalf("frame of kind %v", h.Kind)
	return ""
}

package metasync

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
	files, err := filepath.Glob("testdata/tracker/*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no scenarios: %v", err)
	}
	for _, path := range files {
		t.Run(strings.TrimSuffix(filepath.Base(path), ".txt"), func(t *testing.T) {
			tr := newTracker(time.Second, 10*time.Second)
			datadriven.RunTest(t, path, func(t *testing.T, td *datadriven.TestData) string {
				return runTrackerSpec(t, td, &tr)
			})
		})
	}
}

// specT0 is the instant the scenarios' times count from.
var specT0 = time.Unix(1_000_000, 0)

// specArgs are a directive's arguments, key → values.
type specArgs struct {
	t *testing.T
	m map[string][]string
}

func argsOf(t *testing.T, td *datadriven.TestData) specArgs {
	a := specArgs{t: t, m: map[string][]string{}}
	for _, c := range td.CmdArgs {
		a.m[c.Key] = c.Vals
	}
	return a
}

func (a specArgs) str(key string) string {
	if v := a.m[key]; len(v) > 0 {
		return v[0]
	}
	return ""
}

func (a specArgs) num(key string) uint64 {
	n, err := strconv.ParseUint(a.str(key), 10, 64)
	if err != nil {
		a.t.Fatalf("%s=%q: %v", key, a.str(key), err)
	}
	return n
}

func (a specArgs) dur(key string, def time.Duration) time.Duration {
	if a.str(key) == "" {
		return def
	}
	d, err := time.ParseDuration(a.str(key))
	if err != nil {
		a.t.Fatalf("%s=%q: %v", key, a.str(key), err)
	}
	return d
}

func (a specArgs) at() time.Time { return specT0.Add(a.dur("at", 0)) }

func (a specArgs) kind() kind {
	for k := range numKinds {
		if k.String() == a.str("kind") {
			return k
		}
	}
	a.t.Fatalf("kind=%q", a.str("kind"))
	return 0
}

// picks is a random source that takes the next of the directive's picks
// mod n (0 when none is left).
func (a specArgs) picks() func(int) int {
	picks := a.m["pick"]
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
		*tr = newTracker(a.dur("timeout", time.Second), a.dur("interval", 10*time.Second))
	case "announce":
		k, peer := a.kind(), a.str("peer")
		if tr.announce(k, peer, a.num("version"), a.num("have"), a.at()) {
			fmt.Fprintf(&out, "pull %s from %s\n", k, peer)
		} else {
			out.WriteString("no pull\n")
		}
	case "merged":
		tr.merged(a.kind(), a.num("have"))
	case "forget":
		tr.forget(a.str("peer"))
	case "due":
		var have Versions
		for _, v := range a.m["have"] {
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
		reqs := tr.due(a.at(), have, a.m["peers"], a.picks())
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
					p.peer, p.want, p.deadline.Sub(specT0), strings.Join(p.tried, " "))
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

package node

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

// TestMetadataSyncSpec runs the scenarios of testdata/metasync/*.txt: how
// a node keeps its copies of the cluster metadata (membership, ring,
// shard leaders) current, as the pulls its sync tracker decides to send.
// Times are offsets from a fixed instant (at=1.5s). The verbs:
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
func TestMetadataSyncSpec(t *testing.T) {
	files, err := filepath.Glob("testdata/metasync/*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no scenarios: %v", err)
	}
	for _, path := range files {
		t.Run(strings.TrimSuffix(filepath.Base(path), ".txt"), func(t *testing.T) {
			tr := newSyncTracker(time.Second, 10*time.Second)
			datadriven.RunTest(t, path, func(t *testing.T, td *datadriven.TestData) string {
				return runSyncSpec(t, td, &tr)
			})
		})
	}
}

var syncT0 = time.Unix(1_000_000, 0)

var syncKinds = map[string]int{"members": kMembers, "ring": kRing, "leaders": kLeaders}

func syncKindName(k int) string {
	for name, kk := range syncKinds {
		if kk == k {
			return name
		}
	}
	return strconv.Itoa(k)
}

func runSyncSpec(t *testing.T, td *datadriven.TestData, tr *syncTracker) string {
	args := map[string][]string{}
	for _, c := range td.CmdArgs {
		args[c.Key] = c.Vals
	}
	str := func(key string) string {
		if v := args[key]; len(v) > 0 {
			return v[0]
		}
		return ""
	}
	num := func(key string) uint64 {
		n, err := strconv.ParseUint(str(key), 10, 64)
		if err != nil {
			t.Fatalf("%s=%q: %v", key, str(key), err)
		}
		return n
	}
	dur := func(key string, def time.Duration) time.Duration {
		if str(key) == "" {
			return def
		}
		d, err := time.ParseDuration(str(key))
		if err != nil {
			t.Fatalf("%s=%q: %v", key, str(key), err)
		}
		return d
	}
	kind := func() int {
		k, ok := syncKinds[str("kind")]
		if !ok {
			t.Fatalf("kind=%q", str("kind"))
		}
		return k
	}
	at := func() time.Time { return syncT0.Add(dur("at", 0)) }
	var out strings.Builder
	switch td.Cmd {
	case "tracker":
		*tr = newSyncTracker(dur("timeout", time.Second), dur("interval", 10*time.Second))
	case "announce":
		k, peer := kind(), str("peer")
		if tr.announce(k, peer, num("version"), num("have"), at()) {
			fmt.Fprintf(&out, "pull %s from %s\n", syncKindName(k), peer)
		} else {
			out.WriteString("no pull\n")
		}
	case "merged":
		tr.merged(kind(), num("have"))
	case "forget":
		tr.forget(str("peer"))
	case "due":
		var have MetadataVersions
		for _, v := range args["have"] {
			name, ver, _ := strings.Cut(v, ":")
			n, err := strconv.ParseUint(ver, 10, 64)
			if err != nil {
				t.Fatalf("have %q: %v", v, err)
			}
			switch syncKinds[name] {
			case kMembers:
				have.Membership = n
			case kRing:
				have.Ring = n
			case kLeaders:
				have.ShardLeaders = n
			}
		}
		picks := args["pick"]
		intn := func(n int) int {
			if len(picks) == 0 {
				return 0
			}
			p, err := strconv.Atoi(picks[0])
			if err != nil {
				t.Fatalf("pick %q: %v", picks[0], err)
			}
			picks = picks[1:]
			return p % n
		}
		reqs := tr.due(at(), have, args["peers"], intn)
		if len(reqs) == 0 {
			out.WriteString("no pull\n")
		}
		for _, r := range reqs {
			fmt.Fprintf(&out, "pull %s from %s\n", syncKindName(r.kind), r.peer)
		}
	case "state":
		for k := range numMetaKinds {
			p := &tr.pulls[k]
			fmt.Fprintf(&out, "%s: synced %v", syncKindName(k), tr.synced[k])
			if p.peer != "" {
				fmt.Fprintf(&out, "; pulling from %s for version %d until %s, asked %s",
					p.peer, p.want, p.deadline.Sub(syncT0), strings.Join(p.tried, " "))
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

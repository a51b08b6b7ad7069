package ownership

import (
	"testing"
	"time"

	"github.com/shoalmq/shoal/meta"
	"github.com/shoalmq/shoal/wire"
)

// FuzzHolder drives a Holder with arbitrary opens, closes, rounds and
// replies, as a hostile or confused leader could send them, keeping the
// floors durable as the caller does, and checks after every step: no
// panic; nothing at or below its floor is held; what Serve allows is held
// at that epoch; the digests a round sends are those of what is held; and
// a twin Holder that rebuilds its leader groups on every round (as if the
// leader table always changed) serves exactly what the one reusing them
// serves. Fresh rounds (the shards with new topics alone) come between
// full ones.
func FuzzHolder(f *testing.F) {
	f.Add([]byte{0, 1, 1, 2, 1, 1, 1, 3, 0, 0, 0, 4, 1, 1, 1})
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20})
	f.Fuzz(func(t *testing.T, in []byte) {
		h, _ := New(Config{Lease: time.Second})
		twin, _ := New(Config{Lease: time.Second})
		// Shards 0-2; leaders L and M; the table's version changes with
		// the map, and the twin is told it changed on every round.
		leaders := map[uint64]string{0: "L", 1: "L", 2: "L"}
		var version, twinVersion uint64
		leaderOf := func(s uint64) (string, bool) { l, ok := leaders[s]; return l, ok }
		floors := map[string]uint64{}
		now := time.Unix(1000, 0)
		topics := []string{"a", "b", "c", "d"}
		next := func() uint64 {
			if len(in) == 0 {
				return 0
			}
			v := uint64(in[0])
			in = in[1:]
			return v
		}
		apply := func(cs []Change) {
			for _, c := range cs {
				if c.Floor != 0 && c.Floor > floors[c.Topic] {
					floors[c.Topic] = c.Floor
				}
			}
		}
		round := func(now time.Time) (uint64, map[string]*Ask) {
			seq, asks, _ := h.Round(now, leaderOf, version)
			twinVersion++
			twinSeq, _, _ := twin.Round(now, leaderOf, twinVersion)
			if seq != twinSeq {
				t.Fatalf("round %d, twin's %d", seq, twinSeq)
			}
			return seq, asks
		}
		var seqs []uint64
		var fresh map[string]*Ask
		for steps := 0; len(in) > 0 && steps < 200; steps++ {
			op := next() % 7
			topic := topics[next()%4]
			shard := next() % 3
			term := next() % 4
			epoch := next() % 6
			switch op {
			case 0:
				m := &wire.OpenTopic{Topic: []byte(topic), Shard: shard, Term: term, Epoch: epoch, Partitions: uint32(next()%3 + 1)}
				floor := floors[topic]
				_, _, cs := h.Open(m, floor)
				twin.Open(m, floor)
				apply(cs)
			case 1:
				m := &wire.CloseTopic{Topic: []byte(topic), Shard: shard, Term: term, Epoch: epoch}
				floor := floors[topic]
				_, _, cs := h.Close(m, floor)
				twin.Close(m, floor)
				apply(cs)
			case 2:
				seq, _ := round(now)
				seqs = append(seqs, seq)
			case 3:
				if len(seqs) == 0 {
					continue
				}
				g := wire.LeaseGrant{Shard: shard, Term: term, Listed: epoch%2 == 0}
				if g.Listed {
					g.Topics = append(g.Topics, wire.TopicEpoch{Topic: []byte(topic), Epoch: next() % 6})
				}
				from := "L"
				switch next() % 5 {
				case 0:
					from = "X"
				case 1:
					from = "M"
				}
				flags := next()
				r := &wire.LeaseReply{Seq: seqs[int(next())%len(seqs)], Grants: []wire.LeaseGrant{g},
					HeldMatched: flags&1 != 0, HeldGranted: flags&2 != 0}
				cs, _, _ := h.Reply(from, r)
				twin.Reply(from, r)
				apply(cs)
			case 4:
				now = now.Add(time.Duration(next()) * 10 * time.Millisecond)
			case 6:
				seq, asks, ok := h.FreshRound(now, leaderOf)
				twinSeq, _, twinOK := twin.FreshRound(now, leaderOf)
				if ok != twinOK || seq != twinSeq {
					t.Fatalf("fresh round %d %v, twin's %d %v", seq, ok, twinSeq, twinOK)
				}
				if ok {
					seqs = append(seqs, seq)
					fresh = asks
				}
			case 5:
				if l := next() % 3; l == 0 {
					delete(leaders, shard)
				} else {
					leaders[shard] = []string{"", "L", "M"}[l]
				}
				version++
			}
			digests := map[uint64]uint64{}
			for _, tp := range topics {
				held, ok := h.Get([]byte(tp))
				if ok && held.Epoch <= floors[tp] {
					t.Fatalf("%s held at %d, at or below its floor %d", tp, held.Epoch, floors[tp])
				}
				if ok {
					digests[held.Shard] ^= meta.TopicDigest(tp, held.Epoch)
				}
				for e := range uint64(6) {
					_, r := h.Serve(now, []byte(tp), e)
					if r == Servable && (!ok || held.Epoch != e) {
						t.Fatalf("%s served at %d, held %+v %v", tp, e, held, ok)
					}
					if _, tr := twin.Serve(now, []byte(tp), e); tr != r {
						t.Fatalf("%s at %d: %v, the twin that regroups every round: %v", tp, e, r, tr)
					}
				}
			}
			for _, ask := range fresh {
				if ask.Held != (wire.Summary{}) {
					t.Fatalf("a fresh round sent a summary %+v", ask.Held)
				}
				for _, q := range ask.Requests {
					if q.Digest != digests[q.Shard] {
						t.Fatalf("fresh round digest of shard %d is %x, held topics give %x", q.Shard, q.Digest, digests[q.Shard])
					}
				}
			}
			fresh = nil
			if next()%2 == 0 {
				continue // the ops that follow may answer a fresh round
			}
			seq, reqs := round(now)
			seqs = append(seqs, seq)
			for _, ask := range reqs {
				for _, q := range ask.Requests {
					if q.Digest != digests[q.Shard] {
						t.Fatalf("round digest of shard %d is %x, held topics give %x", q.Shard, q.Digest, digests[q.Shard])
					}
				}
			}
		}
	})
}

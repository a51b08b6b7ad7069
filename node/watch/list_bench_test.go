package watch

import (
	"fmt"
	"testing"

	"github.com/shoalmq/shoal/meta"
	"github.com/shoalmq/shoal/wire"
)

// BenchmarkListShard lists one shard of 20,000 topics (5,000,000 over 256
// shards) in pages of wire.MaxListTopics, each page encoded as it goes on
// the wire.
func BenchmarkListShard(b *testing.B) {
	r := newReplicas(0)
	for i := range 20_000 {
		var res meta.Result
		cmd := &meta.Command{Op: meta.OpAssign, Topic: fmt.Appendf(nil, "bench-%08d", i*7919%100_000_000), Owner: fmt.Sprintf("n%d", i%3+1)}
		if err := r.states[0].Apply(cmd, &res); err != nil {
			b.Fatal(err)
		}
	}
	w := newWorld(b, r, 4)
	var buf []byte
	b.ReportAllocs()
	for b.Loop() {
		var after []byte
		for {
			page := w.list(&wire.ListTopics{After: after, Limit: wire.MaxListTopics})
			r.answerReads(nil)
			w.runSpawned()
			if page.err != nil {
				b.Fatal(page.err)
			}
			buf = wire.AppendTopicList(buf[:0], page.v)
			if page.v.NextShard != 0 || page.v.Done {
				break
			}
			after = page.v.NextAfter
		}
	}
	b.ReportMetric(20_000*float64(b.N)/b.Elapsed().Seconds(), "topics/s")
}

package sim

import (
	"fmt"
	"time"

	"github.com/shoalmq/shoal/wire"
)

// splitEvery is the mean time between two of the operator's splits while
// the faults run.
const splitEvery = 8 * time.Second

// shardOf is the shard of topic in the map of the first live node.
func (w *World) shardOf(topic string) uint32 {
	for _, h := range w.hosts {
		if !h.down {
			return h.node.ShardOf(topic)
		}
	}
	return 0
}

// nextSplit has an operator split the shard of one of the workload's
// topics, as shoalctl split does, through a live node chosen at random
// (which forwards it to the shard's leader), whatever the faults; then
// the next split, until the faults end.
func (w *World) nextSplit() {
	if w.quiet {
		return
	}
	defer w.after(splitEvery/2+time.Duration(w.splits.Int64N(int64(splitEvery))), nil, w.nextSplit)
	topic := fmt.Sprintf("topic-%d", w.splits.IntN(w.cfg.Topics))
	shard := w.shardOf(topic)
	at := w.hosts[w.splits.IntN(len(w.hosts))]
	if at.down || at.paused {
		return
	}
	w.logf("split: shard %d (topic %s), asked at %s", shard, topic, at.id)
	f, start := wire.BeginFrame(nil, wire.KindSplitShard, 1)
	f = wire.AppendSplitShard(f, &wire.SplitShard{Shard: uint64(shard)})
	f, _ = wire.EndFrame(f, start)
	w.after(clientLag, at, func() {
		at.node.DeliverFrame(answerConn{done: func(frame []byte) {
			var hd wire.Header
			if wire.DecodeHeader(frame, &hd) != nil {
				return
			}
			if hd.Kind == wire.KindAdminResult {
				var r wire.AdminResult
				if wire.DecodeAdminResult(frame[wire.HeaderSize:], &r) == nil {
					w.splitsDone++
					w.logf("split of shard %d: done by %s at term %d", r.Shard, r.Node, r.Term)
				}
				return
			}
			w.logf("split of shard %d: %v", shard, hd.Kind)
		}}, f)
		at.wake()
	})
}

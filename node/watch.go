package node

import (
	"bytes"
	"fmt"
	"sync"
	"time"

	"github.com/shoalmq/shoal/raftmux"
	"github.com/shoalmq/shoal/wire"
)

// Watch and ListTopics are answered by the node they reach, from its own
// replicas, whatever their role: every replica keeps its shard's change
// log (changelog.go), and a watcher's position is a raft index, the same
// on every replica. A replica behind the watcher's position gives nothing
// for its shard until it catches up; one ahead gives the changes in
// between. A shard this node hosts no replica of is named in the answer,
// and the client asks a replica of it. A watch with nothing to give is
// held, as a callback and no goroutine, until a change is applied to one
// of its shards or its wait ends; the node holds at most
// Config.MaxWatchers of them and answers the others at once.

// watchHub holds the watches waiting for a change.
type watchHub struct {
	mu      sync.Mutex
	waiting map[*watchWait]struct{}
}

// watchWait is one held watch: the shards it waits on, as a bit set, and
// what to do when one of them changes.
type watchWait struct {
	shards []uint64
	wake   func()
}

func (w *watchWait) has(shard uint64) bool {
	i := shard / 64
	return i < uint64(len(w.shards)) && w.shards[i]&(1<<(shard%64)) != 0
}

// add holds w unless max watches are held already.
func (h *watchHub) add(w *watchWait, max int) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.waiting == nil {
		h.waiting = make(map[*watchWait]struct{})
	}
	if _, ok := h.waiting[w]; !ok && len(h.waiting) >= max {
		return false
	}
	h.waiting[w] = struct{}{}
	return true
}

func (h *watchHub) remove(w *watchWait) {
	h.mu.Lock()
	delete(h.waiting, w)
	h.mu.Unlock()
}

func (h *watchHub) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.waiting)
}

// changed wakes, once, every watch waiting on shard.
func (h *watchHub) changed(shard uint64) {
	h.mu.Lock()
	var woken []*watchWait
	for w := range h.waiting {
		if w.has(shard) {
			woken = append(woken, w)
			delete(h.waiting, w)
		}
	}
	h.mu.Unlock()
	for _, w := range woken {
		w.wake()
	}
}

// hostedSet is which shards this node held a replica of at a time.
type hostedSet struct {
	at     time.Time
	hosted []bool
}

// hostedFresh is how long a hostedSet is used: reading the store's shards
// costs about 0.3 ms at 1,024 shards, and every watch request needs them.
// A replica added since is reported not hosted for that long (the client
// asks another), one removed is found empty (no change given).
const hostedFresh = time.Second

// hostedShards returns which shards this node holds a replica of, as
// the store said at most hostedFresh ago. The slice is shared: read only.
func (n *Node) hostedShards() ([]bool, error) {
	now := n.clock()
	if h := n.hosted.Load(); h != nil && now.Sub(h.at) < hostedFresh && now.Sub(h.at) >= 0 {
		return h.hosted, nil
	}
	ids, err := n.rs.Shards()
	if err != nil {
		return nil, err
	}
	hosted := make([]bool, n.cfg.Shards)
	for _, s := range ids {
		if s < uint64(len(hosted)) {
			hosted[s] = true
		}
	}
	n.hosted.Store(&hostedSet{at: now, hosted: hosted})
	return hosted, nil
}

// serveWatch answers a Watch through done: at once when there are changes
// to give (or shards to send elsewhere, or compacted positions), else once
// one is applied or the wait, at most half the request timeout, ends.
func (n *Node) serveWatch(payload []byte, done answerFunc) {
	var m wire.Watch
	if err := wire.DecodeWatch(payload, &m); err != nil {
		done(errAnswer(wire.CodeBadRequest, err.Error()))
		return
	}
	if last := m.Positions[len(m.Positions)-1].Shard; last >= uint64(n.cfg.Shards) {
		done(errAnswer(wire.CodeBadRequest, fmt.Sprintf("shard %d out of range: the cluster has %d shards", last, n.cfg.Shards)))
		return
	}
	hosted, err := n.hostedShards()
	if err != nil {
		done(errAnswer(wire.CodeInternal, err.Error()))
		return
	}
	n.counters.watches.Add(1)
	wait := min(time.Duration(m.WaitMillis)*time.Millisecond, n.cfg.RequestTimeout/2)
	for _, p := range m.Positions {
		if p.Index == wire.NowIndex {
			wait = 0 // a watch from now wants its positions at once
		}
	}
	collect := func() (wire.WatchEvents, bool) {
		ev := n.collectWatch(&m, hosted)
		return ev, len(ev.Events) > 0 || len(ev.NotHosted) > 0 || len(ev.Compacted) > 0
	}
	answer := func(ev wire.WatchEvents) {
		n.counters.watchEvents.Add(uint64(len(ev.Events)))
		if len(ev.Compacted) > 0 {
			n.counters.watchesCompacted.Add(1)
		}
		done(newAnswer(wire.KindWatchEvents, wire.AppendWatchEvents(nil, &ev)))
	}
	ev, some := collect()
	if some || wait <= 0 {
		answer(ev)
		return
	}
	// Held: woken by a change to one of its shards, answered by the first
	// wake that finds something or by the end of the wait.
	w := &watchWait{shards: make([]uint64, (n.cfg.Shards+63)/64)}
	for _, p := range m.Positions {
		if hosted[p.Shard] {
			w.shards[p.Shard/64] |= 1 << (p.Shard % 64)
		}
	}
	var mu sync.Mutex
	answered := false
	var stop func() bool
	finish := func(ev wire.WatchEvents) {
		mu.Lock()
		if answered {
			mu.Unlock()
			return
		}
		answered = true
		s := stop
		mu.Unlock()
		if s != nil {
			s()
		}
		n.watchers.remove(w)
		answer(ev)
	}
	check := func() {
		mu.Lock()
		over := answered
		mu.Unlock()
		if over {
			return
		}
		// Held again before looking, so that a change applied in between
		// wakes it.
		n.watchers.add(w, n.cfg.MaxWatchers+1)
		if ev, some := collect(); some {
			finish(ev)
		}
		mu.Lock()
		over = answered
		mu.Unlock()
		if over {
			n.watchers.remove(w) // answered meanwhile, by the end of the wait
		}
	}
	w.wake = func() { n.spawn(check) } // off the raft worker that applied the change
	if !n.watchers.add(w, n.cfg.MaxWatchers) {
		n.counters.watchesRefused.Add(1)
		done(unavailable(fmt.Sprintf("node holds %d watches already", n.cfg.MaxWatchers)))
		return
	}
	if ev, some := collect(); some {
		finish(ev)
		return
	}
	s := n.after(wait, func() {
		ev, _ := collect()
		finish(ev)
	})
	mu.Lock()
	stop = s
	mu.Unlock()
}

// collectWatch gathers the changes after m's positions that match it, in
// the shards this node hosts, up to about maxWatchEventsPerAnswer of them.
func (n *Node) collectWatch(m *wire.Watch, hosted []bool) wire.WatchEvents {
	var out wire.WatchEvents
	budget := maxWatchEventsPerAnswer
	for _, p := range m.Positions {
		if !hosted[p.Shard] {
			out.NotHosted = append(out.NotHosted, p.Shard)
			continue
		}
		if budget <= 0 {
			out.Positions = append(out.Positions, p)
			continue
		}
		s, err := n.sm.shard(p.Shard)
		if err != nil {
			n.log.Warn("node: watch: load shard", "shard", p.Shard, "err", err)
			out.NotHosted = append(out.NotHosted, p.Shard)
			continue
		}
		s.mu.Lock()
		if p.Index == wire.NowIndex {
			out.Positions = append(out.Positions, wire.ShardPosition{Shard: p.Shard, Index: s.log.applied})
			s.mu.Unlock()
			continue
		}
		if p.Index < s.log.trimmed {
			out.Compacted = append(out.Compacted, wire.ShardPosition{Shard: p.Shard, Index: s.log.trimmed})
			s.mu.Unlock()
			continue
		}
		pos := max(p.Index, s.log.applied)
		var last uint64
		s.log.since(p.Index, func(e *loggedChange) bool {
			if budget <= 0 && e.index != last {
				pos = last // the rest next time
				return false
			}
			last = e.index
			if e.index == p.Index+1 && e.seq < p.Skip {
				return true // seen already
			}
			if topic := e.c.Topic; (m.Exact && topic == string(m.Match)) || (!m.Exact && len(topic) >= len(m.Match) && topic[:len(m.Match)] == string(m.Match)) {
				out.Events = append(out.Events, wire.WatchEvent{
					Shard: p.Shard, Index: e.index, Seq: e.seq, Change: wire.ChangeKind(e.c.Kind),
					Topic: []byte(topic), Owner: []byte(e.c.Owner), OwnerAddr: []byte(n.clientAddrOf(e.c.Owner)),
					Epoch: e.c.Epoch, Partitions: e.c.Partitions,
				})
				budget--
			}
			return true
		})
		s.mu.Unlock()
		out.Positions = append(out.Positions, wire.ShardPosition{Shard: p.Shard, Index: pos})
	}
	return out
}

// serveListTopics answers a ListTopics from this node's replicas: the
// topics from the cursor on, shard after shard while this node hosts
// them, up to the limit. A follower may not have applied what its leader
// has acknowledged, so each shard is read only after a raft read index
// (answered once the replica applied up to the leader's commit): a
// listing misses nothing committed before it asked, on any replica.
// Shards are read listReadAhead at a time.
func (n *Node) serveListTopics(payload []byte, done answerFunc) {
	var m wire.ListTopics
	if err := wire.DecodeListTopics(payload, &m); err != nil {
		done(errAnswer(wire.CodeBadRequest, err.Error()))
		return
	}
	if m.Shard >= uint64(n.cfg.Shards) {
		done(errAnswer(wire.CodeBadRequest, fmt.Sprintf("shard %d out of range: the cluster has %d shards", m.Shard, n.cfg.Shards)))
		return
	}
	hosted, err := n.hostedShards()
	if err != nil {
		done(errAnswer(wire.CodeInternal, err.Error()))
		return
	}
	n.listShards(&m, hosted, m.Shard, m.After, &wire.TopicList{}, done)
}

// listShards lists the next hosted shards from shard (the first from
// after) into out, and answers once the page is full, a shard is not
// hosted here or cannot be read, or no shard is left.
func (n *Node) listShards(m *wire.ListTopics, hosted []bool, shard uint64, after []byte, out *wire.TopicList, done answerFunc) {
	var batch []uint64
	for s := shard; s < uint64(n.cfg.Shards) && hosted[s] && len(batch) < listReadAhead; s++ {
		batch = append(batch, s)
	}
	if len(batch) == 0 {
		n.endList(out, shard, after, done)
		return
	}
	var mu sync.Mutex
	left := len(batch)
	errs := make([]error, len(batch))
	for i, s := range batch {
		n.host.Submit(raftmux.Op{Kind: raftmux.OpReadIndex, Shard: s}, func(r raftmux.Result) {
			mu.Lock()
			errs[i] = r.Err
			left--
			last := left == 0
			mu.Unlock()
			if !last {
				return
			}
			// Off the raft worker: a page may be thousands of topics.
			n.spawn(func() {
				after := after
				for i, s := range batch {
					if errs[i] != nil {
						if len(out.Topics) == 0 && len(out.Positions) == 0 {
							done(unavailable(fmt.Sprintf("list shard %d: %v", s, errs[i])))
							return
						}
						n.endList(out, s, after, done)
						return
					}
					if full, err := n.listShard(m, s, after, out); err != nil {
						done(errAnswer(wire.CodeInternal, err.Error()))
						return
					} else if full {
						last := out.Topics[len(out.Topics)-1].Topic
						n.endList(out, s, last, done)
						return
					}
					after = nil
				}
				n.listShards(m, hosted, batch[len(batch)-1]+1, nil, out, done)
			})
		})
	}
}

// listShard appends the topics of shard above after to out, until the
// page is full (then it reports true).
func (n *Node) listShard(m *wire.ListTopics, shard uint64, after []byte, out *wire.TopicList) (bool, error) {
	s, err := n.sm.shard(shard)
	if err != nil {
		return false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	out.Positions = append(out.Positions, wire.ShardPosition{Shard: shard, Index: s.log.applied})
	for a := range s.st.Topics() {
		t := []byte(a.Topic)
		if (len(after) > 0 && bytes.Compare(t, after) <= 0) || !bytes.HasPrefix(t, m.Prefix) {
			continue
		}
		out.Topics = append(out.Topics, wire.Assignment{Topic: t, Owner: []byte(a.Owner), OwnerAddr: []byte(n.clientAddrOf(a.Owner)),
			Epoch: a.Epoch, Partitions: a.Partitions, Shard: shard})
		if len(out.Topics) == int(m.Limit) {
			return true, nil
		}
	}
	return false, nil
}

// endList answers a listing whose next page starts at (shard, after).
func (n *Node) endList(out *wire.TopicList, shard uint64, after []byte, done answerFunc) {
	out.NextShard, out.NextAfter = shard, after
	if shard >= uint64(n.cfg.Shards) {
		out.NextShard, out.NextAfter, out.Done = 0, nil, true
	}
	done(newAnswer(wire.KindTopicList, wire.AppendTopicList(nil, out)))
}

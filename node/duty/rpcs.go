package duty

import (
	"cmp"
	"container/heap"
	"maps"
	"slices"
	"time"

	"github.com/shoalmq/shoal/internal/invariants"
	"github.com/shoalmq/shoal/internal/mutant"
	"github.com/shoalmq/shoal/meta"
	"github.com/shoalmq/shoal/wire"
)

// The Opens and Closes a leader owes owners: queued, gated on earlier
// owners' fences, sent when due, resent with backoff until acknowledged.

func key(node, topic string) string { return node + "\x00" + topic }

func (l *Leader) add(r *RPC) {
	k := key(r.Node, r.Topic)
	if old := l.rpcs[k]; old != nil {
		if old.Epoch > r.Epoch {
			return
		}
		l.drop(k, old)
	}
	l.nextReq++
	r.ReqID = l.nextReq
	r.k = k
	l.rpcs[k] = r
	l.byReq[r.ReqID] = k
	m := l.byShard[r.Shard]
	if m == nil {
		m = make(map[*RPC]struct{})
		l.byShard[r.Shard] = m
	}
	m[r] = struct{}{}
	l.schedule(r, time.Time{})
}

func (l *Leader) drop(k string, r *RPC) {
	if l.rpcs[k] != r {
		return
	}
	delete(l.rpcs, k)
	delete(l.byReq, r.ReqID)
	if m := l.byShard[r.Shard]; m != nil {
		delete(m, r)
		if len(m) == 0 {
			delete(l.byShard, r.Shard)
		}
	}
	r.waiting = false
	if r.inWindow {
		r.inWindow = false
		if l.inflight[r.Node]--; l.inflight[r.Node] == 0 {
			delete(l.inflight, r.Node)
		}
		if len(l.waiting[r.Node]) > 0 {
			l.roomMade = true
		}
	}
}

// makeRoom hands the room each node's window has to the messages waiting
// for it, node by node in order and oldest first: each is looked at again
// at once (Due counts it in when it sends it). What waits for a node gone
// for good is dropped. Entries that no longer wait are cleared away.
func (l *Leader) makeRoom(gone func(node string) bool) {
	l.roomMade = false
	for _, node := range slices.Sorted(maps.Keys(l.waiting)) {
		ws := l.waiting[node]
		room := l.cfg.Window - l.inflight[node]
		if gone(node) {
			room = len(ws)
		}
		i := 0
		for ; i < len(ws) && room > 0; i++ {
			r := ws[i]
			if !r.waiting || l.rpcs[r.k] != r {
				continue
			}
			r.waiting = false
			l.schedule(r, time.Time{})
			room--
		}
		if i == len(ws) {
			delete(l.waiting, node)
			continue
		}
		clear(ws[:i])
		l.waiting[node] = ws[i:]
	}
}

// schedule makes Due look at r at time at (zero: at once); an earlier
// entry of r no longer counts.
func (l *Leader) schedule(r *RPC, at time.Time) {
	l.wseq++
	r.wseq = l.wseq
	heap.Push(&l.queue, wake{at: at, seq: l.wseq, r: r})
}

// wakeGated makes Due look again at once at the held-back Opens of topic
// (of every topic if all).
func (l *Leader) wakeGated(topic string, all bool) {
	wakeList := func(rs []*RPC) {
		for _, r := range rs {
			if l.rpcs[r.k] == r {
				l.schedule(r, time.Time{})
			}
		}
	}
	if all {
		for _, t := range slices.Sorted(maps.Keys(l.gatedBy)) {
			wakeList(l.gatedBy[t])
		}
		clear(l.gatedBy)
		return
	}
	wakeList(l.gatedBy[topic])
	delete(l.gatedBy, topic)
}

// maxResendShift bounds the resend backoff: an unacknowledged message is
// sent again after Resend, 2·Resend, 4·Resend, then every 8·Resend, so a
// slow owner is not buried under copies of what it has not yet taken.
const maxResendShift = 3

// wake is one entry of the queue.
type wake struct {
	at  time.Time
	seq uint64
	r   *RPC
}

// wakeQueue is a min-heap of wakes by (at, seq).
type wakeQueue []wake

func (q wakeQueue) Len() int { return len(q) }
func (q wakeQueue) Less(i, j int) bool {
	if !q[i].at.Equal(q[j].at) {
		return q[i].at.Before(q[j].at)
	}
	return q[i].seq < q[j].seq
}
func (q wakeQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *wakeQueue) Push(x any)   { *q = append(*q, x.(wake)) }
func (q *wakeQueue) Pop() any {
	old := *q
	w := old[len(old)-1]
	old[len(old)-1] = wake{}
	*q = old[:len(old)-1]
	return w
}

// Effects takes the effects of commands shard applied at now. lastGrant
// returns when this node last computed a grant for a node on shard (zero:
// never); for every owner a topic left, the topic's next owner is held
// back until that owner acknowledges the close, or the lease of that grant
// runs out. Effects of a shard this node does not lead are ignored.
func (l *Leader) Effects(now time.Time, shard uint64, effs []meta.Effect, lastGrant func(node string) time.Time) {
	if invariants.Enabled {
		defer l.inv.after(l, "effects")
	}
	s := l.led[shard]
	if s == nil {
		return
	}
	for _, e := range effs {
		r := &RPC{Node: e.Node, Open: e.Kind == meta.EffectOpen, Topic: e.Topic, Epoch: e.Epoch, Partitions: e.Partitions,
			Shard: shard, Term: s.term, Prev: e.Prev, Revoked: e.Revoked, fresh: e.Fresh}
		if !r.Open {
			if l.released[e.Node] {
				continue
			}
			deadline := s.since.Add(l.cfg.NewLeaderWait())
			if g := lastGrant(e.Node); !g.IsZero() {
				if d := g.Add(l.cfg.OwnGrantWait()); d.After(deadline) {
					deadline = d
				}
			}
			s.fences[e.Topic] = append(s.fences[e.Topic], fence{node: e.Node, epoch: e.Epoch, deadline: deadline})
		}
		l.add(r)
	}
}

// TakeUp records that this node, leading shard at term, became current
// there at now. Its predecessors may have died owing an Open of a topic
// to its owner or a Close to its previous owner; those are owed again,
// to every node that does not first show, by a lease request whose digest
// equals the state's (Verified, VerifiedLed), that it holds exactly what
// the state gives it in the shard: then every such message would change
// nothing there. The rest are queued by Resend once ResendsDue lists the
// shard, NewLeaderWait after now: verifications count only from TakeUp,
// against the state then current, and the owners' rounds get that long
// to show what they hold. The Opens of topics that may have had another
// holder wait NewLeaderWait from the election anyway, and a leader
// becomes current soon after its election, so the resend comes little
// later than they would; a leader that becomes current long after (a
// node loading many shards after a restart) would otherwise owe every
// topic again at once. So a new leader of a shard whose owners hold what
// they should sends nothing per topic, where it sent an Open of every
// topic.
func (l *Leader) TakeUp(now time.Time, shard, term uint64) {
	s := l.led[shard]
	if s == nil || s.term != term {
		return
	}
	s.resend, s.verified = true, nil
	s.resendAt = now.Add(l.cfg.NewLeaderWait())
	if s.resendAt.Before(s.since.Add(l.cfg.NewLeaderWait())) {
		s.resendAt = s.since.Add(l.cfg.NewLeaderWait()) // a clock stepped back
	}
	l.resends++
}

// Verified records that node holds, in shard, exactly the topics this
// node's state (current, at term) gives it, at their epochs: a lease
// request's digest equal to the state's. Nothing is recorded unless a
// resend is pending there at term.
func (l *Leader) Verified(shard, term uint64, node string) {
	s := l.led[shard]
	if s == nil || s.term != term || !s.resend {
		return
	}
	if s.verified == nil {
		s.verified = make(map[string]bool)
	}
	s.verified[node] = true
}

// VerifiedLed records, for every shard this node leads with a resend
// pending, that node holds there exactly what the state gives it — in
// most of them nothing — provided this node's leaderships are still those
// of ledVersion (Version): a lease round's summary, over every shard the
// owner holds topics in and takes this node to lead, matched the state's
// over every shard this node leads, read at ledVersion. A previous owner
// that holds nothing more in a shard sends no lease request there, and
// would otherwise be sent a Close of every topic it once held in it. A
// topic it still holds in such a shard, taking another node for its
// leader, is not in its summary: once it learns of this leader, its
// summary differs, and the listed grant closes the topic. It reports
// whether the leaderships were those of ledVersion.
func (l *Leader) VerifiedLed(ledVersion uint64, node string) bool {
	if ledVersion != l.ledVersion {
		return false
	}
	if l.resends == 0 {
		return true
	}
	for _, s := range l.led {
		if !s.resend {
			continue
		}
		if s.verified == nil {
			s.verified = make(map[string]bool)
		}
		s.verified[node] = true
	}
	return true
}

// ResendsPending reports whether a led shard's resend is pending
// (TakeUp).
func (l *Leader) ResendsPending() bool { return l.resends > 0 }

// PendingResend is a shard whose predecessors' messages are due to be
// owed again (ResendsDue): Verified holds the nodes that need none (a
// copy, the caller's).
type PendingResend struct {
	Shard, Term uint64
	Verified    map[string]bool
}

// ResendsDue returns, sorted by shard, the shards whose resend is due at
// now. Each stays pending until Resend takes it.
func (l *Leader) ResendsDue(now time.Time) []PendingResend {
	if l.resends == 0 {
		return nil
	}
	var out []PendingResend
	for shard, s := range l.led {
		if s.resend && !now.Before(s.resendAt) {
			out = append(out, PendingResend{Shard: shard, Term: s.term, Verified: maps.Clone(s.verified)})
		}
	}
	slices.SortFunc(out, func(a, b PendingResend) int { return cmp.Compare(a.Shard, b.Shard) })
	return out
}

// Resend queues, for a shard this node leads and is current in, an Open of
// every active topic of topics to its owner and a Close to its previous
// owner, skipping the nodes Verified since TakeUp, and ends the shard's
// pending resend. A digest does not cover a topic's partition count, so
// a topic with more than the default (an update of it may be what was
// owed) is opened again even at a verified owner; the default count was
// never updated. The Opens of topics that may have had another holder
// wait out NewLeaderWait.
func (l *Leader) Resend(shard uint64, topics []meta.Assignment) {
	if invariants.Enabled {
		defer l.inv.after(l, "resend")
	}
	s := l.led[shard]
	if s == nil {
		return
	}
	verified := s.verified
	if s.resend {
		s.resend, s.verified = false, nil
		l.resends--
	}
	deadline := s.since.Add(l.cfg.NewLeaderWait())
	for _, a := range topics {
		if !verified[a.Owner] || a.Partitions > meta.DefaultPartitions {
			l.add(&RPC{Node: a.Owner, Open: true, Topic: a.Topic, Epoch: a.Epoch, Partitions: a.Partitions, Shard: shard, Term: s.term,
				Prev: a.Previous, fresh: a.Epoch == 1 && a.Previous == ""})
		}
		if a.Previous != "" && !verified[a.Previous] {
			s.fences[a.Topic] = append(s.fences[a.Topic], fence{node: a.Previous, epoch: a.Epoch, deadline: deadline})
			l.add(&RPC{Node: a.Previous, Topic: a.Topic, Epoch: a.Epoch, Shard: shard, Term: s.term})
		}
	}
}

// gated reports whether an Open must still wait at now: for the new
// leader's wait, or for an earlier owner of its topic; until is when the
// wait ends unless an acknowledged close ends it sooner.
func (l *Leader) gated(now time.Time, s *led, r *RPC) (until time.Time, gated bool) {
	fs := s.fences[r.Topic]
	kept := fs[:0]
	for _, f := range fs {
		if now.Before(f.deadline) {
			kept = append(kept, f)
			if f.deadline.After(until) {
				until = f.deadline
			}
		}
	}
	if len(kept) == 0 {
		delete(s.fences, r.Topic)
	} else {
		s.fences[r.Topic] = kept
	}
	if r.fresh || mutant.On(mutant.LeaseWait) {
		return time.Time{}, false
	}
	if end := s.since.Add(l.cfg.NewLeaderWait()); now.Before(end) && end.After(until) {
		until = end
	}
	return until, !until.IsZero()
}

// Due returns the messages to send at now: those never sent whose topic is
// not held back and for which their node's window has room, and those
// unacknowledged for Config.Resend. gone reports nodes that will never
// answer (dead or left): what is owed to them is dropped, their fences
// stay until their leases run out.
func (l *Leader) Due(now time.Time, gone func(node string) bool) (out []RPC) {
	if invariants.Enabled {
		defer func() {
			l.checkDue(now, out)
			l.inv.after(l, "due")
		}()
	}
	for {
		l.makeRoom(gone)
		out = l.due(now, gone, out)
		if !l.roomMade {
			return out
		}
	}
}

// due is one pass of Due over the queue, appending to out.
func (l *Leader) due(now time.Time, gone func(node string) bool, out []RPC) []RPC {
	for len(l.queue) > 0 && !l.queue[0].at.After(now) {
		w := heap.Pop(&l.queue).(wake)
		r := w.r
		if r.wseq != w.seq || l.rpcs[r.k] != r {
			continue // rescheduled, acknowledged or dropped since
		}
		s := l.led[r.Shard]
		if s == nil || s.term != r.Term || gone(r.Node) {
			l.drop(r.k, r)
			continue
		}
		if r.Open {
			if until, gated := l.gated(now, s, r); gated {
				l.gatedBy[r.Topic] = append(l.gatedBy[r.Topic], r)
				l.schedule(r, until)
				continue
			}
		}
		if !r.inWindow {
			if l.inflight[r.Node] >= l.cfg.Window {
				if !r.waiting {
					r.waiting = true
					l.waiting[r.Node] = append(l.waiting[r.Node], r)
				}
				continue
			}
			r.waiting = false
			r.inWindow = true
			l.inflight[r.Node]++
		}
		r.sent, r.sentAt = true, now
		r.tries++
		if r.Open {
			delete(l.released, r.Node)
		}
		out = append(out, *r)
		l.schedule(r, now.Add(l.cfg.Resend<<min(r.tries-1, maxResendShift)))
	}
	return out
}

// Next returns when the earliest queued message is due, to be sent or to
// be looked at again (a held-back open whose wait ends, a resend), or the
// zero time while messages wait for room in a node's window; ok is false
// when nothing is queued. A caller that calls Due then, rather than
// at its next periodic turn, sends a held-back open the moment its fences
// allow, not up to a period later.
func (l *Leader) Next() (at time.Time, ok bool) {
	if len(l.waiting) > 0 {
		// Room opens as acks come: look again as soon as the caller will.
		return time.Time{}, true
	}
	if len(l.queue) > 0 {
		at, ok = l.queue[0].at, true
	}
	if l.resends > 0 {
		for _, s := range l.led {
			if s.resend && (!ok || s.resendAt.Before(at)) {
				at, ok = s.resendAt, true
			}
		}
	}
	return at, ok
}

// HoldsBack reports whether this leader owes an open of a topic of shard
// that its new owner has not acknowledged yet (sent or not: held back by a
// fence or by its new-leader wait, or not yet looked at), or may owe one
// (its resend is pending): were it to hand the shard's leadership away
// now, the next leader would owe the open again, and hold it back, and
// the topic's lease, for its own NewLeaderWait from its election. After a
// node dies, its topics' shards keep their leaders until the new owners
// hold them.
func (l *Leader) HoldsBack(shard uint64) bool {
	if s := l.led[shard]; s != nil && s.resend {
		return true // its predecessors' messages are not yet queued
	}
	for r := range l.byShard[shard] {
		if r.Open {
			return true
		}
	}
	return false
}

// Ack takes node from's TopicAck of request reqID. An ack from another
// node than the one asked, or about another topic, is ignored.
func (l *Leader) Ack(from string, reqID uint64, a *wire.TopicAck) {
	if invariants.Enabled {
		defer l.inv.after(l, "ack")
	}
	k, ok := l.byReq[reqID]
	if !ok {
		return
	}
	r := l.rpcs[k]
	if r.Node != from || r.Topic != string(a.Topic) {
		return
	}
	switch a.Status {
	case wire.TopicStaleTerm, wire.TopicBelowFloor:
		// A newer leader exists, or the owner closed a later epoch already:
		// this message has nothing left to do.
		l.drop(k, r)
	case wire.TopicDone:
		if a.Epoch < r.Epoch {
			return // took an older message's effect; keep sending
		}
		l.drop(k, r)
		if !r.Open {
			l.fenced(r.Shard, r.Topic, from, a.Epoch)
		}
	}
}

// fenced records that node closed topic up to epoch.
func (l *Leader) fenced(shard uint64, topic, node string, epoch uint64) {
	s := l.led[shard]
	if s == nil {
		return
	}
	fs := s.fences[topic]
	kept := fs[:0]
	for _, f := range fs {
		if f.node != node || f.epoch > epoch {
			kept = append(kept, f)
		}
	}
	if len(kept) == 0 {
		delete(s.fences, topic)
	} else {
		s.fences[topic] = kept
	}
	l.wakeGated(topic, false)
}

// Settled reports whether, at now, every owner that topic left by a
// command at or below epoch is fenced: it acknowledged the close, or the
// last lease it may hold has run out. A move or revoke is acknowledged to
// its client only once settled, so no write at an older epoch is
// acknowledged after it. A leader in its first NewLeaderWait settles
// nothing but fresh topics (never owned before): its predecessors' grants
// may still run. When not settled, wait
// is how long until the last of those leases runs out (an ack may come
// sooner). leads is false
// when this node no longer leads shard at term: its fences are gone, and
// the next leader fences the previous owners again.
func (l *Leader) Settled(now time.Time, shard, term uint64, topic string, epoch uint64, fresh bool) (settled bool, wait time.Duration, leads bool) {
	s := l.led[shard]
	if s == nil || s.term != term {
		return false, 0, false
	}
	settled = true
	// A predecessor's grants are not all known here (only each topic's
	// last owner is fenced again): until they have all run out, no older
	// epoch can be counted as dead.
	if end := s.since.Add(l.cfg.NewLeaderWait()); now.Before(end) && !fresh {
		settled, wait = false, end.Sub(now)
	}
	for _, f := range s.fences[topic] {
		if f.epoch <= epoch && now.Before(f.deadline) {
			settled = false
			wait = max(wait, f.deadline.Sub(now))
		}
	}
	return settled, wait, true
}

// Holding records that node asked for leases without saying it released
// its topics: it may hold some again (a new life of a node that left).
func (l *Leader) Holding(node string) { delete(l.released, node) }

// Released records that node gave up every topic it held (it is leaving):
// it is fenced everywhere, and nothing more is owed to it.
func (l *Leader) Released(node string) {
	if invariants.Enabled {
		defer l.inv.after(l, "released")
	}
	l.released[node] = true
	for _, s := range l.led {
		for topic, fs := range s.fences {
			kept := fs[:0]
			for _, f := range fs {
				if f.node != node {
					kept = append(kept, f)
				}
			}
			if len(kept) == 0 {
				delete(s.fences, topic)
			} else {
				s.fences[topic] = kept
			}
		}
	}
	for k, r := range l.rpcs {
		if r.Node == node {
			l.drop(k, r)
		}
	}
	l.wakeGated("", true)
}

// Pending is the number of messages owed.
func (l *Leader) Pending() int { return len(l.rpcs) }

// Fences is the number of earlier owners not yet fenced.
func (l *Leader) Fences() int {
	n := 0
	for _, s := range l.led {
		for _, fs := range s.fences {
			n += len(fs)
		}
	}
	return n
}

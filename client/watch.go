package client

import (
	"cmp"
	"context"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/shoalmq/shoal/router"
	"github.com/shoalmq/shoal/wire"
)

// Errors of Watch.
var (
	// ErrCompacted: a watch position is older than the oldest change the
	// cluster still keeps for its shard: changes after it may be lost.
	// List the topics again (ListTopics) and watch from the listing's
	// position.
	ErrCompacted = errors.New("client: watch position compacted: list again")
	// ErrWatchTooSlow: a watcher fell behind by more than the changes a
	// node keeps per shard (its Config.ChangeLogLen) between two calls of
	// Next. It also matches ErrCompacted.
	ErrWatchTooSlow = errors.New("client: watcher too slow")
	// ErrBadPosition: a position or cursor string that this client did not
	// make, or one that places no shard the watch needs (another
	// cluster's).
	ErrBadPosition = errors.New("client: bad position")
)

// Limits of the listing.
const (
	// DefaultListLimit is the page size of ListTopics when
	// ListOptions.Limit is 0: 1,000 topics.
	DefaultListLimit = 1000
)

// WatchOptions say what Watch watches and from where.
type WatchOptions struct {
	// Topic watches one topic; else Prefix watches every topic whose name
	// starts with it ("" watches all). Not both.
	Topic  string
	Prefix string
	// From is a position returned by Watcher.Position or
	// TopicPage.Position: the watch gives every change after it. Empty
	// starts from now. A prefix watch needs a position of every shard (a
	// whole listing's, merged with MergePositions); a topic watch, of its
	// topic's shard.
	From string
	// Splits also gives each split of a watched shard, as a Change with
	// Split set, after every change of the shard before the split; the
	// watch goes on in the halves whether or not they are given.
	Splits bool
}

// Change is one change of a topic's assignment, as Watch gives it.
type Change struct {
	Topic      string
	Change     wire.ChangeKind // assigned, moved, updated, revoked
	Owner      string          // empty for a revoke
	OwnerAddr  string
	Epoch      uint64
	Partitions uint32 // 0 for a revoke
	Shard      uint64
	// Split, with WatchOptions.Splits, is a split of Shard: Change is
	// zero and the topic's fields empty.
	Split *Split
}

// Split is a shard's split as a watch gives it: its two halves, and the
// raft index of the split, where their change logs start.
type Split struct {
	Low, High uint64
	Index     uint64
}

// Watcher streams assignment changes; see Client.Watch. Not safe for
// concurrent use.
type Watcher struct {
	c     *Client
	match []byte
	exact bool
	// shards bounds the live shards' ids (their count while no shard
	// split); live lists them, in ascending order.
	shards uint32
	live   []uint64
	// pos is the position of every watched shard after the changes Next
	// returned.
	pos map[uint64]wire.ShardPosition
	// queue holds changes taken from nodes and not yet returned, each with
	// the position of its shard once it is returned.
	queue []queuedChange
	// served says which node address serves each shard; failed the
	// addresses that failed since a poll last had every answer.
	served map[uint64]string
	failed map[string]bool // since the last poll every node answered
	stale  bool            // a node failed: build served again before the next poll
	// started: pos holds positions nodes gave this watcher.
	started bool
	// space is the cluster's shard space (0 before the client knew it):
	// the halves of a split.
	space router.ShardSpace
	// splits: Next gives the splits too (WatchOptions.Splits).
	splits bool
}

// queuedChange is a change to return, or, with split set, the split of
// a watched shard whose changes before it are queued ahead: once taken,
// the watch goes on in the halves.
type queuedChange struct {
	ch    Change
	after wire.ShardPosition
	split *wire.ShardSplit
}

// Watch starts watching topic assignments. Changes come from the replicas
// of their shards, in commit order within a shard (so in order for one
// topic), each exactly once, also across node failures and restarts:
// Watcher.Position is where to resume after a disconnect. Nodes keep the
// last changes of each shard only (Config.ChangeLogLen of the node): a
// position older than that is refused with ErrCompacted, and a watcher
// that falls that far behind gets ErrWatchTooSlow.
func (c *Client) Watch(ctx context.Context, opts WatchOptions) (*Watcher, error) {
	k := call{op: "watch", subject: opts.Topic}
	w := &Watcher{c: c, match: []byte(opts.Prefix), failed: map[string]bool{}, splits: opts.Splits}
	switch {
	case opts.Topic != "" && opts.Prefix != "":
		return nil, fmt.Errorf("client: %v: %w: a topic and a prefix", k, ErrInvalidArgument)
	case opts.Topic != "":
		if err := validateTopic(opts.Topic); err != nil {
			return nil, fmt.Errorf("client: %v: %w", k, err)
		}
		w.match, w.exact = []byte(opts.Topic), true
	case len(opts.Prefix) > wire.MaxTopicLen:
		return nil, fmt.Errorf("client: %v: %w: prefix longer than %d bytes", k, ErrInvalidArgument, wire.MaxTopicLen)
	}
	if err := w.table(ctx); err != nil {
		return nil, fmt.Errorf("client: %v: %w", k, err)
	}
	w.space = c.shardSpace(ctx)
	var scope []uint64
	if w.exact {
		scope = []uint64{w.c.shardOf(ctx, w.match, w.shards)}
	} else {
		scope = slices.Clone(w.live)
	}
	w.pos = make(map[uint64]wire.ShardPosition, len(scope))
	if opts.From == "" {
		// From now: the replicas' positions, asked at once, so that every
		// change committed after Watch returns is given.
		for _, s := range scope {
			w.pos[s] = wire.ShardPosition{Shard: s, Index: wire.NowIndex}
		}
		if err := w.fill(ctx, 0, func() bool { return !w.hasNow() }); err != nil {
			return nil, fmt.Errorf("client: %v: %w", k, err)
		}
		return w, nil
	}
	from, err := decodePosition(opts.From, 0)
	if err != nil {
		return nil, fmt.Errorf("client: %v: %w", k, err)
	}
	// A shard of the position that split since stands for its halves: the
	// watch gives its last changes, then goes on in them.
	space := w.space
	for _, s := range scope {
		at, ok := s, false
		for {
			if _, ok = from[at]; ok || space == 0 {
				break
			}
			parent, up := space.Parent(uint32(at))
			if !up {
				break
			}
			at = uint64(parent)
		}
		if !ok {
			return nil, fmt.Errorf("client: %v: %w: it has no place in shard %d", k, ErrBadPosition, s)
		}
		w.pos[at] = from[at]
		w.shards = max(w.shards, uint32(at)+1)
	}
	w.stale = true // the servers of the shards that split
	// One look at once, so that a position the nodes no longer keep is
	// refused here.
	if err := w.fill(ctx, 0, func() bool { return w.started }); err != nil {
		return nil, fmt.Errorf("client: %v: %w", k, err)
	}
	return w, nil
}

// table learns the shard count and a node to ask for each shard: its
// leader, else the first of its replicas among the seeds, else any live
// one; the addresses that failed only when nothing else is left.
func (w *Watcher) table(ctx context.Context) error {
	shards, err := w.c.Shards(ctx)
	if err != nil {
		return err
	}
	members, err := w.c.Members(ctx)
	if err != nil {
		return err
	}
	var bound uint32
	live := make([]uint64, 0, len(shards))
	for _, s := range shards {
		live = append(live, s.Shard)
		bound = max(bound, uint32(s.Shard)+1)
	}
	slices.Sort(live)
	w.shards, w.live = max(w.shards, bound), live
	addr := make(map[string]string, len(members))
	for _, m := range members {
		if m.State == wire.MemberAlive || m.State == wire.MemberSuspect {
			addr[m.ID] = m.ClientAddr
		}
	}
	// The shard's leader first: it applies a change first (a follower
	// learns of a commit with the leader's next message, a heartbeat
	// later at worst). Then the seeds, in order, then the others. The
	// addresses that failed come last, still taken when a shard has no
	// other replica.
	servers := len(w.c.cfg.Servers)
	rank := func(a, leader string) int {
		r := servers
		if i := slices.Index(w.c.cfg.Servers, a); i >= 0 {
			r = i
		}
		if a != leader {
			r += servers + 1
		}
		if w.failed[a] {
			r += 2 * (servers + 1)
		}
		return r
	}
	w.served = make(map[uint64]string, len(shards))
	for _, s := range shards {
		leader := addr[s.Leader]
		best, bestRank := "", math.MaxInt
		for _, r := range s.Replicas {
			if a := addr[r]; a != "" && ValidateAddr(a) == nil && rank(a, leader) < bestRank {
				best, bestRank = a, rank(a, leader)
			}
		}
		if best == "" {
			best = leader
		}
		if best != "" {
			w.served[s.Shard] = best
		}
	}
	// A watched shard that split is no longer listed; its replicas, kept
	// where it was, give its last changes and its split: any live node,
	// the seeds first, the ones that failed (or host none) last.
	var others []string
	for _, a := range addr {
		if ValidateAddr(a) == nil {
			others = append(others, a)
		}
	}
	slices.SortFunc(others, func(a, b string) int { return cmp.Or(cmp.Compare(rank(a, ""), rank(b, "")), cmp.Compare(a, b)) })
	for s := range w.pos {
		if _, ok := w.served[s]; !ok && len(others) > 0 {
			w.served[s] = others[0]
		}
	}
	w.stale = false
	return nil
}

// isLive reports whether the table holds shard live.
func (w *Watcher) isLive(shard uint64) bool {
	_, ok := slices.BinarySearch(w.live, shard)
	return ok
}

// hasSplit reports whether the table holds a live shard under shard's
// range, deeper than it: shard has split.
func (w *Watcher) hasSplit(shard uint64) bool {
	if shard > math.MaxUint32 {
		return false
	}
	base, depth, path, ok := w.space.Range(uint32(shard))
	if !ok {
		return false
	}
	i, _ := slices.BinarySearch(w.live, shard+1) // a descendant's id is higher
	for _, l := range w.live[i:] {
		if l > math.MaxUint32 {
			break
		}
		b, d, u, ok := w.space.Range(uint32(l))
		if ok && b == base && d > depth && u&(1<<depth-1) == path {
			return true
		}
	}
	return false
}

// Position returns where the watch stands: after every change Next
// returned. A later Watch from it gives the changes after those, none
// twice.
func (w *Watcher) Position() string {
	ps := make([]wire.ShardPosition, 0, len(w.pos))
	for _, p := range w.pos {
		ps = append(ps, p)
	}
	return encodePosition(ps, w.shards)
}

// Next returns the next change, waiting for one until ctx ends. Errors
// other than ctx's are ErrCompacted, ErrWatchTooSlow, ErrClosed, or the
// failure of every node that could serve a shard after the client's
// retries.
func (w *Watcher) Next(ctx context.Context) (Change, error) {
	for {
		if err := w.fill(ctx, w.c.cfg.RequestTimeout/2, func() bool { return len(w.queue) > 0 }); err != nil {
			return Change{}, fmt.Errorf("client: %v: %w", call{op: "watch", subject: string(w.match)}, err)
		}
		q := w.queue[0]
		w.queue[0] = queuedChange{}
		w.queue = w.queue[1:]
		if q.split != nil {
			if w.splitInto(q.split) && w.splits {
				sp := q.split
				return Change{Shard: sp.Shard, Split: &Split{Low: sp.Low, High: sp.High, Index: sp.Index}}, nil
			}
			continue
		}
		w.pos[q.after.Shard] = q.after
		return q.ch, nil
	}
}

// splitInto goes on with a split shard's halves, from the split's index:
// every change of the shard before it was returned. false: the shard is
// not watched (any more).
func (w *Watcher) splitInto(sp *wire.ShardSplit) bool {
	if _, ok := w.pos[sp.Shard]; !ok {
		return false
	}
	delete(w.pos, sp.Shard)
	for _, h := range []uint64{sp.Low, sp.High} {
		w.pos[h] = wire.ShardPosition{Shard: h, Index: sp.Index}
	}
	w.shards = max(w.shards, uint32(sp.High)+1)
	w.stale = true // the halves' servers
	return true
}

// hasNow reports whether a shard's position is still "from now".
func (w *Watcher) hasNow() bool {
	for _, p := range w.pos {
		if p.Index == wire.NowIndex {
			return true
		}
	}
	return false
}

// fill polls, each poll held up to wait, until done, retrying failed nodes
// (others, once the table is built again) with backoff, MaxRetries times
// in a row at most.
func (w *Watcher) fill(ctx context.Context, wait time.Duration, done func() bool) error {
	var last error
	attempts := 0
	for !done() {
		if err := ctx.Err(); err != nil {
			if last != nil {
				return fmt.Errorf("%w, last: %w", ctxErr(ctx), last)
			}
			return ctxErr(ctx)
		}
		if last != nil {
			attempts++
			if attempts > w.c.cfg.MaxRetries {
				return fmt.Errorf("%d attempts failed, last: %w", attempts, last)
			}
			if err := w.c.sleep(ctx, w.c.backoff(attempts-1, last)); err != nil {
				return fmt.Errorf("%w, last: %w", err, last)
			}
		}
		if w.stale {
			if err := w.table(ctx); err != nil {
				last = err
				continue
			}
		}
		err := w.poll(ctx, wait)
		if err == nil {
			last, attempts = nil, 0
			continue
		}
		if errors.Is(err, ErrCompacted) || errors.Is(err, ErrBadPosition) || classify(err) == fatal && !errors.Is(err, ErrProtocol) && !errors.Is(err, wire.ErrUnavailable) {
			return err
		}
		w.stale = true
		last = err
	}
	return nil
}

type pollResult struct {
	addr string
	ev   wire.WatchEvents
	err  error
}

// poll asks every node serving watched shards, at once, for the changes
// after their positions, held up to wait; the first
// to give something ends the others' waits. It queues what came back.
func (w *Watcher) poll(ctx context.Context, wait time.Duration) error {
	groups := map[string][]wire.ShardPosition{}
	for s, p := range w.pos {
		a, ok := w.served[s]
		if !ok {
			return fmt.Errorf("%w: no live replica of shard %d known", wire.ErrUnavailable, s)
		}
		groups[a] = append(groups[a], p)
	}
	pctx, cancel := context.WithCancel(ctx)
	defer cancel()
	results := make(chan pollResult, len(groups))
	var wg sync.WaitGroup
	for addr, ps := range groups {
		slices.SortFunc(ps, comparePosition)
		m := wire.Watch{Match: w.match, Exact: w.exact, WaitMillis: uint32(min(wait.Milliseconds(), wire.MaxWatchWaitMillis)), Positions: ps}
		wg.Add(1)
		go func() {
			defer wg.Done()
			var r pollResult
			r.addr = addr
			req := &request{kind: wire.KindWatch, expect: wire.KindWatchEvents,
				encode: func(b []byte) []byte { return wire.AppendWatch(b, &m) },
				decode: func(b []byte) error {
					if err := wire.DecodeWatchEvents(b, &r.ev); err != nil {
						return err
					}
					r.ev = cloneWatchEvents(&r.ev)
					return nil
				}}
			r.err = w.c.attempt(pctx, addr, req)
			if r.err == nil && (len(r.ev.Events) > 0 || len(r.ev.NotHosted) > 0 || len(r.ev.Compacted) > 0) {
				cancel()
			}
			results <- r
		}()
	}
	wg.Wait()
	close(results)
	var firstErr error
	for r := range results {
		if r.err != nil {
			if pctx.Err() != nil && ctx.Err() == nil && errors.Is(r.err, context.Canceled) {
				continue // ended because another node answered first
			}
			if f := classify(r.err); f == connection || f == busy {
				w.failed[r.addr] = true
			}
			if firstErr == nil {
				firstErr = r.err
			}
			continue
		}
		if err := w.take(r.addr, &r.ev); err != nil {
			return err
		}
	}
	if firstErr != nil {
		return firstErr
	}
	if !w.hasNow() {
		w.started = true
	}
	clear(w.failed) // every node asked answered
	return nil
}

// take queues one node's answer.
func (w *Watcher) take(addr string, ev *wire.WatchEvents) error {
	if len(ev.Compacted) > 0 {
		c := ev.Compacted[0]
		p := w.pos[c.Shard]
		if w.started && p.Index != wire.NowIndex {
			return fmt.Errorf("%w (%w): shard %d at %s keeps changes after position %d, the watcher was at %d",
				ErrWatchTooSlow, ErrCompacted, c.Shard, addr, c.Index, p.Index)
		}
		return fmt.Errorf("%w: shard %d at %s keeps changes after position %d, the position is at %d", ErrCompacted, c.Shard, addr, c.Index, p.Index)
	}
	if len(ev.NotHosted) > 0 {
		w.failed[addr] = true
		return fmt.Errorf("%w: %s hosts no replica of shard %d", wire.ErrUnavailable, addr, ev.NotHosted[0])
	}
	final := make(map[uint64]wire.ShardPosition, len(ev.Positions))
	for _, p := range ev.Positions {
		if _, ok := w.pos[p.Shard]; ok {
			final[p.Shard] = p
		}
	}
	lastOf := map[uint64]int{}
	for i, e := range ev.Events {
		lastOf[e.Shard] = i
	}
	for i, e := range ev.Events {
		if _, ok := final[e.Shard]; !ok {
			return fmt.Errorf("%w: %s sent a change of shard %d, not asked for", ErrProtocol, addr, e.Shard)
		}
		after := final[e.Shard]
		if i != lastOf[e.Shard] {
			after = wire.ShardPosition{Shard: e.Shard, Index: e.Index}
			if next := nextOfShard(ev.Events[i+1:], e.Shard); next != nil && next.Index == e.Index {
				after = wire.ShardPosition{Shard: e.Shard, Index: e.Index - 1, Skip: e.Seq + 1}
			}
		}
		w.queue = append(w.queue, queuedChange{ch: Change{Topic: string(e.Topic), Change: e.Change, Owner: string(e.Owner), OwnerAddr: string(e.OwnerAddr),
			Epoch: e.Epoch, Partitions: e.Partitions, Shard: e.Shard}, after: after})
	}
	for s, p := range final {
		if _, ok := lastOf[s]; !ok {
			w.pos[s] = p
		}
	}
	for i := range ev.Splits {
		sp := ev.Splits[i]
		if _, ok := final[sp.Shard]; !ok {
			continue
		}
		// The halves are the ones the shard's range gives, whatever the
		// node said.
		low, high, err := w.space.Children(uint32(min(sp.Shard, math.MaxUint32)))
		if w.space == 0 || err != nil || sp.Low != uint64(low) || sp.High != uint64(high) {
			return fmt.Errorf("%w: %s said shard %d split into %d and %d, not the halves of its range", ErrProtocol, addr, sp.Shard, sp.Low, sp.High)
		}
		w.queue = append(w.queue, queuedChange{split: &sp})
	}
	return nil
}

func nextOfShard(evs []wire.WatchEvent, shard uint64) *wire.WatchEvent {
	for i := range evs {
		if evs[i].Shard == shard {
			return &evs[i]
		}
	}
	return nil
}

// cloneWatchEvents copies what aliases the network buffer.
func cloneWatchEvents(m *wire.WatchEvents) wire.WatchEvents {
	out := wire.WatchEvents{Positions: slices.Clone(m.Positions), NotHosted: slices.Clone(m.NotHosted), Compacted: slices.Clone(m.Compacted),
		Splits: slices.Clone(m.Splits)}
	for _, e := range m.Events {
		e.Topic, e.Owner, e.OwnerAddr = slices.Clone(e.Topic), slices.Clone(e.Owner), slices.Clone(e.OwnerAddr)
		out.Events = append(out.Events, e)
	}
	return out
}

// ListOptions say which topics ListTopics lists.
type ListOptions struct {
	// Prefix lists only the topics whose name starts with it.
	Prefix string
	// Limit is the page size: 0 means DefaultListLimit; at most
	// wire.MaxListTopics.
	Limit int
	// Cursor is TopicPage.Next of the page before; empty starts. One
	// from a client before listings crossed splits is refused
	// (ErrBadPosition).
	Cursor string
}

// TopicPage is one page of ListTopics.
type TopicPage struct {
	Topics []Assignment // in range order (listRange), each shard's by name
	// Next is the cursor of the next page; empty after the last one.
	Next string
	// Position is, for every shard this page read, where its replica
	// stood: merged over every page (MergePositions), a watch from it gives
	// every change after the listing.
	Position string
}

// ListTopics returns one page of the active topic assignments of every
// shard, read from replicas of the shards once they caught up with their
// leader (a raft read index): a page misses nothing committed before it
// was asked for. A change committed while the listing pages on is in
// the pages after it or not, as the shards were read: a watch from the
// merged Position of the pages gives it. A listing that crosses a split
// gives each topic once (listRange).
func (c *Client) ListTopics(ctx context.Context, opts ListOptions) (TopicPage, error) {
	k := call{op: "topics", subject: opts.Prefix}
	limit := opts.Limit
	if limit == 0 {
		limit = DefaultListLimit
	}
	if limit < 0 || limit > wire.MaxListTopics {
		return TopicPage{}, fmt.Errorf("client: %v: %w: limit %d not in 1..%d", k, ErrInvalidArgument, opts.Limit, wire.MaxListTopics)
	}
	if len(opts.Prefix) > wire.MaxTopicLen {
		return TopicPage{}, fmt.Errorf("client: %v: %w: prefix longer than %d bytes", k, ErrInvalidArgument, wire.MaxTopicLen)
	}
	w := &Watcher{c: c, failed: map[string]bool{}, space: c.shardSpace(ctx)}
	if err := w.table(ctx); err != nil {
		return TopicPage{}, fmt.Errorf("client: %v: %w", k, err)
	}
	if w.space == 0 {
		return TopicPage{}, fmt.Errorf("client: %v: %w: the cluster's shards are not known", k, wire.ErrUnavailable)
	}
	cur, err := decodeCursor(opts.Cursor, w.space)
	if err != nil {
		return TopicPage{}, fmt.Errorf("client: %v: %w", k, err)
	}
	r := listRange{w: w, k: k, prefix: opts.Prefix, queue: cur.queue, base: cur.base, end: w.space.Base()}
	var page TopicPage
	var positions []wire.ShardPosition
	if err := r.page(ctx, limit, func(a []Assignment, ps []wire.ShardPosition) error {
		page.Topics, positions = append(page.Topics, a...), append(positions, ps...)
		return nil
	}); err != nil {
		return TopicPage{}, err
	}
	if !r.done {
		page.Next = encodeCursor(listCursor{queue: r.queue, base: r.base})
	}
	page.Position = encodePosition(positions, max(w.shards, rangesBound(positions)))
	return page, nil
}

// listRange lists the topics of the base shards [base, end) (router.
// ShardSpace), base after base. A base's range is listed in range order,
// a shard's low half before its high half, and each shard's topics in
// name order. Its cursor is the queue of the shards still to list in the
// base it is in, each from the topic after on: a shard that has split
// since it was queued is replaced by its halves, each from the same
// topic, since every topic of the shard up to it was listed and each half
// holds a part of the shard's. So a listing that crosses splits gives
// each topic once and misses none, where a walk in id order gave again
// the topics of a shard it had passed (its halves' ids come later) and
// could pass a half its table did not know yet.
type listRange struct {
	w      *Watcher
	k      call
	prefix string
	// queue: the shards still to list in the base being listed, in range
	// order; base: the next base to queue once it is empty.
	queue     []listItem
	base, end uint32
	done      bool // the range is listed
	// strs holds one string of each owner and address met: they repeat
	// topic after topic.
	strs map[string]string
}

// listItem is a shard to list, from the topic after after on.
type listItem struct {
	shard uint64
	after []byte
}

// intern returns b as a string, the same one each time for the owners
// and addresses the range has met (up to maxListInterned).
func (r *listRange) intern(b []byte) string {
	if s, ok := r.strs[string(b)]; ok {
		return s
	}
	s := string(b)
	if r.strs == nil {
		r.strs = make(map[string]string)
	}
	if len(r.strs) < maxListInterned {
		r.strs[s] = s
	}
	return s
}

// maxListInterned bounds listRange.strs.
const maxListInterned = 4096

// head returns the next shard to list: the queue's first, the next base
// queued when the queue is empty, a shard the table shows split replaced
// by its halves. nil: the range is listed, or (known false) the table
// knows the head neither live nor split, and must be asked again.
func (r *listRange) head() (it *listItem, known bool) {
	for {
		if len(r.queue) == 0 {
			if r.base >= r.end {
				r.done = true
				return nil, true
			}
			r.queue = append(r.queue, listItem{shard: uint64(r.base)})
			r.base++
		}
		it := &r.queue[0]
		if r.w.isLive(it.shard) {
			return it, true
		}
		if !r.w.hasSplit(it.shard) {
			return nil, false
		}
		low, high, err := r.w.space.Children(uint32(it.shard))
		if err != nil {
			return nil, false // a table that splits a shard past the deepest
		}
		after := it.after
		r.queue = slices.Insert(r.queue[1:], 0, listItem{shard: uint64(low), after: after}, listItem{shard: uint64(high), after: slices.Clone(after)})
	}
}

// page lists up to limit topics from the cursor on, handing each node's
// answer (its topics of the range and the positions of the range's shards
// it read) to take, and moves the cursor past them; it retries as
// ListTopics says.
func (r *listRange) page(ctx context.Context, limit int, take func([]Assignment, []wire.ShardPosition) error) error {
	c, w, k := r.w.c, r.w, r.k
	var last error
	for attempt, n := 0, 0; n < limit && !r.done; {
		it, known := r.head()
		if r.done {
			break
		}
		var m wire.TopicList
		var err error
		var addr string
		switch {
		case !known:
			err = fmt.Errorf("%w: shard %d neither live nor split in the table", wire.ErrUnavailable, r.queue[0].shard)
		default:
			shard, after := it.shard, it.after
			var ok bool
			addr, ok = w.served[shard]
			err = fmt.Errorf("%w: no live replica of shard %d known", wire.ErrUnavailable, shard)
			if ok {
				req := &request{kind: wire.KindListTopics, expect: wire.KindTopicList,
					encode: func(b []byte) []byte {
						return wire.AppendListTopics(b, &wire.ListTopics{Prefix: []byte(r.prefix), Shard: shard, After: after, Limit: uint32(limit - n)})
					},
					decode: func(b []byte) error { return wire.DecodeTopicList(b, &m) }}
				err = c.attempt(ctx, addr, req)
			}
			if err == nil && !m.Done && m.NextShard == shard && string(m.NextAfter) == string(after) && len(m.Topics) == 0 {
				err = fmt.Errorf("%w: %s hosts no replica of shard %d", wire.ErrUnavailable, addr, shard)
			}
			if err == nil && !m.Done && m.NextShard >= uint64(w.space.Capacity()) {
				return fmt.Errorf("client: %v: %w: %s sent a cursor at shard %d, past the shards (below %d)", k, ErrProtocol, addr, m.NextShard, w.space.Capacity())
			}
			if err == nil && (len(m.Positions) == 0 || m.Positions[0].Shard != shard) {
				// The node went past the shard without reading it: its
				// map has it split (or not yet born).
				err = fmt.Errorf("%w: %s did not list shard %d: its map differs", wire.ErrUnavailable, addr, shard)
			}
		}
		if err != nil {
			if ctx.Err() != nil {
				return k.stop(attempt+1, ctxErr(ctx), last)
			}
			last = err
			attempt++
			if f := classify(err); f == fatal || attempt > c.cfg.MaxRetries {
				return k.stop(attempt, nil, err)
			}
			if addr != "" {
				w.failed[addr] = true
			}
			if err := c.sleep(ctx, c.backoff(attempt-1, err)); err != nil {
				return k.stop(attempt, err, last)
			}
			if err := w.table(ctx); err != nil {
				last = err
			}
			continue
		}
		topics, positions := r.accept(&m)
		n += len(topics)
		if err := take(topics, positions); err != nil {
			return err
		}
	}
	return nil
}

// accept takes from a node's answer to a listing of the queue's first
// shard what the range is owed, in the node's order: that shard's topics,
// then those of each next shard it read while that is the queue's next,
// not yet begun (a node goes on in id order, which is range order only
// where no shard split). It moves the queue past them.
func (r *listRange) accept(m *wire.TopicList) ([]Assignment, []wire.ShardPosition) {
	var topics []Assignment
	var positions []wire.ShardPosition
	ti := 0
	for i, p := range m.Positions {
		it, known := r.head()
		if r.done || !known || p.Shard != it.shard || (i > 0 && len(it.after) > 0) {
			break
		}
		for ; ti < len(m.Topics) && m.Topics[ti].Shard == p.Shard; ti++ {
			t := &m.Topics[ti]
			topics = append(topics, Assignment{Topic: string(t.Topic), Owner: r.intern(t.Owner), OwnerAddr: r.intern(t.OwnerAddr),
				Epoch: t.Epoch, Partitions: t.Partitions, Shard: t.Shard})
		}
		positions = append(positions, p)
		if !m.Done && m.NextShard == p.Shard {
			it.after = slices.Clone(m.NextAfter)
			break
		}
		r.queue[0] = listItem{}
		r.queue = r.queue[1:]
	}
	return topics, positions
}

// ListAllOptions are the optional parts of ListAll.
type ListAllOptions struct {
	// Prefix lists only the topics whose name starts with it.
	Prefix string
	// Ranges is how many ranges of shards are listed at once, each page
	// after page: 0 means DefaultListRanges; at most the shards.
	Ranges int
}

// DefaultListRanges is ListAllOptions.Ranges' default.
const DefaultListRanges = 8

// ListAll lists every active topic assignment of every shard (or those
// under opts.Prefix), as ListTopics would page after page, but over
// opts.Ranges ranges of base shards at once, pages of wire.MaxListTopics.
// It hands each page to fn, one call at a time, in range order within a
// range (ranges interleave), and stops at fn's first error. It returns the
// merged position of every shard read: a watch from it gives every change
// after the listing.
func (c *Client) ListAll(ctx context.Context, opts ListAllOptions, fn func([]Assignment) error) (position string, err error) {
	k := call{op: "topics", subject: opts.Prefix}
	if len(opts.Prefix) > wire.MaxTopicLen {
		return "", fmt.Errorf("client: %v: %w: prefix longer than %d bytes", k, ErrInvalidArgument, wire.MaxTopicLen)
	}
	if opts.Ranges < 0 {
		return "", fmt.Errorf("client: %v: %w: ranges %d", k, ErrInvalidArgument, opts.Ranges)
	}
	w := &Watcher{c: c, failed: map[string]bool{}, space: c.shardSpace(ctx)}
	if err := w.table(ctx); err != nil {
		return "", fmt.Errorf("client: %v: %w", k, err)
	}
	if w.space == 0 {
		return "", fmt.Errorf("client: %v: %w: the cluster's shards are not known", k, wire.ErrUnavailable)
	}
	bases := w.space.Base()
	n := uint32(min(uint64(cmp.Or(opts.Ranges, DefaultListRanges)), uint64(bases)))
	n = max(n, 1)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var mu sync.Mutex
	var positions []wire.ShardPosition
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		// Each range asks its own table: a failed node is the range's.
		rw := &Watcher{c: c, failed: map[string]bool{}, shards: w.shards, live: w.live, served: w.served, space: w.space}
		r := listRange{w: rw, k: k, prefix: opts.Prefix, base: uint32(uint64(bases) * uint64(i) / uint64(n)), end: uint32(uint64(bases) * uint64(i+1) / uint64(n))}
		wg.Go(func() {
			for !r.done && errs[i] == nil {
				errs[i] = r.page(ctx, wire.MaxListTopics, func(a []Assignment, ps []wire.ShardPosition) error {
					mu.Lock()
					defer mu.Unlock()
					positions = append(positions, ps...)
					if len(a) == 0 {
						return nil
					}
					return fn(a)
				})
			}
			if errs[i] != nil {
				cancel()
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil && !errors.Is(err, context.Canceled) {
			return "", err
		}
	}
	if err := errors.Join(errs...); err != nil {
		return "", err
	}
	return encodePosition(positions, max(w.shards, rangesBound(positions))), nil
}

// rangesBound is one past the highest shard of ps.
func rangesBound(ps []wire.ShardPosition) uint32 {
	var b uint32
	for _, p := range ps {
		b = max(b, uint32(min(p.Shard, math.MaxUint32-1))+1)
	}
	return b
}

// Positions and cursors are base64url strings (no padding):
//
//	position: u8 version (1) · uvarint shard count · uvarint n ·
//	          n × (uvarint shard, uvarint index, uvarint skip), shards ascending
//	cursor:   u8 version (2) · uvarint next base · uvarint k ·
//	          k × (uvarint shard, uvarint n, n bytes: the topic after which
//	          the shard is listed on), the shards of the base before the next
const (
	positionVersion = 1
	cursorVersion   = 2
)

// positionEncoding refuses the padding and the non-zero trailing bits that
// would let two strings name one position.
var positionEncoding = base64.RawURLEncoding.Strict()

// tokenReader reads the fields of a decoded position or cursor in turn.
type tokenReader []byte

// uvarint reads the next uvarint (ok false: none, or not minimal).
func (r *tokenReader) uvarint() (uint64, bool) {
	v, n := uvarint(*r)
	if n <= 0 {
		return 0, false
	}
	*r = (*r)[n:]
	return v, true
}

// uvarint is binary.Uvarint refusing non-minimal encodings (n 0).
func uvarint(b []byte) (uint64, int) {
	v, n := binary.Uvarint(b)
	if n <= 0 || n != len(binary.AppendUvarint(nil, v)) {
		return 0, 0
	}
	return v, n
}

// encodePosition encodes ps, the smallest of each shard's positions when
// one appears twice.
func encodePosition(ps []wire.ShardPosition, shards uint32) string {
	ps = slices.Clone(ps)
	slices.SortFunc(ps, comparePosition)
	ps = slices.CompactFunc(ps, func(a, b wire.ShardPosition) bool { return a.Shard == b.Shard })
	b := []byte{positionVersion}
	b = binary.AppendUvarint(b, uint64(shards))
	b = binary.AppendUvarint(b, uint64(len(ps)))
	for _, p := range ps {
		b = binary.AppendUvarint(b, p.Shard)
		b = binary.AppendUvarint(b, p.Index)
		b = binary.AppendUvarint(b, uint64(p.Skip))
	}
	return positionEncoding.EncodeToString(b)
}

// comparePosition orders by shard, then earliest first.
func comparePosition(a, b wire.ShardPosition) int {
	switch {
	case a.Shard != b.Shard:
		return cmpU64(a.Shard, b.Shard)
	case a.Index != b.Index:
		return cmpU64(a.Index, b.Index)
	}
	return cmpU64(uint64(a.Skip), uint64(b.Skip))
}

func cmpU64(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// decodeToken decodes a position's or a cursor's text. The base64
// decoder skips carriage returns and newlines; a token is one exact
// string, so any is refused (one value, one spelling).
func decodeToken(s string) ([]byte, error) {
	if strings.ContainsAny(s, "\r\n") {
		return nil, ErrBadPosition
	}
	return positionEncoding.DecodeString(s)
}

// decodePosition decodes a position of a cluster of shards shards (0: any).
func decodePosition(s string, shards uint32) (map[uint64]wire.ShardPosition, error) {
	b, err := decodeToken(s)
	if err != nil || len(b) == 0 || b[0] != positionVersion {
		return nil, fmt.Errorf("%w: %.40q", ErrBadPosition, s)
	}
	r := tokenReader(b[1:])
	next := r.uvarint
	total, ok1 := next()
	count, ok2 := next()
	if !ok1 || !ok2 || total == 0 || total > wire.MaxListEntries || count > total {
		return nil, fmt.Errorf("%w: %.40q", ErrBadPosition, s)
	}
	if shards != 0 && total != uint64(shards) {
		return nil, fmt.Errorf("%w: made in a cluster of %d shards, this one has %d", ErrBadPosition, total, shards)
	}
	out := make(map[uint64]wire.ShardPosition, count)
	prev := -1
	for range count {
		shard, ok1 := next()
		index, ok2 := next()
		skip, ok3 := next()
		if !ok1 || !ok2 || !ok3 || shard >= total || int(shard) <= prev || skip > math.MaxUint32 {
			return nil, fmt.Errorf("%w: %.40q", ErrBadPosition, s)
		}
		prev = int(shard)
		out[shard] = wire.ShardPosition{Shard: shard, Index: index, Skip: uint32(skip)}
	}
	if len(r) != 0 {
		return nil, fmt.Errorf("%w: %.40q", ErrBadPosition, s)
	}
	return out, nil
}

// MergePositions merges positions of the same cluster (the pages of one
// listing): each shard at the earliest of its places, so that a watch
// from the result misses nothing that any of them would give.
func MergePositions(positions ...string) (string, error) {
	var all []wire.ShardPosition
	var shards uint32
	for _, s := range positions {
		// Shards split between pages: the bound of ids grows.
		m, err := decodePosition(s, 0)
		if err != nil {
			return "", fmt.Errorf("client: merge positions: %w", err)
		}
		total, _ := positionShards(s)
		shards = max(shards, total)
		for _, p := range m {
			all = append(all, p)
		}
	}
	if shards == 0 {
		return "", fmt.Errorf("client: merge positions: %w: none given", ErrBadPosition)
	}
	return encodePosition(all, shards), nil
}

// positionShards returns the shard count of a valid position.
func positionShards(s string) (uint32, bool) {
	b, err := decodeToken(s)
	if err != nil || len(b) < 2 {
		return 0, false
	}
	v, n := uvarint(b[1:])
	return uint32(v), n > 0
}

// listCursor is where a ListTopics page ends: the shards left to list in
// the base being listed (listRange), and the next base.
type listCursor struct {
	queue []listItem
	base  uint32
}

// maxCursorShards bounds the queue a cursor carries: a base's shards
// split while it was listed, at most one queued for each live shard.
const maxCursorShards = 1 << 16

func encodeCursor(c listCursor) string {
	b := binary.AppendUvarint([]byte{cursorVersion}, uint64(c.base))
	b = binary.AppendUvarint(b, uint64(len(c.queue)))
	for _, it := range c.queue {
		b = binary.AppendUvarint(b, it.shard)
		b = binary.AppendUvarint(b, uint64(len(it.after)))
		b = append(b, it.after...)
	}
	return positionEncoding.EncodeToString(b)
}

// decodeCursor decodes a ListTopics cursor of the space sp: "" is the
// start. Each queued shard is a shard of the space in a base before the
// next, and each topic no longer than a topic may be.
func decodeCursor(s string, sp router.ShardSpace) (listCursor, error) {
	if s == "" {
		return listCursor{}, nil
	}
	bad := fmt.Errorf("%w: cursor %.40q", ErrBadPosition, s)
	b, err := decodeToken(s)
	if err != nil || len(b) < 3 || b[0] != cursorVersion {
		return listCursor{}, bad
	}
	r := tokenReader(b[1:])
	next := r.uvarint
	base, ok1 := next()
	k, ok2 := next()
	if !ok1 || !ok2 || base > uint64(sp.Base()) || k > maxCursorShards || (k > 0 && base == 0) {
		return listCursor{}, bad
	}
	c := listCursor{base: uint32(base)}
	for range k {
		shard, ok1 := next()
		l, ok2 := next()
		if !ok1 || !ok2 || !sp.Valid(shard) || l > wire.MaxTopicLen || l > uint64(len(r)) {
			return listCursor{}, bad
		}
		if sb, _, _, _ := sp.Range(uint32(shard)); uint64(sb) != base-1 {
			return listCursor{}, bad
		}
		c.queue = append(c.queue, listItem{shard: shard, after: slices.Clone(r[:l])})
		r = r[l:]
	}
	if len(r) != 0 {
		return listCursor{}, bad
	}
	return c, nil
}

package watch

import (
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/shoalmq/shoal/meta"
	"github.com/shoalmq/shoal/router"
	"github.com/shoalmq/shoal/wire"
)

const testShards = 40

// replicas are a node's replicas as a test sets them up: a log and a
// state per hosted shard, read indexes answered when the test says.
type replicas struct {
	logs      map[uint64]*Log
	states    map[uint64]*meta.State
	broken    map[uint64]error // shards whose state does not load
	hostedErr error
	hostReads int
	// reads holds the read indexes asked and not answered yet.
	reads []pendingRead
}

type pendingRead struct {
	shard uint64
	done  func(error)
}

func newReplicas(hosted ...uint64) *replicas {
	r := &replicas{logs: map[uint64]*Log{}, states: map[uint64]*meta.State{}, broken: map[uint64]error{}}
	for _, s := range hosted {
		r.logs[s] = &Log{shard: s, max: 1 << 20}
		r.states[s] = meta.New()
	}
	return r
}

func (r *replicas) Hosted() ([]uint64, error) {
	r.hostReads++
	if r.hostedErr != nil {
		return nil, r.hostedErr
	}
	var ids []uint64
	for s := range r.logs {
		ids = append(ids, s)
	}
	slices.Sort(ids)
	return ids, nil
}

func (r *replicas) Read(shard uint64, fn func(l *Log, topicsFrom func([]byte) iter.Seq[meta.Assignment])) error {
	if err := r.broken[shard]; err != nil {
		return err
	}
	l := r.logs[shard]
	if l == nil {
		return fmt.Errorf("shard %d not loaded", shard)
	}
	fn(l, r.states[shard].TopicsFrom)
	return nil
}

func (r *replicas) ReadIndex(shard uint64, done func(error)) {
	r.reads = append(r.reads, pendingRead{shard, done})
}

// answerReads answers the read indexes asked so far, failing those of
// the shards in fail.
func (r *replicas) answerReads(fail map[uint64]error) {
	reads := r.reads
	r.reads = nil
	for _, p := range reads {
		p.done(fail[p.shard])
	}
}

// apply applies, at index, to shard's state and log, the assignment of
// each topic (to owner) and returns the changes.
func (r *replicas) apply(t *testing.T, shard, index uint64, owner string, topics ...string) {
	t.Helper()
	var changes []meta.Change
	for _, topic := range topics {
		var res meta.Result
		if err := r.states[shard].Apply(&meta.Command{Op: meta.OpAssign, Topic: []byte(topic), Owner: owner}, &res); err != nil {
			t.Fatal(err)
		}
		changes = append(changes, res.Changes...)
	}
	r.logs[shard].Apply(index, changes)
}

// world is a Server on replicas, a clock that moves when told, timers
// that fire when told and spawned work run when told.
type world struct {
	*Server
	r       *replicas
	now     time.Time
	timers  []*timer
	spawned []func()
}

type timer struct {
	d       time.Duration
	f       func()
	stopped bool
}

// fixedMap is the map of a cluster of base shards that never split.
func fixedMap(base int) func() *router.ShardMap {
	m, err := router.NewShardMap(uint32(base))
	if err != nil {
		panic(err)
	}
	return func() *router.ShardMap { return m }
}

func newWorld(t testing.TB, r *replicas, maxWatchers int) *world {
	t.Helper()
	w := &world{r: r, now: time.Unix(1000, 0)}
	s, err := New(Config{
		Map: fixedMap(testShards), MaxWatchers: maxWatchers, MaxWait: 5 * time.Second, Replicas: r,
		OwnerAddr: func(node string) string {
			if node == "" {
				return ""
			}
			return node + ":9000"
		},
		Clock: func() time.Time { return w.now },
		After: func(d time.Duration, f func()) func() bool {
			tm := &timer{d: d, f: f}
			w.timers = append(w.timers, tm)
			return func() bool {
				was := !tm.stopped
				tm.stopped = true
				return was
			}
		},
		Spawn: func(fn func()) bool {
			w.spawned = append(w.spawned, fn)
			return true
		},
		Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	w.Server = s
	return w
}

// runSpawned runs the work spawned so far, and what it spawns.
func (w *world) runSpawned() {
	for len(w.spawned) > 0 {
		fn := w.spawned[0]
		w.spawned = w.spawned[1:]
		fn()
	}
}

// fire fires the timers not stopped.
func (w *world) fire() {
	timers := w.timers
	w.timers = nil
	for _, tm := range timers {
		if !tm.stopped {
			tm.stopped = true
			tm.f()
		}
	}
}

// result is what done was called with, and how often.
type result[T any] struct {
	calls int
	v     *T
	err   error
}

func (r *result[T]) done(v *T, err error) { r.calls, r.v, r.err = r.calls+1, v, err }

func (w *world) watch(m *wire.Watch) *result[wire.WatchEvents] {
	r := &result[wire.WatchEvents]{}
	w.Watch(m, r.done)
	return r
}

func prefix(p string, wait uint32, positions ...wire.ShardPosition) *wire.Watch {
	return &wire.Watch{Match: []byte(p), WaitMillis: wait, Positions: positions}
}

func at(shard, index uint64) wire.ShardPosition {
	return wire.ShardPosition{Shard: shard, Index: index}
}

func eventLines(ev *wire.WatchEvents) []string {
	var out []string
	for _, e := range ev.Events {
		out = append(out, fmt.Sprintf("%d@%d.%d %s %s(%s)", e.Shard, e.Index, e.Seq, e.Topic, e.Owner, e.OwnerAddr))
	}
	return out
}

// A watch with changes to give is answered at once, with the changes of
// its shards that match it and the position after them, shards it is not
// hosted here named, and positions older than a log keeps compacted.
func TestAWatchWithChangesIsAnsweredAtOnce(t *testing.T) {
	r := newReplicas(1, 2, 3)
	r.apply(t, 1, 10, "n1", "w-a", "other")
	r.apply(t, 1, 11, "n2", "w-b")
	r.apply(t, 2, 4, "n3", "w-c")
	r.logs[3].trimmed, r.logs[3].applied = 20, 25
	w := newWorld(t, r, 4)
	got := w.watch(prefix("w-", 1000, at(1, 0), at(2, 4), at(3, 19), at(5, 0)))
	if got.calls != 1 || got.err != nil {
		t.Fatalf("answered %d times, %v", got.calls, got.err)
	}
	ev := got.v
	if want := []string{"1@10.0 w-a n1(n1:9000)", "1@11.0 w-b n2(n2:9000)"}; !slices.Equal(eventLines(ev), want) {
		t.Fatalf("events %q, want %q", eventLines(ev), want)
	}
	if fmt.Sprint(ev.Positions) != fmt.Sprint([]wire.ShardPosition{at(1, 11), at(2, 4)}) ||
		!slices.Equal(ev.NotHosted, []uint64{5}) || fmt.Sprint(ev.Compacted) != fmt.Sprint([]wire.ShardPosition{at(3, 20)}) {
		t.Fatalf("positions %v, not hosted %v, compacted %v", ev.Positions, ev.NotHosted, ev.Compacted)
	}
	if st := w.Stats(); st.Watches != 1 || st.Events != 2 || st.Compacted != 1 || st.Waiting != 0 || len(w.timers) != 0 {
		t.Fatalf("stats %+v, timers %d", st, len(w.timers))
	}
}

// An exact watch matches one topic only; a position's skip leaves out the
// changes of the next index it has seen already.
func TestAnExactWatchAndASkip(t *testing.T) {
	r := newReplicas(1)
	r.apply(t, 1, 5, "n1", "t", "tt", "u")
	r.apply(t, 1, 6, "n2", "t")
	w := newWorld(t, r, 4)
	exact := w.watch(&wire.Watch{Match: []byte("t"), Exact: true, Positions: []wire.ShardPosition{at(1, 0)}})
	if want := []string{"1@5.0 t n1(n1:9000)", "1@6.0 t n2(n2:9000)"}; !slices.Equal(eventLines(exact.v), want) {
		t.Fatalf("exact: %q, want %q", eventLines(exact.v), want)
	}
	skip := w.watch(prefix("", 0, wire.ShardPosition{Shard: 1, Index: 4, Skip: 2}))
	if want := []string{"1@5.2 u n1(n1:9000)", "1@6.0 t n2(n2:9000)"}; !slices.Equal(eventLines(skip.v), want) {
		t.Fatalf("skip 2: %q, want %q", eventLines(skip.v), want)
	}
}

// A watch from now gets each shard's applied index at once, whatever its
// wait.
func TestAWatchFromNowGetsTheAppliedIndexesAtOnce(t *testing.T) {
	r := newReplicas(1, 2)
	r.apply(t, 1, 10, "n1", "a")
	r.logs[2].applied = 3
	w := newWorld(t, r, 4)
	got := w.watch(prefix("", 60_000, at(1, wire.NowIndex), at(2, 1)))
	if got.calls != 1 || len(got.v.Events) != 0 || fmt.Sprint(got.v.Positions) != fmt.Sprint([]wire.ShardPosition{at(1, 10), at(2, 3)}) {
		t.Fatalf("answered %d times: %+v", got.calls, got.v)
	}
	if len(w.timers) != 0 || w.Stats().Waiting != 0 {
		t.Fatal("a watch from now was held")
	}
}

// A watch with nothing to give is held until a change to one of its
// shards, looked at off the caller's goroutine, finds something for it;
// changes to other shards, or that do not match, do not answer it.
func TestAHeldWatchIsAnsweredByAChangeToItsShard(t *testing.T) {
	r := newReplicas(1, 2, 3)
	w := newWorld(t, r, 4)
	got := w.watch(prefix("w-", 60_000, at(1, 0), at(2, 0)))
	if got.calls != 0 || w.Stats().Waiting != 1 || len(w.timers) != 1 || w.timers[0].d != 5*time.Second {
		t.Fatalf("not held for MaxWait: answered %d, %+v, timers %d", got.calls, w.Stats(), len(w.timers))
	}
	r.apply(t, 3, 1, "n1", "w-other-shard")
	w.Changed(3)
	w.runSpawned()
	r.apply(t, 2, 1, "n1", "no-match")
	w.Changed(2)
	if got.calls != 0 || len(w.spawned) != 1 {
		t.Fatalf("woken on the raft worker: answered %d, spawned %d", got.calls, len(w.spawned))
	}
	w.runSpawned()
	if got.calls != 0 || w.Stats().Waiting != 1 {
		t.Fatalf("a change that does not match: answered %d, %+v", got.calls, w.Stats())
	}
	r.apply(t, 2, 2, "n2", "w-x")
	w.Changed(2)
	w.runSpawned()
	if got.calls != 1 || !slices.Equal(eventLines(got.v), []string{"2@2.0 w-x n2(n2:9000)"}) {
		t.Fatalf("answered %d: %q", got.calls, eventLines(got.v))
	}
	if fmt.Sprint(got.v.Positions) != fmt.Sprint([]wire.ShardPosition{at(1, 0), at(2, 2)}) {
		t.Fatalf("positions %v", got.v.Positions)
	}
	if !w.timers[0].stopped || w.Stats().Waiting != 0 {
		t.Fatalf("after the answer: timer stopped %v, %+v", w.timers[0].stopped, w.Stats())
	}
	w.Changed(2)
	w.fire()
	w.runSpawned()
	if got.calls != 1 {
		t.Fatalf("answered %d times", got.calls)
	}
}

// A held watch is answered when its wait ends, with its positions moved
// to what its replicas applied, and is no longer held.
func TestAHeldWatchIsAnsweredWhenItsWaitEnds(t *testing.T) {
	r := newReplicas(1)
	r.logs[1].applied = 7
	w := newWorld(t, r, 4)
	got := w.watch(prefix("w-", 800, at(1, 7)))
	if got.calls != 0 || w.timers[0].d != 800*time.Millisecond {
		t.Fatalf("answered %d, wait %v", got.calls, w.timers[0].d)
	}
	r.logs[1].applied = 9
	w.fire()
	if got.calls != 1 || len(got.v.Events) != 0 || fmt.Sprint(got.v.Positions) != fmt.Sprint([]wire.ShardPosition{at(1, 9)}) {
		t.Fatalf("answered %d: %+v", got.calls, got.v)
	}
	w.Changed(1)
	w.runSpawned()
	if got.calls != 1 || w.Stats().Waiting != 0 {
		t.Fatalf("answered %d times, %+v", got.calls, w.Stats())
	}
}

// A node holds at most MaxWatchers watches: one more with nothing to give
// is refused at once, and counted; one with something to give is not.
func TestAWatchPastMaxWatchersIsRefused(t *testing.T) {
	r := newReplicas(1, 2)
	r.apply(t, 2, 1, "n1", "a")
	w := newWorld(t, r, 1)
	first := w.watch(prefix("", 1000, at(1, 0)))
	second := w.watch(prefix("", 1000, at(1, 0)))
	if first.calls != 0 || second.calls != 1 || !errors.Is(second.err, ErrFull) || second.err.Error() != "node holds 1 watches already" {
		t.Fatalf("first answered %d; second %d, %v", first.calls, second.calls, second.err)
	}
	if some := w.watch(prefix("", 1000, at(2, 0))); some.calls != 1 || some.err != nil || len(some.v.Events) != 1 {
		t.Fatalf("a watch with a change to give: %d, %v", some.calls, some.err)
	}
	if st := w.Stats(); st.Refused != 1 || st.Waiting != 1 || st.Watches != 3 {
		t.Fatalf("stats %+v", st)
	}
}

// A held watch woken by a change that is not for it is held again, even
// when another watch took its place meanwhile: a node past MaxWatchers
// refuses new watches, never drops one it holds.
func TestAWokenWatchIsHeldAgainWhenTheNodeIsFull(t *testing.T) {
	r := newReplicas(1, 2)
	w := newWorld(t, r, 1)
	first := w.watch(prefix("w-", 1000, at(1, 0)))
	r.apply(t, 1, 1, "n1", "no-match")
	w.Changed(1) // first is woken, and waits for its turn to look
	second := w.watch(prefix("w-", 1000, at(2, 0)))
	w.runSpawned()
	if first.calls != 0 || second.calls != 0 || w.Stats().Waiting != 2 {
		t.Fatalf("answered %d and %d, %+v", first.calls, second.calls, w.Stats())
	}
	r.apply(t, 1, 2, "n1", "w-a")
	w.Changed(1)
	w.runSpawned()
	if first.calls != 1 || len(first.v.Events) != 1 || w.Stats().Waiting != 1 {
		t.Fatalf("first answered %d: %+v", first.calls, first.v)
	}
}

// A request naming a shard the cluster does not have, or none, is refused
// as a bad request, in the words the node has always answered with.
func TestARequestOutOfRangeIsABadRequest(t *testing.T) {
	w := newWorld(t, newReplicas(1), 4)
	got := w.watch(prefix("", 0, at(1, 0), at(testShards+2, 0)))
	if !errors.Is(got.err, ErrBadRequest) || got.err.Error() != "shard 42 out of range: the cluster has 40 shards" {
		t.Fatalf("watch: %v", got.err)
	}
	if got := w.watch(prefix("", 0)); !errors.Is(got.err, ErrBadRequest) {
		t.Fatalf("watch of no shard: %v", got.err)
	}
	list := &result[wire.TopicList]{}
	w.List(&wire.ListTopics{Shard: testShards, Limit: 1}, list.done)
	if !errors.Is(list.err, ErrBadRequest) || list.err.Error() != "shard 40 out of range: the cluster has 40 shards" {
		t.Fatalf("list: %v", list.err)
	}
	w.List(&wire.ListTopics{Limit: 0}, list.done)
	if !errors.Is(list.err, ErrBadRequest) {
		t.Fatalf("list of no topic: %v", list.err)
	}
	if st := w.Stats(); st.Watches != 0 {
		t.Fatalf("stats %+v", st)
	}
}

// An answer stops taking changes once it has maxEventsPerAnswer, at the
// end of a raft index; the shards after get their positions back.
func TestAnAnswerStopsAfterItsLimitAtTheEndOfAnIndex(t *testing.T) {
	r := newReplicas(1, 2)
	for i := uint64(1); i <= maxEventsPerAnswer/3+10; i++ {
		r.apply(t, 1, i, "n1", fmt.Sprint("a", i), fmt.Sprint("b", i), fmt.Sprint("c", i))
	}
	r.apply(t, 2, 1, "n1", "z")
	w := newWorld(t, r, 4)
	got := w.watch(prefix("", 0, at(1, 0), at(2, 0)))
	full := maxEventsPerAnswer/3 + 1 // the index in which the limit is reached, taken whole
	if n := len(got.v.Events); n != full*3 {
		t.Fatalf("%d events, want %d", n, full*3)
	}
	if fmt.Sprint(got.v.Positions) != fmt.Sprint([]wire.ShardPosition{at(1, uint64(full)), at(2, 0)}) {
		t.Fatalf("positions %v", got.v.Positions)
	}
	next := w.watch(prefix("", 0, got.v.Positions...))
	if n := len(next.v.Events); n != (maxEventsPerAnswer/3+10-full)*3+1 {
		t.Fatalf("next answer: %d events", n)
	}
}

// The shards a node hosts are read from its store at most once a
// second; a shard whose state does not load is named as not hosted.
func TestHostedShardsAreReadAtMostOnceASecond(t *testing.T) {
	r := newReplicas(1)
	w := newWorld(t, r, 4)
	w.watch(prefix("", 0, at(1, 0)))
	w.now = w.now.Add(999 * time.Millisecond)
	w.watch(prefix("", 0, at(1, 0)))
	if r.hostReads != 1 {
		t.Fatalf("hosted shards read %d times within a second", r.hostReads)
	}
	r.logs[2] = &Log{shard: 2, max: 16}
	r.broken[2] = errors.New("disk on fire")
	if got := w.watch(prefix("", 0, at(2, 0))); !slices.Equal(got.v.NotHosted, []uint64{2}) {
		t.Fatalf("a shard added within the second: %+v", got.v)
	}
	w.now = w.now.Add(time.Millisecond)
	if got := w.watch(prefix("", 0, at(2, 0))); r.hostReads != 2 || !slices.Equal(got.v.NotHosted, []uint64{2}) {
		t.Fatalf("read %d times; a shard that does not load: %+v", r.hostReads, got.v)
	}
	r.hostedErr = errors.New("store closed")
	w.now = w.now.Add(time.Second)
	if got := w.watch(prefix("", 0, at(1, 0))); got.err != r.hostedErr {
		t.Fatalf("hosted shards unreadable: %v", got.err)
	}
}

func (w *world) list(m *wire.ListTopics) *result[wire.TopicList] {
	r := &result[wire.TopicList]{}
	w.List(m, r.done)
	return r
}

func topicLines(l *wire.TopicList) string {
	var out []string
	for _, a := range l.Topics {
		out = append(out, fmt.Sprintf("%d:%s", a.Shard, a.Topic))
	}
	return strings.Join(out, " ")
}

// A listing reads each shard only after its read index, pages by the
// limit with a cursor to go on from, and ends at a shard not hosted here
// or at the last shard.
func TestAListingPagesAfterReadIndexes(t *testing.T) {
	r := newReplicas(0, 1, 2, testShards-3, testShards-2, testShards-1)
	r.apply(t, 0, 3, "n1", "l-a", "l-b", "x")
	r.apply(t, 1, 4, "n2", "l-c")
	r.apply(t, 2, 2, "n1", "l-d", "l-e")
	r.apply(t, testShards-2, 9, "n1", "l-f")
	w := newWorld(t, r, 4)
	page := w.list(&wire.ListTopics{Prefix: []byte("l-"), Limit: 4})
	if page.calls != 0 || len(r.reads) != 3 {
		t.Fatalf("answered %d before the read indexes; %d asked", page.calls, len(r.reads))
	}
	r.answerReads(nil)
	if page.calls != 0 {
		t.Fatal("answered on the raft worker")
	}
	w.runSpawned()
	if page.calls != 1 || page.err != nil {
		t.Fatalf("answered %d, %v", page.calls, page.err)
	}
	p := page.v
	if topicLines(p) != "0:l-a 0:l-b 1:l-c 2:l-d" || p.NextShard != 2 || string(p.NextAfter) != "l-d" || p.Done ||
		fmt.Sprint(p.Positions) != fmt.Sprint([]wire.ShardPosition{at(0, 3), at(1, 4), at(2, 2)}) {
		t.Fatalf("first page %s, next %d/%s, done %v, positions %v", topicLines(p), p.NextShard, p.NextAfter, p.Done, p.Positions)
	}
	// From the cursor: the rest of shard 2, then shard 3 is not hosted.
	page = w.list(&wire.ListTopics{Prefix: []byte("l-"), Shard: 2, After: []byte("l-d"), Limit: 4})
	r.answerReads(nil)
	w.runSpawned()
	if p := page.v; topicLines(p) != "2:l-e" || p.NextShard != 3 || p.NextAfter != nil || p.Done {
		t.Fatalf("second page %s, next %d/%s, done %v", topicLines(p), p.NextShard, p.NextAfter, p.Done)
	}
	// At a shard not hosted: nothing, and the same cursor.
	page = w.list(&wire.ListTopics{Shard: 3, Limit: 4})
	if p := page.v; page.calls != 1 || len(p.Topics) != 0 || p.NextShard != 3 || p.Done || len(r.reads) != 0 {
		t.Fatalf("a shard not hosted: %+v", p)
	}
	// The last shards: done.
	page = w.list(&wire.ListTopics{Shard: testShards - 3, Limit: 4})
	r.answerReads(nil)
	w.runSpawned()
	if p := page.v; topicLines(p) != fmt.Sprintf("%d:l-f", testShards-2) || !p.Done || p.NextShard != 0 {
		t.Fatalf("last page %s, next %d, done %v", topicLines(p), p.NextShard, p.Done)
	}
}

// A listing over many shards reads them in runs of listReadAhead read
// indexes at a time.
func TestAListingReadsAheadARunOfShards(t *testing.T) {
	r := newReplicas()
	for s := range uint64(testShards) {
		r.logs[s], r.states[s] = &Log{shard: s, max: 16}, meta.New()
	}
	w := newWorld(t, r, 4)
	page := w.list(&wire.ListTopics{Limit: 10})
	var runs []int
	for len(r.reads) > 0 {
		runs = append(runs, len(r.reads))
		r.answerReads(nil)
		w.runSpawned()
	}
	if want := []int{listReadAhead, listReadAhead, testShards - 2*listReadAhead}; !slices.Equal(runs, want) {
		t.Fatalf("read indexes in runs of %v, want %v", runs, want)
	}
	if page.calls != 1 || !page.v.Done || len(page.v.Positions) != testShards {
		t.Fatalf("answered %d: %+v", page.calls, page.v)
	}
}

// A listing whose first shard cannot be read is refused as unavailable;
// one that read some shards first ends its page at the one it could not.
func TestAListingStopsAtAShardItCannotRead(t *testing.T) {
	r := newReplicas(0, 1, 2)
	r.apply(t, 0, 1, "n1", "a")
	w := newWorld(t, r, 4)
	cause := errors.New("no leader")
	page := w.list(&wire.ListTopics{Limit: 10})
	r.answerReads(map[uint64]error{0: cause})
	w.runSpawned()
	if !errors.Is(page.err, ErrUnreadable) || !errors.Is(page.err, cause) || page.err.Error() != "list shard 0: no leader" {
		t.Fatalf("first shard unreadable: %v", page.err)
	}
	page = w.list(&wire.ListTopics{Limit: 10})
	r.answerReads(map[uint64]error{1: cause})
	w.runSpawned()
	if p := page.v; page.err != nil || topicLines(p) != "0:a" || p.NextShard != 1 || p.Done {
		t.Fatalf("second shard unreadable: %v %+v", page.err, p)
	}
	// A shard read with nothing to list still ends the page at the next.
	page = w.list(&wire.ListTopics{Prefix: []byte("none-"), Limit: 10})
	r.answerReads(map[uint64]error{1: cause})
	w.runSpawned()
	if p := page.v; page.err != nil || len(p.Topics) != 0 || p.NextShard != 1 || len(p.Positions) != 1 {
		t.Fatalf("second shard unreadable after an empty one: %v %+v", page.err, p)
	}
	r.broken[0] = errors.New("bad record")
	page = w.list(&wire.ListTopics{Limit: 10})
	r.answerReads(nil)
	w.runSpawned()
	if page.err != r.broken[0] {
		t.Fatalf("a shard that does not load: %v", page.err)
	}
}

// A Config lacking what a Server needs is refused.
func TestNewRefusesAnIncompleteConfig(t *testing.T) {
	good := Config{Map: fixedMap(1), MaxWatchers: 1, MaxWait: time.Second, Replicas: newReplicas(), OwnerAddr: func(string) string { return "" },
		Clock: time.Now, After: func(time.Duration, func()) func() bool { return nil }, Spawn: func(func()) bool { return true },
		Logger: slog.New(slog.DiscardHandler)}
	if _, err := New(good); err != nil {
		t.Fatal(err)
	}
	for name, change := range map[string]func(c *Config){
		"no map":      func(c *Config) { c.Map = nil },
		"no watchers": func(c *Config) { c.MaxWatchers = 0 },
		"no spawn":    func(c *Config) { c.Spawn = nil },
		"no replicas": func(c *Config) { c.Replicas = nil },
	} {
		c := good
		change(&c)
		if _, err := New(c); err == nil {
			t.Errorf("%s: taken", name)
		}
	}
}

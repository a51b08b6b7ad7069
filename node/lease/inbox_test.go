package lease

import (
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/shoalmq/shoal/internal/histogram"
	"github.com/shoalmq/shoal/node/ownership"
	"github.com/shoalmq/shoal/raftmux"
	"github.com/shoalmq/shoal/router"
	"github.com/shoalmq/shoal/shardstore"
	"github.com/shoalmq/shoal/wire"
)

// testEnv is an Env of an owner alone: spawned work runs on goroutines,
// and nothing is sent, kicked or announced.
type testEnv struct{}

func (testEnv) Now() time.Time                                 { return time.Now() }
func (testEnv) After(d time.Duration, f func()) func() bool    { return time.AfterFunc(d, f).Stop }
func (testEnv) Spawn(f func()) bool                            { go f(); return true }
func (testEnv) Kick(Task)                                      {}
func (testEnv) Send(string, []byte) error                      { return nil }
func (testEnv) Born() bool                                     { return true }
func (testEnv) NameOf(uint64) (string, bool)                   { return "", false }
func (testEnv) Gone() func(string) bool                        { return func(string) bool { return false } }
func (testEnv) PrevSilent(uint64, string) bool                 { return false }
func (testEnv) ReadIndex(_ uint64, done func(error))           { done(nil) }
func (testEnv) Submit(_ raftmux.Op, done func(raftmux.Result)) { done(raftmux.Result{}) }
func (testEnv) ShardEvents() uint64                            { return 0 }
func (testEnv) Announce([]ownership.Change, Reason)            {}

// owner returns an Agent over a store of its own, to which the tests hand
// ownership messages for shard 9 at term 1.
func owner(t *testing.T) (a *Agent, shard, term uint64) {
	t.Helper()
	st, err := shardstore.Open("/n2", shardstore.Config{FS: vfs.NewMem()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	a, err = New(Config{
		Self:          "n2",
		RaftID:        func(node string) uint64 { return uint64(len(node)) },
		Shards:        16,
		Generation:    1,
		Lease:         time.Second,
		RenewInterval: 250 * time.Millisecond,
		ConfirmFresh:  500 * time.Millisecond,
		Leaders:       router.NewLeaderTable(16),
		Store:         st,
		RoundTimes:    new(histogram.Histogram),
		Logger:        slog.New(slog.DiscardHandler),
		Env:           testEnv{},
	})
	if err != nil {
		t.Fatal(err)
	}
	return a, 9, 1
}

// The Due task writes one batch at most and hands the messages waiting
// after it to spawned work, which writes them all.
func TestDueTaskHandsTheInboxOn(t *testing.T) {
	a, shard, term := owner(t)
	const total = maxBatch + 45
	var mu sync.Mutex
	acked := 0
	var bad []string
	msg := func(i int) Message {
		topic := fmt.Sprintf("handed-%d", i)
		return Message{Open: &wire.OpenTopic{Topic: []byte(topic), Epoch: 1, Partitions: 1, Shard: shard, Term: term},
			Done: func(ack wire.TopicAck, ok bool) {
				mu.Lock()
				defer mu.Unlock()
				acked++
				if !ok || ack.Status != wire.TopicDone {
					bad = append(bad, topic)
				}
			}}
	}
	// Messages already waiting, as if left by goroutines that found a
	// batch under way, and the task's own.
	a.inbox.mu.Lock()
	for i := range total - 1 {
		a.inbox.waiting = append(a.inbox.waiting, msg(i))
	}
	a.inbox.mu.Unlock()
	a.queue(false, []Message{msg(total - 1)})
	mu.Lock()
	first := acked
	mu.Unlock()
	if first < maxBatch {
		t.Fatalf("%d acked when the task returned, want its batch of %d", first, maxBatch)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		mu.Lock()
		done := acked == total
		mu.Unlock()
		if done {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d messages acked", first, total)
		}
		time.Sleep(time.Millisecond)
	}
	if len(bad) > 0 {
		t.Fatalf("not taken: %v", bad)
	}
}

// A copy of an ownership message still waiting to be written (a leader's
// resend while this node is behind) is dropped without an ack; the first
// copy's ack answers for both. Once it is written, a later copy (its ack
// lost) is taken again.
func TestCopyOfAWaitingMessageIsDropped(t *testing.T) {
	a, shard, term := owner(t)
	q := &a.inbox
	q.mu.Lock()
	q.busy = true // a batch under way: what comes now waits
	q.mu.Unlock()
	var got []string
	open := &wire.OpenTopic{Topic: []byte("copied"), Epoch: 1, Partitions: 1, Shard: shard, Term: term}
	msg := func(name string) Message {
		return Message{Open: open, From: "n1", ReqID: 5, Done: func(ack wire.TopicAck, ok bool) {
			got = append(got, fmt.Sprintf("%s %v %v", name, ok, ack.Status))
		}}
	}
	dups := a.Stats().Dups
	a.Take(msg("first"))
	a.Take(msg("copy"))
	if len(got) != 1 || got[0] != "copy false 0" {
		t.Fatalf("while the first waits: %q, want the copy dropped unacknowledged", got)
	}
	if d := a.Stats().Dups - dups; d != 1 {
		t.Fatalf("%d copies counted, want 1", d)
	}
	q.mu.Lock()
	a.writeInbox(true) // the batch under way ends; this writes the inbox
	want := fmt.Sprintf("first true %v", wire.TopicDone)
	if len(got) != 2 || got[1] != want {
		t.Fatalf("after the inbox was written: %q, want the first acknowledged (%s)", got, want)
	}
	a.Take(msg("again"))
	if len(got) != 3 || got[2] != fmt.Sprintf("again true %v", wire.TopicDone) {
		t.Fatalf("a copy after the first was written: %q, want it taken", got)
	}
}

package meta

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"github.com/shoalmq/shoal/internal/mutant"
	"iter"
	"math"
	"slices"
	"strings"

	"github.com/zeebo/xxh3"

	"github.com/shoalmq/shoal/internal/enum"
	"github.com/shoalmq/shoal/internal/invariants"
)

// TopicState is the lifecycle state of a topic record.
type TopicState uint8

// Values are part of the snapshot format: never renumber.
const (
	// Active: the topic has an owner serving it at its epoch.
	Active TopicState = 1
	// Revoked: a tombstone that keeps the topic's last epoch so that a
	// re-assign continues above it.
	Revoked TopicState = 2
)

var topicStateNames = enum.New("TopicState", map[TopicState]string{Active: "active", Revoked: "revoked"})

func (s TopicState) String() string { return topicStateNames.Name(s) }

// Assignment is a topic's record as seen from outside. Owner is empty and
// Partitions 0 for a revoked topic.
type Assignment struct {
	Topic string
	Owner string
	// Previous is the owner the topic had before its last ownership
	// change (a move or a revoke), never Owner itself; empty when there is
	// none. A new shard leader re-sends CloseTopic to it (unless it shows
	// that it no longer holds the topic), in case the old
	// leader failed before the Close was acknowledged.
	Previous   string
	Epoch      uint64
	Partitions uint32
	State      TopicState
}

// EffectKind says what the node must tell a topic owner once a command has
// committed.
type EffectKind uint8

const (
	// EffectOpen: send OpenTopic(Topic, Epoch, Partitions) to Node, until
	// acknowledged. An update of the partition count re-opens the topic at
	// the same epoch.
	EffectOpen EffectKind = 1
	// EffectClose: send CloseTopic(Topic) to Node, until acknowledged or
	// the node is dead. Epoch is the topic's new epoch, which fences every
	// request Node could still answer.
	EffectClose EffectKind = 2
)

var effectKindNames = enum.New("EffectKind", map[EffectKind]string{EffectOpen: "open", EffectClose: "close"})

func (k EffectKind) String() string { return effectKindNames.Name(k) }

// Effect is one RPC the shard leader owes a node after a command commits.
type Effect struct {
	Kind       EffectKind
	Node       string
	Topic      string
	Epoch      uint64
	Partitions uint32
	// Fresh marks the Open of a topic no node can have held before: its
	// first assignment in a shard whose epoch floor is 0 (no tombstone was
	// ever compacted). A leader need not fence earlier owners for it.
	Fresh bool
	// Prev, on the Open of a move, is the owner the topic moved from: the
	// new owner pulls its records from it before serving.
	Prev string
	// Revoked marks the Close of a revoke: the owner deletes the topic's
	// records.
	Revoked bool
}

// Result is the outcome of one Apply.
type Result struct {
	// Assignment is the topic's record after apply, for the single-topic
	// commands (Assign, Revoke, UpdatePartition); zero otherwise.
	Assignment Assignment
	// Changed reports whether the state changed.
	Changed bool
	// Replayed reports a write of a session applied before: Assignment (or
	// the error) is its first answer, and nothing changed now.
	Replayed bool
	// Moved and Skipped count a ReassignNode's moves that applied and that
	// no longer matched the state; Compacted counts dropped tombstones.
	Moved, Skipped, Compacted int
	// Split: the command split the shard (OpSplit).
	Split bool
	// Session names a client's write answered here for the first time
	// (applied, or refused with an error that is its answer from now on);
	// zero for a write without a session, a replay and a stale one.
	Session SessionRef
	// Effects lists the RPCs to send, in order: for a move, the Close to
	// the previous owner comes before the Open to the new one.
	Effects []Effect
	// Changes lists the topics the command changed, as watchers see them,
	// in the order of its moves.
	Changes []Change
}

func (r *Result) reset() {
	effects, changes := r.Effects[:0], r.Changes[:0]
	*r = Result{Effects: effects, Changes: changes}
}

func (r *Result) change(kind ChangeKind, rec *record) {
	r.Changes = append(r.Changes, Change{Kind: kind, Topic: rec.topic, Owner: rec.owner, Epoch: rec.epoch, Partitions: rec.partitions})
}

type record struct {
	topic      string
	owner      string
	prev       string
	epoch      uint64
	partitions uint32
	state      TopicState
}

func (r *record) assignment() Assignment {
	return Assignment{Topic: r.topic, Owner: r.owner, Previous: r.prev, Epoch: r.epoch, Partitions: r.partitions, State: r.state}
}

// ownerStat counts a node's active topics; its id is the one string every
// record owned by the node shares. digest is the XOR of TopicDigest over
// them (see OwnerDigest).
type ownerStat struct {
	id     string
	topics int
	digest uint64
}

// State is one shard's topic metadata. The zero value is not usable; call
// New. Every method, queries included, must be called by the state's single
// owner (queries may sort an internal index).
type State struct {
	topics map[string]*record
	// order holds every record of topics (tombstones included); sorted
	// reports whether it is in ascending topic order. Inserts append,
	// queries sort on demand, so Apply stays O(1). Iterating in order
	// reads the records straight from it, without a map lookup each.
	order  []*record
	sorted bool
	owners map[string]*ownerStat
	active int
	// names sums the lengths of the topic names of every record,
	// tombstones included (Bytes).
	names int
	// floor is the highest epoch a compacted tombstone held: a topic with
	// no record starts at floor+1.
	floor uint64
	// entry is ApplyEntry's decoded command, kept so that its move slice
	// is reused.
	entry Command
	// With track set, changed lists the topics Apply changed and
	// floorChanged whether the floor moved, until DrainChanges.
	track        bool
	changed      []string
	floorChanged bool
	splitChanged bool
	// split: the shard applied OpSplit and applies nothing more.
	split           bool
	changedSessions []uint64
	// sessions holds the client sessions that wrote here (session.go);
	// clock is the newest stamp applied.
	sessions map[uint64]*session
	clock    uint64
	// inv holds what the invariant checks of Apply compare against
	// (invariants.go); only builds with invariants use it.
	inv applyCheck
}

// New returns an empty shard state.
func New() *State {
	return &State{
		topics:   make(map[string]*record),
		owners:   make(map[string]*ownerStat),
		sessions: make(map[uint64]*session),
		sorted:   true,
	}
}

// Apply applies one committed command. On error nothing changed. res, when
// not nil, is overwritten; its Effects backing array is reused, so one
// Result serves a whole apply loop.
func (s *State) Apply(c *Command, res *Result) (err error) {
	var scratch Result
	if res == nil {
		res = &scratch
	}
	if invariants.Enabled {
		s.inv.before(s, c)
		defer func() { s.inv.after(s, c, res, err) }()
	}
	res.reset()
	if s.split && !mutant.On(mutant.SplitUnfenced) {
		return fmt.Errorf("meta: %s: %w", c.Op, ErrShardSplit)
	}
	if c.Session.ID != 0 && c.Op.takesSession() {
		if err := c.Validate(); err != nil {
			return err
		}
		return s.applySession(c, res, func() error { return s.applyOne(c, res) })
	}
	return s.applyOne(c, res)
}

func (s *State) applyOne(c *Command, res *Result) error {
	if err := s.Check(c); err != nil {
		return err
	}
	switch c.Op {
	case OpAssign:
		s.assign(c, res)
	case OpRevoke:
		s.revoke(c, res)
	case OpUpdatePartition:
		s.updatePartitions(c, res)
	case OpReassignNode:
		s.reassign(c, res)
	case OpCompact:
		s.compact(res)
	case OpSplit:
		s.split, s.splitChanged = true, s.track
		res.Changed, res.Split = true, true
	case OpMarker:
	}
	return nil
}

// Split reports whether the shard applied OpSplit: its topics are in the
// shards it split into, and it applies nothing more.
func (s *State) Split() bool { return s.split }

// ApplyEntry decodes a committed raft entry and applies it. An empty entry
// (raft's own, appended by every new leader) is a no-op. An entry that does
// not decode is refused like any bad command: every replica refuses it the
// same way, so the caller reports it and moves on. res is as for Apply.
func (s *State) ApplyEntry(data []byte, res *Result) error {
	if len(data) == 0 {
		if res != nil {
			res.reset()
		}
		return nil
	}
	err := decodeCommand(data, &s.entry, s)
	if err == nil {
		err = s.Apply(&s.entry, res)
	} else if res != nil {
		res.reset()
	}
	// Drop the references into data: the caller may reuse it.
	moves := s.entry.Moves
	clear(moves)
	s.entry = Command{Moves: moves[:0]}
	return err
}

// Check returns the error Apply would return for c, without changing
// anything. A leader uses it to refuse a request before proposing it.
func (s *State) Check(c *Command) error {
	if err := c.Validate(); err != nil {
		return err
	}
	if s.split && !mutant.On(mutant.SplitUnfenced) {
		return fmt.Errorf("meta: %s: %w", c.Op, ErrShardSplit)
	}
	switch c.Op {
	case OpAssign:
		r := s.topics[string(c.Topic)]
		if r != nil && r.state == Active {
			if c.Partitions != 0 && c.Partitions != r.partitions {
				return fmt.Errorf("meta: %s %q: %w (has %d, asked %d)",
					c.Op, c.Topic, ErrPartitionsConflict, r.partitions, c.Partitions)
			}
			if c.Owner != "" && c.Owner != r.owner && r.epoch == math.MaxUint64 {
				return fmt.Errorf("meta: %s %q: %w", c.Op, c.Topic, ErrEpochExhausted)
			}
			return nil
		}
		if c.Owner == "" {
			return fmt.Errorf("meta: %s %q: %w", c.Op, c.Topic, ErrNoOwner)
		}
		if (r == nil && s.floor == math.MaxUint64) || (r != nil && r.epoch == math.MaxUint64) {
			return fmt.Errorf("meta: %s %q: %w", c.Op, c.Topic, ErrEpochExhausted)
		}
	case OpRevoke:
		r := s.topics[string(c.Topic)]
		if r == nil {
			return fmt.Errorf("meta: %s %q: %w", c.Op, c.Topic, ErrUnknownTopic)
		}
		if r.state == Active && r.epoch == math.MaxUint64 {
			return fmt.Errorf("meta: %s %q: %w", c.Op, c.Topic, ErrEpochExhausted)
		}
	case OpUpdatePartition:
		r := s.topics[string(c.Topic)]
		if r == nil || r.state != Active {
			return fmt.Errorf("meta: %s %q: %w", c.Op, c.Topic, ErrUnknownTopic)
		}
		if c.Partitions < r.partitions {
			return fmt.Errorf("meta: %s %q: %w: cannot shrink %d to %d",
				c.Op, c.Topic, ErrBadPartitions, r.partitions, c.Partitions)
		}
	}
	return nil
}

func (s *State) assign(c *Command, res *Result) {
	r := s.topics[string(c.Topic)]
	if r != nil && r.state == Active {
		if c.Owner != "" && c.Owner != r.owner {
			s.move(r, c.Owner, res)
			res.Changed = true
		}
		res.Assignment = r.assignment()
		return
	}
	if r == nil {
		r = &record{topic: string(c.Topic), epoch: s.floor}
		s.topics[r.topic] = r
		s.names += len(r.topic)
		if n := len(s.order); n > 0 && s.order[n-1].topic >= r.topic {
			s.sorted = false
		}
		s.order = append(s.order, r)
	}
	r.epoch++
	r.state = Active
	r.owner = s.acquire(c.Owner, r)
	if r.prev == r.owner {
		r.prev = "" // a topic revoked from a node and given back to it
	}
	r.partitions = c.Partitions
	if r.partitions == 0 {
		r.partitions = DefaultPartitions
	}
	s.active++
	s.touch(r.topic)
	res.Changed = true
	res.Assignment = r.assignment()
	res.Effects = append(res.Effects, Effect{Kind: EffectOpen, Node: r.owner, Topic: r.topic, Epoch: r.epoch, Partitions: r.partitions,
		Fresh: r.epoch == 1 && r.prev == ""})
	res.change(ChangeAssigned, r)
}

// move hands an active record to owner at the next epoch.
func (s *State) move(r *record, owner string, res *Result) {
	prev := r.owner
	s.release(r)
	r.prev = prev
	r.epoch++
	r.owner = s.acquire(owner, r)
	s.touch(r.topic)
	res.Effects = append(res.Effects,
		Effect{Kind: EffectClose, Node: prev, Topic: r.topic, Epoch: r.epoch, Partitions: r.partitions},
		Effect{Kind: EffectOpen, Node: r.owner, Topic: r.topic, Epoch: r.epoch, Partitions: r.partitions, Prev: prev})
	res.change(ChangeMoved, r)
}

func (s *State) revoke(c *Command, res *Result) {
	r := s.topics[string(c.Topic)]
	if r.state == Active {
		prev := r.owner
		s.release(r)
		s.active--
		r.epoch++
		r.state = Revoked
		r.owner = ""
		r.prev = prev
		r.partitions = 0
		s.touch(r.topic)
		res.Changed = true
		res.Effects = append(res.Effects, Effect{Kind: EffectClose, Node: prev, Topic: r.topic, Epoch: r.epoch, Revoked: true})
		res.change(ChangeRevoked, r)
	}
	res.Assignment = r.assignment()
}

func (s *State) updatePartitions(c *Command, res *Result) {
	r := s.topics[string(c.Topic)]
	if c.Partitions != r.partitions {
		r.partitions = c.Partitions
		s.touch(r.topic)
		res.Changed = true
		res.Effects = append(res.Effects, Effect{Kind: EffectOpen, Node: r.owner, Topic: r.topic, Epoch: r.epoch, Partitions: r.partitions,
			Fresh: r.epoch == 1 && r.prev == ""})
		res.change(ChangeUpdated, r)
	}
	res.Assignment = r.assignment()
}

func (s *State) reassign(c *Command, res *Result) {
	for i := range c.Moves {
		m := &c.Moves[i]
		r := s.topics[string(m.Topic)]
		if r == nil || r.state != Active || r.owner != c.Node || r.epoch == math.MaxUint64 || (m.Epoch != 0 && r.epoch != m.Epoch) {
			res.Skipped++
			continue
		}
		s.move(r, m.Owner, res)
		res.Moved++
	}
	res.Changed = res.Moved > 0
}

func (s *State) compact(res *Result) {
	kept := s.order[:0]
	for _, r := range s.order {
		k := r.topic
		if r.state == Active {
			kept = append(kept, r)
			continue
		}
		if r.epoch > s.floor {
			s.floor = r.epoch
			s.floorChanged = s.track
		}
		delete(s.topics, k)
		s.names -= len(k)
		s.touch(k)
		res.Compacted++
	}
	clear(s.order[len(kept):])
	s.order = kept
	for id, st := range s.owners {
		if st.topics == 0 {
			delete(s.owners, id)
		}
	}
	res.Changed = res.Compacted > 0
}

// acquire counts r, at its current epoch, as one more active topic of id
// and returns the shared copy of the id.
func (s *State) acquire(id string, r *record) string {
	st := s.owners[id]
	if st == nil {
		st = &ownerStat{id: id}
		s.owners[id] = st
	}
	st.add(r)
	return st.id
}

// add counts r, at its current epoch, as one active topic more of st's
// owner.
func (st *ownerStat) add(r *record) {
	st.topics++
	st.digest ^= TopicDigest(r.topic, r.epoch)
}

// release counts r, at its current epoch, as one active topic less of its
// owner. A node left with none keeps its entry, so that moving topics back
// and forth between nodes does not allocate; Compact prunes such entries.
func (s *State) release(r *record) {
	st := s.owners[r.owner]
	st.topics--
	st.digest ^= TopicDigest(r.topic, r.epoch)
}

// TopicDigest is one topic's share of an owner digest: a hash of the topic
// and the epoch it is held at.
func TopicDigest(topic string, epoch uint64) uint64 { return xxh3.HashStringSeed(topic, epoch) }

// ShardSummary is one shard's share of a lease round's summary
// (wire.Summary): a hash of the shard, its leader's term, and an owner
// digest there (0 where none is meant).
func ShardSummary(shard, term, digest uint64) uint64 {
	var b [24]byte
	binary.LittleEndian.PutUint64(b[0:], shard)
	binary.LittleEndian.PutUint64(b[8:], term)
	binary.LittleEndian.PutUint64(b[16:], digest)
	return xxh3.Hash(b[:])
}

// OwnerDigest returns the XOR of TopicDigest(topic, epoch) over the active
// topics node owns in this shard (0 when none). An owner that computes the
// same digest over the topics it holds holds exactly those at exactly those
// epochs, barring a 64-bit collision; a shard leader compares the two
// before it grants a lease on the whole set.
func (s *State) OwnerDigest(node string) uint64 {
	if st := s.owners[node]; st != nil {
		return st.digest
	}
	return 0
}

// nodeID returns id as a string, without copying it when it names a node
// that owns or owned topics here. s may be nil.
func (s *State) nodeID(id []byte) string {
	if len(id) == 0 {
		return ""
	}
	if s != nil {
		if st := s.owners[string(id)]; st != nil {
			return st.id
		}
	}
	return string(id)
}

// sortedRecords returns every record in ascending topic order.
func (s *State) sortedRecords() []*record {
	if !s.sorted {
		slices.SortFunc(s.order, func(a, b *record) int { return strings.Compare(a.topic, b.topic) })
		s.sorted = true
	}
	return s.order
}

// Get returns the record of topic, active or revoked; ok is false when the
// shard has none (never assigned, or its tombstone was compacted).
func (s *State) Get(topic []byte) (a Assignment, ok bool) {
	r := s.topics[string(topic)]
	if r == nil {
		return Assignment{}, false
	}
	return r.assignment(), true
}

// OwnsAt reports whether node owns topic, active, at epoch.
func (s *State) OwnsAt(node, topic string, epoch uint64) bool {
	r := s.topics[topic]
	return r != nil && r.state == Active && r.owner == node && r.epoch == epoch
}

// Count returns the number of active topics.
func (s *State) Count() int { return s.active }

// RecordBytes is about what a record takes in the store besides its
// topic's name: the key's prefix, the value (a state, an epoch, two node
// ids of about 8 bytes and a partition count) and the store's own
// trailer.
const RecordBytes = 48

// Bytes estimates the shard's size in the store: the names of its
// records, tombstones included, and RecordBytes for each. A shard of
// long names, or of many tombstones, is large for its count of topics.
func (s *State) Bytes() int64 { return int64(s.names) + int64(len(s.topics))*RecordBytes }

// Tombstones returns the number of revoked topics still recorded.
func (s *State) Tombstones() int { return len(s.topics) - s.active }

// Floor returns the epoch floor: a topic with no record starts above it.
func (s *State) Floor() uint64 { return s.floor }

// Load returns the number of active topics node owns in this shard.
func (s *State) Load(node string) int {
	if st := s.owners[node]; st != nil {
		return st.topics
	}
	return 0
}

// Owners returns every node that owns an active topic, with its topic
// count as Load, sorted by id.
func (s *State) Owners() []Node {
	out := make([]Node, 0, len(s.owners))
	for _, st := range s.owners {
		if st.topics > 0 {
			out = append(out, Node{ID: st.id, Load: uint64(st.topics)})
		}
	}
	slices.SortFunc(out, func(a, b Node) int { return cmp.Compare(a.ID, b.ID) })
	return out
}

// AnyOwner reports whether pred holds for some node owning active topics
// here, without allocating (in no particular order: pred must not depend
// on it).
func (s *State) AnyOwner(pred func(id string) bool) bool {
	for _, st := range s.owners {
		if st.topics > 0 && pred(st.id) {
			return true
		}
	}
	return false
}

// TopicsOwnedBy returns the active topics owned by node, sorted by topic.
func (s *State) TopicsOwnedBy(node string) []Assignment {
	var out []Assignment
	s.EachOwnedBy(node, func(topic string, _ uint64) {
		out = append(out, s.topics[topic].assignment())
	})
	slices.SortFunc(out, func(a, b Assignment) int { return cmp.Compare(a.Topic, b.Topic) })
	return out
}

// EachOwnedBy calls fn with each active topic owned by node and its epoch,
// in no particular order, without sorting or allocating: a lease grant
// lists them on every renewal while they differ from what the owner holds.
// The state must not change during the call.
func (s *State) EachOwnedBy(node string, fn func(topic string, epoch uint64)) {
	if s.Load(node) == 0 {
		return
	}
	for k, r := range s.topics {
		if r.state == Active && r.owner == node {
			fn(k, r.epoch)
		}
	}
}

// Topics iterates over the active topics in ascending order. The state must
// not change during the iteration.
func (s *State) Topics() iter.Seq[Assignment] {
	return func(yield func(Assignment) bool) {
		for _, r := range s.sortedRecords() {
			if r.state == Active && !yield(r.assignment()) {
				return
			}
		}
	}
}

// TopicsFrom iterates over the active topics from from on (from itself
// included), in ascending order. The state must not change during the
// iteration.
func (s *State) TopicsFrom(from []byte) iter.Seq[Assignment] {
	return func(yield func(Assignment) bool) {
		recs := s.sortedRecords()
		i, _ := slices.BinarySearchFunc(recs, string(from), func(r *record, from string) int {
			return strings.Compare(r.topic, from)
		})
		for _, r := range recs[i:] {
			if r.state == Active && !yield(r.assignment()) {
				return
			}
		}
	}
}

// All iterates over every record, tombstones included, in ascending order.
// The state must not change during the iteration.
func (s *State) All() iter.Seq[Assignment] {
	return func(yield func(Assignment) bool) {
		for _, r := range s.sortedRecords() {
			if !yield(r.assignment()) {
				return
			}
		}
	}
}

package wire

// Watch and topic listing: a client reads the changes of topic assignments
// from any replica of their shards, from a position (per shard, the raft
// index up to which it has seen every change), and lists the assignments
// shard by shard. Both are answered by the node they are sent to, from its
// own replicas; a shard it hosts none of is named in the answer, and the
// client asks a replica of it instead.

// Limits of the watch and listing messages.
const (
	// MaxWatchWaitMillis bounds how long a Watch may ask to be held while
	// nothing changed: 60 s (a node holds it at most half its request
	// timeout anyway).
	MaxWatchWaitMillis = 60_000
	// MaxWatchEvents bounds the events in one WatchEvents: 16,384. A node
	// stops adding events past a few thousand, once the raft entry it is in
	// (at most meta.MaxMoves changes) is complete.
	MaxWatchEvents = 1 << 14
	// MaxListTopics bounds the topics in one TopicList and a ListTopics'
	// limit: 10,000 (a page of the largest topic names, owner ids and
	// addresses stays near 6 MiB).
	MaxListTopics = 10_000
)

// ChangeKind says how a topic's assignment changed.
type ChangeKind uint8

// Change kinds. Numbers are stable: they are on the wire.
const (
	ChangeAssigned ChangeKind = 1 // a topic got an owner (new, or assigned again after a revoke)
	ChangeMoved    ChangeKind = 2 // the topic went to another owner, at the next epoch
	ChangeUpdated  ChangeKind = 3 // its partition count grew; same owner, same epoch
	ChangeRevoked  ChangeKind = 4 // the topic lost its owner; Epoch is the tombstone's
)

var changeNames = [...]string{ChangeAssigned: "assigned", ChangeMoved: "moved", ChangeUpdated: "updated", ChangeRevoked: "revoked"}

// Valid reports whether c is one of the ChangeKind constants.
func (c ChangeKind) Valid() bool { return c >= ChangeAssigned && c <= ChangeRevoked }

func (c ChangeKind) String() string {
	if c.Valid() {
		return changeNames[c]
	}
	return "ChangeKind(" + itoa(uint64(c)) + ")"
}

// ShardPosition is a watcher's place in one shard: every change committed
// at a raft index up to Index has been seen, and the first Skip changes
// (by Seq) of index Index+1 (a command that changed several topics, whose
// changes a watcher took only part of). Index NowIndex in a Watch asks for
// no change, only the position the replica is at: a watch from now.
type ShardPosition struct {
	Shard uint64
	Index uint64
	Skip  uint32
}

// NowIndex is the Index of a ShardPosition that means "from now".
const NowIndex = ^uint64(0)

// Watch asks for the assignment changes after Positions (KindWatch): of the
// topic Match when Exact is set, else of every topic starting with Match.
// With none to give, the node holds the request up to WaitMillis (capped by
// its own bound) for one to commit. Answered by WatchEvents.
type Watch struct {
	Match      []byte // a topic (Exact: 1..MaxTopicLen bytes) or a prefix (0..MaxTopicLen)
	Exact      bool
	WaitMillis uint32          // at most MaxWatchWaitMillis
	Positions  []ShardPosition // 1..MaxListEntries, strictly ascending shards
}

// minShardPositionSize is the smallest encoded ShardPosition: three
// one-byte uvarints.
const minShardPositionSize = 3

// AppendWatch appends m's payload.
func AppendWatch(dst []byte, m *Watch) []byte {
	dst = appendBytes(dst, m.Match)
	dst = appendBool(dst, m.Exact)
	dst = appendUvarint(dst, uint64(m.WaitMillis))
	return appendPositions(dst, m.Positions)
}

// DecodeWatch decodes a Watch payload into m, reusing m.Positions. An exact
// watch of an empty topic, no position, or shards out of order are
// ErrMalformed.
func DecodeWatch(b []byte, m *Watch) error {
	r := reader{b: b}
	m.Match = r.bytes(MaxTopicLen)
	m.Exact = r.bool()
	m.WaitMillis = uint32(r.uvarintMax(MaxWatchWaitMillis))
	m.Positions = r.positions(m.Positions)
	if err := r.end(); err != nil {
		m.Positions = m.Positions[:0]
		return err
	}
	if (m.Exact && len(m.Match) == 0) || len(m.Positions) == 0 {
		return ErrMalformed
	}
	return nil
}

// WatchEvent is one change of a WatchEvents.
type WatchEvent struct {
	Shard      uint64
	Index      uint64 // the raft index the change committed at
	Seq        uint32 // its place among the changes of that index
	Change     ChangeKind
	Topic      []byte
	Owner      []byte // empty for ChangeRevoked
	OwnerAddr  []byte // the owner's client address as the answering node knows it
	Epoch      uint64
	Partitions uint32 // 0 for ChangeRevoked
}

// WatchEvents answers Watch (KindWatchEvents). Positions has, for every
// shard of the Watch that the node served, the position to ask from next;
// Events are the changes after the asked positions up to those, in commit
// order within each shard. NotHosted lists the shards of the Watch of
// which the node holds no replica (ask another node); Compacted the shards
// whose asked position is older than the oldest change the node still
// keeps (Index: the oldest position it can serve): the watcher missed
// changes and must list again. Splits lists the shards of the Watch that
// split and whose every change this answer gave up to the split: the
// watch goes on in their halves, from the split's index.
type WatchEvents struct {
	Positions []ShardPosition
	Events    []WatchEvent
	NotHosted []uint64
	Compacted []ShardPosition
	Splits    []ShardSplit
}

// ShardSplit says that Shard split at raft index Index into Low and High,
// whose change logs start there.
type ShardSplit struct {
	Shard, Index, Low, High uint64
}

// minWatchEventSize is the smallest encoded WatchEvent.
const minWatchEventSize = 1 + 1 + 1 + 1 + 2 + 1 + 1 + 1 + 1

// AppendWatchEvents appends m's payload.
func AppendWatchEvents(dst []byte, m *WatchEvents) []byte {
	dst = appendPositions(dst, m.Positions)
	dst = appendUvarint(dst, uint64(len(m.Events)))
	for i := range m.Events {
		e := &m.Events[i]
		dst = appendUvarint(dst, e.Shard)
		dst = appendUvarint(dst, e.Index)
		dst = appendUvarint(dst, uint64(e.Seq))
		dst = append(dst, byte(e.Change))
		dst = appendBytes(dst, e.Topic)
		dst = appendBytes(dst, e.Owner)
		dst = appendBytes(dst, e.OwnerAddr)
		dst = appendUvarint(dst, e.Epoch)
		dst = appendUvarint(dst, uint64(e.Partitions))
	}
	dst = appendUvarint(dst, uint64(len(m.NotHosted)))
	for _, s := range m.NotHosted {
		dst = appendUvarint(dst, s)
	}
	dst = appendPositions(dst, m.Compacted)
	dst = appendUvarint(dst, uint64(len(m.Splits)))
	for _, sp := range m.Splits {
		dst = appendUvarint(dst, sp.Shard)
		dst = appendUvarint(dst, sp.Index)
		dst = appendUvarint(dst, sp.Low)
		dst = appendUvarint(dst, sp.High)
	}
	return dst
}

// DecodeWatchEvents decodes a WatchEvents payload into m, reusing its
// slices. An unknown change kind, an empty topic, or shards out of order in
// Positions, NotHosted or Compacted are ErrMalformed.
func DecodeWatchEvents(b []byte, m *WatchEvents) error {
	r := reader{b: b}
	m.Positions = r.positions(m.Positions)
	n := r.count(MaxWatchEvents, minWatchEventSize)
	m.Events = grow(m.Events[:0], n)
	for i := range m.Events {
		e := &m.Events[i]
		e.Shard = r.uvarint()
		e.Index = r.uvarint()
		e.Seq = r.u32v()
		e.Change = ChangeKind(r.u8())
		e.Topic = r.topic()
		e.Owner = r.bytes(MaxNodeIDLen)
		e.OwnerAddr = r.bytes(MaxAddrLen)
		e.Epoch = r.uvarint()
		e.Partitions = uint32(r.uvarintMax(MaxPartitions))
		if r.err == nil && !e.Change.Valid() {
			r.fail(ErrMalformed)
		}
	}
	nh := r.count(MaxListEntries, 1)
	m.NotHosted = grow(m.NotHosted[:0], nh)
	for i := range m.NotHosted {
		m.NotHosted[i] = r.uvarint()
		if r.err == nil && i > 0 && m.NotHosted[i] <= m.NotHosted[i-1] {
			r.fail(ErrMalformed)
		}
	}
	m.Compacted = r.positions(m.Compacted)
	ns := r.count(MaxListEntries, 4)
	m.Splits = grow(m.Splits[:0], ns)
	for i := range m.Splits {
		sp := &m.Splits[i]
		sp.Shard, sp.Index, sp.Low, sp.High = r.uvarint(), r.uvarint(), r.uvarint(), r.uvarint()
		if r.err == nil && (sp.Low <= sp.Shard || sp.High <= sp.Low || i > 0 && sp.Shard <= m.Splits[i-1].Shard) {
			r.fail(ErrMalformed)
		}
	}
	if err := r.end(); err != nil {
		m.Positions, m.Events, m.NotHosted, m.Compacted, m.Splits = m.Positions[:0], m.Events[:0], m.NotHosted[:0], m.Compacted[:0], m.Splits[:0]
		return err
	}
	return nil
}

// ListTopics asks for a page of the active assignments whose topics start
// with Prefix (KindListTopics), in (shard, topic) order from the cursor
// (Shard, After): the topics of Shard above After (all of them when After
// is empty), then those of the shards after it. The node lists the shards
// it hosts a replica of, from Shard on, each once its replica caught up
// with its leader (a raft read index), and stops at Limit topics or at the
// first shard it hosts none of (or cannot read now). Answered by
// TopicList.
type ListTopics struct {
	Prefix []byte // 0..MaxTopicLen bytes
	Shard  uint64
	After  []byte // 0..MaxTopicLen bytes
	Limit  uint32 // 1..MaxListTopics
}

// AppendListTopics appends m's payload.
func AppendListTopics(dst []byte, m *ListTopics) []byte {
	dst = appendBytes(dst, m.Prefix)
	dst = appendUvarint(dst, m.Shard)
	dst = appendBytes(dst, m.After)
	return appendUvarint(dst, uint64(m.Limit))
}

// DecodeListTopics decodes a ListTopics payload into m. A zero limit is
// ErrMalformed.
func DecodeListTopics(b []byte, m *ListTopics) error {
	r := reader{b: b}
	m.Prefix = r.bytes(MaxTopicLen)
	m.Shard = r.uvarint()
	m.After = r.bytes(MaxTopicLen)
	m.Limit = uint32(r.uvarintMax(MaxListTopics))
	if err := r.end(); err != nil {
		return err
	}
	if m.Limit == 0 {
		return ErrMalformed
	}
	return nil
}

// TopicList answers ListTopics (KindTopicList): the page's assignments in
// (shard, topic) order, the cursor to continue from (NextShard, NextAfter)
// unless Done (no shard is left), and for every shard the page read, the
// position its replica was at: a watch from there misses nothing that
// changed after the listing. A cursor equal to the request's, with no
// topic, means the node hosts no replica of its shard.
type TopicList struct {
	Topics    []Assignment // at most MaxListTopics
	NextShard uint64
	NextAfter []byte
	Done      bool
	Positions []ShardPosition
}

// minAssignmentSize is the smallest encoded Assignment: a one-byte topic,
// two empty strings, the epoch, the partitions and the shard.
const minAssignmentSize = 2 + 1 + 1 + 8 + 1 + 8

// AppendTopicList appends m's payload.
func AppendTopicList(dst []byte, m *TopicList) []byte {
	dst = appendUvarint(dst, uint64(len(m.Topics)))
	for i := range m.Topics {
		dst = AppendAssignment(dst, &m.Topics[i])
	}
	dst = appendUvarint(dst, m.NextShard)
	dst = appendBytes(dst, m.NextAfter)
	dst = appendBool(dst, m.Done)
	return appendPositions(dst, m.Positions)
}

// DecodeTopicList decodes a TopicList payload into m, reusing its slices.
func DecodeTopicList(b []byte, m *TopicList) error {
	r := reader{b: b}
	n := r.count(MaxListTopics, minAssignmentSize)
	m.Topics = grow(m.Topics[:0], n)
	for i := range m.Topics {
		a := &m.Topics[i]
		a.Topic = r.topic()
		a.Owner = r.bytes(MaxNodeIDLen)
		a.OwnerAddr = r.bytes(MaxAddrLen)
		a.Epoch = r.u64()
		a.Partitions = uint32(r.uvarintMax(MaxPartitions))
		a.Shard = r.u64()
	}
	m.NextShard = r.uvarint()
	m.NextAfter = r.bytes(MaxTopicLen)
	m.Done = r.bool()
	m.Positions = r.positions(m.Positions)
	if err := r.end(); err != nil {
		m.Topics, m.Positions = m.Topics[:0], m.Positions[:0]
		return err
	}
	return nil
}

func appendPositions(dst []byte, ps []ShardPosition) []byte {
	dst = appendUvarint(dst, uint64(len(ps)))
	for _, p := range ps {
		dst = appendUvarint(dst, p.Shard)
		dst = appendUvarint(dst, p.Index)
		dst = appendUvarint(dst, uint64(p.Skip))
	}
	return dst
}

// positions reads a list of shard positions in strictly ascending shard
// order into ps.
func (r *reader) positions(ps []ShardPosition) []ShardPosition {
	n := r.count(MaxListEntries, minShardPositionSize)
	ps = grow(ps[:0], n)
	for i := range ps {
		ps[i].Shard = r.uvarint()
		ps[i].Index = r.uvarint()
		ps[i].Skip = r.u32v()
		if r.err == nil && i > 0 && ps[i].Shard <= ps[i-1].Shard {
			r.fail(ErrMalformed)
		}
	}
	return ps
}

package wire

// Ownership leases (docs/leases.md). Once per renewal interval a node sends
// each peer it has business with one LeaseRound: as a topic owner, it asks
// for leases on the shards the peer leads; as a shard leader, it asks the
// peer to vouch that it still follows it. The peer answers with one
// LeaseReply. []byte fields alias the input.
//
// Both questions come in bulk: a Summary stands for every shard the sender
// means, and when the receiver's own state sums to the same Summary the
// answer covers them all in one flag. The per-shard lists are sent only
// while the sender is not sure the summaries agree (its first round after
// something changed), so an idle exchange costs the same whatever the
// number of shards and topics.

// LeaseRound is one node's lease exchange with one peer (KindLeaseRound),
// answered by LeaseReply with the same Seq.
type LeaseRound struct {
	// Seq numbers the sender's rounds; it rises with every round, from a
	// start that differs from one life of the sender to the next (a late
	// reply to an earlier life's round answers none of this life's).
	Seq uint64
	// Requests lists the shards the sender holds topics of and believes the
	// receiver leads, each with the digest of what it holds there.
	Requests []LeaseRequest
	// Vouch lists shards the sender leads, each at its term, of which the
	// receiver hosts a replica.
	Vouch []ShardTerm
	// Released: the sender serves no topic any more (it is leaving), so
	// none of its leases needs to be waited out.
	Released bool
	// Held sums every shard the sender holds topics in and believes the
	// receiver leads: LeaseSummary of (shard, the highest term of its
	// leader the sender has seen, the digest of what it holds there).
	// Zero Count: none.
	Held Summary
	// Led sums every shard the sender leads of which the receiver is a
	// voter: LeaseSummary of (shard, term, 0). Zero Count: none asked.
	Led Summary
}

// Summary stands for a set of shards: how many, and the XOR of one
// LeaseSummary value per shard.
type Summary struct {
	Count  uint64
	Digest uint64
}

// LeaseRequest asks for a lease on one shard. Digest is the XOR of
// meta.TopicDigest(topic, epoch) over the topics the sender holds in the
// shard.
type LeaseRequest struct {
	Shard  uint64
	Digest uint64
}

// ShardTerm names a shard's leadership at a raft term.
type ShardTerm struct {
	Shard uint64
	Term  uint64
}

// LeaseReply answers a LeaseRound (KindLeaseReply).
type LeaseReply struct {
	Seq     uint64
	Grants  []LeaseGrant
	Refused []LeaseRefusal
	// Vouched lists the shards of the round's Vouch whose replica here
	// follows the round's sender at the term it named.
	Vouched []uint64
	// HeldMatched: the round's Held summed to what the receiver's state
	// sums for the sender over the shards it leads. Then Grants and
	// Refused answer for exactly those shards, and HeldGranted says
	// whether every one of them is granted at the term the sender summed
	// (Grants then empty). Otherwise they answer the round's Requests.
	HeldMatched bool
	HeldGranted bool
	// LedMatched: the round's Led summed to the replicas here that follow
	// the sender, at their terms: this node vouches for every one
	// (Vouched then empty).
	LedMatched bool
}

// LeaseGrant is a lease on one shard from its leader at Term, running from
// the moment the holder sent the round. Unless Listed, it covers every
// topic the holder held in the shard when it sent the round, at the epoch
// it held it (the digests matched); if Listed, only the topics of Topics,
// at their epochs: what the leader's state says the holder owns there.
type LeaseGrant struct {
	Shard  uint64
	Term   uint64
	Listed bool
	Topics []TopicEpoch
}

// TopicEpoch is a topic at an epoch.
type TopicEpoch struct {
	Topic []byte
	Epoch uint64
}

// LeaseRefusal says the receiver did not grant a requested shard: it does
// not lead it (Leader and Term are its best knowledge of who does; Leader
// empty when unknown), or it leads it but cannot grant yet (Leader is the
// receiver itself: its leadership is not confirmed or its state not
// current).
type LeaseRefusal struct {
	Shard  uint64
	Leader []byte
	Term   uint64
}

// MaxLeaseTopics bounds the topics listed in one LeaseReply: 1<<20.
const MaxLeaseTopics = 1 << 20

// AppendLeaseRound appends m's payload:
//
//	u64 seq · []{uvarint shard · u64 digest} requests · []{uvarint shard ·
//	uvarint term} vouch · bool released · uvarint held count · u64 held
//	digest · uvarint led count · u64 led digest
func AppendLeaseRound(dst []byte, m *LeaseRound) []byte {
	dst = appendU64(dst, m.Seq)
	dst = appendUvarint(dst, uint64(len(m.Requests)))
	for _, q := range m.Requests {
		dst = appendUvarint(dst, q.Shard)
		dst = appendU64(dst, q.Digest)
	}
	dst = appendUvarint(dst, uint64(len(m.Vouch)))
	for _, v := range m.Vouch {
		dst = appendUvarint(dst, v.Shard)
		dst = appendUvarint(dst, v.Term)
	}
	dst = appendBool(dst, m.Released)
	dst = appendUvarint(dst, m.Held.Count)
	dst = appendU64(dst, m.Held.Digest)
	dst = appendUvarint(dst, m.Led.Count)
	return appendU64(dst, m.Led.Digest)
}

// DecodeLeaseRound decodes a LeaseRound payload into m.
func DecodeLeaseRound(b []byte, m *LeaseRound) error {
	r := reader{b: b}
	m.Seq = r.u64()
	n := r.count(MaxListEntries, 9)
	m.Requests = grow(m.Requests[:0], n)
	for i := range m.Requests {
		m.Requests[i] = LeaseRequest{Shard: r.uvarint(), Digest: r.u64()}
	}
	n = r.count(MaxListEntries, 2)
	m.Vouch = grow(m.Vouch[:0], n)
	for i := range m.Vouch {
		m.Vouch[i] = ShardTerm{Shard: r.uvarint(), Term: r.uvarint()}
	}
	m.Released = r.bool()
	m.Held = Summary{Count: r.uvarint(), Digest: r.u64()}
	m.Led = Summary{Count: r.uvarint(), Digest: r.u64()}
	return r.end()
}

// AppendLeaseReply appends m's payload:
//
//	u64 seq · []{uvarint shard · uvarint term · bool listed ·
//	[]{bytes topic · uvarint epoch}} grants · []{uvarint shard · bytes
//	leader (may be empty) · uvarint term} refused · []uvarint vouched ·
//	u8 flags (1 held matched, 2 held granted, 4 led matched)
func AppendLeaseReply(dst []byte, m *LeaseReply) []byte {
	dst = appendU64(dst, m.Seq)
	dst = appendUvarint(dst, uint64(len(m.Grants)))
	for i := range m.Grants {
		g := &m.Grants[i]
		dst = appendUvarint(dst, g.Shard)
		dst = appendUvarint(dst, g.Term)
		dst = appendBool(dst, g.Listed)
		dst = appendUvarint(dst, uint64(len(g.Topics)))
		for _, t := range g.Topics {
			dst = appendBytes(dst, t.Topic)
			dst = appendUvarint(dst, t.Epoch)
		}
	}
	dst = appendUvarint(dst, uint64(len(m.Refused)))
	for _, f := range m.Refused {
		dst = appendUvarint(dst, f.Shard)
		dst = appendBytes(dst, f.Leader)
		dst = appendUvarint(dst, f.Term)
	}
	dst = appendUvarint(dst, uint64(len(m.Vouched)))
	for _, s := range m.Vouched {
		dst = appendUvarint(dst, s)
	}
	var flags byte
	if m.HeldMatched {
		flags |= replyHeldMatched
	}
	if m.HeldGranted {
		flags |= replyHeldGranted
	}
	if m.LedMatched {
		flags |= replyLedMatched
	}
	return append(dst, flags)
}

const (
	replyHeldMatched = 1 << iota
	replyHeldGranted
	replyLedMatched
	replyFlags = replyHeldMatched | replyHeldGranted | replyLedMatched
)

// DecodeLeaseReply decodes a LeaseReply payload into m. A grant's topics
// alias b. More than MaxLeaseTopics topics in all is ErrTooLarge.
func DecodeLeaseReply(b []byte, m *LeaseReply) error {
	r := reader{b: b}
	m.Seq = r.u64()
	n := r.count(MaxListEntries, 4)
	m.Grants = grow(m.Grants[:0], n)
	topics := 0
	for i := range m.Grants {
		g := &m.Grants[i]
		g.Shard = r.uvarint()
		g.Term = r.uvarint()
		g.Listed = r.bool()
		k := r.count(MaxLeaseTopics-topics, 3)
		topics += k
		g.Topics = grow(g.Topics[:0], k)
		for j := range g.Topics {
			g.Topics[j] = TopicEpoch{Topic: r.topic(), Epoch: r.uvarint()}
		}
		if r.err != nil {
			break
		}
	}
	n = r.count(MaxListEntries, 3)
	m.Refused = grow(m.Refused[:0], n)
	for i := range m.Refused {
		m.Refused[i] = LeaseRefusal{Shard: r.uvarint(), Leader: r.bytes(MaxNodeIDLen), Term: r.uvarint()}
	}
	n = r.count(MaxListEntries, 1)
	m.Vouched = grow(m.Vouched[:0], n)
	for i := range m.Vouched {
		m.Vouched[i] = r.uvarint()
	}
	flags := r.u8()
	if flags&^replyFlags != 0 {
		r.fail(ErrMalformed)
	}
	m.HeldMatched = flags&replyHeldMatched != 0
	m.HeldGranted = flags&replyHeldGranted != 0
	m.LedMatched = flags&replyLedMatched != 0
	return r.end()
}

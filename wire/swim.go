package wire

// SWIM datagrams. A datagram is a header, at most one message (Ping,
// PingReq, Ack, Nack) and a list of piggybacked membership events. The
// full-state exchange (push-pull) is the payload of a KindPushPull TCP
// frame. docs/wire-swim.md gives the byte layout.

// SWIM-specific limits.
const (
	// SwimMagic opens every SWIM datagram ("SW" little-endian), so stray
	// traffic on the port is told apart from a version mismatch.
	SwimMagic uint16 = 0x5753
	// SwimTagSize is the size of the AES-GCM tag that ends a sealed
	// datagram or push-pull payload.
	SwimTagSize = 16
	// SwimMinEventSize is the smallest encoded event (kind, a one-byte
	// node id with its length, two one-byte varints): a count the remaining
	// input cannot hold is refused before any event is read.
	SwimMinEventSize = 5
	// MaxPushPullMembers bounds the members in one push-pull.
	MaxPushPullMembers = MaxListEntries
	// MaxPushPullShards bounds the shard leaders in one push-pull.
	MaxPushPullShards = MaxListEntries
	// MaxPushPullVersions bounds the metadata versions in one push-pull.
	MaxPushPullVersions = 1 << 16
	// MaxPushPullDigests bounds the bucket digests in one push-pull.
	MaxPushPullDigests = 1 << 10
)

// Datagram header flags.
const (
	// SwimFlagSealed: the recipient, key id, salt and sequence number
	// follow the generation, and the body is sealed with AES-GCM (see
	// SwimKeyring).
	SwimFlagSealed uint8 = 1 << 0

	swimKnownFlags = SwimFlagSealed
)

// SwimMsgKind is the message a datagram carries besides its events.
type SwimMsgKind uint8

const (
	SwimNone    SwimMsgKind = 0 // events only (gossip)
	SwimPing    SwimMsgKind = 1 // {seq, target}
	SwimPingReq SwimMsgKind = 2 // {seq, target, addr}: ping target at addr for me
	SwimAck     SwimMsgKind = 3 // {seq}
	SwimNack    SwimMsgKind = 4 // {seq}: an intermediary got no ack in time
	swimMaxMsg              = SwimNack
)

// SwimEventKind is the kind of a piggybacked event.
type SwimEventKind uint8

const (
	SwimAlive           SwimEventKind = 1
	SwimSuspect         SwimEventKind = 2
	SwimDead            SwimEventKind = 3
	SwimLeave           SwimEventKind = 4
	SwimShardLeader     SwimEventKind = 5
	SwimMetadataVersion SwimEventKind = 6
	swimMaxEvent                      = SwimMetadataVersion
)

func (k SwimEventKind) String() string {
	switch k {
	case SwimAlive:
		return "Alive"
	case SwimSuspect:
		return "Suspect"
	case SwimDead:
		return "Dead"
	case SwimLeave:
		return "Leave"
	case SwimShardLeader:
		return "ShardLeader"
	case SwimMetadataVersion:
		return "MetadataVersion"
	}
	return "SwimEventKind(" + itoa(uint64(k)) + ")"
}

// SwimHeader opens every datagram and push-pull payload.
type SwimHeader struct {
	ClusterID  uint64
	Sender     []byte // node id; aliases the input when decoded
	Generation uint64 // the sender's generation
	// Sealed: the fields below follow the generation, and the body (a
	// datagram's message and events, a push-pull's state) is sealed with
	// AES-GCM; the whole header is its additional data (SwimKeyring).
	Sealed bool
	// Recipient is the node id the datagram is for (required in a sealed
	// datagram; empty in a push-pull, whose dialler may not know it).
	Recipient []byte
	// KeyID names the keyring key it is sealed with (SwimKeyID).
	KeyID uint32
	// Salt is drawn at random by the sender once per life: with Sender it
	// picks the sender's subkey, so that two lives never share a nonce.
	Salt uint64
	// Seq rises with every sealed datagram and push-pull of the sender:
	// it is the AES-GCM nonce, and receivers refuse a Seq seen before.
	Seq uint64
}

// SwimMessage is the one message of a datagram; Kind SwimNone means none.
type SwimMessage struct {
	Kind   SwimMsgKind
	Seq    uint64
	Target []byte // Ping, PingReq: the node id meant to answer
	Addr   []byte // PingReq: the target's SWIM address
}

// SwimEvent is one piggybacked event. Which fields are meaningful depends
// on Kind:
//
//	Alive            Node, Generation, Incarnation, SwimAddr, ClientAddr, PeerAddr, Rack, Meta
//	Suspect, Dead    Node, Generation, Incarnation, From (who suspects / declares)
//	Leave            Node, Generation, Incarnation
//	ShardLeader      Shard, Node (the leader), Term
//	MetadataVersion  Node (who has it), MetaKind, Version
//
// The struct is flat so that a slice of them is reused without allocating.
type SwimEvent struct {
	Kind        SwimEventKind
	Node        []byte
	Generation  uint64
	Incarnation uint64
	From        []byte
	SwimAddr    []byte
	ClientAddr  []byte
	PeerAddr    []byte
	Rack        []byte
	Meta        []byte
	Shard       uint64
	Term        uint64
	MetaKind    uint64
	Version     uint64
}

// SwimDatagram is a decoded datagram. Events is filled up to its capacity,
// which the caller sets once (MaxEventsPerDatagram holds any datagram).
type SwimDatagram struct {
	Header SwimHeader
	Msg    SwimMessage
	Events []SwimEvent
}

// AppendSwimHeader appends h and returns the offset in out where the body
// starts: a sealed datagram's body, from there on, is what
// SwimKeyring.Seal encrypts.
func AppendSwimHeader(dst []byte, h *SwimHeader) (out []byte, bodyOff int) {
	dst = appendU16(dst, SwimMagic)
	flags := uint8(0)
	if h.Sealed {
		flags |= SwimFlagSealed
	}
	dst = append(dst, ProtocolVersion, flags)
	dst = appendU64(dst, h.ClusterID)
	dst = appendBytes(dst, h.Sender)
	dst = appendUvarint(dst, h.Generation)
	if h.Sealed {
		dst = appendBytes(dst, h.Recipient)
		dst = appendU32(dst, h.KeyID)
		dst = appendU64(dst, h.Salt)
		dst = appendU64(dst, h.Seq)
	}
	return dst, len(dst)
}

// AppendSwimMessage appends m (a kind byte, then its fields).
func AppendSwimMessage(dst []byte, m *SwimMessage) []byte {
	dst = append(dst, byte(m.Kind))
	switch m.Kind {
	case SwimPing:
		dst = appendUvarint(dst, m.Seq)
		dst = appendBytes(dst, m.Target)
	case SwimPingReq:
		dst = appendUvarint(dst, m.Seq)
		dst = appendBytes(dst, m.Target)
		dst = appendBytes(dst, m.Addr)
	case SwimAck, SwimNack:
		dst = appendUvarint(dst, m.Seq)
	}
	return dst
}

// BeginSwimEvents appends an event count of zero and returns its offset;
// AppendSwimEventWithin then adds already-encoded events under a budget.
func BeginSwimEvents(dst []byte) (out []byte, countOff int) {
	return append(dst, 0), len(dst)
}

// AppendSwimEventWithin appends one encoded event (from AppendSwimEvent)
// if the datagram stays within budget bytes and holds fewer than
// MaxEventsPerDatagram events; it reports whether it did. A sealed
// datagram's caller leaves SwimTagSize bytes of the budget for the tag.
func AppendSwimEventWithin(dst []byte, countOff int, enc []byte, budget int) ([]byte, bool) {
	if countOff < 0 || countOff >= len(dst) || dst[countOff] >= MaxEventsPerDatagram {
		return dst, false
	}
	if len(dst)+len(enc) > budget {
		return dst, false
	}
	dst[countOff]++
	return append(dst, enc...), true
}

// SwimEventCount reports the number of events appended after countOff.
func SwimEventCount(dst []byte, countOff int) int { return int(dst[countOff]) }

// AppendSwimEvent appends one event's encoding.
func AppendSwimEvent(dst []byte, e *SwimEvent) []byte {
	dst = append(dst, byte(e.Kind))
	switch e.Kind {
	case SwimAlive:
		dst = appendBytes(dst, e.Node)
		dst = appendUvarint(dst, e.Generation)
		dst = appendUvarint(dst, e.Incarnation)
		dst = appendBytes(dst, e.SwimAddr)
		dst = appendBytes(dst, e.ClientAddr)
		dst = appendBytes(dst, e.PeerAddr)
		dst = appendBytes(dst, e.Rack)
		dst = appendBytes(dst, e.Meta)
	case SwimSuspect, SwimDead:
		dst = appendBytes(dst, e.Node)
		dst = appendUvarint(dst, e.Generation)
		dst = appendUvarint(dst, e.Incarnation)
		dst = appendBytes(dst, e.From)
	case SwimLeave:
		dst = appendBytes(dst, e.Node)
		dst = appendUvarint(dst, e.Generation)
		dst = appendUvarint(dst, e.Incarnation)
	case SwimShardLeader:
		dst = appendUvarint(dst, e.Shard)
		dst = appendBytes(dst, e.Node)
		dst = appendUvarint(dst, e.Term)
	case SwimMetadataVersion:
		dst = appendBytes(dst, e.Node)
		dst = appendUvarint(dst, e.MetaKind)
		dst = appendUvarint(dst, e.Version)
	}
	return dst
}

// AppendSwimDatagram encodes a whole datagram (header, message, events) in
// one call, for tests and tools; the hot path builds datagrams from the
// parts above. It returns the body offset as AppendSwimHeader does; a
// sealed datagram is then sealed with SwimKeyring.Seal.
func AppendSwimDatagram(dst []byte, d *SwimDatagram) (out []byte, bodyOff int) {
	dst, bodyOff = AppendSwimHeader(dst, &d.Header)
	dst = AppendSwimMessage(dst, &d.Msg)
	dst = append(dst, byte(len(d.Events)))
	for i := range d.Events {
		dst = AppendSwimEvent(dst, &d.Events[i])
	}
	return dst, bodyOff
}

// DecodeSwimHeader decodes the header at the start of b (a datagram of at
// most MaxDatagram bytes, or a push-pull payload of at most MaxFrame) into
// h and returns the offset of the body. Byte fields alias b.
func DecodeSwimHeader(b []byte, h *SwimHeader) (bodyOff int, err error) {
	if len(b) > MaxFrame {
		return 0, ErrTooLarge
	}
	r := reader{b: b}
	if err := decodeSwimHeader(&r, h); err != nil {
		return 0, err
	}
	return r.off, nil
}

// DecodeSwimDatagram decodes an unsealed datagram into d, reusing d.Events
// (its capacity is the most events accepted: more is ErrTooLarge). Byte
// fields alias b. It allocates nothing. A sealed datagram is ErrSealed:
// its body is opened with SwimKeyring.Open and decoded with
// DecodeSwimBody.
func DecodeSwimDatagram(b []byte, d *SwimDatagram) error {
	d.Events = d.Events[:0]
	if len(b) > MaxDatagram {
		return ErrTooLarge
	}
	off, err := DecodeSwimHeader(b, &d.Header)
	if err != nil {
		return err
	}
	if d.Header.Sealed {
		return ErrSealed
	}
	return DecodeSwimBody(b[off:], d)
}

// DecodeSwimBody decodes a datagram's body (its message and events, as
// sent or as opened) into d.Msg and d.Events, as DecodeSwimDatagram does.
func DecodeSwimBody(b []byte, d *SwimDatagram) error {
	d.Events = d.Events[:0]
	if len(b) > MaxDatagram {
		return ErrTooLarge
	}
	r := reader{b: b}
	decodeSwimMessage(&r, &d.Msg)
	// The event count is one byte (BeginSwimEvents patches it in place).
	n := int(r.u8())
	if r.err == nil && n*SwimMinEventSize > r.remaining() {
		return ErrTruncated
	}
	if r.err == nil && n > cap(d.Events) {
		return ErrTooLarge
	}
	for i := 0; i < n && r.err == nil; i++ {
		d.Events = d.Events[:i+1]
		decodeSwimEvent(&r, &d.Events[i])
	}
	if err := r.end(); err != nil {
		d.Events = d.Events[:0]
		return err
	}
	return nil
}

func decodeSwimMessage(r *reader, m *SwimMessage) {
	m.Kind = SwimMsgKind(r.u8())
	m.Seq, m.Target, m.Addr = 0, nil, nil
	switch m.Kind {
	case SwimNone:
	case SwimPing:
		m.Seq = swimUvarint(r)
		m.Target = swimBytes(r, MaxNodeIDLen)
		if r.err == nil && len(m.Target) == 0 {
			r.fail(ErrMalformed)
		}
	case SwimPingReq:
		m.Seq = swimUvarint(r)
		m.Target = swimBytes(r, MaxNodeIDLen)
		m.Addr = swimBytes(r, MaxAddrLen)
		if r.err == nil && (len(m.Target) == 0 || len(m.Addr) == 0) {
			r.fail(ErrMalformed)
		}
	case SwimAck, SwimNack:
		m.Seq = swimUvarint(r)
	default:
		r.fail(ErrUnknownKind)
	}
}

func decodeSwimEvent(r *reader, e *SwimEvent) {
	*e = SwimEvent{Kind: SwimEventKind(r.u8())}
	switch e.Kind {
	case SwimAlive:
		e.Node = swimBytes(r, MaxNodeIDLen)
		e.Generation = swimUvarint(r)
		e.Incarnation = swimUvarint(r)
		e.SwimAddr = swimBytes(r, MaxAddrLen)
		e.ClientAddr = swimBytes(r, MaxAddrLen)
		e.PeerAddr = swimBytes(r, MaxAddrLen)
		e.Rack = swimBytes(r, MaxRackLen)
		e.Meta = swimBytes(r, MaxMetaLen)
		if r.err == nil && len(e.SwimAddr) == 0 {
			r.fail(ErrMalformed)
		}
	case SwimSuspect, SwimDead:
		e.Node = swimBytes(r, MaxNodeIDLen)
		e.Generation = swimUvarint(r)
		e.Incarnation = swimUvarint(r)
		e.From = swimBytes(r, MaxNodeIDLen)
	case SwimLeave:
		e.Node = swimBytes(r, MaxNodeIDLen)
		e.Generation = swimUvarint(r)
		e.Incarnation = swimUvarint(r)
	case SwimShardLeader:
		e.Shard = swimUvarint(r)
		e.Node = swimBytes(r, MaxNodeIDLen)
		e.Term = swimUvarint(r)
	case SwimMetadataVersion:
		e.Node = swimBytes(r, MaxNodeIDLen)
		e.MetaKind = swimUvarint(r)
		e.Version = swimUvarint(r)
	default:
		r.fail(ErrUnknownKind)
		return
	}
	if r.err == nil && len(e.Node) == 0 {
		r.fail(ErrMalformed)
	}
}

// SwimMemberState is a member's state in a push-pull.
type SwimMemberState uint8

const (
	SwimStateAlive   SwimMemberState = 1
	SwimStateSuspect SwimMemberState = 2
	SwimStateDead    SwimMemberState = 3
	SwimStateLeft    SwimMemberState = 4
)

// SwimPushPullMember is one member's full state.
type SwimPushPullMember struct {
	Node        []byte
	Generation  uint64
	Incarnation uint64
	State       SwimMemberState
	SwimAddr    []byte
	ClientAddr  []byte
	PeerAddr    []byte
	Rack        []byte
	Meta        []byte
}

// SwimShardLeaderEntry is one shard's known leader.
type SwimShardLeaderEntry struct {
	Shard  uint64
	Leader []byte
	Term   uint64
}

// SwimVersionEntry is one member's metadata version of one kind.
type SwimVersionEntry struct {
	Node     []byte
	MetaKind uint64
	Version  uint64
}

// SwimPushPull is a node's state, exchanged over TCP at join and
// periodically for anti-entropy (the payload of a KindPushPull frame).
//
// A full one carries all of the sender's state. A Partial one carries
// only the entries of some buckets (each entry falls in the bucket its key
// hashes to), and Digests, when present, sum up the sender's whole state
// bucket by bucket so that the receiver can tell which buckets differ.
type SwimPushPull struct {
	Header   SwimHeader
	Join     bool // the sender is joining (answer even if it is unknown)
	Partial  bool // the lists hold some buckets' entries, not the whole state
	Members  []SwimPushPullMember
	Leaders  []SwimShardLeaderEntry
	Versions []SwimVersionEntry
	Digests  []uint64 // one per bucket, or none
}

const (
	swimPPFlagJoin    = 1
	swimPPFlagPartial = 2
	swimPPFlagDigests = 4
	swimPPFlags       = swimPPFlagJoin | swimPPFlagPartial | swimPPFlagDigests
)

// AppendSwimPushPull appends p's payload and returns the offset of its
// body, as AppendSwimHeader does (a sealed one is then sealed with
// SwimKeyring.Seal).
func AppendSwimPushPull(dst []byte, p *SwimPushPull) (out []byte, bodyOff int) {
	dst, bodyOff = AppendSwimHeader(dst, &p.Header)
	flags := uint8(0)
	if p.Join {
		flags |= swimPPFlagJoin
	}
	if p.Partial {
		flags |= swimPPFlagPartial
	}
	if len(p.Digests) > 0 {
		flags |= swimPPFlagDigests
	}
	dst = append(dst, flags)
	dst = appendUvarint(dst, uint64(len(p.Members)))
	for i := range p.Members {
		m := &p.Members[i]
		dst = appendBytes(dst, m.Node)
		dst = appendUvarint(dst, m.Generation)
		dst = appendUvarint(dst, m.Incarnation)
		dst = append(dst, byte(m.State))
		dst = appendBytes(dst, m.SwimAddr)
		dst = appendBytes(dst, m.ClientAddr)
		dst = appendBytes(dst, m.PeerAddr)
		dst = appendBytes(dst, m.Rack)
		dst = appendBytes(dst, m.Meta)
	}
	dst = appendUvarint(dst, uint64(len(p.Leaders)))
	for i := range p.Leaders {
		l := &p.Leaders[i]
		dst = appendUvarint(dst, l.Shard)
		dst = appendBytes(dst, l.Leader)
		dst = appendUvarint(dst, l.Term)
	}
	dst = appendUvarint(dst, uint64(len(p.Versions)))
	for i := range p.Versions {
		v := &p.Versions[i]
		dst = appendBytes(dst, v.Node)
		dst = appendUvarint(dst, v.MetaKind)
		dst = appendUvarint(dst, v.Version)
	}
	if len(p.Digests) > 0 {
		dst = appendUvarint(dst, uint64(len(p.Digests)))
		for _, d := range p.Digests {
			dst = appendU64(dst, d)
		}
	}
	return dst, bodyOff
}

// DecodeSwimPushPull decodes an unsealed push-pull payload into p, reusing
// its slices (they grow as needed). Byte fields alias b. A sealed one is
// ErrSealed: its body is opened with SwimKeyring.Open and decoded with
// DecodeSwimPushPullBody.
func DecodeSwimPushPull(b []byte, p *SwimPushPull) error {
	p.Members, p.Leaders, p.Versions, p.Digests = p.Members[:0], p.Leaders[:0], p.Versions[:0], p.Digests[:0]
	off, err := DecodeSwimHeader(b, &p.Header)
	if err != nil {
		return err
	}
	if p.Header.Sealed {
		return ErrSealed
	}
	return DecodeSwimPushPullBody(b[off:], p)
}

// DecodeSwimPushPullBody decodes a push-pull's body (as sent or as
// opened) into p's flags, Members, Leaders, Versions and Digests.
func DecodeSwimPushPullBody(b []byte, p *SwimPushPull) error {
	p.Members, p.Leaders, p.Versions, p.Digests = p.Members[:0], p.Leaders[:0], p.Versions[:0], p.Digests[:0]
	if len(b) > MaxFrame {
		return ErrTooLarge
	}
	r := reader{b: b}
	ppf := r.u8()
	if r.err == nil && ppf&^swimPPFlags != 0 {
		return ErrBadFlags
	}
	p.Join, p.Partial = ppf&swimPPFlagJoin != 0, ppf&swimPPFlagPartial != 0
	n := swimCount(&r, MaxPushPullMembers, 9)
	for i := 0; i < n && r.err == nil; i++ {
		p.Members = append(p.Members, SwimPushPullMember{})
		m := &p.Members[len(p.Members)-1]
		m.Node = swimBytes(&r, MaxNodeIDLen)
		m.Generation = swimUvarint(&r)
		m.Incarnation = swimUvarint(&r)
		m.State = SwimMemberState(r.u8())
		m.SwimAddr = swimBytes(&r, MaxAddrLen)
		m.ClientAddr = swimBytes(&r, MaxAddrLen)
		m.PeerAddr = swimBytes(&r, MaxAddrLen)
		m.Rack = swimBytes(&r, MaxRackLen)
		m.Meta = swimBytes(&r, MaxMetaLen)
		if r.err == nil && (len(m.Node) == 0 || len(m.SwimAddr) == 0 || m.State < SwimStateAlive || m.State > SwimStateLeft) {
			r.fail(ErrMalformed)
		}
	}
	n = swimCount(&r, MaxPushPullShards, 3)
	for i := 0; i < n && r.err == nil; i++ {
		p.Leaders = append(p.Leaders, SwimShardLeaderEntry{Shard: swimUvarint(&r), Leader: swimBytes(&r, MaxNodeIDLen), Term: swimUvarint(&r)})
		if r.err == nil && len(p.Leaders[len(p.Leaders)-1].Leader) == 0 {
			r.fail(ErrMalformed)
		}
	}
	n = swimCount(&r, MaxPushPullVersions, 3)
	for i := 0; i < n && r.err == nil; i++ {
		p.Versions = append(p.Versions, SwimVersionEntry{Node: swimBytes(&r, MaxNodeIDLen), MetaKind: swimUvarint(&r), Version: swimUvarint(&r)})
		if r.err == nil && len(p.Versions[len(p.Versions)-1].Node) == 0 {
			r.fail(ErrMalformed)
		}
	}
	if ppf&swimPPFlagDigests != 0 {
		n = swimCount(&r, MaxPushPullDigests, 8)
		if r.err == nil && n == 0 {
			r.fail(ErrMalformed) // the flag says there are some
		}
		for i := 0; i < n && r.err == nil; i++ {
			p.Digests = append(p.Digests, r.u64())
		}
	}
	return r.end()
}

// swimUvarint reads a uvarint and refuses a non-minimal encoding, so that
// every value has one encoding and a decoded datagram re-encodes to the
// bytes it came from (what the tag covers is then unambiguous).
func swimUvarint(r *reader) uint64 {
	start := r.off
	v := r.uvarint()
	if r.err == nil && r.off-start != uvarintLen(v) {
		r.fail(ErrMalformed)
		return 0
	}
	return v
}

// swimBytes is reader.bytes with a minimal length prefix.
func swimBytes(r *reader, max int) []byte {
	n := swimUvarint(r)
	if r.err != nil {
		return nil
	}
	if n > uint64(max) {
		r.fail(ErrTooLarge)
		return nil
	}
	return r.fixed(int(n))
}

// swimCount is reader.count with a minimal encoding.
func swimCount(r *reader, max, minSize int) int {
	v := swimUvarint(r)
	if r.err != nil {
		return 0
	}
	if v > uint64(max) {
		r.fail(ErrTooLarge)
		return 0
	}
	if v > uint64(r.remaining()/minSize) {
		r.fail(ErrTruncated)
		return 0
	}
	return int(v)
}

// decodeSwimHeader reads the header shared by datagrams and push-pull
// payloads.
func decodeSwimHeader(r *reader, h *SwimHeader) error {
	*h = SwimHeader{}
	if r.u16() != SwimMagic {
		if r.err != nil {
			return r.err
		}
		return ErrBadMagic
	}
	if v := r.u8(); r.err == nil && v != ProtocolVersion {
		return ErrVersion
	}
	flags := r.u8()
	if r.err == nil && flags&^swimKnownFlags != 0 {
		return ErrBadFlags
	}
	h.Sealed = flags&SwimFlagSealed != 0
	h.ClusterID = r.u64()
	h.Sender = swimBytes(r, MaxNodeIDLen)
	h.Generation = swimUvarint(r)
	if h.Sealed {
		h.Recipient = swimBytes(r, MaxNodeIDLen)
		h.KeyID = r.u32()
		h.Salt = r.u64()
		h.Seq = r.u64()
		if r.err == nil && r.remaining() < SwimTagSize {
			return ErrTruncated
		}
	}
	if r.err != nil {
		return r.err
	}
	if len(h.Sender) == 0 {
		return ErrMalformed
	}
	return nil
}

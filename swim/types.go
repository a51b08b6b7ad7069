package swim

// State is a member's liveness state.
type State uint8

const (
	StateAlive   State = 1
	StateSuspect State = 2
	StateDead    State = 3
	StateLeft    State = 4
)

func (s State) String() string {
	switch s {
	case StateAlive:
		return "alive"
	case StateSuspect:
		return "suspect"
	case StateDead:
		return "dead"
	case StateLeft:
		return "left"
	}
	return "unknown"
}

// final reports whether nothing in this generation can change s.
func (s State) final() bool { return s == StateDead || s == StateLeft }

// Member is what a node knows about one member.
type Member struct {
	ID          string
	Generation  uint64
	Incarnation uint64
	State       State
	SwimAddr    string
	ClientAddr  string
	PeerAddr    string
	Rack        string
	Meta        []byte
}

// EventKind says what an Event reports.
type EventKind uint8

const (
	// EventJoined: a member not known before (or forgotten) is alive.
	EventJoined EventKind = iota + 1
	// EventUpdated: a member's addresses, rack or metadata changed, or it
	// restarted (new generation) without being seen dead.
	EventUpdated
	// EventSuspect: a member is suspected.
	EventSuspect
	// EventAliveAgain: a suspect refuted, or a dead or left member came
	// back under a new generation.
	EventAliveAgain
	// EventDead: a member was declared dead.
	EventDead
	// EventLeft: a member left gracefully.
	EventLeft
	// EventRejoined: this node heard itself declared dead and took a new
	// generation (Member is this node).
	EventRejoined
	// EventShardLeader: a higher term's leader of a shard.
	EventShardLeader
	// EventMetadataVersion: a member has a newer metadata version of a kind.
	EventMetadataVersion
)

func (k EventKind) String() string {
	return [...]string{"?", "joined", "updated", "suspect", "alive-again", "dead", "left", "rejoined", "shard-leader", "metadata-version"}[min(int(k), 9)]
}

// Event is one output for subscribers.
type Event struct {
	Kind EventKind
	// Member is the member's state after the change (membership events).
	Member Member
	// Prev is the member's state before (Alive-again, Dead, Updated).
	Prev State
	// ShardLeader: Shard, Leader, Term. MetadataVersion: Leader is the
	// member that has it, MetaKind and Version.
	Shard    uint64
	Leader   string
	Term     uint64
	MetaKind uint64
	Version  uint64
}

// Packet is a datagram to send. Data is valid until Advance.
type Packet struct {
	To   string
	Data []byte
}

// PushPullRequest asks the caller to exchange state with Addr over
// TCP: send Payload as a KindPushPull frame, and give the answer's payload
// (or the error) to PushPullDone with the same ID. Payload is the caller's.
type PushPullRequest struct {
	ID      uint64
	Addr    string
	Join    bool
	Payload []byte
}

// Ready is what the node wants done since the last Advance.
type Ready struct {
	Packets   []Packet
	Events    []Event
	PushPulls []PushPullRequest
}

// Stats counts what the core saw and did.
type Stats struct {
	PacketsIn, PacketsOut uint64
	BytesIn, BytesOut     uint64
	Probes                uint64 // direct pings of a probe
	PingReqs              uint64 // ping-reqs sent
	ProbeFailures         uint64 // probes with no ack at the end
	Suspicions            uint64 // members this node suspected itself
	Refutations           uint64 // times this node refuted a suspicion of itself
	Rejoins               uint64 // times this node took a new generation
	DeadDeclared          uint64 // members this node declared dead itself
	PushPulls             uint64 // push-pulls completed (both sides)
	PushPullFailures      uint64
	PushPullsInSync       uint64 // exchanges by digests that found both states equal
	DropMalformed         uint64
	DropClusterID         uint64
	DropAuth              uint64 // unsealed with keys, sealed without, or not opening under any key
	DropReplay            uint64 // sealed input whose sequence number its sender's window took before or left behind
	DropWrongTarget       uint64 // a ping for another node id (a stale address)
	DropSelf              uint64 // a datagram claiming to be from this node
	DropGeneration        uint64 // events naming a generation past MaxGenerationAhead
	DropAck               uint64 // acks and nacks from a member that was not asked
	DropRelay             uint64 // ping-reqs past MaxRelays
	QueueDropped          uint64 // events evicted from a full broadcast queue
}

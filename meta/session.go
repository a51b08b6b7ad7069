package meta

import (
	"errors"
	"fmt"
	"github.com/shoalmq/shoal/internal/mutant"
	"maps"
	"slices"
	"time"
)

// Sessions make client writes exactly-once (the Raft thesis, §6.3). A
// client names each write (Assign, Revoke, UpdatePartition) with its
// session, a random nonzero ID, and a sequence number that a retry repeats.
// The shard keeps, per session, the answers it gave to the sequence
// numbers the client may still retry, in its replicated state: a command
// whose (session, sequence) was applied before is not applied again, and
// gets the first answer, refusals included. So a write forwarded twice,
// proposed twice by a leader that lost track of it, or retried by a client
// after its answer was lost takes effect once.
//
// The bounds:
//   - A session's answers at or below the client's Floor are dropped: the
//     client has promised never to send those again. A retry that still
//     names one gets ErrSessionStale.
//   - A session keeps at most MaxSessionAnswers answers above its floor;
//     past that the oldest goes, and a retry of it gets ErrSessionStale.
//   - A session expires SessionTTL after its last write, by the time the
//     shard leaders stamp on commands (Command.Clock): the leader's
//     monotonic time since it took office, added to the newest stamp it had
//     applied then, so the stamps never run ahead of real time by more than
//     the clocks' rate error. Clients retry a write for client.RetryWindow
//     (one minute) at most, so a retry never meets its expired session
//     unless a copy of it was held inside the cluster for four minutes.
//   - A shard holds at most MaxSessions live sessions; a write from a new
//     session when all are live is refused with ErrTooManySessions (never
//     by evicting a live session, whose retries would then apply twice).
//
// Whether a session has expired depends only on the command's stamp and
// the session's own last stamp, both replicated, so every replica decides
// alike whenever it sweeps.
const (
	// SessionTTL is how long a shard keeps a session after its last write.
	SessionTTL = 5 * time.Minute
	// MaxSessions bounds the live sessions of one shard.
	MaxSessions = 16384
	// MaxSessionAnswers bounds the answers one session keeps in a shard.
	MaxSessionAnswers = 64
)

var (
	// ErrSessionStale: a write names a sequence number whose answer the
	// shard no longer keeps (at or below the client's floor, or dropped
	// for room). It may or may not have been applied; it is not applied
	// now.
	ErrSessionStale = errors.New("meta: write's answer no longer kept (its session moved past it): it may or may not have been applied")
	// ErrOwnerNotLive and ErrOwnerDrained: an Assign named an owner that
	// its leader found not a live member, or drained (Command.Refusal).
	ErrOwnerNotLive = errors.New("meta: owner is not a live member")
	ErrOwnerDrained = errors.New("meta: owner is drained (shoalctl undrain lets it take topics again)")
	// ErrTooManySessions: the shard holds MaxSessions live sessions and
	// the write comes from a new one.
	ErrTooManySessions = errors.New("meta: too many client sessions in the shard")
)

// SessionRef names one write of a client session; the zero value names
// none (the command applies each time it is committed).
type SessionRef struct {
	ID    uint64 // nonzero
	Seq   uint64 // nonzero
	Floor uint64 // < Seq: the client never sends a write at or below it again
}

// errCode is an answer's error, as stored: the sentinels Apply refuses with.
type errCode uint8

const (
	errNone errCode = iota
	errUnknownTopic
	errNoOwner
	errBadPartitions
	errPartitionsConflict
	errEpochExhausted
	errOther
	errOwnerNotLive
	errOwnerDrained
	errCodeEnd
)

var codeErrs = [...]error{errUnknownTopic: ErrUnknownTopic, errNoOwner: ErrNoOwner, errBadPartitions: ErrBadPartitions,
	errPartitionsConflict: ErrPartitionsConflict, errEpochExhausted: ErrEpochExhausted, errOther: ErrBadCommand,
	errOwnerNotLive: ErrOwnerNotLive, errOwnerDrained: ErrOwnerDrained}

func codeOf(err error) errCode {
	if err == nil {
		return errNone
	}
	for c := errUnknownTopic; c < errCodeEnd; c++ {
		if c == errOther {
			continue
		}
		if errors.Is(err, codeErrs[c]) {
			return c
		}
	}
	return errOther
}

// answer is what a shard answered one write of a session.
type answer struct {
	seq        uint64
	code       errCode
	state      TopicState // 0 with an error
	epoch      uint64
	partitions uint32
	owner      string
	prev       string
}

// session is one client session's state in a shard.
type session struct {
	id uint64
	// last is the newest stamp of the session's writes; floor the highest
	// floor they carried; dropped the highest sequence number whose answer
	// was dropped for room (answers keeps those above both, by sequence).
	last, floor, dropped uint64
	answers              []answer
}

func (ss *session) expired(now uint64) bool {
	return now > ss.last && now-ss.last > uint64(SessionTTL)
}

// find returns the answer of seq, if kept.
func (ss *session) find(seq uint64) *answer {
	i, ok := slices.BinarySearchFunc(ss.answers, seq, func(a answer, seq uint64) int {
		switch {
		case a.seq < seq:
			return -1
		case a.seq > seq:
			return 1
		}
		return 0
	})
	if !ok {
		return nil
	}
	return &ss.answers[i]
}

// raiseFloor drops the answers at or below floor.
func (ss *session) raiseFloor(floor uint64) {
	if floor <= ss.floor {
		return
	}
	ss.floor = floor
	i := 0
	for i < len(ss.answers) && ss.answers[i].seq <= floor {
		i++
	}
	if i > 0 {
		n := copy(ss.answers, ss.answers[i:])
		clear(ss.answers[n:])
		ss.answers = ss.answers[:n]
	}
}

// add keeps a's answer, in sequence order, dropping the oldest past
// MaxSessionAnswers.
func (ss *session) add(a answer) {
	i := len(ss.answers)
	for i > 0 && ss.answers[i-1].seq > a.seq {
		i--
	}
	ss.answers = slices.Insert(ss.answers, i, a)
	if len(ss.answers) > MaxSessionAnswers {
		ss.dropped = max(ss.dropped, ss.answers[0].seq)
		n := copy(ss.answers, ss.answers[1:])
		ss.answers[n] = answer{}
		ss.answers = ss.answers[:n]
	}
}

// Clock returns the newest stamp the state has applied (0 before any): a
// new shard leader stamps its commands from there on (see SessionTTL).
func (s *State) Clock() uint64 { return s.clock }

// Sessions returns the number of sessions the shard holds, expired ones
// not yet swept included.
func (s *State) Sessions() int { return len(s.sessions) }

// applySession runs a command of a session: replays the first answer of a
// write seen before, refuses one whose answer is gone, and otherwise
// applies it with apply and keeps its answer. It reports the error to
// return.
func (s *State) applySession(c *Command, res *Result, apply func() error) error {
	ref := c.Session
	s.clock = max(s.clock, c.Clock)
	ss := s.sessions[ref.ID]
	if ss != nil && ss.expired(c.Clock) {
		s.dropSession(ss)
		ss = nil
	}
	if ss == nil {
		if len(s.sessions) >= MaxSessions {
			s.sweepSessions(c.Clock)
		}
		if len(s.sessions) >= MaxSessions {
			return fmt.Errorf("meta: %s %q: %w (%d)", c.Op, c.Topic, ErrTooManySessions, MaxSessions)
		}
		ss = &session{id: ref.ID}
		s.sessions[ref.ID] = ss
	}
	ss.last = max(ss.last, c.Clock)
	s.touchSession(ss.id)
	if found := ss.find(ref.Seq); found != nil && !mutant.On(mutant.SessionDedup) {
		a := *found // raiseFloor moves the answers
		ss.raiseFloor(ref.Floor)
		res.Replayed = true
		if a.code != errNone {
			return fmt.Errorf("meta: %s %q (answered before): %w", c.Op, c.Topic, codeErrs[a.code])
		}
		res.Assignment = Assignment{Topic: string(c.Topic), Owner: a.owner, Previous: a.prev, Epoch: a.epoch, Partitions: a.partitions, State: a.state}
		return nil
	}
	if ref.Seq <= ss.floor || ref.Seq <= ss.dropped {
		ss.raiseFloor(ref.Floor)
		return fmt.Errorf("meta: %s %q: sequence %d: %w", c.Op, c.Topic, ref.Seq, ErrSessionStale)
	}
	ss.raiseFloor(ref.Floor)
	var err error
	switch c.Refusal {
	case RefuseOwnerNotLive:
		err = fmt.Errorf("meta: %s %q: owner %q: %w", c.Op, c.Topic, c.Owner, ErrOwnerNotLive)
	case RefuseOwnerDrained:
		err = fmt.Errorf("meta: %s %q: owner %q: %w", c.Op, c.Topic, c.Owner, ErrOwnerDrained)
	default:
		err = apply()
	}
	res.Session = ref
	a := answer{seq: ref.Seq, code: codeOf(err)}
	if err == nil {
		r := &res.Assignment
		a.state, a.epoch, a.partitions, a.owner, a.prev = r.State, r.Epoch, r.Partitions, s.nodeID([]byte(r.Owner)), s.nodeID([]byte(r.Previous))
	}
	if ss.find(a.seq) == nil {
		ss.add(a)
	}
	return err
}

// sweepSessions drops every session expired at now.
func (s *State) sweepSessions(now uint64) {
	for _, ss := range s.sessions {
		if ss.expired(now) {
			s.dropSession(ss)
		}
	}
}

func (s *State) dropSession(ss *session) {
	delete(s.sessions, ss.id)
	s.touchSession(ss.id)
}

func (s *State) touchSession(id uint64) {
	if s.track {
		s.changedSessions = append(s.changedSessions, id)
	}
}

// DrainSessions calls fn once for every session changed since the last
// drain, in ascending id order, and forgets them. fn then reads the
// session's record with [State.AppendSession]; one it cannot find was
// dropped.
func (s *State) DrainSessions(fn func(id uint64)) {
	slices.Sort(s.changedSessions)
	for _, id := range slices.Compact(s.changedSessions) {
		fn(id)
	}
	s.changedSessions = s.changedSessions[:0]
}

// SessionIDs returns the ids of the sessions the shard holds, in
// ascending order.
func (s *State) SessionIDs() []uint64 {
	return slices.Sorted(maps.Keys(s.sessions))
}

// AppendSession appends the encoding of session id's record to b; ok is
// false when the shard holds no such session.
//
//	last · floor · dropped · count · count × ( seq · u8 code ·
//	    [code 0: u8 state · epoch · partitions · owner · previous owner] )
func (s *State) AppendSession(b []byte, id uint64) (out []byte, ok bool) {
	ss := s.sessions[id]
	if ss == nil {
		return b, false
	}
	return ss.appendBody(b), true
}

func (ss *session) appendBody(b []byte) []byte {
	b = appendUvarint(b, ss.last)
	b = appendUvarint(b, ss.floor)
	b = appendUvarint(b, ss.dropped)
	b = appendUvarint(b, uint64(len(ss.answers)))
	for i := range ss.answers {
		a := &ss.answers[i]
		b = appendUvarint(b, a.seq)
		b = append(b, byte(a.code))
		if a.code == errNone {
			b = append(b, byte(a.state))
			b = appendUvarint(b, a.epoch)
			b = appendUvarint(b, uint64(a.partitions))
			b = appendString(b, a.owner)
			b = appendString(b, a.prev)
		}
	}
	return b
}

// minAnswerSize is the smallest encoded answer: a sequence number and a
// refusal's code.
const minAnswerSize = 2

// readSession decodes a session record body; ids interns node ids.
func readSession(r *reader, id uint64, ids *State) *session {
	ss := &session{id: id, last: r.Uvarint(), floor: r.Uvarint(), dropped: r.Uvarint()}
	n := r.Count(MaxSessionAnswers, minAnswerSize)
	if n > 0 {
		ss.answers = make([]answer, 0, n)
	}
	for i := 0; i < n && r.Err() == nil; i++ {
		a := answer{seq: r.Uvarint(), code: errCode(r.U8())}
		if a.code == errNone {
			a.state = TopicState(r.U8())
			a.epoch = r.Uvarint()
			a.partitions = uint32(r.UvarintMax(MaxPartitions))
			a.owner = ids.nodeID(r.Bytes(MaxNodeIDLen))
			a.prev = ids.nodeID(r.Bytes(MaxNodeIDLen))
		}
		if r.Err() != nil {
			break
		}
		switch {
		case a.code >= errCodeEnd:
			r.Fail(fmt.Errorf("session %x: answer code %d: %w", id, a.code, errDomain))
		case a.seq <= ss.floor || a.seq <= ss.dropped || (i > 0 && a.seq <= ss.answers[i-1].seq):
			r.Fail(fmt.Errorf("session %x: answer %d out of order: %w", id, a.seq, errDomain))
		case a.code == errNone && a.state != Active && a.state != Revoked:
			r.Fail(fmt.Errorf("session %x: answer state %d: %w", id, a.state, errDomain))
		}
		ss.answers = append(ss.answers, a)
	}
	return ss
}

// AddSession adds a session's record from its encoding (as AppendSession
// wrote it). A record that does not decode is an error wrapping
// ErrBadSnapshot; the loader then refuses everything.
func (l *Loader) AddSession(id uint64, value []byte) error {
	if l.err != nil {
		return l.err
	}
	r := newReader(value)
	ss := readSession(&r, id, l.s)
	if err := r.End(); err != nil || id == 0 {
		if err == nil {
			err = errDomain
		}
		l.err = fmt.Errorf("%w: session %x: %w", ErrBadSnapshot, id, err)
		return l.err
	}
	l.s.sessions[id] = ss
	l.s.clock = max(l.s.clock, ss.last)
	return nil
}

// appendSessions appends every session, in ascending id order, to a
// snapshot.
func (s *State) appendSessions(b []byte) []byte {
	ids := make([]uint64, 0, len(s.sessions))
	for id := range s.sessions {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	b = appendUvarint(b, uint64(len(ids)))
	for _, id := range ids {
		b = appendUvarint(b, id)
		b = s.sessions[id].appendBody(b)
	}
	return b
}

// readSessions decodes a snapshot's sessions into s.
func (s *State) readSessions(r *reader) {
	n := r.Count(int(^uint(0)>>1), 5)
	var prev uint64
	for i := 0; i < n && r.Err() == nil; i++ {
		id := r.Uvarint()
		ss := readSession(r, id, s)
		if r.Err() != nil {
			break
		}
		if id == 0 || (i > 0 && id <= prev) {
			r.Fail(fmt.Errorf("session %d: %w", i, errNotSorted))
			break
		}
		prev = id
		s.sessions[id] = ss
		s.clock = max(s.clock, ss.last)
	}
}

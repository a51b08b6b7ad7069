package wire

// Record handoff (node ↔ node): a topic's new owner pulls the records of
// the owner it moved from before it serves, chunk by chunk.

// HandoffStatus is how a node answered a RecordsPull.
type HandoffStatus uint8

const (
	// HandoffOK: Records are the asker's chunk.
	HandoffOK HandoffStatus = 0
	// HandoffNotClosed: the asked node has not closed the topic's epochs
	// below the asker's yet (its Close is on its way): ask again.
	HandoffNotClosed HandoffStatus = 1
)

// RecordsPull asks the previous owner of Topic for its records from
// offset From on, at most MaxBytes of values (KindRecordsPull). Epoch is
// the asker's epoch: the asked node answers only once it has closed every
// epoch below it, so that its log no longer changes. Answered by
// RecordsChunk.
type RecordsPull struct {
	Topic    []byte
	Epoch    uint64
	From     uint64
	MaxBytes uint32
}

// AppendRecordsPull appends m's payload.
func AppendRecordsPull(dst []byte, m *RecordsPull) []byte {
	dst = appendBytes(dst, m.Topic)
	dst = appendU64(dst, m.Epoch)
	dst = appendU64(dst, m.From)
	return appendU32(dst, m.MaxBytes)
}

// DecodeRecordsPull decodes a RecordsPull payload into m.
func DecodeRecordsPull(b []byte, m *RecordsPull) error {
	r := reader{b: b}
	m.Topic = r.topic()
	m.Epoch = r.u64()
	m.From = r.u64()
	m.MaxBytes = r.u32()
	return r.end()
}

// RecordsChunk answers a RecordsPull (KindRecordsChunk): records in
// ascending offsets, with their epochs, Next the offset to pull from next,
// and End the asked node's high watermark: the handoff is complete once
// Next reaches End. The chunk that completes it carries the topic's
// producer sessions too (Producers), so that a retried produce is still
// answered once, not appended again, at the new owner.
type RecordsChunk struct {
	Topic     []byte
	Status    HandoffStatus
	Records   []Record // at most MaxRecordsPerProduce
	Next      uint64
	End       uint64
	Producers []Producer // ascending IDs, at most MaxProducers
}

// AppendRecordsChunk appends m's payload.
func AppendRecordsChunk(dst []byte, m *RecordsChunk) []byte {
	dst = appendBytes(dst, m.Topic)
	dst = append(dst, byte(m.Status))
	dst = appendU64(dst, m.Next)
	dst = appendU64(dst, m.End)
	dst = appendRecords(dst, m.Records)
	return appendProducers(dst, m.Producers)
}

// DecodeRecordsChunk decodes a RecordsChunk payload into m, reusing
// m.Records and m.Producers.
func DecodeRecordsChunk(b []byte, m *RecordsChunk) error {
	r := reader{b: b}
	m.Topic = r.topic()
	m.Status = HandoffStatus(r.u8())
	m.Next = r.u64()
	m.End = r.u64()
	m.Records = r.records(m.Records)
	m.Producers = r.producers(m.Producers)
	if err := r.end(); err != nil {
		m.Records = m.Records[:0]
		m.Producers = m.Producers[:0]
		return err
	}
	if m.Status > HandoffNotClosed {
		return ErrMalformed
	}
	return nil
}

// Bounds of the producer state a topic's owner keeps (and a RecordsChunk
// carries).
const (
	// MaxProducers bounds the producer sessions kept per topic: 1,024.
	// The least recently used one is dropped to make room for another.
	MaxProducers = 1024
	// MaxProducerAnswers bounds the answers kept per producer session
	// and topic: 64 produces of one session in flight at once to one
	// topic. The lowest is dropped to make room for another.
	MaxProducerAnswers = 64
)

// Producer is the state a topic's owner keeps of one producer session
// (Session.ID) that produced to the topic: the answers to its produces it
// may still be asked again for, those whose Seq is above Floor.
type Producer struct {
	ID uint64 // nonzero
	// Floor is the highest Session.Floor the session sent: it never sends
	// a Seq at or below it again.
	Floor uint64
	// Forgot: answers with a Seq at or below it (and above Floor) may
	// have been dropped to stay within MaxProducerAnswers (0: none was).
	Forgot uint64
	// Used is the topic's high watermark when the session last produced,
	// which orders sessions from least to most recently used.
	Used    uint64
	Answers []ProducerAnswer // ascending Seq, each above Floor; at most MaxProducerAnswers
}

// ProducerAnswer is the answer a produce of a session got: its records,
// Count of them, were appended from Offset on at Epoch.
type ProducerAnswer struct {
	Seq    uint64 // nonzero
	Epoch  uint64
	Offset uint64
	Count  uint32 // 1..MaxRecordsPerProduce
}

// appendProducers appends a producer list: uvarint count · {u64 id ·
// uvarint floor · uvarint forgot · u64 used · uvarint count · {uvarint seq ·
// uvarint epoch · u64 offset · uvarint count}}.
func appendProducers(dst []byte, ps []Producer) []byte {
	dst = appendUvarint(dst, uint64(len(ps)))
	for i := range ps {
		p := &ps[i]
		dst = appendU64(dst, p.ID)
		dst = appendUvarint(dst, p.Floor)
		dst = appendUvarint(dst, p.Forgot)
		dst = appendU64(dst, p.Used)
		dst = appendUvarint(dst, uint64(len(p.Answers)))
		for _, a := range p.Answers {
			dst = appendUvarint(dst, a.Seq)
			dst = appendUvarint(dst, a.Epoch)
			dst = appendU64(dst, a.Offset)
			dst = appendUvarint(dst, uint64(a.Count))
		}
	}
	return dst
}

// producers reads a producer list (appendProducers) into ps[:0]. IDs must
// ascend and be nonzero; each session's answers must ascend in Seq above
// its Floor and name 1..MaxRecordsPerProduce records.
func (r *reader) producers(ps []Producer) []Producer {
	n := r.count(MaxProducers, 19)
	ps = grow(ps[:0], n)
	for i := range ps {
		p := &ps[i]
		p.ID = r.u64()
		p.Floor = r.uvarint()
		p.Forgot = r.uvarint()
		p.Used = r.u64()
		p.Answers = grow(p.Answers[:0], r.count(MaxProducerAnswers, 11))
		if r.err == nil && (p.ID == 0 || (i > 0 && p.ID <= ps[i-1].ID)) {
			r.fail(ErrMalformed)
		}
		last := p.Floor
		for j := range p.Answers {
			a := &p.Answers[j]
			a.Seq = r.uvarint()
			a.Epoch = r.uvarint()
			a.Offset = r.u64()
			a.Count = uint32(r.uvarintMax(MaxRecordsPerProduce))
			if r.err == nil && (a.Seq <= last || a.Count == 0) {
				r.fail(ErrMalformed)
			}
			last = a.Seq
		}
	}
	return ps
}

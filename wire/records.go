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
// Next reaches End.
type RecordsChunk struct {
	Topic   []byte
	Status  HandoffStatus
	Records []Record // at most MaxRecordsPerProduce
	Next    uint64
	End     uint64
}

// AppendRecordsChunk appends m's payload.
func AppendRecordsChunk(dst []byte, m *RecordsChunk) []byte {
	dst = appendBytes(dst, m.Topic)
	dst = append(dst, byte(m.Status))
	dst = appendU64(dst, m.Next)
	dst = appendU64(dst, m.End)
	return appendRecords(dst, m.Records)
}

// DecodeRecordsChunk decodes a RecordsChunk payload into m, reusing
// m.Records.
func DecodeRecordsChunk(b []byte, m *RecordsChunk) error {
	r := reader{b: b}
	m.Topic = r.topic()
	m.Status = HandoffStatus(r.u8())
	m.Next = r.u64()
	m.End = r.u64()
	m.Records = r.records(m.Records)
	if err := r.end(); err != nil {
		m.Records = m.Records[:0]
		return err
	}
	if m.Status > HandoffNotClosed {
		return ErrMalformed
	}
	return nil
}

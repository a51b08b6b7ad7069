package wire

import (
	"testing"

	"go.etcd.io/raft/v3/raftpb"
)

func BenchmarkHeaderDecode(b *testing.B) {
	buf := AppendHeader(nil, &Header{Version: ProtocolVersion, Kind: KindProduce, Length: 4096, RequestID: 77})
	var h Header
	b.SetBytes(HeaderSize)
	b.ReportAllocs()
	for b.Loop() {
		if err := DecodeHeader(buf, &h); err != nil {
			b.Fatal(err)
		}
	}
}

// benchRaftBatch is a steady replication round: 64 MsgApp messages (one per
// shard) of 4 entries of 128 bytes each.
func benchRaftBatch() *RaftBatch {
	m := &RaftBatch{}
	data := make([]byte, 128)
	for i := range 64 {
		m.Messages = append(m.Messages, ShardMessage{Shard: uint64(i * 17)})
		msg := &m.Messages[i].Msg
		*msg = raftpb.Message{Type: raftpb.MsgApp, To: 2, From: 1, Term: 7, LogTerm: 7, Index: uint64(100_000 + i), Commit: uint64(100_000 + i)}
		for j := range 4 {
			msg.Entries = append(msg.Entries, raftpb.Entry{Term: 7, Index: uint64(100_001 + i + j), Type: raftpb.EntryNormal, Data: data})
		}
	}
	return m
}

func BenchmarkRaftBatchEncode(b *testing.B) {
	m := benchRaftBatch()
	for _, c := range []struct {
		name string
		enc  func([]byte, *RaftBatch) []byte
	}{{"hand", AppendRaftBatch}, {"proto", appendRaftBatchProto}} {
		b.Run(c.name, func(b *testing.B) {
			buf := c.enc(nil, m)
			b.SetBytes(int64(len(buf)))
			b.ReportAllocs()
			for b.Loop() {
				buf = c.enc(buf[:0], m)
			}
		})
	}
}

func BenchmarkRaftBatchDecode(b *testing.B) {
	m := benchRaftBatch()
	for _, c := range []struct {
		name string
		enc  func([]byte, *RaftBatch) []byte
		dec  func([]byte, *RaftBatch) error
	}{{"hand", AppendRaftBatch, DecodeRaftBatch}, {"hand-reuse", AppendRaftBatch, DecodeRaftBatchReuse}, {"proto", appendRaftBatchProto, decodeRaftBatchProto}} {
		b.Run(c.name, func(b *testing.B) {
			buf := c.enc(nil, m)
			var got RaftBatch
			b.SetBytes(int64(len(buf)))
			b.ReportAllocs()
			for b.Loop() {
				if err := c.dec(buf, &got); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func benchProduce() *Produce {
	m := &Produce{Topic: []byte("orders.eu-west.v2"), Epoch: 12}
	rec := make([]byte, 100)
	for range 100 {
		m.Records = append(m.Records, rec)
	}
	return m
}

func BenchmarkProduceEncode(b *testing.B) {
	m := benchProduce()
	buf := AppendProduce(nil, m)
	b.SetBytes(int64(len(buf)))
	b.ReportAllocs()
	for b.Loop() {
		buf = AppendProduce(buf[:0], m)
	}
}

func BenchmarkProduceDecode(b *testing.B) {
	buf := AppendProduce(nil, benchProduce())
	var m Produce
	b.SetBytes(int64(len(buf)))
	b.ReportAllocs()
	for b.Loop() {
		if err := DecodeProduce(buf, &m); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkErrorEncode(b *testing.B) {
	m := &Error{Code: CodeNotLeader, Message: []byte("not the leader of shard 77"), Shard: 77, NodeID: []byte("n2"), Addr: []byte("127.0.0.1:7102")}
	buf := AppendError(nil, m)
	b.ReportAllocs()
	for b.Loop() {
		buf = AppendError(buf[:0], m)
	}
}

func BenchmarkErrorDecode(b *testing.B) {
	buf := AppendError(nil, &Error{Code: CodeNotLeader, Message: []byte("not the leader of shard 77"), Shard: 77, NodeID: []byte("n2"), Addr: []byte("127.0.0.1:7102")})
	var m Error
	b.ReportAllocs()
	for b.Loop() {
		if err := DecodeError(buf, &m); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkAssignmentEncode(b *testing.B) {
	m := &Assignment{Topic: []byte("orders.eu-west.v2"), Owner: []byte("n2"), OwnerAddr: []byte("127.0.0.1:7102"), Epoch: 3, Partitions: 12, Shard: 977}
	buf := AppendAssignment(nil, m)
	b.ReportAllocs()
	for b.Loop() {
		buf = AppendAssignment(buf[:0], m)
	}
}

func BenchmarkAssignmentDecode(b *testing.B) {
	buf := AppendAssignment(nil, &Assignment{Topic: []byte("orders.eu-west.v2"), Owner: []byte("n2"), OwnerAddr: []byte("127.0.0.1:7102"), Epoch: 3, Partitions: 12, Shard: 977})
	var m Assignment
	b.ReportAllocs()
	for b.Loop() {
		if err := DecodeAssignment(buf, &m); err != nil {
			b.Fatal(err)
		}
	}
}

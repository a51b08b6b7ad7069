package sim

import "github.com/shoalmq/shoal/wire"

// traffic is what a host sent: peer frames by class, SWIM datagrams and
// push-pulls.
type traffic struct {
	frames, frameBytes       [numClasses]uint64
	datagrams, datagramBytes uint64
	pushPulls, pushPullBytes uint64
}

// Classes of peer frames.
const (
	classRaft = iota
	classLease
	classMetadata
	classOwnership
	classForward
	classOther
	numClasses
)

var classNames = [numClasses]string{"raft", "lease", "metadata", "ownership", "forward", "other"}

func classOf(k wire.Kind) int {
	switch k {
	case wire.KindRaftBatch, wire.KindSnapshotChunk, wire.KindSnapshotAck:
		return classRaft
	case wire.KindLeaseRound, wire.KindLeaseReply:
		return classLease
	case wire.KindMetadataPull, wire.KindMetadataPush:
		return classMetadata
	case wire.KindOpenTopic, wire.KindCloseTopic, wire.KindTopicAck:
		return classOwnership
	case wire.KindForward, wire.KindForwardReply:
		return classForward
	}
	return classOther
}

func (t *traffic) frame(k wire.Kind, n int) {
	c := classOf(k)
	t.frames[c]++
	t.frameBytes[c] += uint64(n)
}

func (t *traffic) msgs() uint64 {
	n := t.datagrams + t.pushPulls
	for _, f := range t.frames {
		n += f
	}
	return n
}

func (t *traffic) bytes() uint64 {
	n := t.datagramBytes + t.pushPullBytes
	for _, b := range t.frameBytes {
		n += b
	}
	return n
}

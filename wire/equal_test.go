package wire

import "bytes"

func equalError(a, b *Error) bool {
	return a.Code == b.Code && bytes.Equal(a.Message, b.Message) && a.Shard == b.Shard && a.Epoch == b.Epoch &&
		bytes.Equal(a.NodeID, b.NodeID) && bytes.Equal(a.Addr, b.Addr) && a.RetryAfter == b.RetryAfter
}

package security

import (
	"fmt"

	"github.com/shoalmq/shoal/wire"
)

// What an authenticated client may make a node spend. MaxRequests bounds
// the requests being worked on at once by count; MaxRequestBytes bounds by
// bytes those not yet answered, which outlive their handler while raft or
// another node answers them, since a request is copied off the event loop
// and, compressed, decompressed up to wire.MaxFrame: 16,384 requests of
// 16 MiB would be 256 GiB (serve.Admission holds requests to both).
// MaxFetchBytes caps what one Fetch returns, whatever it asks.

// Defaults and bounds of the request limits.
const (
	// DefaultMaxRequestBytes is Limits.MaxRequestBytes' default: 256 MiB.
	DefaultMaxRequestBytes = 256 << 20
	// MinRequestBytes is the smallest Limits.MaxRequestBytes: the cost of
	// the largest single request (a frame of wire.MaxFrame bytes that
	// decompresses to as many), so that every request can be served.
	MinRequestBytes = wire.HeaderSize + 2*wire.MaxFrame
	// DefaultMaxFetchBytes is Limits.MaxFetchBytes' default: 1 MiB.
	DefaultMaxFetchBytes = 1 << 20
	// MaxFetchBytesLimit bounds Limits.MaxFetchBytes: an answer of that
	// many record bytes, plus the one record a Fetch always gets and the
	// records' framing, stays within wire.MaxFrame.
	MaxFetchBytesLimit = wire.MaxFrame / 2

	// DefaultChangeLogLen is Limits.ChangeLogLen's default: 1,024 changes
	// per shard (about 100 KiB of memory for a shard whose log is full).
	DefaultChangeLogLen = 1024
	// MaxChangeLogLen bounds Limits.ChangeLogLen: 65,536.
	MaxChangeLogLen = 1 << 16
	// DefaultMaxWatchers is Limits.MaxWatchers' default: 4,096 watches
	// held open at once.
	DefaultMaxWatchers = 4096
)

// Limits are the limits of a node's Config that bound what a client may
// make it keep: the bytes of the requests not yet answered, the record
// bytes of one Fetch, each shard's change log and the watches held. Zero
// fields take the defaults above.
type Limits struct {
	MaxRequestBytes int64
	MaxFetchBytes   int
	ChangeLogLen    int
	MaxWatchers     int
}

// Fill checks the limits and sets their defaults.
func (l *Limits) Fill() error {
	if l.MaxRequestBytes == 0 {
		l.MaxRequestBytes = DefaultMaxRequestBytes
	}
	if l.MaxRequestBytes < MinRequestBytes {
		return fmt.Errorf("max request bytes %d below %d (one largest request)", l.MaxRequestBytes, MinRequestBytes)
	}
	if l.MaxFetchBytes == 0 {
		l.MaxFetchBytes = DefaultMaxFetchBytes
	}
	if l.ChangeLogLen == 0 {
		l.ChangeLogLen = DefaultChangeLogLen
	}
	if l.ChangeLogLen < 1 || l.ChangeLogLen > MaxChangeLogLen {
		return fmt.Errorf("change log length %d not in 1..%d", l.ChangeLogLen, MaxChangeLogLen)
	}
	if l.MaxWatchers == 0 {
		l.MaxWatchers = DefaultMaxWatchers
	}
	if l.MaxWatchers < 0 {
		return fmt.Errorf("max watchers %d is negative", l.MaxWatchers)
	}
	if l.MaxFetchBytes < 1 || l.MaxFetchBytes > MaxFetchBytesLimit {
		return fmt.Errorf("max fetch bytes %d not in 1..%d", l.MaxFetchBytes, MaxFetchBytesLimit)
	}
	return nil
}

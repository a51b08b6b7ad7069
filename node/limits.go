package node

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
	// DefaultMaxRequestBytes is Config.MaxRequestBytes' default: 256 MiB.
	DefaultMaxRequestBytes = 256 << 20
	// MinRequestBytes is the smallest Config.MaxRequestBytes: the cost of
	// the largest single request (a frame of wire.MaxFrame bytes that
	// decompresses to as many), so that every request can be served.
	MinRequestBytes = wire.HeaderSize + 2*wire.MaxFrame
	// DefaultMaxFetchBytes is Config.MaxFetchBytes' default: 1 MiB.
	DefaultMaxFetchBytes = 1 << 20
	// MaxFetchBytesLimit bounds Config.MaxFetchBytes: an answer of that
	// many record bytes, plus the one record a Fetch always gets and the
	// records' framing, stays within wire.MaxFrame.
	MaxFetchBytesLimit = wire.MaxFrame / 2

	// DefaultChangeLogLen is Config.ChangeLogLen's default: 1,024 changes
	// per shard (about 100 KiB of memory for a shard whose log is full).
	DefaultChangeLogLen = 1024
	// MaxChangeLogLen bounds Config.ChangeLogLen: 65,536.
	MaxChangeLogLen = 1 << 16
	// DefaultMaxWatchers is Config.MaxWatchers' default: 4,096 watches held
	// open at once.
	DefaultMaxWatchers = 4096
)

// fillLimits checks the request limits and sets their defaults.
func (c *Config) fillLimits() error {
	if c.MaxRequestBytes == 0 {
		c.MaxRequestBytes = DefaultMaxRequestBytes
	}
	if c.MaxRequestBytes < MinRequestBytes {
		return fmt.Errorf("%w: max request bytes %d below %d (one largest request)", ErrConfig, c.MaxRequestBytes, MinRequestBytes)
	}
	if c.MaxFetchBytes == 0 {
		c.MaxFetchBytes = DefaultMaxFetchBytes
	}
	if c.ChangeLogLen == 0 {
		c.ChangeLogLen = DefaultChangeLogLen
	}
	if c.ChangeLogLen < 1 || c.ChangeLogLen > MaxChangeLogLen {
		return fmt.Errorf("%w: change log length %d not in 1..%d", ErrConfig, c.ChangeLogLen, MaxChangeLogLen)
	}
	if c.MaxWatchers == 0 {
		c.MaxWatchers = DefaultMaxWatchers
	}
	if c.MaxWatchers < 0 {
		return fmt.Errorf("%w: max watchers %d is negative", ErrConfig, c.MaxWatchers)
	}
	if c.MaxFetchBytes < 1 || c.MaxFetchBytes > MaxFetchBytesLimit {
		return fmt.Errorf("%w: max fetch bytes %d not in 1..%d", ErrConfig, c.MaxFetchBytes, MaxFetchBytesLimit)
	}
	return nil
}

package client

import (
	"context"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/shoalmq/shoal/wire"
)

// Following routes (Config.FollowRoutes): the client watches every change
// of the cluster's assignments and keeps the routes it has cached up to
// date from them, so that when an owner dies and its topics move, a data
// request finds the new owner in the cache, at most one watch poll after
// the move committed, instead of looking each topic up again. Only routes
// already cached are updated (router.Cache.Refresh): the cache stays the
// client's working set. The watch is a hint: a route is fenced by its
// epoch as ever, and a request whose route the watch has not moved yet
// falls back to a lookup after followPatience.

const (
	// followPoll is how often a request whose cached owner could not be
	// dialled a moment ago reads the cache again while the watch follows.
	followPoll = 25 * time.Millisecond
	// followPatience bounds that wait: after it, the request looks its
	// topic up, as a client that does not follow does at once.
	followPatience = 2 * time.Second
)

// follower is the state of the route watch.
type follower struct {
	// healthy is set while the watch is established and its last poll
	// did not fail.
	healthy atomic.Bool
	// changes counts the changes taken; refreshed, the cached routes they
	// updated.
	changes, refreshed atomic.Uint64
	done               sync.WaitGroup
}

// FollowStats says what the route watch did.
type FollowStats struct {
	Following bool   // the watch is established
	Changes   uint64 // changes taken from the watch
	Refreshed uint64 // cached routes they moved
}

// FollowStats returns what the route watch did (zero without
// Config.FollowRoutes).
func (c *Client) FollowStats() FollowStats {
	if c.follow == nil {
		return FollowStats{}
	}
	return FollowStats{Following: c.follow.healthy.Load(), Changes: c.follow.changes.Load(), Refreshed: c.follow.refreshed.Load()}
}

// startFollowing runs the route watch until the client closes.
func (c *Client) startFollowing() {
	c.follow = &follower{}
	c.follow.done.Go(func() { c.followLoop(c.pool.closing) })
}

// followLoop watches every change from now, again from now after each
// failure (after a backoff): a change missed in between leaves a stale
// route, which the next request's epoch fences as without the watch.
func (c *Client) followLoop(ctx context.Context) {
	f := c.follow
	for fails := 0; ctx.Err() == nil; {
		w, err := c.Watch(ctx, WatchOptions{})
		if err != nil {
			f.healthy.Store(false)
			c.log.Debug("client: route watch", "err", err)
			_ = c.sleep(ctx, c.backoff(min(fails, 30), err))
			fails++
			continue
		}
		fails = 0
		f.healthy.Store(true)
		for {
			ch, err := w.Next(ctx)
			if err != nil {
				f.healthy.Store(false)
				c.log.Debug("client: route watch", "err", err)
				break
			}
			f.changes.Add(1)
			if c.applyChange(&ch) {
				f.refreshed.Add(1)
			}
		}
	}
}

// applyChange brings the cached route of ch's topic up to ch, and reports
// whether it changed it.
func (c *Client) applyChange(ch *Change) bool {
	topic := []byte(ch.Topic)
	if ch.Change == wire.ChangeRevoked {
		return c.cache.Invalidate(topic, ch.Epoch)
	}
	if ch.Owner == "" || ValidateAddr(ch.OwnerAddr) != nil {
		return false
	}
	return c.cache.Refresh(topic, ch.Owner, ch.OwnerAddr, ch.Epoch, ch.Partitions)
}

// trustWatch reports whether a data request may leave its cached route to
// the route watch rather than look its topic up: the watch is
// established, and the request has not relied on it for followPatience
// yet (*since: when it first did, set here).
func (c *Client) trustWatch(since *time.Time) bool {
	if c.follow == nil || !c.follow.healthy.Load() {
		return false
	}
	if since.IsZero() {
		*since = time.Now()
	}
	return time.Since(*since) < followPatience
}

// followWait waits one followPoll, jittered, for the watch to move a
// route.
func (c *Client) followWait(ctx context.Context) error {
	return c.sleep(ctx, followPoll/2+rand.N(followPoll))
}

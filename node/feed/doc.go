// Package feed is what a program that embeds a node learns of the topics
// the node holds: the ownership events, and the Guard it checks before it
// acknowledges a write of its own.
//
// # What it owns
//
//   - The events (Event: Acquired, Released and the reason of a release)
//     and their feed (Feed): the holdings as the last event left them,
//     each topic's events not yet read, in order, and the turns the topics
//     take. Pushing never blocks: a backlog that grows past two events
//     folds into the net change from what the reader was last told (the
//     Released of that epoch, then the Acquired of the epoch held now),
//     and the folds are counted. A feed is off until Start: a node nobody
//     embeds keeps no second copy of its holdings. Pump hands the events
//     to the reader until it is told to stop, then closes the channel.
//   - The Guard: the lease check of a write at an epoch, with the refusal
//     (NotServingError) in words.
//
// # What it may touch
//
// It is told the node's holdings (Start, Held, Dropped) and reads the
// lease check through Leases. One lock guards the feed's state; the
// channel's reader is never waited for under it. It starts no goroutine
// of its own: the node runs Pump on one.
package feed

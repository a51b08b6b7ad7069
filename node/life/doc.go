// Package life is a node's life cycle and the work it spawns: a Cycle is
// begun once (Start, or NewDriven with its caller's runtime) and closed
// once, and between the two it runs what the node hands it.
//
// # What it owns
//
//   - The life cycle: Begin starts the life of a started node or of a
//     driven one, once, and never after Close; Close says the node is
//     closing (from then on nothing is spawned and no request admitted),
//     Cancel stops what waits on Done, and Wait waits for every goroutine
//     the Cycle started.
//   - Spawned work (Spawn): on a driven node handed to its caller (the
//     runtime's Go), who chooses when it runs; on a started node run by a
//     worker, a goroutine that takes more work while it is busy and ends
//     once idle for a while or when the node stops. A worker keeps the
//     stack its work grew (a request's path through the store is deep),
//     which a goroutine for each piece of work would grow again every
//     time.
//   - The rest of a piece of work (Resume): at once on a started node; on
//     a driven one as its caller chooses (the runtime's Yield), who may
//     pause or crash the node in between; at once again on a closing one.
//   - The gate of work that must not start once the node closes (Enter,
//     Exit): the admission of a request, which Close waits for.
//
// # What it may touch
//
// Nothing of the node: it is handed functions and runs them. One
// read-write lock guards the life cycle, held for reading by Spawn,
// Resume's look at it and between Enter and Exit, and for writing by
// Begin and Close; no work runs under it on a started node, and on a
// driven one only the caller's Go, which must not call back into the
// Cycle.
package life

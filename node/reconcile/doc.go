// Package reconcile is a node's local controller of the cluster's shape:
// which changes the raft groups it leads need to match the ring, whose
// topics move off their owners, which replicas it hosts are strays, when
// the cluster is born, and the operators' marks that shape the ring
// (drained and removed nodes). Every node runs one; each shard leader is
// the controller of its slice, and differing views cost time, not safety:
// only committed raft configuration changes count.
//
// # Replicas
//
// Each pass of the shard manager (Controller.Manage) compares, in every
// shard this node leads, the group's configuration with the ring's desired
// replicas (router.Placement over the live members; drained ones lead
// nothing) and returns at most one Step per shard, at most
// Config.MaxConfChanges per pass: a learner promoted, or removed if the
// ring no longer wants it; a desired live member added as a learner; the
// voter of a node removed for good removed at once; a voter the ring does
// not want removed once the group has more voters than the replication
// factor (this node hands its own leadership over first); then the
// leadership handed to the preferred replica, unless an operator moved it
// here under this placement (Pin) or this node is moving topics in the
// shard (a reassignment in flight, an open it owes not sent: the next
// leader would hold those back again for its own new-leader wait). A pass
// runs only on a settled view (no suspect, the live set unchanged for five
// intervals); a pass that found nothing to do is not repeated while the
// view and the replicas' leaders and configurations stay (but once in ten).
// The groups of a node given a replica are woken every pass for a while,
// so that a quiesced leader catches it up.
//
// # Owners
//
// A look at the owners (Controller.Owners) finds, in each shard this node
// leads, the owners whose topics move to live members that are not
// drained: those gone (SWIM declared them dead or left, or knows nothing of
// them once this node has been ready for a while), drained, or silent (no
// lease asked of this leader on the shard, and no lease round from them,
// for three leases: a one-way partition SWIM does not see). A look is due
// at each new view, every fourth interval, and as soon as a peer's rounds
// stop; one that would find what the last found, nothing, is left out.
//
// # Strays and birth
//
// strays.go says how a replica the ring no longer places here is found,
// confirmed with its shard's leader and dropped; birth.go how a fresh
// cluster is born once Config.BootstrapExpect members are live, or a node
// joins one already born; marks.go where the operators' marks live and
// what each does.
//
// # Shape
//
// The Controller decides: each method takes what the node knows (the
// View, the replicas' raftmux.Info, the time, the lease rounds heard) and
// returns what to do (Steps, stray checks, owners to move, groups to
// create), and is told the ends of what it asked for (StepDone, Judge,
// Dropped, Reassigned, GroupDone). It holds one lock over its own state,
// and reads the rest of the node only through its Env (the node id of a
// raft id, whether the node holds back an open it owes) and the
// shard-leader table it is given. Marks keeps the marks under a lock of
// its own, and writes them through its MarkStore under it, so that they
// land in order. The Controller must not: ask raft for anything, propose,
// send or read a frame, read a clock, start a goroutine or a timer, log,
// or call its Env while it holds its lock; nor decide membership (SWIM
// does) or placement (router does).
//
// The Driver acts (driver.go): it runs the reconcile task's passes (Run)
// and the cluster's birth (Birth) against the raft host (Host), the
// state machine (Machine) and the lease room (Lease), which proposes the
// owners' moves, asks the events room (Events) which shards the replicas
// lead, asks leaders about strays through its DriverEnv, and reports
// every end back to the Controller. It reads the clock, the view and the
// node's birth only through its DriverEnv, and starts no goroutine and
// arms no timer: the node's tasks run it.
package reconcile

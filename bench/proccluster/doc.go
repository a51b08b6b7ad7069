// Package proccluster starts clusters of real `shoal node` processes for
// benchmarks: on 127.0.0.1, or each node in its own network namespace
// (root only), joined by one bridge. It waits for readiness through each
// node's metrics address (/readyz, shoal_members_alive), kills, pauses,
// resumes and restarts nodes, cuts a node's link (namespaces only), reads
// a node's CPU time and RSS from /proc and its counters from /metrics, and
// removes every process, namespace, bridge and temporary directory it made
// when Close is called.
//
// Every node is started with the parent-death signal set to SIGKILL, so a
// benchmark that dies without calling Close does not leave nodes behind;
// the temporary directory of such a run is removed by the next Start, and
// its namespaces and bridge by the next Start in namespace mode (their
// names carry the pid of the process that made them).
//
// Config.Command lets a caller change how a node is run (put it into a
// cgroup, run it under another program): it sees every node's exec.Cmd
// before each start of the node.
//
// The package runs on Linux only.
package proccluster

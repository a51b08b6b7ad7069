// Package tests holds process-level tests: they build the shoal and
// shoalctl binaries, run real `shoal node` processes on loopback ports with
// their own data directories, and drive them only through `shoalctl --json`,
// as a user or a script would. They take tens of seconds; `make test` runs
// them, and leaving this package out of `go test` leaves them out.
package tests

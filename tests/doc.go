// Package tests holds process-level tests: they build the shoal and
// shoalctl binaries, run real `shoal node` processes on loopback ports with
// their own data directories, and drive them only through `shoalctl --json`,
// as a user or a script would. They take tens of seconds, so `go test
// -short` skips them; `make test` runs them.
package tests

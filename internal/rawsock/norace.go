//go:build !race

package rawsock

// wrote and read annotate socket I/O for the race detector (race.go);
// without it they do nothing.
func wrote() {}
func read()  {}

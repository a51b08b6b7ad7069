//go:build race

package shardstore

// raceEnabled scales long tests down under the race detector, which makes
// Pebble several times slower.
const raceEnabled = true

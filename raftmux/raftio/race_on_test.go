//go:build race

package raftio_test

const raceEnabled = true

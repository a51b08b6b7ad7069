//go:build !race

package raftio_test

const raceEnabled = false

//go:build race

package raftmux_test

const raceEnabled = true

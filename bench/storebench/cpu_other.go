//go:build !unix

package main

import "time"

// cpuTime is not measured on this platform; the CPU figures read 0.
func cpuTime() time.Duration { return 0 }

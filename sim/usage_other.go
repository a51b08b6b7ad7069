//go:build !unix

package sim

import "time"

func cpuTime() time.Duration { return 0 }

func maxRSS() uint64 { return 0 }

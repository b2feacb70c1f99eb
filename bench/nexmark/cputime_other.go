//go:build !unix

package main

import "time"

// cpuTime is not measured here: the per-core figures by CPU time are 0.
func cpuTime() time.Duration { return 0 }

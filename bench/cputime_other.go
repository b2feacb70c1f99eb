//go:build !unix

package bench

import "time"

// ProcessCPUTime is not measured here: figures per CPU second are 0.
func ProcessCPUTime() time.Duration { return 0 }

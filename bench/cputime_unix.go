//go:build unix

package bench

import (
	"syscall"
	"time"
)

// ProcessCPUTime is the CPU time (user and system) the process has used so far,
// on every thread: the Go scheduler's, RocksDB's, the runtime's.
func ProcessCPUTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

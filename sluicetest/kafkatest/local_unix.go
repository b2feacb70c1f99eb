//go:build unix

package kafkatest

import (
	"os"
	"syscall"
)

// terminate asks the broker to stop (SIGTERM: a controlled shutdown).
func terminate(p *os.Process) error { return p.Signal(syscall.SIGTERM) }

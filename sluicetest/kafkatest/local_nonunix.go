//go:build !unix

package kafkatest

import "os"

func terminate(p *os.Process) error { return errNoSignal }

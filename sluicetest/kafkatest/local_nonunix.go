//go:build !unix

package kafkatest

import (
	"errors"
	"os"
)

func terminate(p *os.Process) error { return errNoSignal }

var errNoSignal = errors.New("cannot signal the broker on this platform")

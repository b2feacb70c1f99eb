package kafkatest

import "syscall"

// brokerProcAttr kills the broker when the test process dies, so that a
// test killed by its timeout leaves no broker behind.
func brokerProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

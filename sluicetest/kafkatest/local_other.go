//go:build !linux

package kafkatest

import "syscall"

func brokerProcAttr() *syscall.SysProcAttr { return nil }

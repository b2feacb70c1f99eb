//go:build !linux

package state

import "unsafe"

func preferHugePages(unsafe.Pointer, uintptr) {}

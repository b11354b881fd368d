//go:build !race

package sockio

import (
	"syscall"
	"unsafe"
)

// sysRead and sysWrite are the calls themselves, raw: the scheduler is
// not told (sockio.go says why). p is never empty.
func sysRead(fd uintptr, p []byte) (int, syscall.Errno) {
	r, _, e := syscall.RawSyscall(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)))
	return int(r), e
}

func sysWrite(fd uintptr, p []byte) (int, syscall.Errno) {
	r, _, e := syscall.RawSyscall(syscall.SYS_WRITE, fd, uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)))
	return int(r), e
}

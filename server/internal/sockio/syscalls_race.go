//go:build race

package sockio

import "syscall"

// Under the race detector the calls go through the syscall package, whose
// Read and Write tell the detector that what a goroutine did before
// writing to a socket happens before what a reader does after reading it,
// as they do for net.Conn. The raw calls would hide that order and report
// races that the socket's bytes rule out. Everything else (the poller,
// EAGAIN, deadlines) is the same in both builds.
func sysRead(fd uintptr, p []byte) (int, syscall.Errno) {
	n, err := syscall.Read(int(fd), p)
	return max(n, 0), errnoOf(err)
}

func sysWrite(fd uintptr, p []byte) (int, syscall.Errno) {
	n, err := syscall.Write(int(fd), p)
	return max(n, 0), errnoOf(err)
}

func errnoOf(err error) syscall.Errno {
	if err == nil {
		return 0
	}
	return err.(syscall.Errno)
}

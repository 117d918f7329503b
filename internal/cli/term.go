package cli

import (
	"errors"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// IsTerminal tells whether f is a terminal (it has termios).
func IsTerminal(f *os.File) bool {
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

// UnwrapSyscall is the errno under err, where there is one: a write
// error says "broken pipe", not the path and operation around it.
func UnwrapSyscall(err error) error {
	var e syscall.Errno
	if errors.As(err, &e) {
		return e
	}
	return err
}

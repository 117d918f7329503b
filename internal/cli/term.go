package cli

import (
	"errors"
	"os"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

func IsTerminal(f *os.File) bool {
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

func UnwrapSyscall(err error) error {
	var e syscall.Errno
	if errors.As(err, &e) {
		return e
	}
	return err
}

// TermSize is the terminal's columns and rows; 80x24 when unknown.
// COLUMNS and LINES, where set to a number, win over the terminal, as
// procps's ps and GNU ls let them.
func TermSize(f *os.File) (cols, rows int) {
	cols, rows = 80, 24
	if ws, err := unix.IoctlGetWinsize(int(f.Fd()), unix.TIOCGWINSZ); err == nil && ws.Col > 0 {
		cols, rows = int(ws.Col), int(ws.Row)
	}
	if n, err := strconv.Atoi(os.Getenv("COLUMNS")); err == nil && n > 0 {
		cols = n
	}
	if n, err := strconv.Atoi(os.Getenv("LINES")); err == nil && n > 0 {
		rows = n
	}
	return cols, rows
}

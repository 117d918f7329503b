package main

import (
	"fmt"
	"io"
)

// errWriter is standard output that remembers its first write error, so a
// command can say "write error" once (as coreutils does) instead of going
// on silently into a full disk or a closed file. After an error every
// write fails at once with it.
type errWriter struct {
	w   io.Writer
	err error
}

func newErrWriter(w io.Writer) *errWriter { return &errWriter{w: w} }

func (e *errWriter) Write(p []byte) (int, error) {
	if e.err != nil {
		return 0, e.err
	}
	n, err := e.w.Write(p)
	if err != nil {
		e.err = err
	}
	return n, err
}

// Err is the first write error, or nil.
func (e *errWriter) Err() error { return e.err }

// report prints the write error, if there was one, as "9harness CMD: write
// error: CAUSE" and tells whether there was.
func (e *errWriter) report(stderr io.Writer, cmd string) bool {
	if e.err == nil {
		return false
	}
	fmt.Fprintf(stderr, "9harness %s: write error: %v\n", cmd, unwrapSyscall(e.err))
	return true
}

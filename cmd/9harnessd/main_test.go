package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/9harness/9harness/internal/harness"
)

// TestRunStatus: help on stdout with 0; a usage error one line on stderr,
// naming the flag as typed, with 2; nothing printed twice, no usage text
// around an error.
func TestRunStatus(t *testing.T) {
	for _, tc := range []struct {
		args   []string
		status int
		stdout string // a prefix
		stderr string // the whole
	}{
		{[]string{"--help"}, 0, "usage: 9harnessd", ""},
		{[]string{"-h"}, 0, "usage: 9harnessd", ""},
		{[]string{"--version"}, 0, "9harnessd ", ""},
		{[]string{"--bogus"}, 2, "", "9harnessd: unknown flag --bogus (try '9harnessd --help')\n"},
		{[]string{"-bogus"}, 2, "", "9harnessd: unknown flag -b in -bogus (try '9harnessd --help')\n"},
		{[]string{"--audit", "bogus"}, 2, "", "9harnessd: --audit bogus: want auto, journal or stderr (try '9harnessd --help')\n"},
		{[]string{"--audit=bogus"}, 2, "", "9harnessd: --audit bogus: want auto, journal or stderr (try '9harnessd --help')\n"},
		{[]string{"--msize"}, 2, "", "9harnessd: flag --msize needs a value (try '9harnessd --help')\n"},
		{[]string{"--msize", "x"}, 2, "", "9harnessd: invalid value \"x\" for --msize: must be a non-negative integer (try '9harnessd --help')\n"},
		{[]string{"--msize", "1"}, 2, "", "9harnessd: --msize 1: must be between 4096 and 4194304 (try '9harnessd --help')\n"},
		{[]string{"--root", "nosuch=/x"}, 2, "", "9harnessd: invalid value \"nosuch=/x\" for --root: unknown harness \"nosuch\" (known: " + strings.Join(harness.Names(), ", ") + ") (try '9harnessd --help')\n"},
		{[]string{"--idle-timeout", "-1s"}, 2, "", "9harnessd: --idle-timeout -1s: must not be negative (try '9harnessd --help')\n"},
		{[]string{"extra"}, 2, "", "9harnessd: unexpected argument \"extra\" (try '9harnessd --help')\n"},
		{[]string{"--max-bytes", "8M"}, 2, "", "9harnessd: --max-bytes 8M: must be at least 16M (try '9harnessd --help')\n"},
		{[]string{"--max-bytes", "1X"}, 2, "", "9harnessd: invalid value \"1X\" for --max-bytes: want a positive number of bytes, with an optional K, M or G (try '9harnessd --help')\n"},
		{[]string{"--max-bytes", "32M", "--max-bytes-per-uid", "64M"}, 2, "", "9harnessd: --max-bytes-per-uid 64M: must not be above --max-bytes (32M) (try '9harnessd --help')\n"},
		{[]string{"--unix", "/a", "--fd", "3"}, 2, "", "9harnessd: --unix, --name and --fd are alternatives: give at most one (try '9harnessd --help')\n"},
	} {
		var stdout, stderr bytes.Buffer
		status := run(tc.args, &stdout, &stderr)
		if status != tc.status || !strings.HasPrefix(stdout.String(), tc.stdout) || (tc.stdout == "") != (stdout.Len() == 0) || stderr.String() != tc.stderr {
			t.Errorf("9harnessd %q: status %d, stdout %.40q, stderr %q; want %d, %q..., %q", tc.args, status, stdout.String(), stderr.String(), tc.status, tc.stdout, tc.stderr)
		}
	}
}

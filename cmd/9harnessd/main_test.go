package main

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/9harness/9harness/internal/daemon"
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
		{[]string{"-bogus"}, 2, "", "9harnessd: unknown flag -bogus (try '9harnessd --help')\n"},
		{[]string{"--audit", "bogus"}, 2, "", "9harnessd: --audit bogus: want auto, journal or stderr (try '9harnessd --help')\n"},
		{[]string{"--audit=bogus"}, 2, "", "9harnessd: --audit bogus: want auto, journal or stderr (try '9harnessd --help')\n"},
		{[]string{"--msize"}, 2, "", "9harnessd: flag --msize needs a value (try '9harnessd --help')\n"},
		{[]string{"--msize", "x"}, 2, "", "9harnessd: --msize x: must be a non-negative integer (try '9harnessd --help')\n"},
		{[]string{"--msize", "1"}, 2, "", "9harnessd: --msize 1: must be between 4096 and 4194304 (try '9harnessd --help')\n"},
		{[]string{"--root", "nosuch=/x"}, 2, "", "9harnessd: --root nosuch=/x: unknown harness \"nosuch\" (known: " + strings.Join(harness.Names(), ", ") + ") (try '9harnessd --help')\n"},
		{[]string{"--idle-timeout", "-1s"}, 2, "", "9harnessd: --idle-timeout -1s: must not be negative (try '9harnessd --help')\n"},
		{[]string{"extra"}, 2, "", "9harnessd: unexpected argument \"extra\" (try '9harnessd --help')\n"},
		{[]string{"--max-bytes", "8M"}, 2, "", "9harnessd: --max-bytes 8M: must be at least 16M (try '9harnessd --help')\n"},
		{[]string{"--max-bytes", "1X"}, 2, "", "9harnessd: --max-bytes 1X: want a positive number of bytes, with an optional K, M or G (try '9harnessd --help')\n"},
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

// TestParseIdleTimeout: --idle-timeout reaches the Config, 0 as "never"
// (negative there), since the Config's 0 is the default.
func TestParseIdleTimeout(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want time.Duration
	}{
		{nil, daemon.DefaultIdleTimeout},
		{[]string{"--idle-timeout", "30s"}, 30 * time.Second},
		{[]string{"--idle-timeout", "0"}, -1},
	} {
		cfg, err := parse(append(tc.args, "--root", "claude=/nonexistent"), &bytes.Buffer{})
		if err != nil {
			t.Fatalf("%q: %v", tc.args, err)
		}
		if cfg.IdleTimeout != tc.want {
			t.Errorf("%q: IdleTimeout %v, want %v", tc.args, cfg.IdleTimeout, tc.want)
		}
	}
}

// TestParseMaxBytes: the byte ceilings reach the Config; a --max-bytes
// below the default per-uid ceiling lowers that default with it.
func TestParseMaxBytes(t *testing.T) {
	for _, tc := range []struct {
		args       []string
		bytes, uid int64
	}{
		{nil, daemon.DefaultMaxBytes, daemon.DefaultMaxBytesPerUID},
		{[]string{"--max-bytes", "1G", "--max-bytes-per-uid", "100M"}, 1 << 30, 100 << 20},
		{[]string{"--max-bytes", "32m"}, 32 << 20, 32 << 20},
		{[]string{"--max-bytes", "20971520"}, 20 << 20, 20 << 20},
	} {
		cfg, err := parse(append(tc.args, "--root", "claude=/nonexistent"), &bytes.Buffer{})
		if err != nil {
			t.Fatalf("%q: %v", tc.args, err)
		}
		if cfg.MaxBytes != tc.bytes || cfg.MaxBytesPerUID != tc.uid {
			t.Errorf("%q: MaxBytes %d, MaxBytesPerUID %d; want %d, %d", tc.args, cfg.MaxBytes, cfg.MaxBytesPerUID, tc.bytes, tc.uid)
		}
	}
}

// TestParseHelp: --help is pflag.ErrHelp, to be printed by run on stdout.
func TestParseHelp(t *testing.T) {
	if _, err := parse([]string{"--help"}, &bytes.Buffer{}); !errors.Is(err, pflag.ErrHelp) {
		t.Errorf("parse --help: %v", err)
	}
}

// TestHelpText: the help names every harness, /active, both dialects,
// and keeps its flag lines in the "  --flag" form.
func TestHelpText(t *testing.T) {
	h := helpText()
	for _, w := range []string{"/active/HARNESS/PID/", "9P2000.L", "plain 9P2000", "  --audit WHERE", "  -h, --help"} {
		if !strings.Contains(h, w) {
			t.Errorf("help lacks %q", w)
		}
	}
	for _, n := range harness.Names() {
		if !strings.Contains(h, "/"+n+"/") {
			t.Errorf("help's tree lacks /%s/", n)
		}
	}
	if strings.Contains(h, "%!") {
		t.Errorf("help has a bad verb:\n%s", h)
	}
}

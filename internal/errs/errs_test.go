package errs

import (
	"errors"
	"fmt"
	"syscall"
	"testing"
)

func TestPlain(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{nil, ""},
		{errors.New("bare"), "bare"},
		{E("saferoot.OpenAnchor", NotExist, "/home/u/.codex", syscall.ENOENT), "/home/u/.codex: does not exist"},
		{E("saferoot.Open", Permission, "", syscall.EACCES), "permission denied"},
		{E("saferoot.OpenAnchor", IO, "/srv", syscall.EIO), "/srv: input/output error"},
		{E("tree.read", Other, "/a", E("saferoot.Stat", NotDir, "/a/b", nil)), "/a: /a/b: not a directory"},
		{fmt.Errorf("wrapped: %w", E("x.Y", Invalid, "p", nil)), "p: invalid argument"},
	} {
		if got := Plain(tc.err); got != tc.want {
			t.Errorf("Plain(%v) = %q, want %q", tc.err, got, tc.want)
		}
	}
}

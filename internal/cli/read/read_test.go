package read

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	"github.com/9harness/9harness/internal/cli"
)

// TestHumanSize: sizes as GNU ls -lh prints them.
func TestHumanSize(t *testing.T) {
	for n, want := range map[uint64]string{
		0: "0", 1023: "1023", 1024: "1.0K", 1536: "1.5K", 10 << 10: "10K", 10235: "10K",
		1<<20 - 1: "1.0M", 5 << 20: "5.0M", 123 << 20: "123M", 3 << 30: "3.0G",
	} {
		if got := humanSize(n); got != want {
			t.Errorf("humanSize(%d) = %q, want %q", n, got, want)
		}
	}
}

// TestReadUsage: cat and stat need a path; ls lists / without one.
func TestReadUsage(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "nosock")
	for _, tc := range []struct {
		cmd  string
		code int
	}{{"cat", cli.ExitUsage}, {"stat", cli.ExitUsage}, {"ls", cli.ExitError}} {
		g := cli.NewGlobals("test", nil)
		g.Cmd = tc.cmd
		var out, errs bytes.Buffer
		if code := Run(g, []string{"-s", sock}, &out, &errs); code != tc.code || strings.Count(errs.String(), "\n") != 1 {
			t.Errorf("%s without a path: exit %d, stderr %q; want %d and one line", tc.cmd, code, errs.String(), tc.code)
		}
	}
}

// TestJoinPath: a name joins its directory with one slash.
func TestJoinPath(t *testing.T) {
	for _, tc := range [][3]string{{"/", "a", "/a"}, {"/x", "a", "/x/a"}, {"/x/", "a", "/x/a"}, {"", "a", "a"}} {
		if got := joinPath(tc[0], tc[1]); got != tc[2] {
			t.Errorf("joinPath(%q, %q) = %q, want %q", tc[0], tc[1], got, tc[2])
		}
	}
}

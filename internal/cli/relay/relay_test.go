package relay

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	"github.com/9harness/9harness/internal/cli"
)

// TestRelayRefusals: relay serves this machine's daemon only, takes no
// operand, and --where names no socket that does not answer.
func TestRelayRefusals(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "nosock")
	for _, tc := range []struct {
		args []string
		code int
		says string
	}{
		{[]string{"--ssh", "build1"}, cli.ExitUsage, "takes no --ssh"},
		{[]string{"extra"}, cli.ExitUsage, "unexpected argument"},
		{[]string{"-s", missing, "--where"}, cli.ExitError, "relay --where"},
	} {
		g := cli.NewGlobals("test", map[string]string{"relay": Help})
		g.Cmd = "relay"
		var out, errs bytes.Buffer
		code := Run(g, tc.args, strings.NewReader(""), &out, &errs)
		if code != tc.code || out.Len() != 0 || !strings.Contains(errs.String(), tc.says) {
			t.Errorf("relay %q: exit %d, stdout %q, stderr %q; want %d and %q", tc.args, code, out.String(), errs.String(), tc.code, tc.says)
		}
	}
}

package complete

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/9harness/9harness/internal/cli/read"
)

// testUsage is a usage in 9harness's form.
const testUsage = `usage: 9harness [-s SOCKET] COMMAND [ARGS]

Commands:
  ps [--json] [--watch] [--harness NAME]... [--all]
                    list the live agents, one row each
  ls [-l] PATH...   list directories (a file lists as itself)
  version           print the version (also: 9harness --version)

Flags:
  -s, --socket SOCKET
                    the daemon's socket (default %s)
  --aname NAME      the tree to attach (default /)
  -h, --help        this text
`

// TestHelpFlags: __complete reads the flags of a help and the commands
// of the usage, each with its description.
func TestHelpFlags(t *testing.T) {
	names := func(ds []described) []string {
		var out []string
		for _, d := range ds {
			if d.desc == "" {
				t.Errorf("%s has no description", d.name)
			}
			out = append(out, d.name)
		}
		return out
	}
	if got := names(helpFlags(read.LsHelp)); !slices.Equal(got, []string{"-l", "--long", "--human-readable", "-a", "--all", "-h", "--help"}) {
		t.Errorf("ls's flags %q", got)
	}
	if got := names(helpFlags(testUsage)); !slices.Equal(got, []string{"-s", "--socket", "--aname", "-h", "--help"}) {
		t.Errorf("the usage's flags %q", got)
	}
	want := []described{{"ps", "list the live agents, one row each"}, {"ls", "list directories"}, {"version", "print the version"}}
	if got := usageCommands(testUsage); !slices.Equal(got, want) {
		t.Errorf("the usage's commands %q, want %q", got, want)
	}
}

// TestSSHHosts: the Host lines of ~/.ssh/config without patterns, and the
// lines of ~/.config/9harness/hosts, sorted, once each.
func TestSSHHosts(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("XDG_CONFIG_HOME", "")
	os.MkdirAll(filepath.Join(home, ".ssh"), 0o700)
	os.WriteFile(filepath.Join(home, ".ssh", "config"), []byte("Host b a\n\tHostName x\nHost *.corp !c d?\n  host e # comment\nHostName f\nMatch host g\n"), 0o600)
	if got := sshHosts(); !slices.Equal(got, []string{"a", "b", "e"}) {
		t.Errorf("hosts %q", got)
	}
	os.MkdirAll(filepath.Join(home, ".config", "9harness"), 0o755)
	os.WriteFile(filepath.Join(home, ".config", "9harness", "hosts"), []byte("# mine\nz\n\n a \n"), 0o644)
	if got := sshHosts(); !slices.Equal(got, []string{"a", "b", "e", "z"}) {
		t.Errorf("hosts with the 9harness list %q", got)
	}
}

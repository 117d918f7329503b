package main

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
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

// TestHelpFlags: every flag line of every help is in the "  -x, --long"
// form, and __complete flags reads them all.
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
	if got := names(helpFlags(lsHelp)); !slices.Equal(got, []string{"-l", "--long", "--human-readable", "-a", "--all", "-h", "--help"}) {
		t.Errorf("ls's flags %q", got)
	}
	top := names(helpFlags(usage))
	for _, f := range []string{"-s", "--socket", "--aname", "--version", "-h", "--help", "--ssh", "--ssh-opt", "--ssh-cmd"} {
		if !slices.Contains(top, f) {
			t.Errorf("the usage's flags %q lack %s", top, f)
		}
	}
	cmds := names(usageCommands(usage))
	for cmd := range helps {
		if !slices.Contains(cmds, cmd) {
			t.Errorf("the usage's commands %q lack %s", cmds, cmd)
		}
	}
	for cmd, h := range helps {
		if !slices.Contains(names(helpFlags(h)), "--help") {
			t.Errorf("%s's help lists no --help", cmd)
		}
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

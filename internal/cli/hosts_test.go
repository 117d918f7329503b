package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/9harness/9harness/internal/client"
	"github.com/9harness/9harness/internal/fleet"
)

func TestFleetHosts(t *testing.T) {
	file := filepath.Join(t.TempDir(), "hosts")
	if err := os.WriteFile(file, []byte("b1 ssh-opt=Port=2 ssh-cmd=x\nb2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		args  []string
		ff    fleet.Flags
		names []string
	}{
		{"all", []string{"--ssh-opt", "A=1"}, fleet.Flags{All: true, Hosts: file}, []string{"-", "b1", "b2"}},
		{"hosts", nil, fleet.Flags{Hosts: file}, []string{"b1", "b2"}},
		{"ssh", []string{"--ssh", "b1", "--ssh", "c"}, fleet.Flags{Hosts: file}, []string{"b1", "b2", "c"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewGlobals("test", nil)
			if err := g.Flags.Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			hosts, err := g.Dialer().Hosts(tc.ff, true)
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, h := range hosts {
				names = append(names, h.Name)
				if h.Name == "b1" {
					want := append(append([]string{}, g.SSHOptions...), "Port=2")
					if !reflect.DeepEqual(h.SSH.Options, want) || h.SSH.Command != "x" {
						t.Errorf("b1: options %q command %q, want %q and x", h.SSH.Options, h.SSH.Command, want)
					}
				}
				if h.Name == "b2" && h.SSH.Command != client.DefaultRelayCommand {
					t.Errorf("b2's command %q", h.SSH.Command)
				}
			}
			if !reflect.DeepEqual(names, tc.names) {
				t.Errorf("hosts %q, want %q", names, tc.names)
			}
		})
	}
}

// TestFleetHostsNoHostsFile: every --all command (ps, top, wait, events,
// mount, notify) says in one line that there is no hosts file, naming the
// file it looked for; not when the file exists or --hosts names one.
func TestFleetHostsNoHostsFile(t *testing.T) {
	conf := t.TempDir()
	t.Setenv("XDG_CONFIG_HOME", conf)
	want := filepath.Join(conf, "9harness", "hosts")
	run := func(cmd string, ff fleet.Flags, changed bool) string {
		g := NewGlobals("test", nil)
		g.Cmd = cmd
		var errs bytes.Buffer
		if hosts, status := FleetHosts(g, ff, changed, &errs); hosts == nil {
			t.Fatalf("%s: status %d: %s", cmd, status, errs.String())
		}
		return errs.String()
	}
	for _, cmd := range []string{"ps", "top", "wait", "events", "mount", "notify"} {
		got := run(cmd, fleet.Flags{All: true}, false)
		if line := "9harness " + cmd + ": --all: no hosts file " + want + ", so only this machine and any --ssh DEST\n"; got != line {
			t.Errorf("%s --all without a hosts file: stderr %q, want %q", cmd, got, line)
		}
	}
	other := filepath.Join(t.TempDir(), "hosts")
	if err := os.WriteFile(other, []byte("b1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := run("ps", fleet.Flags{All: true, Hosts: other}, true); got != "" {
		t.Errorf("--all --hosts FILE: stderr %q, want nothing", got)
	}
	if err := os.MkdirAll(filepath.Dir(want), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(want, []byte("b1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := run("wait", fleet.Flags{All: true}, false); got != "" {
		t.Errorf("--all with a hosts file: stderr %q, want nothing", got)
	}
}

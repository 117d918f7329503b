package cli

import (
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

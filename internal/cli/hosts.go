package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"

	"github.com/9harness/9harness/internal/client"
	"github.com/9harness/9harness/internal/fleet"
)

// FleetHosts is fleetHosts for a command: a failure, or no hosts, is
// one line on stderr and the usage status (hosts nil).
func FleetHosts(g *Globals, ff fleet.Flags, hostsChanged bool, stderr io.Writer) ([]client.Host, int) {
	hosts, err := g.Dialer().Hosts(ff, hostsChanged)
	if err != nil {
		fmt.Fprintf(stderr, "9harness %s: %v\n", g.Cmd, err)
		return nil, ExitUsage
	}
	if len(hosts) == 0 {
		fmt.Fprintf(stderr, "9harness %s: no hosts: the hosts file lists none, and no --ssh DEST was given\n", g.Cmd)
		return nil, ExitUsage
	}
	if ff.All && !hostsChanged {
		noHostsFile(g.Cmd, stderr)
	}
	return hosts, ExitOK
}

// noHostsFile says so when --all has no hosts file to read: --all is then
// this machine (and any --ssh DEST) only, which is easy to mistake for a
// fleet with nobody on it.
func noHostsFile(cmd string, stderr io.Writer) {
	file := client.HostsFile()
	if _, err := os.Stat(file); file != "" && !errors.Is(err, fs.ErrNotExist) {
		return
	}
	if file == "" {
		file = "(no $XDG_CONFIG_HOME or $HOME)"
	}
	fmt.Fprintf(stderr, "9harness %s: --all: no hosts file %s, so only this machine and any --ssh DEST\n", cmd, fleet.Printable(file))
}

// DialNamedHost reaches the host a command names (HOST:HARNESS/PID): the
// hosts file's line of that name, or else the name as an ssh destination
// ([user@]host[:port]); also its ssh destination. A failure is printed;
// the status says which.
func DialNamedHost(g *Globals, name, file string, fileChanged bool, stderr io.Writer) (*client.Client, string, int) {
	fail := func(status int, err error) (*client.Client, string, int) {
		fmt.Fprintf(stderr, "9harness %s: %v\n", g.Cmd, err)
		return nil, "", status
	}
	if !fileChanged {
		file = client.HostsFile()
	}
	var h *client.Host
	if file != "" {
		listed, err := client.ReadHosts(file, !fileChanged)
		if err != nil {
			return fail(ExitUsage, err)
		}
		for i := range listed {
			if listed[i].Name == name {
				h = &listed[i]
			}
		}
	}
	if h == nil {
		s, err := client.ParseDest(name)
		if err != nil {
			return fail(ExitUsage, err)
		}
		h = &client.Host{Name: name, SSH: &s}
	}
	c, err := client.DialSSH(context.Background(), g.Dialer().WithFlags(*h.SSH))
	if err != nil {
		return fail(ExitError, fmt.Errorf("%s: %v", name, err))
	}
	return c, h.SSH.Dest, ExitOK
}

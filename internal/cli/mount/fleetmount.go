package mount

import (
	"context"
	"fmt"
	"io"
	"maps"
	"net"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/9harness/9harness/internal/cli"
	"github.com/9harness/9harness/internal/client"
	"github.com/9harness/9harness/internal/fleet"
	"github.com/9harness/9harness/internal/fusefs"
	"github.com/9harness/9harness/internal/sockpath"
)

// localMountName is this machine's directory in a fleet mount. ps writes
// "-" for it, but a file named "-" is an option or standard input to most
// commands (cat -/active fails); "local" is the same on every machine, so
// a script that reads DIR/local works anywhere.
const localMountName = "local"

// runFleetMount is `9harness mount --all|--hosts FILE|--ssh DEST… DIR`:
// one directory per host, each its daemon's tree over its own connection.
func runFleetMount(g *cli.Globals, ff fleet.Flags, hostsChanged bool, ops []string, fg, debug bool, stdout, stderr io.Writer) int {
	if g.Flags.Changed("aname") {
		fmt.Fprintln(stderr, "9harness mount: --aname is for ls, cat and stat on a local socket")
		return cli.ExitUsage
	}
	if ff.Timeout <= 0 {
		fmt.Fprintln(stderr, "9harness mount: --timeout is a positive duration")
		return cli.ExitUsage
	}
	if len(ops) != 1 {
		fmt.Fprintln(stderr, "9harness mount: expected one directory: 9harness mount --all DIR (try '9harness mount --help')")
		return cli.ExitUsage
	}
	hosts, status := mountHosts(g, ff, hostsChanged, stderr)
	if hosts == nil {
		return status
	}
	dir, err := filepath.Abs(ops[0])
	if err != nil {
		fmt.Fprintf(stderr, "9harness mount: %v\n", err)
		return cli.ExitError
	}
	if status := checkMountDir(dir, stderr); status != cli.ExitOK {
		return status
	}
	what := hostCount(len(hosts))
	if !fg {
		args, err := fleetMountArgs(g, ff, hostsChanged, dir)
		if err != nil {
			fmt.Fprintf(stderr, "9harness mount: %v\n", err)
			return cli.ExitError
		}
		return mountBackground(args, what, dir, stdout, stderr)
	}
	return mountFleetForeground(g, hosts, ff.Timeout, dir, what, debug, stdout, stderr)
}

// mountFleetForeground mounts one directory per host on dir and serves
// it until the mount is gone.
func mountFleetForeground(g *cli.Globals, hosts []client.Host, timeout time.Duration, dir, what string, debug bool, stdout, stderr io.Writer) int {
	notify := notifyFile()
	limit := fusefs.DefaultDialLimit(timeout)
	var fhosts []fusefs.Host
	for _, h := range hosts {
		fhosts = append(fhosts, fusefs.Host{
			Name: mountName(h),
			Dial: func(ctx context.Context) (*client.Client, func(), error) { return dialFleetHost(ctx, g, h, limit) },
		})
	}
	opts := fusefs.FleetOptions{
		Source:    "fleet",
		Timeout:   timeout,
		DialLimit: limit,
		Debug:     debug,
	}
	// In the foreground, hosts coming and going are news once the mount
	// is announced (its first dials are summed up below); in the
	// background nobody would read it.
	var announced atomic.Bool
	if notify == nil {
		opts.Logf = func(format string, args ...any) {
			if announced.Load() {
				fmt.Fprintf(stderr, "9harness mount: "+format+"\n", args...)
			}
		}
	}
	f, err := fusefs.MountFleet(dir, fhosts, opts)
	if err != nil {
		fmt.Fprintf(stderr, "9harness mount: %s: %v\n%s", dir, strings.TrimSpace(err.Error()), mountHint(err))
		return cli.ExitError
	}
	defer f.Close()
	what = answered(f.FirstDials(), len(hosts), stderr)
	announced.Store(true)
	// The server stops once the kernel lets go of a busy mount: its hosts'
	// connections are closed after that.
	return serve(f, dir, what, notify, nil, 5*time.Second, stdout, stderr)
}

// hostCount is n hosts, in words.
func hostCount(n int) string {
	if n == 1 {
		return "1 host"
	}
	return strconv.Itoa(n) + " hosts"
}

// answered says which hosts did not answer their first dial, a line each,
// and returns what was mounted: "N hosts", or "K of N hosts" when some did
// not answer.
func answered(failed map[string]error, n int, stderr io.Writer) string {
	for _, name := range slices.Sorted(maps.Keys(failed)) {
		fmt.Fprintf(stderr, "9harness mount: %s: %v; its directory appears once it answers\n", name, failed[name])
	}
	if len(failed) == 0 {
		return hostCount(n)
	}
	return strconv.Itoa(n-len(failed)) + " of " + hostCount(n)
}

// mountHosts is a fleet mount's hosts, each named so that it can be a
// directory, no two alike; a problem (no host either) is a usage error,
// printed, and nil with the status.
func mountHosts(g *cli.Globals, ff fleet.Flags, hostsChanged bool, stderr io.Writer) ([]client.Host, int) {
	hosts, status := cli.FleetHosts(g, ff, hostsChanged, stderr)
	if hosts == nil {
		return nil, status
	}
	names := map[string]bool{}
	for _, h := range hosts {
		name := mountName(h)
		switch {
		case name == "." || name == ".." || strings.ContainsAny(name, "/\x00"):
			fmt.Fprintf(stderr, "9harness mount: %q cannot be a directory's name\n", name)
			return nil, cli.ExitUsage
		case names[name]:
			fmt.Fprintf(stderr, "9harness mount: two hosts are named %q (this machine is %q)\n", name, localMountName)
			return nil, cli.ExitUsage
		}
		names[name] = true
	}
	return hosts, cli.ExitOK
}

// mountName is a host's directory: its name as written, or
// localMountName for this machine.
func mountName(h client.Host) string {
	if h.Name == client.LocalHost {
		return localMountName
	}
	return h.Name
}

// fleetMountArgs is the command line of the background process that
// serves a fleet mount: the same hosts, with absolute paths, in the
// foreground.
func fleetMountArgs(g *cli.Globals, ff fleet.Flags, hostsChanged bool, dir string) ([]string, error) {
	sock, err := filepath.Abs(g.Sock)
	if err != nil {
		return nil, err
	}
	args := []string{"-s", sock}
	if g.Flags.Changed("ssh-cmd") {
		args = append(args, "--ssh-cmd", g.SSHCmd)
	}
	for _, o := range g.SSHOptions {
		args = append(args, "--ssh-opt", o)
	}
	for _, d := range g.SSHDests {
		args = append(args, "--ssh", d)
	}
	args = append(args, "mount", "-f", "--timeout", ff.Timeout.String())
	if ff.All {
		args = append(args, "--all")
	}
	if hostsChanged {
		file := ff.Hosts
		if file != "" {
			if file, err = filepath.Abs(file); err != nil {
				return nil, err
			}
		}
		args = append(args, "--hosts", file)
	}
	return append(args, dir), nil
}

// dialFleetHost reaches one host of a fleet mount as fleet.Dialer does, and
// keeps its transport, whose close the mount uses to hang up on a host
// that stopped answering. ssh gives up connecting after limit, and the
// whole dial when ctx ends.
func dialFleetHost(ctx context.Context, g *cli.Globals, h client.Host, limit time.Duration) (*client.Client, func(), error) {
	if h.SSH == nil {
		var conn net.Conn
		c, err := client.DialFunc(ctx, func() (net.Conn, error) {
			c, err := sockpath.Dial(g.Sock, 5*time.Second)
			if err != nil {
				return nil, err
			}
			conn = c
			return c, nil
		}, "/")
		if err != nil {
			return nil, nil, fleet.Describe(err)
		}
		return c, func() { conn.Close() }, nil
	}
	s := *h.SSH
	s.ConnectTimeout = limit
	c, err := client.DialSSH(ctx, s)
	if err != nil {
		return nil, nil, fleet.HostError(err)
	}
	return c, c.Hangup, nil
}

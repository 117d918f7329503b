package mount

import (
	"bytes"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/9harness/9harness/internal/cli"
	"github.com/9harness/9harness/internal/client"
	"github.com/9harness/9harness/internal/fleet"
)

// TestUnescapeMount: mountinfo's octal escapes decode; anything else is
// kept as it is.
func TestUnescapeMount(t *testing.T) {
	for in, want := range map[string]string{
		`/mnt/a\040b`: "/mnt/a b", `/plain`: "/plain", `/t\011ab`: "/t\tab", `/odd\09`: `/odd\09`, `/end\04`: `/end\04`,
	} {
		if got := unescapeMount(in); got != want {
			t.Errorf("unescapeMount(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestMountName: this machine is "local" in a fleet mount, every other
// host its name as written.
func TestMountName(t *testing.T) {
	if got := mountName(client.Host{Name: client.LocalHost}); got != localMountName {
		t.Errorf("this machine: %q", got)
	}
	if got := mountName(client.Host{Name: "build1"}); got != "build1" {
		t.Errorf("build1: %q", got)
	}
}

// TestFleetMountArgs: the background process gets the same hosts, with
// absolute paths, in the foreground.
func TestFleetMountArgs(t *testing.T) {
	g := cli.NewGlobals("dev", nil)
	if err := g.Flags.Parse([]string{"-s", "rel.sock", "--ssh", "a", "--ssh", "b", "--ssh-opt", "Port=2", "--ssh-cmd", "x relay"}); err != nil {
		t.Fatal(err)
	}
	ff := fleet.Flags{All: true, Hosts: "hosts", Timeout: 3 * time.Second}
	got, err := fleetMountArgs(g, ff, true, "/m")
	if err != nil {
		t.Fatal(err)
	}
	abs := func(p string) string { p, _ = filepath.Abs(p); return p }
	want := []string{"-s", abs("rel.sock"), "--ssh-cmd", "x relay", "--ssh-opt", "Port=2", "--ssh", "a", "--ssh", "b",
		"mount", "-f", "--timeout", "3s", "--all", "--hosts", abs("hosts"), "/m"}
	if !slices.Equal(got, want) {
		t.Errorf("args\n%q\nwant\n%q", got, want)
	}
}

// TestMountUsage: bad flags and operands are one line and exit 2, before
// anything is mounted or dialled.
func TestMountUsage(t *testing.T) {
	for _, tc := range []struct {
		cmd  string
		args []string
	}{
		{"mount", nil},
		{"mount", []string{"a", "b"}},
		{"mount", []string{"--timeout", "5s", "/m"}},
		{"mount", []string{"--timeout", "soon", "/m"}},
		{"mount", []string{"--all", "--timeout", "0", "/m"}},
		{"mount", []string{"--ssh", "h", "--aname", "/x", "/m"}},
		{"mount", []string{"--nosuch", "/m"}},
		{"umount", nil},
		{"umount", []string{"--ssh", "h", "/m"}},
	} {
		g := cli.NewGlobals("dev", map[string]string{"mount": Help, "umount": UmountHelp})
		g.Cmd = tc.cmd
		run := Run
		if tc.cmd == "umount" {
			run = RunUmount
		}
		var out, errs bytes.Buffer
		code := run(g, tc.args, &out, &errs)
		if code != cli.ExitUsage || out.Len() != 0 || strings.Count(errs.String(), "\n") != 1 {
			t.Errorf("%s %q: exit %d, stdout %q, stderr %q; want exit 2 and one line", tc.cmd, tc.args, code, out.String(), errs.String())
		}
	}
}

// fakeMount is a mount that is unmounted when told to, or from outside.
type fakeMount struct {
	gone      chan struct{}
	busy      bool
	unmounted bool
}

func (m *fakeMount) Wait() { <-m.gone }

func (m *fakeMount) Unmount() error {
	m.unmounted = true
	if m.busy {
		return errors.New("busy")
	}
	close(m.gone)
	return nil
}

// TestServe: a mount unmounted from outside ends serve with 0, and is not
// unmounted again; a lost daemon is one line, the unmount, and exit 1.
func TestServe(t *testing.T) {
	m := &fakeMount{gone: make(chan struct{})}
	close(m.gone)
	var out, errs bytes.Buffer
	if code := serve(m, "/m", "S", nil, nil, 0, &out, &errs); code != cli.ExitOK || m.unmounted || out.String() != "mounted S on /m\n" || errs.Len() != 0 {
		t.Errorf("unmounted from outside: exit %d, unmounted %v, stdout %q, stderr %q", code, m.unmounted, out.String(), errs.String())
	}

	m = &fakeMount{gone: make(chan struct{})}
	lost := make(chan error, 1)
	lost <- errors.New("EOF")
	out.Reset()
	if code := serve(m, "/m", "S", nil, lost, 0, &out, &errs); code != cli.ExitError || !m.unmounted ||
		errs.String() != "9harness mount: lost the daemon at S (EOF): unmounting /m\n" {
		t.Errorf("lost: exit %d, unmounted %v, stderr %q", code, m.unmounted, errs.String())
	}
}

// TestAnswered: the mount's line counts the hosts that answered their
// first dial, and each that did not is a line of its own, in name order.
func TestAnswered(t *testing.T) {
	for _, tc := range []struct {
		failed     map[string]error
		n          int
		want, errs string
	}{
		{nil, 1, "1 host", ""},
		{nil, 3, "3 hosts", ""},
		{map[string]error{"b": errors.New("no answer within 3s")}, 3, "2 of 3 hosts",
			"9harness mount: b: no answer within 3s; its directory appears once it answers\n"},
		{map[string]error{"z": errors.New("x"), "a": errors.New("y")}, 2, "0 of 2 hosts",
			"9harness mount: a: y; its directory appears once it answers\n9harness mount: z: x; its directory appears once it answers\n"},
	} {
		var errs bytes.Buffer
		if got := answered(tc.failed, tc.n, &errs); got != tc.want || errs.String() != tc.errs {
			t.Errorf("answered(%v, %d) = %q, stderr %q; want %q, %q", tc.failed, tc.n, got, errs.String(), tc.want, tc.errs)
		}
	}
}

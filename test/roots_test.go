package test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/9harness/9harness/internal/client"
)

// marker is the content of every foreign file: a root that was redirected
// would serve it.
const rootMarker = "FOREIGN-MARKER-7f3a"

// foreignDir makes a directory of 0600 files holding the marker, under the
// names the real root has (a followed link would serve them in its place)
// and one it lacks.
func foreignDir(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "foreign")
	for _, f := range []string{"real.txt", "only-foreign.txt", "storages/workspace.json", "storages/only-foreign.json"} {
		p := filepath.Join(dir, f)
		must(t, os.MkdirAll(filepath.Dir(p), 0o700))
		must(t, os.WriteFile(p, []byte(rootMarker+"\n"), 0o600))
	}
	return dir
}

// startWithHome runs 9harnessd with HOME=home and no --root, so that every
// root is a default one, looked up in the $HOME the daemon opened at start.
func startWithHome(t *testing.T, home string, extra ...string) *daemon {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "harness.sock")
	d := launchCmd(t, "env", append([]string{"HOME=" + home, bin("9harnessd"), "--unix", sock, "--audit", "stderr"}, extra...)...)
	d.sock = sock
	d.waitReady()
	return d
}

func direntNames(c *client.Client, path string) ([]string, error) {
	ents, err := c.ReadDir(path)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range ents {
		if e.Name != "." && e.Name != ".." {
			out = append(out, e.Name)
		}
	}
	return out, nil
}

// rootReader reads through the daemon in a loop and counts what it was
// served from outside the root.
type rootReader struct {
	dshNames, storageNames []string // what the real root lists
	realContent            string
	ops, absent, real      atomic.Int64
	foreign                atomic.Int64
	foreignSeen            sync.Map // a description of each foreign answer, for the failure message
}

func (rr *rootReader) bad(what string, n int) {
	rr.foreign.Add(int64(n))
	rr.foreignSeen.Store(what, true)
}

// once does one round of reads; every answer must be the real root's, or
// an error (the root absent while it is swapped).
func (rr *rootReader) once(c *client.Client) {
	check := func(path string, names []string, allowed []string) {
		for _, n := range names {
			if !slices.Contains(allowed, n) {
				rr.bad(path+" listed "+n, len(n))
			}
		}
	}
	if names, err := direntNames(c, "/dsh"); err == nil {
		check("/dsh", names, rr.dshNames)
	} else {
		rr.absent.Add(1)
	}
	if names, err := direntNames(c, "/dsh/storages"); err == nil {
		check("/dsh/storages", names, rr.storageNames)
	}
	if b, err := c.ReadFile("/dsh/real.txt"); err == nil && string(b) != rr.realContent {
		rr.bad(fmt.Sprintf("/dsh/real.txt = %.40q", b), len(b))
	} else if err == nil {
		rr.real.Add(1)
	}
	for _, p := range []string{"/dsh/only-foreign.txt", "/dsh/storages/only-foreign.json", "/dsh/self/environ", "/dsh/1/environ", "/dsh/etc/passwd", "/dsh/self/status"} {
		if b, err := c.ReadFile(p); err == nil {
			rr.bad(fmt.Sprintf("%s = %.40q", p, b), len(b)+1)
		}
	}
	if _, _, err := c.Stat("/dsh/proc"); err == nil {
		rr.bad("/dsh/proc stat'ed", 1)
	}
	rr.ops.Add(1)
}

func (rr *rootReader) report(t *testing.T) {
	t.Helper()
	if n := rr.foreign.Load(); n != 0 {
		var seen []string
		rr.foreignSeen.Range(func(k, _ any) bool { seen = append(seen, k.(string)); return len(seen) < 20 })
		t.Errorf("%d foreign bytes served:\n%s", n, strings.Join(seen, "\n"))
	}
}

// TestRootSwap: while readers loop through the daemon, a default root
// ($HOME/.dsh, looked up in the $HOME the daemon opened at start) is
// swapped 1,000 times, by renames, for symlinks to /, to /proc and to a
// directory of 0600 files holding a marker under the root's own names. No
// foreign byte is ever served: no marker, nothing of /proc, no listing of
// /; the root is absent while it is a link, and served again, the real one,
// when it is put back.
//
// Guards rule 1: no byte from outside the roots.
func TestRootSwap(t *testing.T) {
	t.Parallel()
	const swaps = 1000
	home := fixtureHome(t)
	dsh := filepath.Join(home, ".dsh")
	must(t, os.WriteFile(filepath.Join(dsh, "real.txt"), []byte("REAL\n"), 0o600))
	foreign := foreignDir(t)
	d := startWithHome(t, home)

	rr := &rootReader{realContent: "REAL\n"}
	c := d.client()
	var err error
	if rr.dshNames, err = direntNames(c, "/dsh"); err != nil || !slices.Contains(rr.dshNames, "real.txt") {
		t.Fatalf("/dsh before the swaps: %v %v", rr.dshNames, err)
	}
	if rr.storageNames, err = direntNames(c, "/dsh/storages"); err != nil {
		t.Fatal(err)
	}

	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i := 0; i < 3; i++ {
		rc := d.client()
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				rr.once(rc)
			}
		}()
	}
	targets := []string{"/", "/proc", foreign}
	start := time.Now()
	for i := 0; i < swaps; i++ {
		must(t, os.Rename(dsh, dsh+".real"))
		must(t, os.Symlink(targets[i%len(targets)], dsh))
		// Hold the link long enough for the readers to meet it.
		time.Sleep(200 * time.Microsecond)
		must(t, os.Remove(dsh))
		must(t, os.Rename(dsh+".real", dsh))
		time.Sleep(200 * time.Microsecond)
	}
	elapsed := time.Since(start)
	close(stop)
	wg.Wait()
	rr.report(t)
	t.Logf("%d swaps in %v; %d rounds of reads: %d found the root absent, %d read the real file; %d foreign bytes",
		swaps, elapsed.Round(time.Millisecond), rr.ops.Load(), rr.absent.Load(), rr.real.Load(), rr.foreign.Load())
	if rr.absent.Load() == 0 || rr.real.Load() == 0 {
		t.Error("the reads did not meet both the link and the real root: the test proves nothing")
	}

	// Put back, the real root is served.
	if b, err := c.ReadFile("/dsh/real.txt"); err != nil || string(b) != "REAL\n" {
		t.Errorf("after the swaps /dsh/real.txt = %q, %v", b, err)
	}
	// And a root that is a link now is absent, not followed.
	must(t, os.Rename(dsh, dsh+".real"))
	must(t, os.Symlink(foreign, dsh))
	if names, err := direntNames(c, "/"); err != nil || slices.Contains(names, "dsh") {
		t.Errorf("/ lists %v (%v) while .dsh is a link", names, err)
	}
	if b, err := c.ReadFile("/dsh/real.txt"); err == nil {
		t.Errorf("served through the link: %q", b)
	}
	must(t, os.Remove(dsh))
	must(t, os.Rename(dsh+".real", dsh))
	if b, err := c.ReadFile("/dsh/real.txt"); err != nil || string(b) != "REAL\n" {
		t.Errorf("put back: %q, %v", b, err)
	}
}

// TestMountBeneathRoot: in a private mount namespace the daemon runs in, a
// directory holding the marker is bound beneath a root (--root), and /proc
// beneath it too. Neither mount is crossed: the mount points' contents are
// neither listed, stat'ed nor read. The same daemon with NAME=PATH,xdev
// serves them (the control: the mounts are really there). The client runs
// in the daemon's mount namespace (nsenter): from another one it would be
// served the grantee view, which hides these names anyway.
//
// Guards rule 1: no byte from outside the roots.
func TestMountBeneathRoot(t *testing.T) {
	t.Parallel()
	requireRoot(t)
	unshare := require(t, "unshare")
	nsenter := require(t, "nsenter")
	home := fixtureHome(t)
	dsh := filepath.Join(home, ".dsh")
	must(t, os.MkdirAll(filepath.Join(dsh, "mnt"), 0o755))
	must(t, os.WriteFile(filepath.Join(dsh, "mnt", "under.txt"), []byte("under the mount\n"), 0o644))
	must(t, os.MkdirAll(filepath.Join(dsh, "p"), 0o755))
	must(t, os.WriteFile(filepath.Join(dsh, "owner-view.txt"), []byte("the owner's view\n"), 0o600))
	foreign := foreignDir(t)
	script := `src=$1 dst=$2 pdst=$3; shift 3; mount --bind "$src" "$dst"; mount --bind /proc "$pdst"; exec "$@"`
	start := func(xdev string) *daemon {
		sock := filepath.Join(t.TempDir(), "harness.sock")
		args := []string{"--mount", "--propagation", "private", "--", "sh", "-euc", script, "sh",
			foreign, filepath.Join(dsh, "mnt"), filepath.Join(dsh, "p"),
			bin("9harnessd"), "--unix", sock, "--audit", "stderr"}
		for _, a := range rootArgs(home) {
			if strings.HasPrefix(a, "dsh=") {
				a += xdev
			}
			args = append(args, a)
		}
		d := launchCmd(t, unshare, args...)
		d.sock = sock
		d.waitReady()
		return d
	}
	// in runs the client in d's mount namespace.
	in := func(d *daemon, args ...string) (string, error) {
		cmd := exec.Command(nsenter, append([]string{"-t", strconv.Itoa(d.cmd.Process.Pid), "-m", "--", bin("9harness"), "-s", d.sock}, args...)...)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}

	d := start("")
	if out, err := in(d, "cat", "/dsh/owner-view.txt"); err != nil || out != "the owner's view\n" {
		t.Fatalf("the client is not served the owner's view: %q, %v", out, err)
	}
	if out, err := in(d, "ls", "/dsh"); err != nil || !strings.Contains(out, "storages") {
		t.Fatalf("ls /dsh: %q, %v", out, err)
	}
	for _, p := range []string{"/dsh/mnt/real.txt", "/dsh/mnt/only-foreign.txt", "/dsh/mnt/storages/workspace.json", "/dsh/mnt/under.txt",
		"/dsh/p/self/environ", "/dsh/p/1/environ", "/dsh/p/self/status", "/dsh/p/version"} {
		if out, err := in(d, "cat", p); err == nil || strings.Contains(out, rootMarker) {
			t.Errorf("%s crossed a mount: %.60q", p, out)
		}
		if out, err := in(d, "stat", p); err == nil {
			t.Errorf("%s stat'ed across a mount: %.60q", p, out)
		}
	}
	for _, p := range []string{"/dsh/mnt", "/dsh/p"} {
		if out, err := in(d, "ls", p); err == nil {
			t.Errorf("the mount point %s listed: %q", p, out)
		}
	}
	if !strings.Contains(d.stderr.String(), "root dsh: "+dsh+": pinned now (a link or mount put in its place later is not followed)") {
		t.Errorf("the --root is not logged as pinned:\n%s", d.stderr.String())
	}

	// The control: asked for, the mounts are crossed.
	x := start(",xdev")
	if out, err := in(x, "cat", "/dsh/mnt/only-foreign.txt"); err != nil || out != rootMarker+"\n" {
		t.Errorf("with xdev: %q, %v; want the bound marker", out, err)
	}
	if out, err := in(x, "cat", "/dsh/p/version"); err != nil || !strings.HasPrefix(out, "Linux version") {
		t.Errorf("with xdev, /proc bound beneath the root: %q, %v", out, err)
	}
	if !strings.Contains(x.stderr.String(), "mounts beneath it are served (xdev)") {
		t.Errorf("xdev not logged:\n%s", x.stderr.String())
	}
}

// TestRootSymlinkAtStart: a default root that is a symlink when the daemon
// starts (GNU stow: ~/.dsh -> dotfiles/dsh) is resolved then, logged, and
// served; the link changed afterwards (to the marker directory, to /) or
// removed does not redirect it.
//
// Guards rule 1: no byte from outside the roots.
func TestRootSymlinkAtStart(t *testing.T) {
	t.Parallel()
	fixture := fixtureHome(t)
	home := filepath.Join(t.TempDir(), "home")
	must(t, os.Mkdir(home, 0o755))
	stowed := filepath.Join(filepath.Dir(home), "dotfiles", "dsh")
	must(t, os.MkdirAll(filepath.Dir(stowed), 0o755))
	must(t, os.Rename(filepath.Join(fixture, ".dsh"), stowed))
	must(t, os.WriteFile(filepath.Join(stowed, "real.txt"), []byte("STOWED\n"), 0o600))
	link := filepath.Join(home, ".dsh")
	must(t, os.Symlink("../dotfiles/dsh", link))
	foreign := foreignDir(t)

	d := startWithHome(t, home)
	want := "root dsh: " + link + " is a symlink: serving " + stowed + ", resolved once"
	eventually(t, func() bool { return strings.Contains(d.stderr.String(), want) }, "the log line "+want)
	c := d.client()
	names, err := direntNames(c, "/dsh")
	if err != nil || !slices.Contains(names, "real.txt") {
		t.Fatalf("/dsh = %v, %v", names, err)
	}
	for _, target := range []string{foreign, "/", "/proc", ""} {
		must(t, os.Remove(link))
		if target != "" {
			must(t, os.Symlink(target, link))
		}
		if b, err := c.ReadFile("/dsh/real.txt"); err != nil || string(b) != "STOWED\n" {
			t.Errorf("link now to %q: /dsh/real.txt = %q, %v", target, b, err)
		}
		if got, err := direntNames(c, "/dsh"); err != nil || !slices.Equal(got, names) {
			t.Errorf("link now to %q: /dsh lists %v, %v; want %v", target, got, err, names)
		}
		if b, err := c.ReadFile("/dsh/only-foreign.txt"); err == nil {
			t.Errorf("link now to %q: served %q", target, b)
		}
	}
}

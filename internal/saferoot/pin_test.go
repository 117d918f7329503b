package saferoot

import (
	"io"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/9harness/9harness/internal/errs"
)

func readAll(t *testing.T, r *Root, rel string) (string, error) {
	t.Helper()
	f, err := r.Open(rel)
	if err != nil {
		return "", err
	}
	defer f.Close()
	b, err := io.ReadAll(f)
	return string(b), err
}

func wantServed(t *testing.T, r *Root, rel, content string) {
	t.Helper()
	if got, err := readAll(t, r, rel); err != nil || got != content {
		t.Errorf("read %s = %q, %v; want %q", rel, got, err, content)
	}
}

// TestAnchoredRoot: a root opened by name from an anchor (what every
// default root is) serves its directory, appears when created after start,
// survives being deleted and recreated, and, replaced by a symlink (to an
// outside directory, to /, to /proc), is NotExist: never followed. A file
// or a fifo in its place is NotExist too.
//
// Guards rule 1: no byte from outside the roots.
func TestAnchoredRoot(t *testing.T) {
	eachMode(t, func(t *testing.T, opts []Option) {
		home := t.TempDir()
		write(t, home+"/outside/f", "OUTSIDE-SECRET")
		a, err := OpenAnchor(home)
		if err != nil {
			t.Fatal(err)
		}
		defer a.Close()
		r := a.Root(".dsh", opts...)
		if r.Path() != home+"/.dsh" {
			t.Errorf("Path = %q", r.Path())
		}
		if r.Exists() {
			t.Fatal("a missing root exists")
		}
		refuseAll(t, r, "", errs.NotExist)

		write(t, home+"/.dsh/f", "inside")
		if !r.Exists() {
			t.Fatal("a root created after start is not served")
		}
		wantServed(t, r, "f", "inside")

		for _, target := range []string{home + "/outside", "/", "/proc", "outside"} {
			if err := os.Rename(home+"/.dsh", home+"/.dsh.real"); err != nil {
				t.Fatal(err)
			}
			symlink(t, target, home+"/.dsh")
			if r.Exists() {
				t.Errorf("root swapped for a link to %s: Exists", target)
			}
			refuseAll(t, r, "", errs.NotExist)
			refuseAll(t, r, "f", errs.NotExist)
			refuseAll(t, r, "self", errs.NotExist)
			os.Remove(home + "/.dsh")
			if err := os.Rename(home+"/.dsh.real", home+"/.dsh"); err != nil {
				t.Fatal(err)
			}
			wantServed(t, r, "f", "inside")
		}

		// Deleted, recreated with other content.
		os.RemoveAll(home + "/.dsh")
		refuseAll(t, r, "f", errs.NotExist)
		write(t, home+"/.dsh/g", "again")
		wantServed(t, r, "g", "again")
		os.RemoveAll(home + "/.dsh")

		// Not a directory: not a root.
		write(t, home+"/.dsh", "file")
		refuseAll(t, r, "", errs.NotExist)
		os.Remove(home + "/.dsh")
		if err := unix.Mkfifo(home+"/.dsh", 0o600); err != nil {
			t.Fatal(err)
		}
		within(t, "a fifo root", func() { refuseAll(t, r, "", errs.NotExist) })
		os.Remove(home + "/.dsh")

		// A closed anchor serves nothing.
		write(t, home+"/.dsh/f", "inside")
		a.Close()
		refuseAll(t, r, "f", errs.NotExist)
	})
}

// TestPinSymlinkAtStart: a root that is a symlink when it is pinned (GNU
// stow, home-manager) is resolved then, said so, and served from the
// directory it named; a later change of the link (to an outside directory,
// or its removal) changes nothing.
//
// Guards rule 1: no byte from outside the roots.
func TestPinSymlinkAtStart(t *testing.T) {
	eachMode(t, func(t *testing.T, opts []Option) {
		base := t.TempDir()
		write(t, base+"/dotfiles/claude/f", "stowed")
		write(t, base+"/outside/f", "OUTSIDE-SECRET")
		mkdir(t, base+"/home")
		symlink(t, "../dotfiles/claude", base+"/home/.claude")
		var p Pinner
		defer p.Close()
		r, res, err := p.Pin(base+"/home/.claude", opts...)
		if err != nil {
			t.Fatal(err)
		}
		if !res.Link || res.Served != base+"/dotfiles/claude" || res.Mount || res.Absent {
			t.Errorf("resolution %+v", res)
		}
		if s := res.String(); !strings.Contains(s, "is a symlink: serving "+base+"/dotfiles/claude, resolved once") {
			t.Errorf("resolution says %q", s)
		}
		if r.Path() != base+"/dotfiles/claude" {
			t.Errorf("Path = %q", r.Path())
		}
		wantServed(t, r, "f", "stowed")
		os.Remove(base + "/home/.claude")
		symlink(t, base+"/outside", base+"/home/.claude")
		wantServed(t, r, "f", "stowed")
		os.Remove(base + "/home/.claude")
		wantServed(t, r, "f", "stowed")

		// The resolved directory is itself looked up by name: replaced by
		// a link, it is NotExist.
		os.Rename(base+"/dotfiles/claude", base+"/dotfiles/claude.real")
		symlink(t, base+"/outside", base+"/dotfiles/claude")
		refuseAll(t, r, "f", errs.NotExist)

		// A dangling link at start is not served, and says why.
		symlink(t, base+"/nowhere", base+"/home/.pi")
		r, _, err = p.Pin(base+"/home/.pi", opts...)
		if err == nil || r.Exists() {
			t.Errorf("a dangling link pinned: %v", err)
		}
		mkdir(t, base+"/nowhere")
		if r.Exists() {
			t.Error("a root dangling at start was served later")
		}
	})
}

// TestPinPlain: an ordinary root (and one that does not exist yet) is its
// entry in an anchor shared by every root of that directory; a parent
// given through a link is resolved once.
func TestPinPlain(t *testing.T) {
	base := t.TempDir()
	mkdir(t, base+"/home/.codex")
	symlink(t, "home", base+"/h")
	var p Pinner
	defer p.Close()
	r1, res1, err := p.Pin(base + "/home/.codex")
	if err != nil || res1.Link || res1.Mount || res1.Absent || res1.Served != base+"/home/.codex" {
		t.Fatalf("%+v %v", res1, err)
	}
	r2, res2, err := p.Pin(base + "/h/.omp")
	if err != nil || !res2.Absent || res2.Served != base+"/home/.omp" {
		t.Fatalf("%+v %v", res2, err)
	}
	if r1.anchor != r2.anchor || len(p.anchors) != 1 {
		t.Errorf("%d anchors for one directory", len(p.anchors))
	}
	if !r1.Exists() || r2.Exists() {
		t.Error("Exists")
	}
	write(t, base+"/home/.omp/x", "later")
	wantServed(t, r2, "x", "later")
	for _, bad := range []string{"relative/.claude", "/"} {
		if r, _, err := p.Pin(bad); err == nil || r.Exists() {
			t.Errorf("Pin(%q) accepted", bad)
		}
	}
	if r, _, err := p.Pin(base + "/nosuch/.claude"); err == nil || r.Exists() {
		t.Errorf("a root whose parent is missing: %v", err)
	}
}

// inMountNS runs f on a thread of its own in a private mount namespace,
// which dies with the thread: the mounts f makes are seen by nothing else
// and need no unmounting.
func inMountNS(t *testing.T, f func()) {
	t.Helper()
	if os.Getuid() != 0 {
		skipUnlessCI(t, "needs root to mount")
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread() // never unlocked: the thread exits with the goroutine
		if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
			t.Errorf("unshare: %v", err)
			return
		}
		if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
			t.Errorf("make / private: %v", err)
			return
		}
		f()
	}()
	<-done
}

func mount(t *testing.T, src, dst, fstype string, flags uintptr) {
	t.Helper()
	if err := unix.Mount(src, dst, fstype, flags, ""); err != nil {
		t.Errorf("mount %s on %s: %v", src, dst, err)
	}
}

// TestMountBeneathRoot: a mount beneath a root is not crossed: a bind of
// an outside directory and a tmpfs (another filesystem) are NotExist to
// stat, open and list, unless the root was made with CrossMounts. The walk
// (no openat2) tells mounts apart by device, so it is tried on the tmpfs.
//
// Guards rule 1: no byte from outside the roots.
func TestMountBeneathRoot(t *testing.T) {
	base := t.TempDir()
	write(t, base+"/outside/marker", "OUTSIDE-SECRET")
	write(t, base+"/root/f", "inside")
	write(t, base+"/root/bind/under", "hidden by the bind")
	mkdir(t, base+"/root/tmp")
	mkdir(t, base+"/root/deep/er")
	inMountNS(t, func() {
		mount(t, base+"/outside", base+"/root/bind", "", unix.MS_BIND)
		mount(t, "tmpfs", base+"/root/tmp", "tmpfs", 0)
		mount(t, base+"/outside", base+"/root/deep/er", "", unix.MS_BIND)
		write(t, base+"/root/tmp/marker", "OUTSIDE-SECRET")
		for _, m := range modes {
			r := New(base+"/root", m.opts...)
			wantServed(t, r, "f", "inside")
			mounts := []string{"tmp"}
			if m.opts == nil {
				mounts = append(mounts, "bind", "deep/er")
			}
			for _, mp := range mounts {
				refuseAll(t, r, mp+"/marker", errs.NotExist)
				if _, err := r.ReadDir(mp); err == nil {
					t.Errorf("%s: the mount point %s listed", m.name, mp)
				}
				if fi, err := r.Stat(mp); err == nil {
					t.Errorf("%s: the mount point %s stat'ed: %+v", m.name, mp, fi)
				}
			}
			x := New(base+"/root", append(slices.Clone(m.opts), CrossMounts())...)
			for _, mp := range mounts {
				wantServed(t, x, mp+"/marker", "OUTSIDE-SECRET")
			}
		}
	})
}

// TestPinMountPointAtStart: a root that is a mount point when pinned
// (impermanence) is served, through that mount only: unmounted, or with
// another filesystem mounted in its place, it is NotExist. A root that was
// an ordinary directory at start and has a mount put on it is NotExist.
func TestPinMountPointAtStart(t *testing.T) {
	base := t.TempDir()
	mkdir(t, base+"/home/.omp")
	write(t, base+"/home/.claude/f", "plain")
	write(t, base+"/persist/omp/f", "persisted")
	write(t, base+"/outside/f", "OUTSIDE-SECRET")
	inMountNS(t, func() {
		mount(t, base+"/persist/omp", base+"/home/.omp", "", unix.MS_BIND)
		for _, m := range modes {
			var p Pinner
			r, res, err := p.Pin(base+"/home/.omp", m.opts...)
			if err != nil || !res.Mount || res.Link {
				t.Errorf("%s: %+v %v", m.name, res, err)
			}
			if !strings.Contains(res.String(), "mount point") {
				t.Errorf("resolution says %q", res.String())
			}
			wantServed(t, r, "f", "persisted")
			plain, res, err := p.Pin(base+"/home/.claude", m.opts...)
			if err != nil || res.Mount {
				t.Errorf("%s: %+v %v", m.name, res, err)
			}
			wantServed(t, plain, "f", "plain")
			mount(t, "tmpfs", base+"/home/.claude", "tmpfs", 0)
			write(t, base+"/home/.claude/f", "OUTSIDE-SECRET")
			refuseAll(t, plain, "f", errs.NotExist)
			if err := unix.Unmount(base+"/home/.claude", 0); err != nil {
				t.Error(err)
			}
			wantServed(t, plain, "f", "plain")
			p.Close()
		}
		// Another filesystem mounted in its place is not that mount.
		var p Pinner
		defer p.Close()
		r, _, _ := p.Pin(base + "/home/.omp")
		if err := unix.Unmount(base+"/home/.omp", 0); err != nil {
			t.Fatal(err)
		}
		refuseAll(t, r, "f", errs.NotExist)
		mount(t, "tmpfs", base+"/home/.omp", "tmpfs", 0)
		write(t, base+"/home/.omp/f", "OUTSIDE-SECRET")
		refuseAll(t, r, "f", errs.NotExist)
	})
}

// TestAnchorCloseUnderReads: an anchor closed while its roots are read
// (the daemon stopping with requests in flight) answers them NotExist or
// the file, never a read through a descriptor number the close freed and
// another open took (run with -race).
func TestAnchorCloseUnderReads(t *testing.T) {
	home := t.TempDir()
	write(t, home+"/.dsh/f", "inside")
	write(t, home+"/elsewhere/f", "OTHER")
	a, err := OpenAnchor(home)
	if err != nil {
		t.Fatal(err)
	}
	r := a.Root(".dsh")
	done := make(chan struct{})
	var wg sync.WaitGroup
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-done:
					return
				default:
				}
				var b []byte
				f, err := r.Open("f")
				if err == nil {
					b, err = io.ReadAll(f)
					f.Close()
				}
				if err == nil && string(b) != "inside" {
					t.Errorf("read %q through a closed anchor", b)
					return
				}
				// Opens that may take the freed number.
				if f, err := os.Open(home + "/elsewhere"); err == nil {
					f.Close()
				}
			}
		}()
	}
	time.Sleep(20 * time.Millisecond)
	a.Close()
	time.Sleep(20 * time.Millisecond)
	close(done)
	wg.Wait()
	refuseAll(t, r, "f", errs.NotExist)
}

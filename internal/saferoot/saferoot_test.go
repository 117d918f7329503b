package saferoot

import (
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/9harness/9harness/internal/errs"
)

// modes runs every confinement test twice: through openat2, and through the
// per-component O_NOFOLLOW walk.
var modes = []struct {
	name string
	opts []Option
}{
	{"openat2", nil},
	{"walk", []Option{WithoutOpenat2()}},
}

func eachMode(t *testing.T, f func(t *testing.T, opts []Option)) {
	t.Helper()
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) { f(t, m.opts) })
	}
}

func TestMain(m *testing.M) {
	how := unix.OpenHow{Flags: unix.O_PATH | unix.O_CLOEXEC, Resolve: resolveFlags}
	if fd, err := unix.Openat2(unix.AT_FDCWD, ".", &how); err == nil {
		unix.Close(fd)
	} else {
		fmt.Fprintf(os.Stderr, "saferoot: openat2 unavailable (%v): the openat2 subtests exercise the walk\n", err)
	}
	os.Exit(m.Run())
}

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func mkdir(t *testing.T, path string) {
	t.Helper()
	if err := os.MkdirAll(path, 0o755); err != nil {
		t.Fatal(err)
	}
}

func symlink(t *testing.T, target, path string) {
	t.Helper()
	if err := os.Symlink(target, path); err != nil {
		t.Fatal(err)
	}
}

func wantKind(t *testing.T, what string, err error, k errs.Kind) {
	t.Helper()
	if err == nil {
		t.Errorf("%s: no error, want %v", what, k)
		return
	}
	if got := errs.KindOf(err); got != k {
		t.Errorf("%s: %v (kind %d), want kind %d (%v)", what, err, got, k, k)
	}
}

func names(ents []Entry) []string {
	var s []string
	for _, e := range ents {
		s = append(s, e.Name)
	}
	return s
}

// refuseAll asserts that rel neither stats, opens nor lists, with kind k.
func refuseAll(t *testing.T, r *Root, rel string, k errs.Kind) {
	t.Helper()
	_, err := r.Stat(rel)
	wantKind(t, "Stat "+rel, err, k)
	f, err := r.Open(rel)
	if f != nil {
		f.Close()
	}
	wantKind(t, "Open "+rel, err, k)
	_, err = r.ReadDir(rel)
	wantKind(t, "ReadDir "+rel, err, k)
}

func TestNormalTree(t *testing.T) {
	root := t.TempDir()
	write(t, root+"/a.txt", "hello")
	mkdir(t, root+"/B")
	write(t, root+"/b/c.txt", "xyz")
	mkdir(t, root+"/b/sub")
	write(t, root+"/empty", "")

	eachMode(t, func(t *testing.T, opts []Option) {
		// Reset each time: the other mode's read moved the atime.
		mtime := time.Date(2021, 2, 3, 4, 5, 6, 123456789, time.UTC)
		atime := time.Date(2020, 1, 2, 3, 4, 5, 987654321, time.UTC)
		if err := os.Chtimes(root+"/a.txt", atime, mtime); err != nil {
			t.Fatal(err)
		}
		r := New(root, opts...)
		if r.Path() != root || !r.Exists() {
			t.Fatalf("Path %q Exists %v", r.Path(), r.Exists())
		}

		fi, err := r.Stat("a.txt")
		if err != nil {
			t.Fatal(err)
		}
		var st unix.Stat_t
		if err := unix.Lstat(root+"/a.txt", &st); err != nil {
			t.Fatal(err)
		}
		if fi.Dir || fi.Size != 5 || fi.Mode != st.Mode || fi.Mode&unix.S_IFMT != unix.S_IFREG ||
			fi.Ino != st.Ino || fi.Dev != st.Dev || fi.Nlink != 1 {
			t.Errorf("Stat a.txt = %+v, lstat %+v", fi, st)
		}
		if !fi.Mtime.Equal(mtime) || !fi.Atime.Equal(atime) {
			t.Errorf("Stat a.txt times m=%v a=%v, want m=%v a=%v", fi.Mtime, fi.Atime, mtime, atime)
		}
		if fi.Ctime.IsZero() || time.Since(fi.Ctime) > time.Hour {
			t.Errorf("Stat a.txt ctime %v", fi.Ctime)
		}
		for rel, size := range map[string]int64{"b/c.txt": 3, "empty": 0} {
			fi, err := r.Stat(rel)
			if err != nil || fi.Dir || fi.Size != size {
				t.Errorf("Stat %s = %+v, %v", rel, fi, err)
			}
		}
		for _, rel := range []string{"", "B", "b", "b/sub"} {
			fi, err := r.Stat(rel)
			if err != nil || !fi.Dir || fi.Mode&unix.S_IFMT != unix.S_IFDIR {
				t.Errorf("Stat %q = %+v, %v", rel, fi, err)
			}
		}

		f, err := r.Open("a.txt")
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(f)
		if err != nil || string(b) != "hello" {
			t.Errorf("read a.txt = %q, %v", b, err)
		}
		buf := make([]byte, 3)
		if n, err := f.ReadAt(buf, 2); n != 3 || string(buf) != "llo" {
			t.Errorf("ReadAt = %d %q %v", n, buf, err)
		}
		if fl, err := unix.FcntlInt(f.Fd(), unix.F_GETFL, 0); err != nil || fl&unix.O_NONBLOCK != 0 || fl&unix.O_ACCMODE != unix.O_RDONLY {
			t.Errorf("flags %#x %v", fl, err)
		}
		f.Close()
		f, err = r.Open("b/c.txt")
		if err != nil {
			t.Fatal(err)
		}
		b, _ = io.ReadAll(f)
		f.Close()
		if string(b) != "xyz" {
			t.Errorf("read b/c.txt = %q", b)
		}

		ents, err := r.ReadDir("")
		if err != nil {
			t.Fatal(err)
		}
		want := []Entry{{"B", true, 0}, {"a.txt", false, 0}, {"b", true, 0}, {"empty", false, 0}}
		if len(ents) != len(want) {
			t.Fatalf("ReadDir = %+v", ents)
		}
		for i, e := range ents {
			var st unix.Stat_t
			unix.Lstat(filepath.Join(root, e.Name), &st)
			if e.Name != want[i].Name || e.Dir != want[i].Dir || e.Ino != st.Ino {
				t.Errorf("entry %d = %+v, want %+v ino %d", i, e, want[i], st.Ino)
			}
		}
		if ents, err := r.ReadDir("b"); err != nil || !slices.Equal(names(ents), []string{"c.txt", "sub"}) {
			t.Errorf("ReadDir b = %+v, %v", ents, err)
		}
		if ents, err := r.ReadDir("b/sub"); err != nil || len(ents) != 0 {
			t.Errorf("ReadDir b/sub = %+v, %v", ents, err)
		}

		_, err = r.Open("")
		wantKind(t, "Open root", err, errs.IsDir)
		_, err = r.Open("b")
		wantKind(t, "Open b", err, errs.IsDir)
		_, err = r.ReadDir("a.txt")
		wantKind(t, "ReadDir a.txt", err, errs.NotDir)
		_, err = r.ReadDir("b/c.txt")
		wantKind(t, "ReadDir b/c.txt", err, errs.NotDir)
		refuseAll(t, r, "nope", errs.NotExist)
		refuseAll(t, r, "b/nope/x", errs.NotExist)
		refuseAll(t, r, "a.txt/x", errs.NotExist) // ENOTDIR in the walk
	})
}

// Guards rule 1: no byte from outside the roots.
func TestSymlinks(t *testing.T) {
	base := t.TempDir()
	write(t, base+"/outside/x.txt", "OUTSIDE")
	root := base + "/root"
	write(t, root+"/real/x", "inside")
	symlink(t, "real/x", root+"/filelink")
	mkdir(t, root+"/a")
	symlink(t, "../real", root+"/a/link")
	symlink(t, "..", root+"/a/up")
	symlink(t, "/etc/passwd", root+"/etcfile")
	symlink(t, "does-not-exist", root+"/dangling")
	symlink(t, "real", root+"/dirlink")
	symlink(t, base+"/outside", root+"/abslink")
	symlink(t, "/proc/self/root/etc/passwd", root+"/magic")

	eachMode(t, func(t *testing.T, opts []Option) {
		r := New(root, opts...)
		for _, rel := range []string{
			"filelink", "a/link", "a/link/x", "a/up", "a/up/real/x", "etcfile", "dangling",
			"dirlink", "dirlink/x", "abslink", "abslink/x.txt", "magic",
		} {
			refuseAll(t, r, rel, errs.NotExist)
		}
		if ents, err := r.ReadDir(""); err != nil || !slices.Equal(names(ents), []string{"a", "real"}) {
			t.Errorf("ReadDir root = %v, %v", names(ents), err)
		}
		if ents, err := r.ReadDir("a"); err != nil || len(ents) != 0 {
			t.Errorf("ReadDir a = %v, %v", names(ents), err)
		}
		if f, err := r.Open("real/x"); err != nil {
			t.Errorf("Open real/x: %v", err)
		} else {
			f.Close()
		}
	})
}

// within fails the test if f does not return within 5 s: a confined operation
// that blocks on a fifo is a failure, not a hang.
func within(t *testing.T, what string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { defer close(done); f() }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatalf("%s blocked", what)
	}
}

// Guards rule 1: no byte from outside the roots.
func TestSpecialFiles(t *testing.T) {
	root := t.TempDir()
	write(t, root+"/ok.txt", "ok")
	if err := unix.Mkfifo(root+"/fifo", 0o644); err != nil {
		t.Fatal(err)
	}
	mkdir(t, root+"/d")
	if err := unix.Mkfifo(root+"/d/fifo", 0o644); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("unix", root+"/sock")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	special := []string{"fifo", "d/fifo", "sock"}
	if os.Geteuid() != 0 {
		t.Logf("not root: no device node created")
	} else if err := unix.Mknod(root+"/null", unix.S_IFCHR|0o666, int(unix.Mkdev(1, 3))); err != nil {
		t.Logf("mknod c 1 3 failed (%v): no device node tested", err)
	} else {
		special = append(special, "null")
	}

	// A writer blocked opening the fifo must stay blocked: Open refuses the
	// fifo by type through O_PATH, and never opens it for reading.
	writerDone := make(chan error, 1)
	go func() {
		f, err := os.OpenFile(root+"/fifo", os.O_WRONLY, 0)
		if err == nil {
			f.Close()
		}
		writerDone <- err
	}()

	eachMode(t, func(t *testing.T, opts []Option) {
		r := New(root, opts...)
		for _, rel := range special {
			within(t, "Stat "+rel, func() {
				_, err := r.Stat(rel)
				wantKind(t, "Stat "+rel, err, errs.NotExist)
			})
			within(t, "Open "+rel, func() {
				f, err := r.Open(rel)
				if f != nil {
					f.Close()
				}
				wantKind(t, "Open "+rel, err, errs.NotExist)
			})
			within(t, "ReadDir "+rel, func() {
				_, err := r.ReadDir(rel)
				wantKind(t, "ReadDir "+rel, err, errs.NotExist)
			})
		}
		within(t, "ReadDir", func() {
			if ents, err := r.ReadDir(""); err != nil || !slices.Equal(names(ents), []string{"d", "ok.txt"}) {
				t.Errorf("ReadDir = %v, %v", names(ents), err)
			}
			if ents, err := r.ReadDir("d"); err != nil || len(ents) != 0 {
				t.Errorf("ReadDir d = %v, %v", names(ents), err)
			}
		})
	})

	select {
	case err := <-writerDone:
		t.Errorf("the fifo's writer was woken (%v): the fifo was opened", err)
	case <-time.After(100 * time.Millisecond):
	}
	// Release the writer.
	if fd, err := unix.Open(root+"/fifo", unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0); err == nil {
		<-writerDone
		unix.Close(fd)
	}
}

// Guards rule 2: no credential listed or read; a grantee sees session state only.
func TestExcludedAtDepth(t *testing.T) {
	root := t.TempDir()
	secrets := []string{"auth.json", ".credentials.json", "12345.0a1b2c.key", "settings.json", "ID_RSA.pub", ".env", "config.toml"}
	dir := root
	var levels []string // rel of each directory, depth 1..5 entries inside
	rel := ""
	for depth := 1; depth <= 5; depth++ {
		levels = append(levels, rel)
		for _, s := range secrets {
			write(t, filepath.Join(dir, s), "SECRET")
		}
		write(t, filepath.Join(dir, "my-Secrets", "plain.txt"), "SECRET")
		write(t, filepath.Join(dir, "ok.txt"), "ok")
		next := fmt.Sprintf("d%d", depth)
		if depth < 5 {
			mkdir(t, filepath.Join(dir, next))
			dir = filepath.Join(dir, next)
			rel = strings.TrimPrefix(rel+"/"+next, "/")
		}
	}

	eachMode(t, func(t *testing.T, opts []Option) {
		r := New(root, opts...)
		for i, lv := range levels {
			want := []string{"ok.txt"}
			if i < len(levels)-1 {
				want = []string{fmt.Sprintf("d%d", i+1), "ok.txt"}
			}
			ents, err := r.ReadDir(lv)
			if err != nil || !slices.Equal(names(ents), want) {
				t.Errorf("ReadDir %q = %v, %v, want %v", lv, names(ents), err, want)
			}
			join := func(s string) string { return strings.TrimPrefix(lv+"/"+s, "/") }
			for _, s := range append(secrets, "my-Secrets", "my-Secrets/plain.txt") {
				refuseAll(t, r, join(s), errs.Private)
			}
			if f, err := r.Open(join("ok.txt")); err != nil {
				t.Errorf("Open %s: %v", join("ok.txt"), err)
			} else {
				f.Close()
			}
		}
	})
}

func TestInvalidRel(t *testing.T) {
	base := t.TempDir()
	write(t, base+"/root/a/b", "x")
	eachMode(t, func(t *testing.T, opts []Option) {
		// A root that does not exist proves nothing was looked up: a lookup
		// would have answered NotExist.
		for _, root := range []string{base + "/root", base + "/absent"} {
			r := New(root, opts...)
			for _, c := range invalidRels {
				refuseAll(t, r, c.rel, c.kind)
			}
		}
	})
}

func TestMissingRoot(t *testing.T) {
	base := t.TempDir()
	root := base + "/root"
	eachMode(t, func(t *testing.T, opts []Option) {
		r := New(root, opts...)
		if r.Exists() {
			t.Fatal("Exists of a missing root")
		}
		refuseAll(t, r, "", errs.NotExist)
		refuseAll(t, r, "a", errs.NotExist)

		write(t, root+"/a", "one")
		if !r.Exists() {
			t.Fatal("root created, Exists false")
		}
		if fi, err := r.Stat(""); err != nil || !fi.Dir {
			t.Fatalf("Stat root = %+v, %v", fi, err)
		}
		if ents, err := r.ReadDir(""); err != nil || !slices.Equal(names(ents), []string{"a"}) {
			t.Errorf("ReadDir = %v, %v", names(ents), err)
		}

		// Deleted and recreated with other content between calls.
		if err := os.RemoveAll(root); err != nil {
			t.Fatal(err)
		}
		if r.Exists() {
			t.Fatal("root deleted, Exists true")
		}
		refuseAll(t, r, "a", errs.NotExist)
		write(t, root+"/b", "two")
		if ents, err := r.ReadDir(""); err != nil || !slices.Equal(names(ents), []string{"b"}) {
			t.Errorf("ReadDir recreated = %v, %v", names(ents), err)
		}
		f, err := r.Open("b")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(f)
		f.Close()
		if string(b) != "two" {
			t.Errorf("read b = %q", b)
		}
		refuseAll(t, r, "a", errs.NotExist)
		os.RemoveAll(root)

		// A root that is a file is not a root.
		write(t, root, "file")
		if r.Exists() {
			t.Error("Exists of a file root")
		}
		refuseAll(t, r, "", errs.NotExist)
		os.Remove(root)
	})
}

// Guards rule 1: no byte from outside the roots.
func TestRootIsSymlink(t *testing.T) {
	base := t.TempDir()
	write(t, base+"/real/a.txt", "via link")
	symlink(t, base+"/real", base+"/link")
	symlink(t, "link", base+"/link2")
	eachMode(t, func(t *testing.T, opts []Option) {
		for _, root := range []string{base + "/link", base + "/link2"} {
			r := New(root, opts...)
			if !r.Exists() {
				t.Fatalf("%s: Exists false", root)
			}
			if fi, err := r.Stat(""); err != nil || !fi.Dir {
				t.Errorf("Stat root = %+v, %v", fi, err)
			}
			if fi, err := r.Stat("a.txt"); err != nil || fi.Size != 8 {
				t.Errorf("Stat a.txt = %+v, %v", fi, err)
			}
			f, err := r.Open("a.txt")
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(f)
			f.Close()
			if string(b) != "via link" {
				t.Errorf("read = %q", b)
			}
			if ents, err := r.ReadDir(""); err != nil || !slices.Equal(names(ents), []string{"a.txt"}) {
				t.Errorf("ReadDir = %v, %v", names(ents), err)
			}
		}
	})
}

func TestHugeDir(t *testing.T) {
	const n = 100_000
	root := t.TempDir()
	mkdir(t, root+"/big")
	start := time.Now()
	dfd, err := unix.Open(root+"/big", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	want := make([]string, 0, n)
	for i := range n {
		name := fmt.Sprintf("f%06d", i)
		want = append(want, name)
		if err := unix.Mknodat(dfd, name, unix.S_IFREG|0o644, 0); err != nil {
			t.Fatal(err)
		}
	}
	unix.Close(dfd)
	// A few that must not be listed.
	write(t, root+"/big/auth.json", "x")
	symlink(t, "f000000", root+"/big/link")
	t.Logf("created %d files in %v", n, time.Since(start))

	eachMode(t, func(t *testing.T, opts []Option) {
		r := New(root, opts...)
		start := time.Now()
		ents, err := r.ReadDir("big")
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("listed %d entries in %v", len(ents), time.Since(start))
		if len(ents) != n {
			t.Fatalf("listed %d, want %d", len(ents), n)
		}
		for i, e := range ents {
			if e.Name != want[i] || e.Dir || e.Ino == 0 {
				t.Fatalf("entry %d = %+v, want %s", i, e, want[i])
			}
		}
	})
}

func countFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		skipUnlessCI(t, "no /proc/self/fd: %v", err)
	}
	return len(ents)
}

func TestNoFDLeak(t *testing.T) {
	base := t.TempDir()
	root := base + "/root"
	write(t, root+"/a/b/c.txt", "c")
	write(t, root+"/f", "f")
	write(t, root+"/auth.json", "x")
	symlink(t, "a", root+"/link")
	symlink(t, "b", root+"/a/link")
	if err := unix.Mkfifo(root+"/fifo", 0o644); err != nil {
		t.Fatal(err)
	}
	roots := []*Root{New(root), New(root, WithoutOpenat2()), New(base + "/absent"), New(base+"/absent", WithoutOpenat2())}
	ops := []func(r *Root){
		func(r *Root) { r.Stat("a/b/c.txt") },
		func(r *Root) { r.Stat("") },
		func(r *Root) { r.Stat("link") },
		func(r *Root) { r.Stat("a/link/c.txt") },
		func(r *Root) { r.Stat("fifo") },
		func(r *Root) { r.Stat("auth.json") },
		func(r *Root) { r.Stat("a/../f") },
		func(r *Root) {
			if f, err := r.Open("a/b/c.txt"); err == nil {
				f.Close()
			}
		},
		func(r *Root) { r.Open("a") },
		func(r *Root) { r.Open("fifo") },
		func(r *Root) { r.Open("link/b/c.txt") },
		func(r *Root) { r.Open("a/b/c.txt/x") },
		func(r *Root) { r.Open("missing") },
		func(r *Root) { r.ReadDir("") },
		func(r *Root) { r.ReadDir("a/b") },
		func(r *Root) { r.ReadDir("f") },
		func(r *Root) { r.ReadDir("link") },
		func(r *Root) { r.ReadDir("a/link") },
		func(r *Root) { r.ReadDir("fifo") },
		func(r *Root) { r.Exists() },
	}
	run := func(iters int) {
		for i := range iters {
			ops[i%len(ops)](roots[(i/len(ops))%len(roots)])
		}
	}
	run(len(ops) * len(roots)) // warm up whatever the runtime opens lazily (the poller)
	before := countFDs(t)
	run(1000)
	if after := countFDs(t); after != before {
		t.Errorf("fds before %d, after 1000 operations %d", before, after)
	}
}

func TestOpenat2Used(t *testing.T) {
	how := unix.OpenHow{Flags: unix.O_PATH | unix.O_CLOEXEC, Resolve: resolveFlags}
	fd, err := unix.Openat2(unix.AT_FDCWD, ".", &how)
	if err != nil {
		skipUnlessCI(t, "openat2: %v", err)
	}
	unix.Close(fd)
	r := New(t.TempDir())
	if _, err := r.Stat(""); err != nil {
		t.Fatal(err)
	}
	if openat2Missing.Load() {
		t.Error("openat2 works but was marked missing")
	}
}

func TestClassifyUnknown(t *testing.T) {
	root := t.TempDir()
	write(t, root+"/file", "x")
	mkdir(t, root+"/dir")
	symlink(t, "file", root+"/link")
	if err := unix.Mkfifo(root+"/fifo", 0o644); err != nil {
		t.Fatal(err)
	}
	write(t, root+"/token.txt", "x")
	fd, err := unix.Open(root, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	unix.Lstat(root+"/file", &st)
	cases := []struct {
		name string
		ok   bool
		dir  bool
	}{
		{"file", true, false}, {"dir", true, true}, {"link", false, false},
		{"fifo", false, false}, {"vanished", false, false}, {"token.txt", false, false},
	}
	for _, c := range cases {
		dir, ino, ok := classify(fd, []byte(c.name), unix.DT_UNKNOWN, 0)
		if ok != c.ok || dir != c.dir || (ok && ino == 0) {
			t.Errorf("classify %s = %v %d %v, want ok=%v dir=%v", c.name, dir, ino, ok, c.ok, c.dir)
		}
	}
	if _, ino, _ := classify(fd, []byte("file"), unix.DT_UNKNOWN, 0); ino != st.Ino {
		t.Errorf("classify ino %d, want %d", ino, st.Ino)
	}
	for _, dt := range []uint8{unix.DT_LNK, unix.DT_FIFO, unix.DT_SOCK, unix.DT_CHR, unix.DT_BLK} {
		if _, _, ok := classify(fd, []byte("file"), dt, 1); ok {
			t.Errorf("classify d_type %d listed", dt)
		}
	}
	// A malformed buffer is an error, not a panic.
	if err := new(scratch).appendDirents(fd, make([]byte, 10)); err == nil {
		t.Error("short dirent buffer accepted")
	}
	bad := make([]byte, 24)
	bad[direntReclen] = 200
	if err := new(scratch).appendDirents(fd, bad); err == nil {
		t.Error("overlong reclen accepted")
	}
}

// skipUnlessCI skips on a machine that lacks a kernel feature, saying why,
// and fails under CI=true, where a missing component must not pass silently.
func skipUnlessCI(t *testing.T, format string, args ...any) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf("missing in CI: "+format, args...)
	}
	t.Skipf(format, args...)
}

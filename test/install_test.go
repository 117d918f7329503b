package test

// make install, make uninstall and make install-user, run for real: into a
// DESTDIR (a package's staging), system-wide (as root, in a private mount
// namespace whose install directories are empty tmpfs, so the machine's
// own /usr/local, polkit actions and journal catalog are never touched),
// and into a fresh HOME. Each checks that every file lands where the
// system reads it, and that uninstall removes every file install put.

import (
	"bytes"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The completions the CLI ships, by source file: each is installed only
// when the checkout has it.
var completionFiles = map[string]struct{ system, user string }{
	"9harness.bash": {"share/bash-completion/completions/9harness", ".local/share/bash-completion/completions/9harness"},
	"_9harness":     {"share/zsh/site-functions/_9harness", ".local/share/zsh/site-functions/_9harness"},
	"9harness.fish": {"share/fish/vendor_completions.d/9harness.fish", ".local/share/fish/vendor_completions.d/9harness.fish"},
}

func haveCompletion(name string) bool {
	_, err := os.Stat(filepath.Join("../packaging/completions", name))
	return err == nil
}

// wantSystemFiles is every file make install puts for prefix, relative to
// the root (or DESTDIR), with its mode.
func wantSystemFiles(prefix string) map[string]fs.FileMode {
	p := strings.TrimPrefix(prefix, "/")
	want := map[string]fs.FileMode{
		p + "/bin/9harnessd":                            0o755,
		p + "/bin/9harness":                             0o755,
		p + "/bin/zmxify":                               0o755,
		p + "/lib/systemd/user/9harness.socket":         0o644,
		p + "/lib/systemd/user/9harness.service":        0o644,
		p + "/lib/systemd/user/9harness-proc.socket":    0o644,
		p + "/lib/systemd/user/9harness-proc.service":   0o644,
		p + "/lib/systemd/user/9harness-notify.service": 0o644,
		p + "/lib/systemd/catalog/9harness.catalog":     0o644,
		p + "/share/man/man1/9harness.1":                0o644,
		p + "/share/man/man8/9harnessd.8":               0o644,
	}
	// For /usr and /usr/local: the one directory every polkitd reads
	// (before polkit 126 the only one); any other prefix keeps
	// everything under itself.
	if prefix == "/usr" || prefix == "/usr/local" {
		want["usr/share/polkit-1/actions/org.ninep.harness.move.policy"] = 0o644
	} else {
		want[p+"/share/polkit-1/actions/org.ninep.harness.move.policy"] = 0o644
	}
	for src, dst := range completionFiles {
		if haveCompletion(src) {
			want[p+"/"+dst.system] = 0o644
		}
	}
	return want
}

// filesUnder lists the regular files (and links, and anything not a
// directory) under root, relative to it, with their permission bits.
func filesUnder(t *testing.T, root string) map[string]fs.FileMode {
	t.Helper()
	got := map[string]fs.FileMode{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		got[rel] = fi.Mode().Perm()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func sameFiles(t *testing.T, what string, got, want map[string]fs.FileMode) {
	t.Helper()
	for f, m := range want {
		if g, ok := got[f]; !ok {
			t.Errorf("%s: %s missing", what, f)
		} else if g != m {
			t.Errorf("%s: %s has mode %o, want %o", what, f, g, m)
		}
	}
	for f := range got {
		if _, ok := want[f]; !ok {
			t.Errorf("%s: %s was not expected", what, f)
		}
	}
}

// goEnv pins Go's caches and configuration for a make run with another
// HOME (install-user's destination): Go derives them from HOME otherwise,
// would download and compile every module again, and would write its
// telemetry counters into that HOME.
func goEnv(t *testing.T) []string {
	t.Helper()
	out, err := exec.Command("go", "env", "GOCACHE", "GOMODCACHE", "GOPATH").Output()
	if err != nil {
		t.Fatalf("go env: %v", err)
	}
	v := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(v) != 3 {
		t.Fatalf("go env: %q", out)
	}
	config, err := os.UserConfigDir()
	if err != nil {
		t.Fatal(err)
	}
	return []string{"GOCACHE=" + v[0], "GOMODCACHE=" + v[1], "GOPATH=" + v[2], "XDG_CONFIG_HOME=" + config}
}

// makeRun runs make in the repository with vars and env added.
func makeRun(t *testing.T, env []string, args ...string) (stdout, stderr string) {
	t.Helper()
	cmd := exec.Command("make", append([]string{"-s", "-C", ".."}, args...)...)
	cmd.Env = append(append(os.Environ(), goEnv(t)...), env...)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	if err := cmd.Run(); err != nil {
		t.Fatalf("make %s: %v\n%s%s", strings.Join(args, " "), err, o.String(), e.String())
	}
	return o.String(), e.String()
}

// A journalctl that records that it ran, for the staged installs, which
// must not run the real one.
func journalctlStub(t *testing.T) (path, log string) {
	t.Helper()
	d := t.TempDir()
	path, log = filepath.Join(d, "journalctl"), filepath.Join(d, "ran")
	writeExe(t, path, []byte("#!/bin/sh\necho \"$@\" >>"+log+"\n"))
	return path, log
}

func TestInstallDestdir(t *testing.T) {
	t.Parallel()
	require(t, "make")
	binDir := t.TempDir()
	jctl, jlog := journalctlStub(t)
	for _, prefix := range []string{"/usr/local", "/usr"} {
		t.Run(strings.TrimPrefix(prefix, "/"), func(t *testing.T) {
			dest := t.TempDir()
			vars := []string{"DESTDIR=" + dest, "PREFIX=" + prefix, "BIN=" + binDir, "JOURNALCTL=" + jctl}
			makeRun(t, nil, append([]string{"install"}, vars...)...)
			sameFiles(t, "make install DESTDIR", filesUnder(t, dest), wantSystemFiles(prefix))

			// The units run the installed binary, not the staging path.
			for u, exe := range map[string]string{"9harness.service": "9harnessd", "9harness-proc.service": "9harnessd", "9harness-notify.service": "9harness"} {
				b, err := os.ReadFile(filepath.Join(dest, prefix, "lib/systemd/user", u))
				must(t, err)
				if !strings.Contains(string(b), "\nExecStart="+prefix+"/bin/"+exe+" ") || strings.Contains(string(b), dest) || strings.Contains(string(b), "@BINDIR@") {
					t.Errorf("%s: ExecStart is not %s/bin/%s:\n%s", u, prefix, exe, b)
				}
			}

			makeRun(t, nil, append([]string{"uninstall"}, vars...)...)
			if left := filesUnder(t, dest); len(left) > 0 {
				t.Errorf("make uninstall DESTDIR left %v", slices.Sorted(maps.Keys(left)))
			}
		})
	}
	// A staged install leaves the catalog database to the package.
	if b, err := os.ReadFile(jlog); err == nil {
		t.Errorf("journalctl ran under DESTDIR: %s", b)
	}
}

// TestInstallPrefix: make install PREFIX=DIR (no DESTDIR) writes nothing
// outside DIR: not the polkit action, not the journal catalog's database.
// Run as root in a private mount namespace whose system directories are
// empty tmpfs, so a file put there is seen and the machine's are never
// touched.
func TestInstallPrefix(t *testing.T) {
	t.Parallel()
	requireRoot(t)
	require(t, "make")
	require(t, "unshare")
	binDir := t.TempDir()
	prefix := filepath.Join(t.TempDir(), "opt", "9harness")
	jctl, jlog := journalctlStub(t)
	dirs := []string{"/usr/local/bin", "/usr/local/lib", "/usr/local/share", "/usr/share/polkit-1/actions", "/var/lib/systemd/catalog"}
	script := `set -eu
for d in ` + strings.Join(dirs, " ") + `; do mkdir -p "$d"; mount -t tmpfs -o mode=755 tmpfs "$d"; done
make -s -C .. install BIN="$BIN" PREFIX="$PREFIX" JOURNALCTL="$JCTL"
echo "== outside"
find ` + strings.Join(dirs, " ") + ` ! -type d | sort
echo "== end"
`
	work := t.TempDir()
	writeExe(t, filepath.Join(work, "install.sh"), []byte(script))
	cmd := exec.Command("unshare", "--mount", "--propagation", "private", "--", "sh", filepath.Join(work, "install.sh"))
	cmd.Env = append(append(os.Environ(), goEnv(t)...), "BIN="+binDir, "PREFIX="+prefix, "JCTL="+jctl)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	_, rest, _ := strings.Cut(string(out), "== outside\n")
	if outside, _, _ := strings.Cut(rest, "== end"); strings.TrimSpace(outside) != "" {
		t.Errorf("make install PREFIX=%s wrote outside it:\n%s", prefix, outside)
	}
	if b, err := os.ReadFile(jlog); err == nil {
		t.Errorf("journalctl ran for PREFIX=%s: %s", prefix, b)
	}
	got := map[string]fs.FileMode{}
	for f, m := range filesUnder(t, prefix) {
		got[strings.TrimPrefix(filepath.Join(prefix, f), "/")] = m
	}
	sameFiles(t, "make install PREFIX", got, wantSystemFiles(prefix))
}

// TestDist: make dist twice gives the same bytes (the same SHA256SUMS),
// and its tarball, unpacked at a root, is the make install layout of
// /usr/local with the version stamped in both programs.
func TestDist(t *testing.T) {
	// Everything make dist writes is under its DISTDIR and a stage of its
	// own (it builds into the stage, not bin/): it runs beside the others.
	t.Parallel()
	require(t, "make")
	require(t, "git")
	const version = "v0.0.1-test"
	var sums, dirs []string
	for range 2 {
		dir := t.TempDir()
		makeRun(t, nil, "dist", "VERSION="+version, "DISTDIR="+dir)
		b, err := os.ReadFile(filepath.Join(dir, "SHA256SUMS"))
		must(t, err)
		sums, dirs = append(sums, string(b)), append(dirs, dir)
	}
	if sums[0] != sums[1] || !strings.Contains(sums[0], "9harness-"+version+"-linux-") {
		t.Fatalf("two make dist runs: %q and %q", sums[0], sums[1])
	}
	// The two tarballs are the same bytes: the second is the one unpacked.
	name := strings.Fields(sums[0])[1]
	dir := dirs[1]
	root := t.TempDir()
	if out, err := exec.Command("tar", "-C", root, "-xzf", filepath.Join(dir, name)).CombinedOutput(); err != nil {
		t.Fatalf("tar: %v\n%s", err, out)
	}
	sameFiles(t, "make dist", filesUnder(t, root), wantSystemFiles("/usr/local"))
	for _, prog := range []string{"9harness", "9harnessd"} {
		out, err := exec.Command(filepath.Join(root, "usr/local/bin", prog), "--version").Output()
		if err != nil || strings.TrimSpace(string(out)) != prog+" "+version {
			t.Errorf("%s --version: %q %v, want %q", prog, out, err, prog+" "+version)
		}
	}
}

// System-wide, as root: the real journalctl --update-catalog, whose
// database then holds the catalog's entries until make uninstall.
func TestInstallSystemWide(t *testing.T) {
	t.Parallel()
	requireRoot(t)
	require(t, "make")
	require(t, "unshare")
	require(t, "journalctl")
	binDir := t.TempDir()
	work := t.TempDir()
	// The directories install writes, each an empty tmpfs in the
	// namespace: what is in them afterwards is what make put there.
	dirs := []string{"/usr/local/bin", "/usr/local/lib", "/usr/local/share", "/usr/share/polkit-1/actions", "/var/lib/systemd/catalog"}
	script := `set -eu
for d in ` + strings.Join(dirs, " ") + `; do mkdir -p "$d"; mount -t tmpfs -o mode=755 tmpfs "$d"; done
make -s -C .. install BIN="$BIN"
echo "== installed"
find ` + strings.Join(dirs[:4], " ") + ` -type f | sort
echo "== catalog"
journalctl --list-catalog 9a3c1d2e5f6b4c7d8e9f0a1b2c3d4e51 2>&1 || true
make -s -C .. uninstall
echo "== left"
find ` + strings.Join(dirs[:4], " ") + ` ! -type d | sort
echo "== catalog after"
journalctl --list-catalog 9a3c1d2e5f6b4c7d8e9f0a1b2c3d4e51 2>&1 || true
echo "== end"
`
	writeExe(t, filepath.Join(work, "install.sh"), []byte(script))
	cmd := exec.Command("unshare", "--mount", "--propagation", "private", "--", "sh", filepath.Join(work, "install.sh"))
	cmd.Env = append(os.Environ(), "BIN="+binDir)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	section := func(name string) []string {
		_, rest, _ := strings.Cut(string(out), "== "+name+"\n")
		body, _, _ := strings.Cut(rest, "== ")
		return strings.Fields(body)
	}
	want := wantSystemFiles("/usr/local")
	var wantPaths []string
	for f := range want {
		wantPaths = append(wantPaths, "/"+f)
	}
	slices.Sort(wantPaths)
	if got := section("installed"); !slices.Equal(got, wantPaths) {
		t.Errorf("make install put\n\t%s\nwant\n\t%s", strings.Join(got, "\n\t"), strings.Join(wantPaths, "\n\t"))
	}
	// journalctl -x shows the catalog's text after make install ...
	if got := strings.Join(section("catalog"), " "); !strings.Contains(got, "9a3c1d2e5f6b4c7d8e9f0a1b2c3d4e51") || !strings.Contains(got, "refused") {
		t.Errorf("after make install, journalctl --list-catalog: %s\n%s", got, out)
	}
	// ... and no more after make uninstall, which leaves no file.
	if got := section("left"); len(got) > 0 {
		t.Errorf("make uninstall left %q", got)
	}
	if got := strings.Join(section("catalog after"), " "); strings.Contains(got, "refused") {
		t.Errorf("after make uninstall, journalctl --list-catalog still has the entry: %s", got)
	}
}

func TestInstallUser(t *testing.T) {
	t.Parallel()
	require(t, "make")
	binDir := t.TempDir()
	home := t.TempDir()
	// No user manager to reach: uninstall-user's systemctl --user fails
	// and is ignored, as on a machine without one.
	noBus := []string{"XDG_RUNTIME_DIR=" + t.TempDir(), "DBUS_SESSION_BUS_ADDRESS=unix:path=/nonexistent"}
	withoutLocal := "PATH=/usr/local/go/bin:/usr/local/bin:/usr/bin:/bin"
	if goBin, err := exec.LookPath("go"); err == nil {
		withoutLocal = "PATH=" + filepath.Dir(goBin) + ":/usr/bin:/bin"
	}
	_, errOut := makeRun(t, append(noBus, withoutLocal), "install-user", "HOME="+home, "BIN="+binDir)
	if !strings.Contains(errOut, home+"/.local/bin is not on your PATH") {
		t.Errorf("install-user with ~/.local/bin off PATH said nothing about it:\n%s", errOut)
	}
	want := map[string]fs.FileMode{
		".local/bin/9harnessd":                         0o755,
		".local/bin/9harness":                          0o755,
		".local/bin/zmxify":                            0o755,
		".config/systemd/user/9harness.socket":         0o644,
		".config/systemd/user/9harness.service":        0o644,
		".config/systemd/user/9harness-proc.socket":    0o644,
		".config/systemd/user/9harness-proc.service":   0o644,
		".config/systemd/user/9harness-notify.service": 0o644,
		".local/share/man/man1/9harness.1":             0o644,
		".local/share/man/man8/9harnessd.8":            0o644,
	}
	for src, dst := range completionFiles {
		if haveCompletion(src) {
			want[dst.user] = 0o644
		}
	}
	sameFiles(t, "make install-user", filesUnder(t, home), want)

	// On PATH: no complaint.
	_, errOut = makeRun(t, append(noBus, "PATH="+home+"/.local/bin:"+strings.TrimPrefix(withoutLocal, "PATH=")), "install-user", "HOME="+home, "BIN="+binDir)
	if strings.Contains(errOut, "not on your PATH") {
		t.Errorf("install-user with ~/.local/bin on PATH complained:\n%s", errOut)
	}

	makeRun(t, noBus, "uninstall-user", "HOME="+home)
	if left := filesUnder(t, home); len(left) > 0 {
		t.Errorf("make uninstall-user left %v", left)
	}
}

package realcli

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// minNode is the oldest Node every pinned CLI runs on: pi 1.6 needs 22.19
// (on 20 it dies at start, its node:module lacks enableCompileCache), and
// Claude Code's npm wrapper declares 22. One Node for all keeps one install.
var minNode = [3]int{22, 19, 0}

// missing fails the test under CI (CI=true), where a missing component is a
// broken tier, and skips it, saying why, on a developer's machine.
func missing(t testing.TB, format string, args ...any) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf("missing in CI: "+format, args...)
	}
	t.Skipf("skipped: "+format, args...)
}

// cacheDir is where the CLIs are installed, one directory per package and
// version, kept across runs: REALCLI_CACHE, else the user's cache dir.
func cacheDir() (string, error) {
	if d := os.Getenv("REALCLI_CACHE"); d != "" {
		return filepath.Abs(d)
	}
	d, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("no cache directory (set REALCLI_CACHE): %w", err)
	}
	return filepath.Join(d, "9harness-realcli"), nil
}

// nodeVersion parses `node --version` ("v20.20.2").
func nodeVersion(node string) ([3]int, error) {
	out, err := exec.Command(node, "--version").Output()
	if err != nil {
		return [3]int{}, fmt.Errorf("%s --version: %w", node, err)
	}
	var v [3]int
	parts := strings.SplitN(strings.TrimPrefix(strings.TrimSpace(string(out)), "v"), ".", 3)
	for i := range parts {
		n, err := strconv.Atoi(parts[i])
		if err != nil {
			return v, fmt.Errorf("%s --version: %q is not a version", node, out)
		}
		v[i] = n
	}
	return v, nil
}

func newer(have, want [3]int) bool {
	for i := range have {
		if have[i] != want[i] {
			return have[i] > want[i]
		}
	}
	return true
}

// installer installs each package once per test process and, through a
// lock file, once per cache across processes.
type installer struct {
	mu    sync.Mutex
	nodes string // the directory of the node and npm used, found once
	nerr  error
	done  map[string]*installed
	// latest are the newest versions, by package, once asked.
	latest map[string]string
}

type installed struct {
	once   sync.Once
	prefix string
	err    error
}

// install is the test process's one installer: the tests share its
// installs, and TestMain reports the versions used.
var install = &installer{done: map[string]*installed{}, latest: map[string]string{}}

// nodeFromNPM is the Node installed from npm's node package when the
// machine's own is too old (Debian's is 20 at best).
const nodeFromNPM = "22.23.3"

// node finds a Node new enough: the machine's own, else (npm present, its
// node too old, or REALCLI_NODE=npm) the node package from npm, installed
// into the cache like the CLIs. It returns the directory of that node.
func (in *installer) node(t testing.TB) (string, error) {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.nodes != "" || in.nerr != nil {
		return in.nodes, in.nerr
	}
	need := fmt.Sprintf("the real-CLI tier needs Node >= %d.%d", minNode[0], minNode[1])
	if _, err := exec.LookPath("npm"); err != nil {
		in.nerr = fmt.Errorf("%s and npm (npm is not on PATH)", need)
		return "", in.nerr
	}
	node, err := exec.LookPath("node")
	if err != nil {
		in.nerr = fmt.Errorf("%s (node is not on PATH)", need)
		return "", in.nerr
	}
	if os.Getenv("REALCLI_NODE") != "npm" {
		v, err := nodeVersion(node)
		if err == nil && newer(v, minNode) {
			in.nodes = filepath.Dir(node)
			return in.nodes, nil
		}
		fmt.Fprintf(os.Stderr, "realcli: %s is %d.%d.%d (%v): %s, installing node@%s from npm\n", node, v[0], v[1], v[2], err, need, nodeFromNPM)
	}
	prefix, err := npmInstall(filepath.Dir(node), "node", nodeFromNPM)
	if err != nil {
		in.nerr = fmt.Errorf("%s; the machine's is too old, and installing node@%s from npm failed: %w", need, nodeFromNPM, err)
		return "", in.nerr
	}
	bin := filepath.Join(prefix, "node_modules", ".bin")
	if v, err := nodeVersion(filepath.Join(bin, "node")); err != nil || !newer(v, minNode) {
		in.nerr = fmt.Errorf("%s; node@%s from npm does not run (%v)", need, nodeFromNPM, err)
		return "", in.nerr
	}
	in.nodes = bin
	return in.nodes, nil
}

// prefix installs pkg@version (once) and returns its npm prefix: the
// programs are in PREFIX/node_modules/.bin.
func (in *installer) prefix(t testing.TB, pkg, version string) string {
	t.Helper()
	nodes, err := in.node(t)
	if err != nil {
		missing(t, "%v", err)
	}
	key := pkg + "@" + version
	in.mu.Lock()
	e := in.done[key]
	if e == nil {
		e = &installed{}
		in.done[key] = e
	}
	in.mu.Unlock()
	e.once.Do(func() { e.prefix, e.err = npmInstall(nodes, pkg, version) })
	if e.err != nil {
		missing(t, "installing %s: %v", key, e.err)
	}
	return e.prefix
}

// npmInstall runs npm install into CACHE/<pkg>@<version>, unless a finished
// install is there. The install goes to a temporary directory renamed into
// place, so a half-done one is never used.
func npmInstall(nodes, pkg, version string) (string, error) {
	cache, err := cacheDir()
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(cache, 0o755); err != nil {
		return "", err
	}
	name := strings.NewReplacer("@", "", "/", "_").Replace(pkg) + "@" + version
	dir := filepath.Join(cache, name)
	// Another test process may be installing the same package.
	lock, err := os.OpenFile(filepath.Join(cache, name+".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return "", err
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return "", fmt.Errorf("lock %s: %w", lock.Name(), err)
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", ".bin")); err == nil {
		return dir, nil
	}
	tmp := dir + ".tmp"
	os.RemoveAll(tmp)
	start := time.Now()
	npm, err := exec.LookPath("npm")
	if err != nil {
		return "", err
	}
	cmd := exec.Command(npm, "install", "--prefix", tmp, "--no-audit", "--no-fund",
		"--cache", filepath.Join(cache, "npm"), pkg+"@"+version)
	cmd.Env = append(os.Environ(), "PATH="+nodes+":/usr/local/bin:/usr/bin:/bin")
	out, err := cmd.CombinedOutput()
	if err != nil {
		os.RemoveAll(tmp)
		return "", fmt.Errorf("npm install %s@%s: %v\n%s", pkg, version, err, out)
	}
	if err := os.Rename(tmp, dir); err != nil {
		return "", err
	}
	// Printed, not logged: the install happens once per cache, and its
	// time is what a first run costs.
	fmt.Fprintf(os.Stderr, "realcli: installed %s@%s into %s in %s\n", pkg, version, dir, time.Since(start).Round(100*time.Millisecond))
	return dir, nil
}

// version is the pinned version, or with REALCLI_VERSIONS=latest the
// newest published one (asked of the registry once per process).
func (in *installer) version(t testing.TB, pkg, pinned string) string {
	t.Helper()
	if os.Getenv("REALCLI_VERSIONS") != "latest" {
		return pinned
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	if v, ok := in.latest[pkg]; ok {
		return v
	}
	out, err := exec.Command("npm", "view", pkg+"@latest", "version").Output()
	if err != nil {
		missing(t, "npm view %s version: %v", pkg, err)
	}
	v := strings.TrimSpace(string(out))
	in.latest[pkg] = v
	if v != pinned {
		fmt.Fprintf(os.Stderr, "realcli: %s: running the latest %s (pinned: %s)\n", pkg, v, pinned)
	}
	return v
}

// used lists the packages installed or reused in this process, sorted.
func (in *installer) used() []string {
	in.mu.Lock()
	defer in.mu.Unlock()
	var out []string
	for k, e := range in.done {
		if e.err == nil && e.prefix != "" {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

// pathFor is the system PATH with the Node in use first, unless it is
// already there.
func (in *installer) pathFor(t testing.TB) string {
	nodes, err := in.node(t)
	if err != nil {
		missing(t, "%v", err)
	}
	for _, d := range filepath.SplitList(systemPath) {
		if d == nodes {
			return systemPath
		}
	}
	return nodes + ":" + systemPath
}

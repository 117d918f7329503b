package move

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// The relaunch never carries the agent's environment in an argv: argv is
// world-readable in /proc/PID/cmdline (and a tmux server started by the
// move keeps its argv for life), environ is 0400. So the move leaves the
// resume argv and the environment in a 0600 file of an owner-only
// directory, and the session host runs a fixed launcher,
// `9harnessd --exec-env FILE`, that verifies the file, unlinks it on the
// first read and execs the resume argv with exactly that environment. The
// same channel works whether the move starts the tmux server or an
// already running one creates the pane (a pane gets the server's
// environment and none of the client's descriptors), and through zmx,
// which types its command into a login shell.

// Launch is what the launcher execs.
type Launch struct {
	Path string   // the resume binary, absolute
	Argv []string // the resume argv (argv[0] the harness's program name)
	Env  []string // the agent's environment, scrubbed and sanitized
	Cwd  string   // the agent's directory
}

// launchFile is Launch as written: every string as bytes (base64 in
// JSON), because an environment, an argv or a directory name need not be
// UTF-8 and JSON strings would replace such bytes.
type launchFile struct {
	// Nonce makes the content, and so the file's name (its SHA-256),
	// unpredictable.
	Nonce []byte   `json:"nonce"`
	Path  []byte   `json:"path"`
	Argv  [][]byte `json:"argv"`
	Env   [][]byte `json:"env"`
	Cwd   []byte   `json:"cwd"`
}

func toBytes(ss []string) [][]byte {
	out := make([][]byte, len(ss))
	for i, s := range ss {
		out[i] = []byte(s)
	}
	return out
}

func fromBytes(bs [][]byte) []string {
	out := make([]string, len(bs))
	for i, b := range bs {
		out[i] = string(b)
	}
	return out
}

// Spool is the owner-only directory of launch files.
type Spool struct{ Dir string }

// Bounds of a launch file: each string is under the kernel's per-string
// limit for execve (MAX_ARG_STRLEN, 32 pages), the whole file well under
// ARG_MAX's usual 2 MiB.
const (
	MaxArgString  = 128<<10 - 1
	MaxLaunch     = 1 << 20
	maxLaunchFile = 4 << 20 // base64 makes the file a third larger than its strings
)

// DefaultSpoolDir is $XDG_RUNTIME_DIR/9harness/launch (the unit makes
// %t/9harness writable), or 9harness-UID/launch under TMPDIR without a
// runtime directory.
func DefaultSpoolDir() string {
	if rt := os.Getenv("XDG_RUNTIME_DIR"); rt != "" && filepath.IsAbs(rt) {
		return filepath.Join(rt, "9harness", "launch")
	}
	return filepath.Join(os.TempDir(), "9harness-"+strconv.Itoa(os.Geteuid()), "launch")
}

// A launch file is named by the SHA-256 of its content: the name the
// daemon puts in the host command commits to the content, so a process of
// the same uid (a sandbox that can write the directory) cannot put a
// program or an environment of its own in its place.
var launchName = regexp.MustCompile(`^[0-9a-f]{64}$`)

// ownerOnly checks that fd is a directory owned by uid that no one else
// may enter or write.
func ownerOnly(fd int, uid uint32, what string) error {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return fmt.Errorf("%s is not a directory", what)
	}
	if st.Uid != uid || st.Mode&0o077 != 0 {
		return fmt.Errorf("%s is owned by uid %d with mode %o, want uid %d and no access for others", what, st.Uid, st.Mode&0o7777, uid)
	}
	return nil
}

// open makes the spool directory and its parent (mode 0700) when missing,
// and returns it pinned, once both are checked to be owner-only.
func (s Spool) open() (int, error) {
	if !filepath.IsAbs(s.Dir) {
		return -1, fmt.Errorf("spool directory %q is not absolute", s.Dir)
	}
	uid := uint32(os.Geteuid())
	parent := filepath.Dir(s.Dir)
	if err := os.MkdirAll(s.Dir, 0o700); err != nil {
		return -1, err
	}
	pfd, err := unix.Open(parent, unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("%s: %w", parent, err)
	}
	defer unix.Close(pfd)
	if err := ownerOnly(pfd, uid, parent); err != nil {
		return -1, err
	}
	fd, err := unix.Openat(pfd, filepath.Base(s.Dir), unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("%s: %w", s.Dir, err)
	}
	if err := ownerOnly(fd, uid, s.Dir); err != nil {
		unix.Close(fd)
		return -1, err
	}
	return fd, nil
}

// Put writes l to a new launch file and returns its absolute path.
func (s Spool) Put(l Launch) (string, error) {
	nonce := make([]byte, 32)
	if _, err := rand.Read(nonce); err != nil {
		return "", err
	}
	b, err := json.Marshal(launchFile{Nonce: nonce, Path: []byte(l.Path), Argv: toBytes(l.Argv), Env: toBytes(l.Env), Cwd: []byte(l.Cwd)})
	if err != nil {
		return "", err
	}
	if len(b) > maxLaunchFile {
		return "", fmt.Errorf("the relaunch is %d bytes, more than %d", len(b), maxLaunchFile)
	}
	dfd, err := s.open()
	if err != nil {
		return "", fmt.Errorf("launch directory: %w", err)
	}
	defer unix.Close(dfd)
	sum := sha256.Sum256(b)
	name := hex.EncodeToString(sum[:])
	fd, err := unix.Openat(dfd, name, unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return "", fmt.Errorf("launch file: %w", err)
	}
	f := os.NewFile(uintptr(fd), name)
	_, werr := f.Write(b)
	cerr := f.Close()
	if werr != nil || cerr != nil {
		unix.Unlinkat(dfd, name, 0)
		return "", fmt.Errorf("launch file: %w", errors.Join(werr, cerr))
	}
	return filepath.Join(s.Dir, name), nil
}

// Remove removes a launch file the launcher never read, and the launcher's
// note of its pid.
func (s Spool) Remove(path string) {
	if filepath.Dir(path) != s.Dir || !launchName.MatchString(filepath.Base(path)) {
		return
	}
	os.Remove(path)
	os.Remove(path + ".pid")
}

// Started returns the pid the launcher of path noted before its exec, or 0.
func (s Spool) Started(path string) int {
	b, err := os.ReadFile(path + ".pid")
	if err != nil {
		return 0
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return 0
	}
	return pid
}

// ReadLaunch is the launcher's side: it opens path only if it is a launch
// file (a 0600 regular file with one link, owned by this uid, in a
// directory of this uid that no one else may enter), unlinks it at once,
// and parses it. A second read of the same path finds nothing.
func ReadLaunch(path string) (Launch, error) {
	var l Launch
	dir, name := filepath.Dir(path), filepath.Base(path)
	if !filepath.IsAbs(path) || !launchName.MatchString(name) {
		return l, fmt.Errorf("%q is not a launch file", path)
	}
	uid := uint32(os.Geteuid())
	dfd, err := unix.Open(dir, unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return l, fmt.Errorf("%s: %w", dir, err)
	}
	defer unix.Close(dfd)
	if err := ownerOnly(dfd, uid, dir); err != nil {
		return l, err
	}
	fd, err := unix.Openat(dfd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return l, fmt.Errorf("%s: %w", path, err)
	}
	f := os.NewFile(uintptr(fd), path)
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return l, err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG || st.Uid != uid || st.Mode&0o7777 != 0o600 || st.Nlink != 1 {
		return l, fmt.Errorf("%s is not a 0600 file of uid %d with one link (mode %o, uid %d, %d links)", path, uid, st.Mode&0o7777, st.Uid, st.Nlink)
	}
	// Read once: whatever follows, the environment is no longer on disk.
	if err := unix.Unlinkat(dfd, name, 0); err != nil {
		return l, fmt.Errorf("unlinking %s: %w", path, err)
	}
	b := make([]byte, maxLaunchFile+1)
	n := 0
	for n < len(b) {
		m, err := f.Read(b[n:])
		n += m
		if err != nil || m == 0 {
			break
		}
	}
	if n > maxLaunchFile {
		return l, fmt.Errorf("%s is larger than %d bytes", path, maxLaunchFile)
	}
	if sum := sha256.Sum256(b[:n]); hex.EncodeToString(sum[:]) != name {
		return l, fmt.Errorf("%s is not the file the daemon wrote (its content does not match its name)", path)
	}
	var w launchFile
	if err := json.Unmarshal(b[:n], &w); err != nil {
		return l, fmt.Errorf("%s: %w", path, err)
	}
	l = Launch{Path: string(w.Path), Argv: fromBytes(w.Argv), Env: fromBytes(w.Env), Cwd: string(w.Cwd)}
	if !filepath.IsAbs(l.Path) || len(l.Argv) == 0 {
		return l, fmt.Errorf("%s names no program to run", path)
	}
	// The daemon reads this to know which process is the relaunch.
	if pfd, err := unix.Openat(dfd, name+".pid", unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600); err == nil {
		unix.Write(pfd, []byte(strconv.Itoa(os.Getpid())+"\n"))
		unix.Close(pfd)
	}
	return l, nil
}

// hostSet are the variables the new session host gives the process: where
// it now lives (tmux's pane, zmx's session) and what its terminal is. The
// launcher keeps its own values of these over the agent's old ones.
var hostSet = []string{"TMUX", "TMUX_PANE", "ZMX_SESSION", "TERM"}

// ExecEnv is `9harnessd --exec-env FILE`: it reads the launch file and
// execs the resume argv in the agent's directory with the agent's
// environment plus the new host's variables. It returns only on failure.
func ExecEnv(path string) error {
	l, err := ReadLaunch(path)
	if err != nil {
		return err
	}
	env := l.Env
	for _, k := range hostSet {
		if v, ok := os.LookupEnv(k); ok && v != "" {
			env = setenv(env, k, v)
		}
	}
	if l.Cwd != "" {
		if err := os.Chdir(l.Cwd); err != nil {
			return err
		}
	}
	return unix.Exec(l.Path, l.Argv, env)
}

func setenv(env []string, k, v string) []string {
	out := make([]string, 0, len(env)+1)
	for _, kv := range env {
		if !strings.HasPrefix(kv, k+"=") {
			out = append(out, kv)
		}
	}
	return append(out, k+"="+v)
}

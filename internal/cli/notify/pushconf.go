package notify

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/9harness/9harness/internal/cli"
	"github.com/9harness/9harness/internal/fleet"
)

// pushConfig is notify.conf: which transitions to deliver, and where.
type pushConfig struct {
	file      string
	on        []string      // of pushKinds
	idleAfter time.Duration // an idle counts after a turn of at least this
	harnesses []string      // only these harnesses ("": all)
	targets   []*pushTarget
}

// pushKinds are the transitions notify knows, in the order the help lists
// them.
var pushKinds = []string{"waiting", "idle", "exit"}

// pushTarget is one place a transition goes.
type pushTarget struct {
	kind     string // ntfy, webhook, desktop, command
	name     string // the key of its deliveries in the state file
	url      string // ntfy: the server's root; webhook: where to POST
	topic    string // ntfy
	priority int    // ntfy: of a wait (0: ntfy's high, 4)
	cmd      string // command: what /bin/sh -c runs
	token    string // ntfy, webhook: sent as Authorization: Bearer; never printed
}

// String names a target in a message: its kind and name, never its token.
func (t *pushTarget) String() string { return fleet.Printable(t.kind + " " + t.name) }

// confError is a config error: FILE:LINE and what is wrong.
type confError struct {
	file string
	line int
	msg  string
}

func (e *confError) Error() string {
	if e.line == 0 {
		return e.file + ": " + e.msg
	}
	return fmt.Sprintf("%s:%d: %s", e.file, e.line, e.msg)
}

// pushConfigPath is $XDG_CONFIG_HOME/9harness/notify.conf, or under
// ~/.config.
func pushConfigPath() string {
	conf := os.Getenv("XDG_CONFIG_HOME")
	if conf == "" {
		home, _ := os.UserHomeDir()
		conf = filepath.Join(home, ".config")
	}
	return filepath.Join(conf, "9harness", "notify.conf")
}

// loadPushConfig reads and checks the config file, and the tokens it
// names; any problem is a *confError.
func loadPushConfig(file string) (*pushConfig, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, &confError{file: file, msg: cli.UnwrapSyscall(err).Error()}
	}
	defer f.Close()
	return parsePushConfig(file, f)
}

// maxConfBytes bounds the config file: a few dozen lines are plenty.
const maxConfBytes = 1 << 20

func parsePushConfig(file string, r io.Reader) (*pushConfig, error) {
	cfg := &pushConfig{file: file, on: slices.Clone(pushKinds), idleAfter: time.Minute}
	sc := bufio.NewScanner(io.LimitReader(r, maxConfBytes))
	n := 0
	bad := func(format string, a ...any) error {
		return &confError{file: file, line: n, msg: fmt.Sprintf(format, a...)}
	}
	names := map[string]int{}
	seen := map[string]int{}
	for sc.Scan() {
		n++
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		f := strings.Fields(line)
		switch f[0] {
		case "on", "idle-after", "harness":
			if prev, ok := seen[f[0]]; ok {
				return nil, bad("%s given again (first on line %d)", f[0], prev)
			}
			seen[f[0]] = n
		}
		switch f[0] {
		case "on":
			if len(f) == 1 {
				return nil, bad("on names at least one of %s", strings.Join(pushKinds, ", "))
			}
			cfg.on = nil
			for _, k := range f[1:] {
				if !slices.Contains(pushKinds, k) {
					return nil, bad("on: unknown transition %q (want %s)", fleet.Printable(k), strings.Join(pushKinds, ", "))
				}
				if !slices.Contains(cfg.on, k) {
					cfg.on = append(cfg.on, k)
				}
			}
		case "idle-after":
			if len(f) != 2 {
				return nil, bad("idle-after takes one duration, such as 1m or 90s")
			}
			d, err := time.ParseDuration(f[1])
			if err != nil || d < 0 {
				return nil, bad("idle-after: %q is not a duration such as 1m or 90s", fleet.Printable(f[1]))
			}
			cfg.idleAfter = d
		case "harness":
			if len(f) == 1 {
				return nil, bad("harness names at least one harness")
			}
			cfg.harnesses = f[1:]
		case "target":
			if len(f) < 2 {
				return nil, bad("target needs a kind: ntfy, webhook, desktop or command")
			}
			t, err := parsePushTarget(f[1], line, f[2:])
			if err != nil {
				return nil, bad("%v", err)
			}
			if prev, ok := names[t.name]; ok {
				return nil, bad("a second target named %q (the first is on line %d): give one a name=", fleet.Printable(t.name), prev)
			}
			names[t.name] = n
			cfg.targets = append(cfg.targets, t)
		default:
			return nil, bad("unknown setting %q (want on, idle-after, harness or target)", fleet.Printable(f[0]))
		}
	}
	if err := sc.Err(); err != nil {
		return nil, &confError{file: file, line: n + 1, msg: err.Error()}
	}
	if len(cfg.targets) == 0 {
		return nil, &confError{file: file, msg: "no target: add a line such as\n  target ntfy url=https://ntfy.sh topic=NAME"}
	}
	return cfg, nil
}

// parsePushTarget reads a target line's kind and KEY=VALUE words (a command's
// rest of the line, whole).
func parsePushTarget(kind, line string, words []string) (*pushTarget, error) {
	t := &pushTarget{kind: kind}
	if kind == "command" {
		// The rest of the line is the command, as the shell parses it.
		rest := strings.TrimSpace(line[strings.Index(line, "command")+len("command"):])
		if rest == "" {
			return nil, errors.New("target command needs the command, as the rest of the line")
		}
		t.cmd = rest
		t.name = "command " + rest
		return t, nil
	}
	kv, err := targetWords(kind, words)
	if err != nil {
		return nil, err
	}
	if err := t.setEndpoint(kv); err != nil {
		return nil, err
	}
	if v := kv["name"]; v != "" {
		t.name = v
	}
	switch {
	case kv["token-file"] != "":
		t.token, err = readTokenFile(expandHome(kv["token-file"]))
	case kv["token-credential"] != "":
		t.token, err = readCredential(kv["token-credential"])
	}
	if err != nil {
		return nil, err
	}
	return t, nil
}

// targetWords reads a target's KEY=VALUE words: each key one its kind
// takes, once.
func targetWords(kind string, words []string) (map[string]string, error) {
	allowed := map[string][]string{
		"ntfy":    {"url", "topic", "priority", "token-file", "token-credential", "name"},
		"webhook": {"url", "token-file", "token-credential", "name"},
		"desktop": {"name"},
	}[kind]
	if allowed == nil {
		return nil, fmt.Errorf("unknown target kind %q (want ntfy, webhook, desktop or command)", fleet.Printable(kind))
	}
	kv := map[string]string{}
	for _, w := range words {
		k, v, ok := strings.Cut(w, "=")
		if !ok || v == "" {
			return nil, fmt.Errorf("%q is not KEY=VALUE", fleet.Printable(w))
		}
		if !slices.Contains(allowed, k) {
			return nil, fmt.Errorf("target %s takes %s, not %q", kind, strings.Join(allowed, "=, ")+"=", fleet.Printable(k))
		}
		if _, dup := kv[k]; dup {
			return nil, fmt.Errorf("%s= given twice", k)
		}
		kv[k] = v
	}
	if kv["token-file"] != "" && kv["token-credential"] != "" {
		return nil, errors.New("token-file= and token-credential= are one or the other")
	}
	return kv, nil
}

// setEndpoint sets where t delivers (its URL, ntfy's topic and priority)
// and its default name, from its words.
func (t *pushTarget) setEndpoint(kv map[string]string) error {
	switch t.kind {
	case "ntfy":
		t.url = kv["url"]
		if t.url == "" {
			t.url = "https://ntfy.sh"
		}
		t.topic = kv["topic"]
		if t.topic == "" {
			return errors.New("target ntfy needs topic=NAME")
		}
		if p := kv["priority"]; p != "" {
			n, err := strconv.Atoi(p)
			if err != nil || n < 1 || n > 5 {
				return fmt.Errorf("priority=%s: want 1 to 5", fleet.Printable(p))
			}
			t.priority = n
		}
		t.name = strings.TrimSuffix(t.url, "/") + "/" + t.topic
	case "webhook":
		t.url = kv["url"]
		if t.url == "" {
			return errors.New("target webhook needs url=URL")
		}
		t.name = t.url
	case "desktop":
		t.name = "desktop"
	}
	if t.url != "" {
		u, err := url.Parse(t.url)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("url=%s: want an http:// or https:// URL", fleet.Printable(t.url))
		}
		if u.User != nil {
			return errors.New("url= holds a user or password: put the token in token-file= or token-credential=")
		}
	}
	return nil
}

// expandHome turns a leading ~/ into the home directory.
func expandHome(p string) string {
	if rest, ok := strings.CutPrefix(p, "~/"); ok {
		if home, err := os.UserHomeDir(); err == nil {
			return filepath.Join(home, rest)
		}
	}
	return p
}

// maxTokenBytes bounds a token file.
const maxTokenBytes = 4096

// readTokenFile reads a token from a regular file that only its owner,
// who is this user, can read or write: mode 0600 or 0400. The mode is
// checked on the descriptor the token is read from.
func readTokenFile(path string) (string, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NOFOLLOW|unix.O_NONBLOCK, 0)
	if err != nil {
		return "", fmt.Errorf("token-file %s: %v", fleet.Printable(path), err)
	}
	f := os.NewFile(uintptr(fd), path)
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return "", fmt.Errorf("token-file %s: %v", fleet.Printable(path), err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return "", fmt.Errorf("token-file %s is not a regular file", fleet.Printable(path))
	}
	if st.Uid != uint32(os.Getuid()) {
		return "", fmt.Errorf("token-file %s belongs to uid %d, not to you", fleet.Printable(path), st.Uid)
	}
	if perm := st.Mode & 0o777; perm&0o077 != 0 {
		return "", fmt.Errorf("token-file %s has mode %04o: others may read it; chmod 600 it", fleet.Printable(path), perm)
	}
	return readToken(f, "token-file "+fleet.Printable(path))
}

// readCredential reads a credential systemd passed the unit
// (LoadCredential=NAME:PATH puts it in $CREDENTIALS_DIRECTORY/NAME, which
// only the unit's user can read).
func readCredential(name string) (string, error) {
	if strings.ContainsRune(name, '/') || name == "." || name == ".." {
		return "", fmt.Errorf("token-credential=%s: a credential's name has no /", fleet.Printable(name))
	}
	dir := os.Getenv("CREDENTIALS_DIRECTORY")
	if dir == "" {
		return "", fmt.Errorf("token-credential=%s: $CREDENTIALS_DIRECTORY is not set (the unit needs LoadCredential=%s:FILE)", fleet.Printable(name), fleet.Printable(name))
	}
	f, err := os.OpenFile(filepath.Join(dir, name), os.O_RDONLY|unix.O_NOFOLLOW, 0)
	if err != nil {
		return "", fmt.Errorf("token-credential=%s: %v", fleet.Printable(name), cli.UnwrapSyscall(err))
	}
	defer f.Close()
	return readToken(f, "token-credential="+fleet.Printable(name))
}

func readToken(r io.Reader, what string) (string, error) {
	b, err := io.ReadAll(io.LimitReader(r, maxTokenBytes+1))
	if err != nil {
		return "", fmt.Errorf("%s: %v", what, err)
	}
	if len(b) > maxTokenBytes {
		return "", fmt.Errorf("%s: longer than %d bytes", what, maxTokenBytes)
	}
	tok := string(bytes.TrimSpace(b))
	if tok == "" {
		return "", fmt.Errorf("%s is empty", what)
	}
	// A header value holds no control byte; a token that does is a
	// mistake, said without showing it.
	if strings.IndexFunc(tok, func(r rune) bool { return r < 0x20 || r == 0x7f }) >= 0 {
		return "", fmt.Errorf("%s holds a control byte or a second line", what)
	}
	return tok, nil
}

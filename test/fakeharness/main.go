// Command fakeharness stands in for a real harness in tests. It behaves as
// the harness named by its own argv[0] basename (copy or link it as
// "claude", "codex", ...), writing the on-disk state the real one writes
// (the shapes of the samples in testdata/home), then waits for a signal.
//
//	claude [--resume SID]   writes $HOME/.claude/sessions/<pid>.json with
//	                        its real procStart (field 22) and a transcript
//	                        under projects/<sanitized cwd>/<sid>.jsonl; it
//	                        opens and closes the transcript per write, as
//	                        Claude does (no held fd)
//	codex [resume SID]      creates sessions/YYYY/MM/DD/rollout-…-<sid>.jsonl
//	                        under $HOME/.codex and holds it open, as the
//	                        native Codex writer does
//	omp [--session|--resume|-r PATH|ID]
//	                        a v3 transcript under $OMP_CODING_AGENT_DIR or
//	                        $HOME/.omp/agent: sessions/<dir>/<ISO ts with :
//	                        and . → ->_<uuidv7>.jsonl, <dir> in the current
//	                        scheme (-tmp-<rel> under the temp dir, checked
//	                        first; -<rel> under $HOME, "-" for $HOME; else
//	                        --<abs>--); a 256-byte title slot, the session
//	                        header, model_change and one exchange. With a
//	                        path or id it appends to that transcript. The fd
//	                        stays open (Jan-2026 FileSessionStorageWriter).
//	pi [--session PATH|ID]  the same under $PI_CODING_AGENT_DIR or
//	                        $HOME/.pi/agent, dir --<cwd / → ->--, header
//	                        first (no title slot); like pi's SessionManager
//	                        it opens, appends and closes per entry (no fd)
//	hermes [chat] [--resume|-r SID]
//	                        adds a lease to $HERMES_HOME (or $HOME/.hermes)
//	                        /runtime/active_sessions.json under flock on
//	                        active_sessions.lock, pruning dead owners and
//	                        refusing (exit 1) a session a live owner holds,
//	                        as hermes_cli/active_sessions.py does; releases
//	                        it on exit. No state.db is written.
//
//	gemini [--resume|-r SID]
//	                        as Gemini CLI: without GEMINI_CLI_NO_RELAUNCH a
//	                        launcher that relaunches itself with it set and
//	                        ignores SIGTERM; the child maps the cwd to its
//	                        basename in $HOME/.gemini/projects.json and
//	                        writes tmp/<slug>/chats/session-<minute>-<id8>.jsonl
//	                        (no fd); resuming, it writes nothing
//
// Environment: FAKE_SESSION (the session id to use when not resuming),
// FAKE_RECORD (a file to which it appends one JSON line: argv, cwd, env,
// pid), FAKE_IGNORE_TERM=1 (ignore SIGTERM), FAKE_CHILD (a \x1f-separated
// command line run as a child). SIGTERM, SIGINT and SIGHUP (a hangup, as
// "zmx kill" sends) end it cleanly.
package main

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func main() {
	name := filepath.Base(os.Args[0])
	if err := run(name, os.Args[1:]); err != nil {
		var r refusal
		if errors.As(err, &r) {
			fmt.Fprintln(os.Stderr, string(r))
			os.Exit(1)
		}
		fmt.Fprintf(os.Stderr, "fake %s: %v\n", name, err)
		os.Exit(1)
	}
}

func run(name string, args []string) error {
	sigs := make(chan os.Signal, 1)
	if os.Getenv("FAKE_IGNORE_TERM") == "1" {
		signal.Ignore(syscall.SIGTERM)
		signal.Notify(sigs, syscall.SIGINT, syscall.SIGHUP)
	} else {
		signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	}
	if err := record(name, args); err != nil {
		return err
	}
	home := os.Getenv("HOME")
	cwd, _ := os.Getwd()
	sid := os.Getenv("FAKE_SESSION")
	var cleanup func()
	switch name {
	case "claude":
		for i, a := range args {
			if a == "--resume" && i+1 < len(args) {
				sid = args[i+1]
			}
		}
		c, err := claude(home, cwd, sid)
		if err != nil {
			return err
		}
		cleanup = c
	case "codex":
		if len(args) >= 2 && args[0] == "resume" {
			sid = args[1]
		}
		f, err := codex(home, cwd, sid)
		if err != nil {
			return err
		}
		defer f.Close()
	case "omp":
		f, err := omp(home, physicalWd(), sid, flagValue(args, "--session", "--resume", "-r"))
		if err != nil {
			return err
		}
		defer f.Close()
	case "pi":
		if err := pi(home, physicalWd(), sid, flagValue(args, "--session")); err != nil {
			return err
		}
	case "hermes":
		if v := flagValue(args, "--resume", "-r"); v != "" {
			sid = v
		}
		c, err := hermes(home, sid)
		if err != nil {
			return err
		}
		cleanup = c
	case "gemini":
		if os.Getenv("GEMINI_CLI_NO_RELAUNCH") == "" {
			return geminiLaunch(args)
		}
		if err := gemini(home, physicalWd(), sid, flagValue(args, "--resume", "-r")); err != nil {
			return err
		}
	default:
		// A process that only looks like the harness (argv/comm) and
		// writes nothing: the "no registry" shape.
	}
	// FAKE_CHILD: a command line (fields separated by \x1f, since an environment cannot hold NUL) to run as this process's
	// child, so a test can place something (the daemon) under a process
	// shaped like a harness.
	if c := os.Getenv("FAKE_CHILD"); c != "" {
		argv := strings.Split(c, "\x1f")
		child := exec.Command(argv[0], argv[1:]...)
		child.Stdout, child.Stderr = os.Stdout, os.Stderr
		child.Env = os.Environ()
		if err := child.Start(); err != nil {
			return err
		}
		done := make(chan struct{})
		go func() { child.Wait(); close(done) }()
		select {
		case sig := <-sigs:
			child.Process.Signal(sig)
			<-done
		case <-done:
			<-sigs
		}
		if cleanup != nil {
			cleanup()
		}
		return nil
	}
	<-sigs
	if cleanup != nil {
		cleanup()
	}
	return nil
}

// record appends what this process was started with, so a test can check
// the argv, cwd and environment a move relaunched it with.
func record(name string, args []string) error {
	path := os.Getenv("FAKE_RECORD")
	if path == "" {
		return nil
	}
	cwd, _ := os.Getwd()
	line, _ := json.Marshal(map[string]any{"name": name, "argv": append([]string{os.Args[0]}, args...), "cwd": cwd, "env": os.Environ(), "pid": os.Getpid()})
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = f.Write(append(line, '\n'))
	return err
}

func startTime() string {
	b, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		return ""
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	return f[19]
}

var nonAlnum = regexp.MustCompile(`[^a-zA-Z0-9]`)

func claude(home, cwd, sid string) (func(), error) {
	root := filepath.Join(home, ".claude")
	pid := os.Getpid()
	now := time.Now()
	proj := filepath.Join(root, "projects", nonAlnum.ReplaceAllString(cwd, "-"))
	if err := os.MkdirAll(proj, 0o755); err != nil {
		return nil, err
	}
	transcript := filepath.Join(proj, sid+".jsonl")
	lines := []string{
		fmt.Sprintf(`{"parentUuid":null,"isSidechain":false,"userType":"external","cwd":%q,"sessionId":%q,"version":"2.1.284","type":"user","message":{"role":"user","content":"fix the build"},"uuid":"aaaa0000-0000-4000-8000-000000000001","timestamp":%q}`, cwd, sid, now.UTC().Format(time.RFC3339Nano)),
		fmt.Sprintf(`{"parentUuid":"aaaa0000-0000-4000-8000-000000000001","isSidechain":false,"cwd":%q,"sessionId":%q,"type":"assistant","message":{"role":"assistant","model":"claude-opus-4-6","content":[{"type":"text","text":"On it."}]},"uuid":"aaaa0000-0000-4000-8000-000000000002","timestamp":%q}`, cwd, sid, now.UTC().Format(time.RFC3339Nano)),
		fmt.Sprintf(`{"type":"custom-title","customTitle":"fake claude %d","sessionId":%q}`, pid, sid),
	}
	// Open, append, close: Claude holds no transcript fd.
	f, err := os.OpenFile(transcript, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, err
	}
	f.WriteString(strings.Join(lines, "\n") + "\n")
	f.Close()

	sessions := filepath.Join(root, "sessions")
	if err := os.MkdirAll(sessions, 0o700); err != nil {
		return nil, err
	}
	reg, _ := json.Marshal(map[string]any{
		"pid": pid, "sessionId": sid, "cwd": cwd, "startedAt": now.UnixMilli(), "procStart": startTime(),
		"version": "2.1.284", "kind": "interactive", "entrypoint": "cli", "name": filepath.Base(cwd),
		"nameSource": "derived", "status": "busy", "updatedAt": now.UnixMilli(),
	})
	path := filepath.Join(sessions, fmt.Sprintf("%d.json", pid))
	tmp := path + ".0123456789abcdef.tmp"
	if err := os.WriteFile(tmp, reg, 0o600); err != nil {
		return nil, err
	}
	if err := os.Rename(tmp, path); err != nil {
		return nil, err
	}
	return func() { os.Remove(path) }, nil
}

func codex(home, cwd, sid string) (*os.File, error) {
	now := time.Now()
	dir := filepath.Join(home, ".codex", "sessions", now.Format("2006"), now.Format("01"), now.Format("02"))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	// A resumed session appends to its existing rollout.
	var path string
	if m, _ := filepath.Glob(filepath.Join(home, ".codex", "sessions", "*", "*", "*", "rollout-*-"+sid+".jsonl")); len(m) > 0 {
		path = m[0]
	} else {
		path = filepath.Join(dir, "rollout-"+now.Format("2006-01-02T15-04-05")+"-"+sid+".jsonl")
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, err
	}
	ts := now.UTC().Format(time.RFC3339Nano)
	fmt.Fprintf(f, `{"timestamp":%q,"type":"session_meta","payload":{"id":%q,"timestamp":%q,"cwd":%q,"originator":"codex_cli_rs","cli_version":"0.128.0","source":"cli"}}`+"\n", ts, sid, ts, cwd)
	fmt.Fprintf(f, `{"timestamp":%q,"type":"turn_context","payload":{"cwd":%q,"model":"gpt-5.6"}}`+"\n", ts, cwd)
	return f, nil
}

// physicalWd is getcwd(2): what node's process.cwd() and Python's
// os.getcwd() return (os.Getwd may answer a symlinked $PWD instead).
func physicalWd() string {
	wd, err := syscall.Getwd()
	if err != nil {
		wd, _ = os.Getwd()
	}
	return wd
}

// flagValue returns the value of the first of names given as "--x v" or
// "--x=v".
func flagValue(args []string, names ...string) string {
	for i, a := range args {
		for _, n := range names {
			if a == n && i+1 < len(args) {
				return args[i+1]
			}
			if strings.HasPrefix(a, n+"=") {
				return a[len(n)+1:]
			}
		}
	}
	return ""
}

func randHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// uuidv7 is what Bun.randomUUIDv7 (omp) and current pi mint.
func uuidv7() string {
	var b [16]byte
	rand.Read(b[:])
	ms := uint64(time.Now().UnixMilli())
	for i := 0; i < 6; i++ {
		b[i] = byte(ms >> (40 - 8*i))
	}
	b[6] = 0x70 | b[6]&0x0f
	b[8] = 0x80 | b[8]&0x3f
	h := hex.EncodeToString(b[:])
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// isoMillis is JavaScript's Date.toISOString.
func isoMillis(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z") }

var piSep = strings.NewReplacer("/", "-", "\\", "-", ":", "-")

// legacyDir is pi's (and Jan-2026 omp's) --<cwd>-- directory name.
func legacyDir(cwd string) string {
	if strings.HasPrefix(cwd, "/") || strings.HasPrefix(cwd, "\\") {
		cwd = cwd[1:]
	}
	return "--" + piSep.Replace(cwd) + "--"
}

func canonical(p string) string {
	if r, err := filepath.EvalSymlinks(p); err == nil {
		return r
	}
	return filepath.Clean(p)
}

func under(p, root string) (string, bool) {
	if root == "" || root == "." {
		return "", false
	}
	rel, err := filepath.Rel(root, p)
	if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		return "", false
	}
	if rel == "." {
		return "", true
	}
	return rel, true
}

// ompDir is current omp's session-paths.ts: the temp dir is checked before
// $HOME, so a $HOME under the temp dir still gets -tmp-….
func ompDir(cwd, home string) string {
	cwd = canonical(cwd)
	if rel, ok := under(cwd, canonical(os.TempDir())); ok {
		if rel == "" {
			return "-tmp"
		}
		return "-tmp-" + piSep.Replace(rel)
	}
	if rel, ok := under(cwd, canonical(home)); ok {
		return "-" + piSep.Replace(rel)
	}
	return legacyDir(cwd)
}

// findSession resolves a --session/--resume value: a path (anything with a
// slash or ending .jsonl, relative to cwd) or a session id prefix looked up
// in every sessions/<dir>/.
func findSession(root, cwd, v string) (string, error) {
	if v == "" {
		return "", nil
	}
	if strings.Contains(v, "/") || strings.HasSuffix(v, ".jsonl") {
		if !filepath.IsAbs(v) {
			v = filepath.Join(cwd, v)
		}
		return v, nil
	}
	m, _ := filepath.Glob(filepath.Join(root, "sessions", "*", "*_"+v+"*.jsonl"))
	if len(m) == 0 {
		return "", fmt.Errorf("no session matching %q", v)
	}
	return m[len(m)-1], nil
}

// lastEntry returns the session id of a transcript's header and the id of
// its last tree entry (the parent of what is appended next).
func lastEntry(path string) (sid, last string) {
	b, _ := os.ReadFile(path)
	for _, line := range strings.Split(string(b), "\n") {
		var e struct{ Type, ID string }
		if json.Unmarshal([]byte(line), &e) != nil {
			continue
		}
		switch e.Type {
		case "session":
			sid = e.ID
		case "title":
		default:
			if e.ID != "" {
				last = e.ID
			}
		}
	}
	return sid, last
}

func jsonLine(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// obj is a JSON object that keeps its keys in the order given, as
// JSON.stringify does: obj{k1, v1, k2, v2, ...}.
type obj []any

func (o obj) MarshalJSON() ([]byte, error) {
	var b strings.Builder
	b.WriteByte('{')
	for i := 0; i+1 < len(o); i += 2 {
		if i > 0 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(o[i])
		v, err := json.Marshal(o[i+1])
		if err != nil {
			return nil, err
		}
		b.Write(k)
		b.WriteByte(':')
		b.Write(v)
	}
	b.WriteByte('}')
	return []byte(b.String()), nil
}

// exchange is a user message and an assistant answer, as tree entries.
func exchange(parent, user string, now time.Time) []string {
	var p any
	if parent != "" {
		p = parent
	}
	u, a := randHex(4), randHex(4)
	return []string{
		jsonLine(obj{"type", "message", "id", u, "parentId", p, "timestamp", isoMillis(now),
			"message", obj{"role", "user", "content", user}}),
		jsonLine(obj{"type", "message", "id", a, "parentId", u, "timestamp", isoMillis(now),
			"message", obj{"role", "assistant", "content", []any{obj{"type", "text", "text", "On it."}},
				"provider", "anthropic", "model", "claude-opus-4-6", "stopReason", "stop"}}),
	}
}

// titleSlot is omp's fixed-width 256-byte (with the newline) title line.
func titleSlot(title string, now time.Time) string {
	line := func(pad string) string {
		return fmt.Sprintf(`{"type":"title","v":1,"title":%s,"source":"auto","updatedAt":%q,"pad":%q}`, jsonLine(title), isoMillis(now), pad)
	}
	return line(strings.Repeat(" ", 255-len(line(""))))
}

func omp(home, cwd, sid, sessionArg string) (*os.File, error) {
	root := os.Getenv("OMP_CODING_AGENT_DIR")
	if root == "" {
		root = filepath.Join(home, ".omp", "agent")
	}
	path, err := findSession(root, cwd, sessionArg)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	if path != "" {
		if _, err := os.Stat(path); err == nil {
			// Resume: append to the existing transcript, fd kept open.
			_, last := lastEntry(path)
			f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
			if err != nil {
				return nil, err
			}
			_, err = f.WriteString(strings.Join(exchange(last, "continue", now), "\n") + "\n")
			return f, err
		}
	}
	if sid == "" {
		sid = uuidv7()
	}
	if path == "" {
		dir := filepath.Join(root, "sessions", ompDir(cwd, home))
		path = filepath.Join(dir, strings.NewReplacer(":", "-", ".", "-").Replace(isoMillis(now))+"_"+sid+".jsonl")
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, err
	}
	mc := randHex(4)
	lines := []string{
		titleSlot(fmt.Sprintf("fake omp %d", os.Getpid()), now),
		jsonLine(obj{"type", "session", "version", 3, "id", sid, "timestamp", isoMillis(now), "cwd", cwd}),
		jsonLine(obj{"type", "model_change", "id", mc, "parentId", nil, "timestamp", isoMillis(now), "model", "anthropic/claude-opus-4-6"}),
	}
	lines = append(lines, exchange(mc, "fix the build", now)...)
	if _, err := f.WriteString(strings.Join(lines, "\n") + "\n"); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// appendLine is node's appendFileSync: open, append, close.
func appendLine(path, line string) error {
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	_, err = f.WriteString(line + "\n")
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// pi writes a session that has had one exchange: pi creates the file only
// once there is an assistant message, and holds no fd.
func pi(home, cwd, sid, sessionArg string) error {
	root := os.Getenv("PI_CODING_AGENT_DIR")
	if root == "" {
		root = filepath.Join(home, ".pi", "agent")
	}
	path, err := findSession(root, cwd, sessionArg)
	if err != nil {
		return err
	}
	now := time.Now()
	var lines []string
	if _, err := os.Stat(path); path != "" && err == nil {
		_, last := lastEntry(path)
		lines = exchange(last, "continue", now)
	} else {
		if sid == "" {
			sid = uuidv7()
		}
		if path == "" {
			path = filepath.Join(root, "sessions", legacyDir(cwd), strings.NewReplacer(":", "-", ".", "-").Replace(isoMillis(now))+"_"+sid+".jsonl")
		}
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return err
		}
		mc := randHex(4)
		lines = append([]string{
			jsonLine(obj{"type", "session", "version", 3, "id", sid, "timestamp", isoMillis(now), "cwd", cwd}),
			jsonLine(obj{"type", "model_change", "id", mc, "parentId", nil, "timestamp", isoMillis(now), "provider", "anthropic", "modelId", "claude-opus-4-6"}),
		}, exchange(mc, "fix the build", now)...)
	}
	for _, l := range lines {
		if err := appendLine(path, l); err != nil {
			return err
		}
	}
	return nil
}

// geminiLaunch is Gemini CLI's launcher: it relaunches itself (same argv)
// as a child with GEMINI_CLI_NO_RELAUNCH=true, ignores SIGINT, SIGTERM and
// SIGHUP as the real one does, and exits with the child's status.
func geminiLaunch(args []string) error {
	signal.Ignore(syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	self, err := os.Executable()
	if err != nil {
		return err
	}
	child := exec.Command(self, args...)
	child.Args[0] = os.Args[0]
	child.Stdin, child.Stdout, child.Stderr = os.Stdin, os.Stdout, os.Stderr
	child.Env = append(os.Environ(), "GEMINI_CLI_NO_RELAUNCH=true")
	err = child.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		os.Exit(max(ee.ExitCode(), 1))
	}
	return err
}

// gemini is Gemini CLI's relaunched child: it maps the cwd to a slug in
// projects.json (its basename) and writes tmp/<slug>/chats/
// session-<UTC minute>-<sid[:8]>.jsonl: the metadata line at start, then
// one exchange. With --resume <sid> it writes nothing (as 0.61.0 does
// until the next prompt).
func gemini(home, cwd, sid, resume string) error {
	root := filepath.Join(home, ".gemini")
	slug := strings.ToLower(filepath.Base(cwd))
	if err := os.MkdirAll(filepath.Join(root, "tmp", slug, "chats"), 0o755); err != nil {
		return err
	}
	reg, _ := json.Marshal(map[string]any{"projects": map[string]string{cwd: slug}})
	if err := os.WriteFile(filepath.Join(root, "projects.json"), reg, 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(root, "tmp", slug, ".project_root"), []byte(cwd), 0o644); err != nil {
		return err
	}
	if resume != "" {
		if m, _ := filepath.Glob(filepath.Join(root, "tmp", slug, "chats", "session-*-"+resume[:min(8, len(resume))]+".jsonl")); len(m) == 1 {
			return nil
		}
		return fmt.Errorf("Error resuming session: Invalid session identifier %q", resume)
	}
	if sid == "" {
		sid = uuidv7()
	}
	now := time.Now()
	sum := sha256.Sum256([]byte(cwd))
	path := filepath.Join(root, "tmp", slug, "chats", "session-"+strings.ReplaceAll(isoMillis(now)[:16], ":", "-")+"-"+sid[:8]+".jsonl")
	ts := isoMillis(now)
	for _, l := range []string{
		jsonLine(obj{"sessionId", sid, "projectHash", hex.EncodeToString(sum[:]), "startTime", ts, "lastUpdated", ts, "kind", "main"}),
		jsonLine(obj{"id", randHex(16), "timestamp", ts, "type", "user", "content", []any{map[string]string{"text": "fix the build"}}}),
		jsonLine(obj{"$set", map[string]string{"lastUpdated": ts}}),
		jsonLine(obj{"id", randHex(16), "timestamp", ts, "type", "gemini", "content", "done", "model", "gemini-2.5-pro"}),
	} {
		if err := appendLine(path, l); err != nil {
			return err
		}
	}
	return nil
}

// refusal is hermes's refusal text, printed as is.
type refusal string

func (r refusal) Error() string { return string(r) }

// pyFloat marshals as Python's repr of a float does (always a '.' or an
// exponent).
type pyFloat float64

func (f pyFloat) MarshalJSON() ([]byte, error) {
	s := strconv.FormatFloat(float64(f), 'f', -1, 64)
	if !strings.ContainsAny(s, ".e") {
		s += ".0"
	}
	return []byte(s), nil
}

// pyJSON is json.dumps(v, sort_keys=True, ensure_ascii=False) with the
// default separators ", " and ": ".
func pyJSON(v any) string {
	var b strings.Builder
	var enc func(v any)
	enc = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			keys := make([]string, 0, len(x))
			for k := range x {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			b.WriteByte('{')
			for i, k := range keys {
				if i > 0 {
					b.WriteString(", ")
				}
				enc(k)
				b.WriteString(": ")
				enc(x[k])
			}
			b.WriteByte('}')
		case []any:
			b.WriteByte('[')
			for i, e := range x {
				if i > 0 {
					b.WriteString(", ")
				}
				enc(e)
			}
			b.WriteByte(']')
		case string:
			var sb strings.Builder
			e := json.NewEncoder(&sb)
			e.SetEscapeHTML(false)
			e.Encode(x)
			b.WriteString(strings.TrimSuffix(sb.String(), "\n"))
		default:
			j, _ := json.Marshal(x)
			b.Write(j)
		}
	}
	enc(v)
	return b.String()
}

// procStart is psutil's create_time on Linux: boot time (btime in
// /proc/stat) plus starttime (field 22 of /proc/<pid>/stat) / CLK_TCK.
func procStart(pid int) (float64, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, false
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	ticks, err := strconv.ParseFloat(f[19], 64)
	if err != nil {
		return 0, false
	}
	st, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, false
	}
	for _, line := range strings.Split(string(st), "\n") {
		if v, ok := strings.CutPrefix(line, "btime "); ok {
			bt, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				return 0, false
			}
			return bt + ticks/100, true
		}
	}
	return 0, false
}

func numberOf(v any) (float64, bool) {
	switch x := v.(type) {
	case json.Number:
		f, err := x.Float64()
		return f, err == nil
	case string:
		f, err := strconv.ParseFloat(x, 64)
		return f, err == nil
	}
	return 0, false
}

// alive is _pid_liveness(lenient=True): a pid that does not exist is dead;
// a recorded start time that differs from the process's by 1 ms or more
// is a reused pid.
func alive(e map[string]any) bool {
	p, ok := numberOf(e["pid"])
	pid := int(p)
	if !ok || pid <= 0 {
		return false
	}
	if err := syscall.Kill(pid, 0); err != nil && !errors.Is(err, syscall.EPERM) {
		return false
	}
	want, ok := numberOf(e["process_start_time"])
	if !ok {
		return true
	}
	got, ok := procStart(pid)
	if !ok {
		return true
	}
	return math.Abs(got-want) < 0.001
}

type hermesRegistry struct{ state, lock string }

// locked runs f holding the registry's flock, as _FileLock does.
func (r hermesRegistry) locked(f func() error) error {
	if err := os.MkdirAll(filepath.Dir(r.lock), 0o755); err != nil {
		return err
	}
	l, err := os.OpenFile(r.lock, os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o666)
	if err != nil {
		return err
	}
	defer l.Close()
	if err := syscall.Flock(int(l.Fd()), syscall.LOCK_EX); err != nil {
		return err
	}
	defer syscall.Flock(int(l.Fd()), syscall.LOCK_UN)
	return f()
}

func (r hermesRegistry) read() ([]map[string]any, error) {
	b, err := os.ReadFile(r.state)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	d := json.NewDecoder(strings.NewReader(strings.TrimPrefix(string(b), "\ufeff")))
	d.UseNumber()
	var data any
	if err := d.Decode(&data); err != nil {
		return nil, fmt.Errorf("active session registry unreadable: %s", r.state)
	}
	if m, ok := data.(map[string]any); ok {
		data = m["entries"]
	}
	list, ok := data.([]any)
	if !ok {
		return nil, fmt.Errorf("active session registry has invalid shape: %s", r.state)
	}
	var out []map[string]any
	for _, e := range list {
		if m, ok := e.(map[string]any); ok {
			out = append(out, m)
		}
	}
	return out, nil
}

// write is atomic_json_write(indent=None, sort_keys=True): a mkstemp file
// beside the target, fsync, rename; a new file gets the umask mode, an
// existing one keeps its mode.
func (r hermesRegistry) write(entries []map[string]any) error {
	list := make([]any, len(entries))
	for i, e := range entries {
		list[i] = e
	}
	mode := os.FileMode(0o666) &^ os.FileMode(umask)
	if fi, err := os.Stat(r.state); err == nil {
		mode = fi.Mode().Perm()
	}
	f, err := os.CreateTemp(filepath.Dir(r.state), ".active_sessions_*.tmp")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	f.Chmod(mode)
	if _, err := f.WriteString(pyJSON(map[string]any{"entries": list})); err != nil {
		f.Close()
		return err
	}
	f.Sync()
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), r.state)
}

func prune(entries []map[string]any) []map[string]any {
	var out []map[string]any
	for _, e := range entries {
		if alive(e) {
			out = append(out, e)
		}
	}
	return out
}

var umask = func() int { m := syscall.Umask(0o022); syscall.Umask(m); return m }()

// hermes takes a "cli" lease on sid, as try_acquire_active_session does,
// and returns its release.
func hermes(home, sid string) (func(), error) {
	root := os.Getenv("HERMES_HOME")
	if root == "" {
		root = filepath.Join(home, ".hermes")
	}
	if sid == "" {
		sid = time.Now().Format("20060102_150405") + "_" + randHex(3)
	}
	reg := hermesRegistry{filepath.Join(root, "runtime", "active_sessions.json"), filepath.Join(root, "runtime", "active_sessions.lock")}
	pid := os.Getpid()
	now := pyFloat(float64(time.Now().UnixNano()) / 1e9)
	lease := randHex(16)
	entry := map[string]any{"lease_id": lease, "session_id": sid, "surface": "cli", "pid": pid, "process_start_time": nil, "started_at": now, "updated_at": now}
	if st, ok := procStart(pid); ok {
		entry["process_start_time"] = pyFloat(st)
	}
	err := reg.locked(func() error {
		entries, err := reg.read()
		if err != nil {
			return refusal("hermes-refusal-reason: SESSION_COORDINATION_UNAVAILABLE\n" + err.Error())
		}
		entries = prune(entries)
		for _, e := range entries {
			if e["session_id"] == sid {
				reg.write(entries) // the prune is kept even when refusing
				return refusal(fmt.Sprintf("hermes-refusal-reason: SESSION_NOT_OWNED\nSession %s already has a live owner (%v, pid %v).", sid, e["surface"], e["pid"]))
			}
		}
		return reg.write(append(entries, entry))
	})
	if err != nil {
		return nil, err
	}
	return func() {
		reg.locked(func() error {
			entries, err := reg.read()
			if err != nil {
				return err
			}
			entries = prune(entries)
			var kept []map[string]any
			for _, e := range entries {
				if e["lease_id"] != lease {
					kept = append(kept, e)
				}
			}
			if len(kept) != len(entries) {
				return reg.write(kept)
			}
			return nil
		})
	}, nil
}

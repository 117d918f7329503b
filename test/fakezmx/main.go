// Command fakezmx stands in for zmx (neurosnap/zmx) in tests. Build it as
// "zmx" and put it on PATH. It keeps upstream's CLI, socket naming and
// process shape (as upstream's source has them), so code that drives
// the real zmx can be tested against it:
//
//   - socket dir: $ZMX_DIR | $XDG_RUNTIME_DIR/zmx | $TMPDIR/zmx-$UID |
//     /tmp/zmx-$UID, made with mode $ZMX_DIR_MODE (octal, default 0750);
//   - a session is the unix socket <socket dir>/<$ZMX_SESSION_PREFIX><name>,
//     listened on by one daemon process per session;
//   - "zmx run NAME [-d] CMD…" double-forks a daemon (setsid in between) when
//     no live session NAME exists; the daemon keeps the client's argv (it is
//     a fork of the client upstream), cwd and environment, and runs a login
//     bash (argv[0] "-bash") with ZMX_SESSION=<full name>. The command is
//     shell-quoted as upstream does and "typed" into that bash followed by
//     "; echo ZMX_TASK_COMPLETED:<4hex>:$?", so the tree is
//     zmx daemon → -bash → CMD and the shell outlives the command. When the
//     session already exists the line goes into the EXISTING shell, as
//     upstream (the hazard a caller must avoid). Any argument after NAME that
//     begins with "-d" is removed and sets detached.
//   - list [--short], kill NAME… [--force], history NAME, version, help.
//
// Deviations (the fake has no terminal): the shell reads its commands from a
// pipe instead of a PTY, so it is a non-interactive bash without job control
// (the command stays in bash's process group) and there is no echo; the
// daemon echoes each typed line into the session history itself. bash is
// started with --noprofile --norc so that /etc/profile cannot reset PATH in
// tests. The socket protocol is JSON lines, not upstream's binary IPC: only
// "a connect succeeds" is shared with upstream. attach and the other
// interactive commands are refused with exit status 2. No log files are
// written (version still reports log_dir).
package main

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// The daemon is this same binary re-executed with the client's argv; these
// variables tell it its role. They are removed from the session's shell.
const (
	roleEnv = "FAKEZMX_ROLE"
	nameEnv = "FAKEZMX_NAME"
	dirEnv  = "FAKEZMX_SOCKET_DIR"
)

// sunPathMax is sizeof(sockaddr_un.sun_path)-1 on Linux.
const sunPathMax = 107

func main() {
	switch os.Getenv(roleEnv) {
	case "fork":
		os.Exit(forkDaemon())
	case "daemon":
		os.Exit(daemonMain())
	}
	os.Exit(client(os.Args[1:]))
}

func usage(w io.Writer) {
	fmt.Fprint(w, `usage: zmx <command> [args]

  run|r <name> [-d] [cmd...]   run a command in a session (created if missing)
  list|ls [--short]            list sessions
  kill|k <name>... [--force]   kill sessions (a trailing * matches a prefix)
  history|hi <name>            print a session's output
  version|v                    print version, socket_dir and log_dir
  help|h                       this help
`)
}

func client(args []string) int {
	if len(args) == 0 {
		usage(os.Stderr)
		return 1
	}
	cmd, rest := args[0], args[1:]
	switch cmd {
	case "help", "h", "-h", "--help":
		usage(os.Stdout)
		return 0
	case "version", "v", "-v", "--version":
		fmt.Printf("version\t0.7.0-fake\nsocket_dir\t%s\nlog_dir\t%s\n", socketDir(), logDir())
		return 0
	case "attach", "a":
		fmt.Fprintln(os.Stderr, "attach is not supported by the test fake")
		return 2
	case "send", "s", "print", "p", "write", "wr", "detach", "d", "get", "g", "set", "unset", "un",
		"clear", "cl", "wait", "w", "tail", "t", "completions", "c":
		fmt.Fprintf(os.Stderr, "%s is not supported by the test fake\n", cmd)
		return 2
	}
	dir := socketDir()
	if err := ensureDir(dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	switch cmd {
	case "run", "r":
		return cmdRun(dir, rest)
	case "list", "ls":
		return cmdList(dir, rest)
	case "kill", "k":
		return cmdKill(dir, rest)
	case "history", "hi":
		return cmdHistory(dir, rest)
	}
	fmt.Fprintf(os.Stderr, "unknown command %q\n", cmd)
	usage(os.Stderr)
	return 1
}

// socketDir follows cfg.zig socketDir.
func socketDir() string {
	if d := os.Getenv("ZMX_DIR"); d != "" {
		return d
	}
	if d := os.Getenv("XDG_RUNTIME_DIR"); d != "" {
		return strings.TrimRight(d, "/") + "/zmx"
	}
	if d := os.Getenv("TMPDIR"); d != "" {
		return fmt.Sprintf("%s/zmx-%d", strings.TrimRight(d, "/"), os.Getuid())
	}
	return fmt.Sprintf("/tmp/zmx-%d", os.Getuid())
}

func logDir() string {
	if d := os.Getenv("ZMX_DIR"); d != "" {
		return d + "/logs"
	}
	if d := os.Getenv("XDG_STATE_HOME"); d != "" {
		return d + "/zmx/logs"
	}
	return os.Getenv("HOME") + "/.local/state/zmx/logs"
}

func ensureDir(dir string) error {
	mode := os.FileMode(0o750)
	if s := os.Getenv("ZMX_DIR_MODE"); s != "" {
		m, err := strconv.ParseUint(s, 8, 32)
		if err != nil {
			return fmt.Errorf("invalid ZMX_DIR_MODE %q", s)
		}
		mode = os.FileMode(m)
	}
	return os.MkdirAll(dir, mode)
}

// seshName follows socket.getSeshName: the full name is the prefix plus the
// name; any bytes but '/' and NUL, not "." or "..", not empty, and the socket
// path must fit sun_path.
func seshName(dir, name string) (string, error) {
	if strings.ContainsAny(name, "/\x00") {
		return "", fmt.Errorf("invalid session name %q: it may not contain '/' or NUL", name)
	}
	full := os.Getenv("ZMX_SESSION_PREFIX") + name
	if full == "" || full == "." || full == ".." {
		return "", fmt.Errorf("invalid session name %q", name)
	}
	if len(dir)+1+len(full) > sunPathMax {
		return "", errors.New("session name is too long")
	}
	return full, nil
}

type state int

const (
	absent      state = iota
	live              // a connect succeeds
	stale             // a socket nobody listens on
	unreachable       // connect timed out or failed otherwise
	notSocket         // something else is in the way
)

func probe(path string) (state, net.Conn) {
	fi, err := os.Lstat(path)
	if err != nil {
		return absent, nil
	}
	if fi.Mode().Type() != os.ModeSocket {
		return notSocket, nil
	}
	c, err := net.DialTimeout("unix", path, 2*time.Second)
	if err == nil {
		return live, c
	}
	if errors.Is(err, syscall.ECONNREFUSED) {
		return stale, nil
	}
	if errors.Is(err, syscall.ENOENT) {
		return absent, nil
	}
	return unreachable, nil
}

// request and response are the fake's own IPC, one JSON line each way.
type request struct {
	Op       string `json:"op"`
	Line     string `json:"line,omitempty"`
	Marker   string `json:"marker,omitempty"`
	Detached bool   `json:"detached,omitempty"`
}

type response struct {
	OK      bool   `json:"ok"`
	Err     string `json:"err,omitempty"`
	PID     int    `json:"pid,omitempty"`
	Clients int    `json:"clients"`
	Created int64  `json:"created,omitempty"`
	Cwd     string `json:"cwd,omitempty"`
	Cmd     string `json:"cmd,omitempty"`
	History string `json:"history,omitempty"`
}

func call(path string, req request, timeout time.Duration) (response, net.Conn, *bufio.Reader, error) {
	c, err := net.DialTimeout("unix", path, 2*time.Second)
	if err != nil {
		return response{}, nil, nil, err
	}
	c.SetDeadline(time.Now().Add(timeout))
	b, _ := json.Marshal(req)
	if _, err := c.Write(append(b, '\n')); err != nil {
		c.Close()
		return response{}, nil, nil, err
	}
	r := bufio.NewReader(c)
	line, err := r.ReadBytes('\n')
	if err != nil {
		c.Close()
		return response{}, nil, nil, err
	}
	var resp response
	if err := json.Unmarshal(line, &resp); err != nil {
		c.Close()
		return response{}, nil, nil, err
	}
	if !resp.OK {
		c.Close()
		return resp, nil, nil, errors.New(resp.Err)
	}
	return resp, c, r, nil
}

// shellNeedsQuoting and shellQuote are util.zig's.
func shellNeedsQuoting(arg string) bool {
	return arg == "" || strings.ContainsAny(arg, " \t\"'\\$`!(){}[]|&;<>?*~#\n")
}

func shellQuote(arg string) string {
	return "'" + strings.ReplaceAll(arg, "'", `'\''`) + "'"
}

func cmdRun(dir string, args []string) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" {
		fmt.Println("usage: zmx run <name> [-d] [command...]")
		return 0
	}
	name := args[0]
	detached := false
	var words []string
	for _, a := range args[1:] {
		if strings.HasPrefix(a, "-d") {
			detached = true
			continue
		}
		if shellNeedsQuoting(a) {
			a = shellQuote(a)
		}
		words = append(words, a)
	}
	full, err := seshName(dir, name)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	cmd := strings.Join(words, " ")
	if len(words) == 0 {
		// Upstream reads the command from a non-terminal stdin.
		if fi, err := os.Stdin.Stat(); err == nil && fi.Mode()&os.ModeCharDevice == 0 {
			b, _ := io.ReadAll(os.Stdin)
			cmd = strings.TrimSuffix(string(b), "\n")
		}
	}
	if cmd == "" {
		fmt.Fprintln(os.Stderr, "error: CommandRequired")
		return 1
	}
	path := dir + "/" + full
	created, err := ensureSession(dir, full, path)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if created {
		fmt.Printf("session %q created\n", full)
	}
	id := make([]byte, 2)
	rand.Read(id)
	marker := "ZMX_TASK_COMPLETED:" + hex.EncodeToString(id) + ":"
	line := cmd + "; echo " + marker + "$?\n"
	if strings.Contains(cmd, "<<") {
		line = cmd + "\necho " + marker + "$?\n"
	}
	timeout := 10 * time.Second
	if !detached {
		timeout = 24 * time.Hour
	}
	_, c, r, err := call(path, request{Op: "run", Line: line, Marker: marker, Detached: detached}, timeout)
	if err != nil {
		fmt.Fprintln(os.Stderr, "session not ready:", err)
		return 1
	}
	defer c.Close()
	if detached {
		fmt.Println("command sent!")
		return 0
	}
	// Tail the session's output until the task's marker.
	re := regexp.MustCompile(regexp.QuoteMeta(marker) + `(\d+)`)
	var out bytes.Buffer
	buf := make([]byte, 4096)
	for {
		n, err := r.Read(buf)
		os.Stdout.Write(buf[:n])
		out.Write(buf[:n])
		if m := re.FindSubmatch(out.Bytes()); m != nil {
			code, _ := strconv.Atoi(string(m[1]))
			return code
		}
		if err != nil {
			return 1
		}
	}
}

// ensureSession makes sure a live session listens on path, spawning its
// daemon if there is none. It reports whether it created one.
func ensureSession(dir, full, path string) (bool, error) {
	switch st, c := probe(path); st {
	case live:
		c.Close()
		return false, nil
	case stale:
		os.Remove(path)
	case notSocket:
		return false, fmt.Errorf("%s exists and is not a socket", path)
	case unreachable:
		return false, fmt.Errorf("session %q is unreachable", full)
	}
	r, w, err := os.Pipe()
	if err != nil {
		return false, err
	}
	defer r.Close()
	exe, err := os.Executable()
	if err != nil {
		return false, err
	}
	env := append(withoutFakeEnv(os.Environ()), roleEnv+"=fork", nameEnv+"="+full, dirEnv+"="+dir)
	fork := &exec.Cmd{Path: exe, Args: os.Args, Env: env, ExtraFiles: []*os.File{w},
		SysProcAttr: &syscall.SysProcAttr{Setsid: true}}
	err = fork.Start()
	w.Close()
	if err != nil {
		return false, err
	}
	fork.Wait()
	r.SetReadDeadline(time.Now().Add(10 * time.Second))
	line, _ := bufio.NewReader(r).ReadString('\n')
	switch line = strings.TrimSpace(line); {
	case line == "ok":
		return true, nil
	case line == "inuse": // another client created it first
		return false, nil
	case line == "":
		return false, errors.New("the session daemon did not start")
	default:
		return false, errors.New(line)
	}
}

func withoutFakeEnv(env []string) []string {
	var out []string
	for _, kv := range env {
		if strings.HasPrefix(kv, roleEnv+"=") || strings.HasPrefix(kv, nameEnv+"=") || strings.HasPrefix(kv, dirEnv+"=") {
			continue
		}
		out = append(out, kv)
	}
	return out
}

func cmdList(dir string, args []string) int {
	short := len(args) > 0 && args[0] == "--short"
	ents, err := os.ReadDir(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	current, inSession := os.LookupEnv("ZMX_SESSION")
	n := 0
	for _, e := range ents {
		if e.Type() != os.ModeSocket {
			continue
		}
		name := e.Name()
		prefix := ""
		if inSession {
			prefix = "  "
			if name == current {
				prefix = "→ "
			}
		}
		path := dir + "/" + name
		st, c := probe(path)
		if c != nil {
			c.Close()
		}
		var info response
		if st == live {
			info, c, _, err = call(path, request{Op: "info"}, 2*time.Second)
			if err != nil {
				st = unreachable
			} else {
				c.Close()
			}
		}
		switch st {
		case live:
			n++
			if short {
				fmt.Println(name)
			} else {
				fmt.Printf("%sname=%s\tpid=%d\tclients=%d\tcreated=%d\n", prefix, name, info.PID, info.Clients, info.Created)
			}
		case stale:
			os.Remove(path)
			if !short {
				fmt.Printf("%sname=%s\terr=ConnectionRefused\tstatus=cleaning up\n", prefix, name)
			}
		case unreachable:
			if !short {
				fmt.Printf("%sname=%s\terr=Timeout\tstatus=unreachable\n", prefix, name)
			}
		}
	}
	if n == 0 && !short {
		fmt.Fprintf(os.Stderr, "no sessions found in %s\n", dir)
	}
	return 0
}

func cmdKill(dir string, args []string) int {
	force := false
	var names []string
	for _, a := range args {
		if a == "--force" {
			force = true
			continue
		}
		names = append(names, a)
	}
	if len(names) == 0 {
		fmt.Fprintln(os.Stderr, "usage: zmx kill <name>... [--force]")
		return 1
	}
	prefix := os.Getenv("ZMX_SESSION_PREFIX")
	var targets []string
	for _, n := range names {
		if strings.HasSuffix(n, "*") {
			ents, _ := os.ReadDir(dir)
			for _, e := range ents {
				if e.Type() == os.ModeSocket && strings.HasPrefix(e.Name(), prefix+strings.TrimSuffix(n, "*")) {
					targets = append(targets, e.Name())
				}
			}
			continue
		}
		full, err := seshName(dir, n)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		targets = append(targets, full)
	}
	rc := 0
	for _, full := range targets {
		path := dir + "/" + full
		st, c := probe(path)
		if c != nil {
			c.Close()
		}
		switch st {
		case live:
			if _, c, r, err := call(path, request{Op: "kill"}, 10*time.Second); err != nil {
				fmt.Fprintf(os.Stderr, "failed to kill session %q: %v\n", full, err)
				rc = 1
			} else {
				io.Copy(io.Discard, r) // EOF: the daemon has exited
				c.Close()
				fmt.Printf("killed session %s\n", full)
			}
		case stale:
			os.Remove(path)
			fmt.Printf("cleaned up stale session %s\n", full)
		case unreachable:
			if force {
				os.Remove(path)
				fmt.Printf("removed unreachable session %s\n", full)
			} else {
				fmt.Fprintf(os.Stderr, "session %q is unreachable (use --force)\n", full)
				rc = 1
			}
		default:
			fmt.Fprintf(os.Stderr, "session %q not found\n", full)
			rc = 1
		}
	}
	return rc
}

func cmdHistory(dir string, args []string) int {
	var name string
	for _, a := range args {
		if !strings.HasPrefix(a, "--") {
			name = a
		}
	}
	full, err := seshName(dir, name)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	resp, c, _, err := call(dir+"/"+full, request{Op: "history"}, 5*time.Second)
	if err != nil {
		fmt.Fprintf(os.Stderr, "session %q not found: %v\n", full, err)
		return 1
	}
	c.Close()
	fmt.Print(resp.History)
	return 0
}

// forkDaemon is the middle process of the double fork: it runs in a new
// session (the client started it with setsid), starts the daemon and exits
// without waiting, so the daemon is orphaned and can never regain a
// controlling terminal.
func forkDaemon() int {
	ready := os.NewFile(3, "ready")
	exe, err := os.Executable()
	if err == nil {
		env := append(withoutFakeEnv(os.Environ()), roleEnv+"=daemon", nameEnv+"="+os.Getenv(nameEnv), dirEnv+"="+os.Getenv(dirEnv))
		d := &exec.Cmd{Path: exe, Args: os.Args, Env: env, ExtraFiles: []*os.File{ready}}
		if err = d.Start(); err == nil {
			return 0
		}
	}
	fmt.Fprintf(ready, "starting the session daemon: %v\n", err)
	return 1
}

type daemon struct {
	name, path, cwd string
	created         int64
	ln              *net.UnixListener
	shell           *exec.Cmd
	pgid            int

	mu      sync.Mutex
	stdin   *os.File
	history bytes.Buffer
	subs    map[chan []byte]struct{}
	lastCmd string
}

const historyMax = 1 << 20

func daemonMain() int {
	// fd 3 (the readiness pipe) came without close-on-exec: keep it out of
	// the shell.
	syscall.CloseOnExec(3)
	ready := os.NewFile(3, "ready")
	// SIGHUP is caught and dropped rather than ignored: an ignored
	// disposition would be inherited by the shell and the command.
	hups := make(chan os.Signal, 1)
	signal.Notify(hups, syscall.SIGHUP)
	go func() {
		for range hups {
		}
	}()
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)

	d := &daemon{name: os.Getenv(nameEnv), created: time.Now().Unix(), subs: map[chan []byte]struct{}{}}
	d.path = os.Getenv(dirEnv) + "/" + d.name
	d.cwd, _ = syscall.Getwd()
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: d.path, Net: "unix"})
	if err != nil {
		if errors.Is(err, syscall.EADDRINUSE) {
			fmt.Fprintln(ready, "inuse")
		} else {
			fmt.Fprintf(ready, "listening on %s: %v\n", d.path, err)
		}
		return 1
	}
	d.ln = ln

	env := withoutFakeEnv(os.Environ())
	env = setEnv(env, "ZMX_SESSION", d.name)
	if t := os.Getenv("TERM"); t == "" || t == "dumb" {
		env = setEnv(env, "TERM", "xterm-256color")
	}
	bash, err := exec.LookPath("bash")
	if err != nil {
		bash = "/bin/bash"
	}
	inR, inW, err := os.Pipe()
	if err != nil {
		fmt.Fprintln(ready, err)
		ln.Close()
		return 1
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		fmt.Fprintln(ready, err)
		ln.Close()
		return 1
	}
	// A login bash, as upstream's task mode runs; --noprofile/--norc keep
	// /etc/profile from resetting the test's PATH.
	d.shell = &exec.Cmd{Path: bash, Args: []string{"-bash", "--noprofile", "--norc"}, Env: env, Dir: d.cwd,
		Stdin: inR, Stdout: outW, Stderr: outW, SysProcAttr: &syscall.SysProcAttr{Setsid: true}}
	if err := d.shell.Start(); err != nil {
		fmt.Fprintf(ready, "starting bash: %v\n", err)
		ln.Close()
		return 1
	}
	inR.Close()
	outW.Close()
	d.stdin = inW
	d.pgid = d.shell.Process.Pid
	go d.pump(outR)
	shellDone := make(chan struct{})
	go func() { d.shell.Wait(); close(shellDone) }()

	kills := make(chan net.Conn)
	go d.serve(kills)
	fmt.Fprintln(ready, "ok")
	ready.Close()

	select {
	case <-sigs:
		d.stop(true)
	case <-shellDone:
		d.stop(false)
	case c := <-kills:
		d.stop(true)
		b, _ := json.Marshal(response{OK: true})
		c.Write(append(b, '\n'))
		// c stays open: the client reads until EOF, which comes when this
		// process exits.
	}
	return 0
}

func setEnv(env []string, k, v string) []string {
	out := env[:0:0]
	for _, kv := range env {
		if !strings.HasPrefix(kv, k+"=") {
			out = append(out, kv)
		}
	}
	return append(out, k+"="+v)
}

// pump keeps the shell's output as the session history and passes it to
// clients tailing a run.
func (d *daemon) pump(r *os.File) {
	buf := make([]byte, 4096)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			d.output(buf[:n])
		}
		if err != nil {
			return
		}
	}
}

func (d *daemon) output(p []byte) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.history.Len()+len(p) > historyMax {
		b := d.history.Bytes()
		keep := append([]byte(nil), b[len(b)/2:]...)
		d.history.Reset()
		d.history.Write(keep)
	}
	d.history.Write(p)
	for ch := range d.subs {
		select {
		case ch <- append([]byte(nil), p...):
		default: // a slow tail loses output rather than stalling the session
		}
	}
}

func (d *daemon) serve(kills chan<- net.Conn) {
	for {
		c, err := d.ln.Accept()
		if err != nil {
			return
		}
		go d.handle(c, kills)
	}
}

func (d *daemon) handle(c net.Conn, kills chan<- net.Conn) {
	r := bufio.NewReader(c)
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	line, err := r.ReadBytes('\n')
	if err != nil { // a bare liveness probe
		c.Close()
		return
	}
	c.SetReadDeadline(time.Time{})
	var req request
	reply := func(resp response) error {
		b, _ := json.Marshal(resp)
		_, err := c.Write(append(b, '\n'))
		return err
	}
	if err := json.Unmarshal(line, &req); err != nil {
		reply(response{Err: "bad request"})
		c.Close()
		return
	}
	switch req.Op {
	case "info":
		d.mu.Lock()
		reply(response{OK: true, PID: os.Getpid(), Created: d.created, Cwd: d.cwd, Cmd: d.lastCmd})
		d.mu.Unlock()
	case "history":
		d.mu.Lock()
		h := d.history.String()
		d.mu.Unlock()
		reply(response{OK: true, History: h})
	case "kill":
		kills <- c // answered once the session is gone
		return
	case "run":
		var ch chan []byte
		if !req.Detached {
			ch = make(chan []byte, 256)
			d.mu.Lock()
			d.subs[ch] = struct{}{}
			d.mu.Unlock()
			defer func() {
				d.mu.Lock()
				delete(d.subs, ch)
				d.mu.Unlock()
			}()
		}
		// "Type" the line: a terminal would echo it, so the history shows it.
		d.output([]byte(req.Line))
		d.mu.Lock()
		d.lastCmd = strings.TrimSuffix(req.Line, "\n")
		_, err := d.stdin.Write([]byte(req.Line))
		d.mu.Unlock()
		if err != nil {
			reply(response{Err: "the session's shell is gone"})
			break
		}
		if reply(response{OK: true}) != nil || req.Detached {
			break
		}
		re := regexp.MustCompile(regexp.QuoteMeta(req.Marker) + `\d+`)
		var seen bytes.Buffer
		for p := range ch {
			if _, err := c.Write(p); err != nil {
				break
			}
			seen.Write(p)
			if re.Match(seen.Bytes()) {
				break
			}
		}
	default:
		reply(response{Err: "unknown op " + req.Op})
	}
	c.Close()
}

// stop ends the session: the socket goes first, then (as upstream's
// handleKill) SIGHUP to the shell's process group, half a second's grace
// and SIGKILL.
func (d *daemon) stop(killShell bool) {
	d.ln.Close()
	os.Remove(d.path)
	if !killShell {
		return
	}
	syscall.Kill(-d.pgid, syscall.SIGHUP)
	time.Sleep(500 * time.Millisecond)
	syscall.Kill(-d.pgid, syscall.SIGKILL)
	// Answer only once nothing of the group is left running, so a caller
	// that waited for "zmx kill" sees the processes gone.
	deadline := time.Now().Add(3 * time.Second)
	for groupAlive(d.pgid) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
}

// groupAlive reports whether any non-zombie process is in process group pgid.
func groupAlive(pgid int) bool {
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		s := string(b)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(f) > 2 && f[0] != "Z" && f[0] != "X" && f[2] == strconv.Itoa(pgid) {
			return true
		}
	}
	return false
}

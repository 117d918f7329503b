package test

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/9harness/9harness/internal/shquote"
)

// How a move hands the agent's environment to the relaunched agent, as a
// process of the owner's uid that the daemon must not serve meets it:
// rules 7 and 9.

// spy is a process of the owner's uid in a user and mount namespace of its
// own that shares the launch directory: it watches the directory with
// inotify, reads every file that appears, connects to every socket that
// appears and presents every argument it finds after --exec-env in any
// process's argv, and counts the bytes of a canary in all it got.
type spy struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   *syncBuffer
}

func startSpy(t *testing.T, dir, canary string) *spy {
	t.Helper()
	unshare := require(t, "unshare")
	s := &spy{out: &syncBuffer{}}
	s.cmd = exec.Command(unshare, "--user", "--map-root-user", "--mount", "--propagation", "private", "--",
		bin("self.test"), "-test.run=^TestHelperSpy$", "-test.count=1")
	s.cmd.Env = []string{"HELPER_SPY=" + dir, "HELPER_SPY_CANARY=" + canary, "PATH=/usr/bin:/bin"}
	s.cmd.Stdout, s.cmd.Stderr = s.out, s.out
	var err error
	s.stdin, err = s.cmd.StdinPipe()
	must(t, err)
	must(t, s.cmd.Start())
	t.Cleanup(func() { s.stdin.Close(); s.cmd.Wait() })
	// It says when its watch is in place.
	eventually(t, func() bool { return strings.Contains(s.out.String(), "watching") }, "the spy's inotify watch")
	return s
}

// stop ends the spy and returns its counts.
func (s *spy) stop(t *testing.T) map[string]int {
	t.Helper()
	s.stdin.Close()
	if err := s.cmd.Wait(); err != nil {
		t.Fatalf("spy: %v\n%s", err, s.out.String())
	}
	got := map[string]int{}
	sc := bufio.NewScanner(strings.NewReader(s.out.String()))
	for sc.Scan() {
		var k string
		var n int
		if _, err := fmt.Sscanf(sc.Text(), "count %s %d", &k, &n); err == nil {
			got[k] = n
		}
	}
	return got
}

// dialListening connects to the socket at p as an attacker would: a socket
// is bound (and seen) a moment before it listens, and connecting in that
// moment is refused, so a refusal is tried again while the socket is there,
// for up to 2 s.
func dialListening(p string) (net.Conn, error) {
	deadline := time.Now().Add(2 * time.Second)
	for {
		c, err := net.DialTimeout("unix", p, time.Second)
		if err == nil || !errors.Is(err, unix.ECONNREFUSED) || time.Now().After(deadline) {
			return c, err
		}
		if _, err := os.Lstat(p); err != nil {
			return nil, err
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestHelperSpy is the spy (run by startSpy inside unshare).
func TestHelperSpy(t *testing.T) {
	dir := os.Getenv("HELPER_SPY")
	if dir == "" {
		t.Skip("a helper: run by TestMoveHandoffSpy")
	}
	canary := []byte(os.Getenv("HELPER_SPY_CANARY"))
	if f := os.Getenv("HELPER_SPY_CANARY_FILE"); f != "" {
		// From a file, so the canary is in no argv that starts the spy.
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		canary = bytes.TrimSpace(b)
	}
	if len(canary) == 0 {
		t.Fatal("no canary")
	}
	in, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := unix.InotifyAddWatch(in, dir, unix.IN_CREATE|unix.IN_MOVED_TO|unix.IN_CLOSE_WRITE|unix.IN_MODIFY); err != nil {
		t.Fatal(err)
	}
	fmt.Println("watching")
	done := make(chan struct{})
	go func() { io.Copy(io.Discard, os.Stdin); close(done) }()
	n := map[string]int{}
	tried := map[string]bool{}
	leaked := map[string]bool{} // the entries that gave the canary
	look := func(name string) {
		p := filepath.Join(dir, name)
		var st unix.Stat_t
		if unix.Lstat(p, &st) != nil {
			return
		}
		n["entries"]++
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFREG:
			b, err := os.ReadFile(p)
			if err == nil {
				n["files"]++
				n["bytes"] += len(b)
				k := countCanary(b, canary)
				n["canary"] += k
				if k > 0 && !leaked[name] {
					leaked[name] = true
					n["leaks"]++
				}
			}
		case unix.S_IFSOCK:
			// Every handle a launcher's argv shows, and nothing at all.
			for _, h := range append(execEnvArgs(), "") {
				key := name + "\x00" + h
				if tried[key] {
					continue
				}
				tried[key] = true
				c, err := dialListening(p)
				if err != nil {
					continue
				}
				n["connects"]++
				if h != "" {
					n["handles"]++
					io.WriteString(c, h+"\n")
				}
				c.SetDeadline(time.Now().Add(2 * time.Second))
				b, _ := io.ReadAll(c)
				c.Close()
				n["bytes"] += len(b)
				k := countCanary(b, canary)
				n["canary"] += k
				if k > 0 && !leaked[name] {
					leaked[name] = true
					n["leaks"]++
				}
			}
		}
	}
	buf := make([]byte, 64<<10)
	for {
		select {
		case <-done:
			for _, k := range []string{"entries", "files", "connects", "handles", "bytes", "canary", "leaks"} {
				fmt.Printf("count %s %d\n", k, n[k])
			}
			return
		default:
		}
		fds := []unix.PollFd{{Fd: int32(in), Events: unix.POLLIN}}
		unix.Poll(fds, 5)
		m, _ := unix.Read(in, buf)
		for off := 0; m > 0 && off+unix.SizeofInotifyEvent <= m; {
			ev := (*unix.InotifyEvent)(unsafe.Pointer(&buf[off]))
			name := string(bytes.TrimRight(buf[off+unix.SizeofInotifyEvent:off+unix.SizeofInotifyEvent+int(ev.Len)], "\x00"))
			off += unix.SizeofInotifyEvent + int(ev.Len)
			if name != "" {
				look(name)
			}
		}
		// And a sweep, for what appeared between two reads.
		if ents, err := os.ReadDir(dir); err == nil {
			for _, e := range ents {
				look(e.Name())
			}
		}
	}
}

// countCanary counts canary in b, and in every string of b read as JSON
// (or JSON lines) and in the base64 decoding of each such string: what
// encoding a file or a reply used, the value inside is counted.
func countCanary(b, canary []byte) int {
	n := bytes.Count(b, canary)
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case string:
			n += strings.Count(v, string(canary))
			if d, err := base64.StdEncoding.DecodeString(v); err == nil {
				n += bytes.Count(d, canary)
			}
		case []any:
			for _, e := range v {
				walk(e)
			}
		case map[string]any:
			for _, e := range v {
				walk(e)
			}
		}
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	for {
		var v any
		if dec.Decode(&v) != nil {
			break
		}
		walk(v)
	}
	return n
}

// execEnvArgs are the arguments after --exec-env in every argv this
// process can read.
func execEnvArgs() []string {
	var out []string
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil {
			continue
		}
		args := strings.Split(string(b), "\x00")
		for i, a := range args {
			if a == "--exec-env" {
				for _, h := range args[i+1:] {
					if h != "" {
						out = append(out, h)
					}
				}
				out = append(out, strings.Join(args[i+1:], " "))
			}
		}
	}
	return out
}

// TestMoveHandoffSpy: while agents whose environment holds a canary are
// moved into tmux and into zmx, a process of the owner's uid in a user and
// mount namespace of its own, sharing the launch directory, watches it
// with inotify, reads or connects to everything that appears there and
// presents every launcher handle it can read in an argv: it gets no byte
// of the canary, and the moves complete, the canary given back to the
// moved agents.
//
// Guards rule 7: no client byte reaches exec, no agent picks a binary.
// Guards rule 9: never widen: a sandbox gets nothing through 9harness.
func TestMoveHandoffSpy(t *testing.T) {
	t.Parallel()
	requireRoot(t)
	for _, mode := range []string{"alone", "helper"} {
		t.Run(mode, func(t *testing.T) { spyOnMoves(t, mode) })
	}
}

// startProcHelper starts a proc helper by hand (it then answers a daemon
// in its own namespaces, this test's) and returns its socket.
func startProcHelper(t *testing.T) string {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "proc-helper.sock")
	h := launch(t, "--serve-proc-helper", "--unix", sock)
	h.sock = sock
	h.waitReady()
	return sock
}

// handoffArgs are the daemon's flags for mode: "alone" judges launchers
// itself, "helper" through a proc helper (as the systemd unit does).
func handoffArgs(t *testing.T, mode string, args ...string) []string {
	if mode == "helper" {
		return append(args, "--proc-helper", startProcHelper(t))
	}
	return args
}

func spyOnMoves(t *testing.T, mode string) {
	m := newMoveEnv(t)
	rt := shortDir(t, "rt")
	dir := filepath.Join(rt, "9harness", "launch")
	must(t, os.MkdirAll(dir, 0o700))
	canary := marker(t, "CANARY")
	sp := startSpy(t, dir, canary)
	d := startDaemonEnv(t, []string{"XDG_RUNTIME_DIR=" + rt}, m.home, handoffArgs(t, mode, m.moveArgs()...)...)
	// The zmx session the move makes, and its agent, are the test's: ended
	// whatever happens below.
	t.Cleanup(func() {
		kill := exec.Command(bin("zmx"), "kill", "spied-zmx")
		kill.Env = []string{"ZMX_DIR=" + m.zmxDir, "PATH=/usr/bin:/bin"}
		kill.Run()
	})
	c := d.client()
	for i, host := range []string{"tmux", "zmx"} {
		a := m.startClaude(t, fmt.Sprintf("1a2b3c4d-5e6f-4a7b-8c9d-0e1f2a3b4c%02d", i), "ANTHROPIC_API_KEY="+canary)
		if err := c.WriteFile("/active/claude/"+strconv.Itoa(a.pid())+"/"+host, []byte("spied-"+host)); err != nil {
			t.Fatalf("move into %s: %v\n%s", host, err, d.stderr.String())
		}
	}
	got := sp.stop(t)
	t.Logf("spy: %v", got)
	if got["entries"] == 0 {
		t.Fatalf("the spy saw nothing appear in %s: it proves nothing\n%s", dir, sp.out.String())
	}
	if got["connects"] == 0 {
		t.Errorf("the spy never connected to a launch socket: it proves less than it should\n%s", sp.out.String())
	}
	if got["canary"] != 0 {
		t.Errorf("the spy got the canary %d times from %d entries of the launch directory, in 2 moves (%d bytes read in all)", got["canary"], got["leaks"], got["bytes"])
	}
	recs := m.records(t)
	moved := 0
	for _, r := range recs {
		for _, kv := range r.Env {
			if kv == "ANTHROPIC_API_KEY="+canary {
				moved++
			}
		}
		defer func(pid int) {
			if p, err := os.FindProcess(pid); err == nil {
				p.Signal(os.Interrupt)
			}
		}(r.PID)
	}
	if moved != 4 {
		t.Errorf("%d launches held the canary, want 4 (2 agents and their 2 relaunches)", moved)
	}
	if strings.Contains(d.stderr.String(), canary) {
		t.Error("the daemon's log holds the canary")
	}
	if !strings.Contains(d.stderr.String(), "refused a launcher") {
		t.Errorf("the daemon's log names no launcher refused:\n%s", d.stderr.String())
	}
	t.Logf("the daemon's first refusal: %s", firstLine(d.stderr.String(), "refused a launcher"))
}

// firstLine is the first line of s that holds sub.
func firstLine(s, sub string) string {
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			return l
		}
	}
	return ""
}

// TestMoveHandoffImpostor: the session host runs an impostor in the
// launcher's place, with the launcher's own arguments (the socket and the
// move's token): a copy of 9harnessd (the same code, another file), and
// the real 9harnessd inside each sandbox the sandbox tests know
// (sandboxes). The daemon gives none of them the relaunch, whether it
// judges them itself or through its proc helper; each move fails with EIO
// once its bound has passed, the journal saying failed with the command
// that resumes by hand, and nothing was relaunched.
//
// Guards rule 5: nothing is killed that has nowhere to come back to.
// Guards rule 7: no client byte reaches exec, no agent picks a binary.
// Guards rule 9: never widen: a sandbox gets nothing through 9harness.
func TestMoveHandoffImpostor(t *testing.T) {
	t.Parallel()
	requireRoot(t)
	m := newMoveEnv(t)
	rt := shortDir(t, "rt")
	w := t.TempDir()
	must(t, os.Chmod(w, 0o755))
	cp := filepath.Join(w, "9harnessd")
	copyExe(t, bin("9harnessd"), cp)
	// The impostors, by a short id the session's name starts with.
	type impostor struct {
		what string
		argv []string
		why  string // the daemon's reason
	}
	imps := map[string]impostor{"i0": {"a copy of 9harnessd", []string{cp}, "is not the daemon's"}}
	kinds := sandboxes(t)
	var sorted []string
	for k := range kinds {
		sorted = append(sorted, k)
	}
	slices.Sort(sorted)
	for i, k := range sorted {
		imps["i"+strconv.Itoa(i+1)] = impostor{"9harnessd in " + k, append(append([]string{}, kinds[k]...), bin("9harnessd")), "(a sandbox)"}
	}
	// The host: zmx as the daemon runs it (run NAME -d LAUNCHER...), with
	// the impostor the session's name picks in the launcher's place.
	script := "#!/bin/sh\nif [ \"$1\" = run ]; then\n\tname=$2; shift 4\n\tcase $name in\n"
	for id, imp := range imps {
		q := make([]string, len(imp.argv))
		for i, a := range imp.argv {
			q[i] = shquote.Quote(a)
		}
		script += "\t" + id + "-*) exec " + bin("zmx") + ` run "$name" -d ` + strings.Join(q, " ") + " \"$@\" ;;\n"
	}
	script += "\tesac\nfi\nexec " + bin("zmx") + " \"$@\"\n"
	writeExe(t, filepath.Join(w, "zmx"), []byte(script))
	canary := marker(t, "CANARY")
	// Two daemons: one judges its launchers itself, the other through a
	// proc helper, as the systemd unit does; each meets every impostor.
	modes := []string{"alone", "helper"}
	ds := map[string]*daemon{}
	for _, mode := range modes {
		ds[mode] = startDaemonEnv(t, []string{"XDG_RUNTIME_DIR=" + rt}, m.home, handoffArgs(t, mode, "--allow-move", "--host-path", w+":"+bins+":/usr/bin:/bin")...)
	}
	var names []string
	for _, mode := range modes {
		for id := range imps {
			names = append(names, id+"-"+mode)
		}
	}
	t.Cleanup(func() {
		kill := exec.Command(bin("zmx"), append([]string{"kill"}, names...)...)
		kill.Env = []string{"ZMX_DIR=" + m.zmxDir, "PATH=/usr/bin:/bin"}
		kill.Run()
	})
	type result struct {
		name string
		err  error
	}
	results := make(chan result, len(names))
	for i, name := range names {
		a := m.startClaude(t, fmt.Sprintf("2b3c4d5e-6f7a-4b8c-9d0e-1f2a3b4c5d%02d", i), "ANTHROPIC_API_KEY="+canary)
		c := ds[name[strings.IndexByte(name, '-')+1:]].client()
		go func() {
			results <- result{name, c.WriteFile("/active/claude/"+strconv.Itoa(a.pid())+"/zmx", []byte(name))}
		}()
	}
	for range names {
		r := <-results
		if !isErrno(r.err, 5 /* EIO */) {
			t.Errorf("move with %s in the launcher's place (%s): %v, want EIO", imps[r.name[:strings.IndexByte(r.name, '-')]].what, r.name, r.err)
		}
	}
	for _, mode := range modes {
		log := ds[mode].stderr.String()
		refusals := strings.Count(log, "refused a launcher")
		if refusals < len(imps) {
			t.Errorf("%s: %d launchers refused, want at least %d:\n%s", mode, refusals, len(imps), log)
		}
		for _, imp := range imps {
			if !strings.Contains(log, imp.why) {
				t.Errorf("%s: the daemon's log lacks a launcher refused because %q (%s):\n%s", mode, imp.why, imp.what, log)
			}
		}
		failed := auditEntries(log, "9a3c1d2e5f6b4c7d8e9f0a1b2c3d4e56")
		if len(failed) != len(imps) {
			t.Fatalf("%s: %d moves journaled failed, want %d:\n%s", mode, len(failed), len(imps), log)
		}
		for _, f := range failed {
			if f["outcome"] != "failed" || !strings.Contains(f["resume"], "claude --resume 2b3c4d5e-") || !strings.Contains(f["reason"], "the launcher never took the relaunch") {
				t.Errorf("%s: failed entry %q", mode, f)
			}
		}
		if n := len(auditEntries(log, "9a3c1d2e5f6b4c7d8e9f0a1b2c3d4e55")); n != 0 {
			t.Errorf("%s: %d moves journaled done", mode, n)
		}
		if strings.Contains(log, canary) {
			t.Errorf("%s: the daemon's log holds the canary", mode)
		}
	}
	if recs := m.records(t); len(recs) != len(names) {
		t.Errorf("%d launches recorded, want only the %d agents: an impostor relaunched one", len(recs), len(names))
	}
	// Each impostor failed in its session: refused by the daemon, or (in
	// another pid namespace, where the daemon's pid is not its own) it
	// refused the daemon's socket first.
	for _, name := range names {
		h := exec.Command(bin("zmx"), "history", name)
		h.Env = []string{"ZMX_DIR=" + m.zmxDir, "PATH=/usr/bin:/bin"}
		out, _ := h.CombinedOutput()
		if !strings.Contains(string(out), "9harnessd --exec-env: ") || strings.Contains(string(out), canary) {
			t.Errorf("the %s impostor's session:\n%s", name, out)
		}
	}
}

// TestMoveUpgradedDaemon: once the daemon's executable has been replaced on
// disk (an upgrade), the launcher a move would run is another file, which
// the handoff refuses: the move is refused before the agent is touched,
// saying how to go on.
//
// Guards rule 5: nothing is killed that has nowhere to come back to.
func TestMoveUpgradedDaemon(t *testing.T) {
	t.Parallel()
	m := newMoveEnv(t)
	dir := t.TempDir()
	must(t, os.Chmod(dir, 0o755))
	exe := filepath.Join(dir, "9harnessd")
	copyExe(t, bin("9harnessd"), exe)
	sock := filepath.Join(t.TempDir(), "harness.sock")
	d := launchCmd(t, exe, append(append([]string{"--unix", sock, "--audit", "stderr"}, rootArgs(m.home)...), m.moveArgs()...)...)
	d.sock = sock
	d.waitReady()
	// The upgrade: a new file renamed over the old name.
	copyExe(t, bin("9harnessd"), exe+".new")
	must(t, os.Rename(exe+".new", exe))
	a := m.startClaude(t, "3c4d5e6f-7a8b-4c9d-8e0f-1a2b3c4d5e6f")
	err := d.client().WriteFile("/active/claude/"+strconv.Itoa(a.pid())+"/tmux", []byte("upgraded"))
	if !isErrno(err, 1 /* EPERM */) {
		t.Fatalf("move after an upgrade: %v, want EPERM\n%s", err, d.stderr.String())
	}
	// The daemon writes the refusal before it answers; the test's copy of
	// its standard error may come a moment later.
	eventually(t, func() bool { return len(auditEntries(d.stderr.String(), "9a3c1d2e5f6b4c7d8e9f0a1b2c3d4e53")) > 0 }, "the refusal in the audit")
	if refused := auditEntries(d.stderr.String(), "9a3c1d2e5f6b4c7d8e9f0a1b2c3d4e53"); len(refused) != 1 || !strings.Contains(refused[0]["reason"], "no longer the daemon's own executable") {
		t.Errorf("the refusal does not name the replaced executable:\n%s", d.stderr.String())
	}
	select {
	case <-a.done:
		t.Fatal("the agent was stopped")
	default:
	}
	if n := len(auditEntries(d.stderr.String(), "9a3c1d2e5f6b4c7d8e9f0a1b2c3d4e54")); n != 0 {
		t.Errorf("%d moves started", n)
	}
}

// copyExe copies the executable src to dst with cp(1), and writeExe
// writes one with sh(1), never through a descriptor of this process: a
// file this process opens for writing is inherited, until its exec, by
// every child another test forks meanwhile, and an exec of the file fails
// with ETXTBSY while any of them holds it.
func copyExe(t *testing.T, src, dst string) {
	t.Helper()
	if out, err := exec.Command("cp", src, dst).CombinedOutput(); err != nil {
		t.Fatalf("cp %s %s: %v %s", src, dst, err, out)
	}
	must(t, os.Chmod(dst, 0o755))
}

func writeExe(t *testing.T, path string, b []byte) {
	t.Helper()
	cmd := exec.Command("sh", "-c", `cat >"$1"`, "sh", path)
	cmd.Stdin = bytes.NewReader(b)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("writing %s: %v %s", path, err, out)
	}
	must(t, os.Chmod(path, 0o755))
}

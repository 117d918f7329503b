// Command fakeharness stands in for a real harness in tests. It behaves as
// the harness named by its own argv[0] basename (copy or link it as
// "claude", "codex", ...), writing the on-disk state the real one writes
// (shapes from shared/research/harness-formats.md), then waits for a signal.
//
//	claude [--resume SID]   writes $HOME/.claude/sessions/<pid>.json with
//	                        its real procStart (field 22) and a transcript
//	                        under projects/<sanitized cwd>/<sid>.jsonl; it
//	                        opens and closes the transcript per write, as
//	                        Claude does (no held fd)
//	codex [resume SID]      creates sessions/YYYY/MM/DD/rollout-…-<sid>.jsonl
//	                        under $HOME/.codex and holds it open, as the
//	                        native Codex writer does
//
// Environment: FAKE_SESSION (the session id to use when not resuming),
// FAKE_RECORD (a file to which it appends one JSON line: argv, cwd, env,
// pid), FAKE_IGNORE_TERM=1 (ignore SIGTERM), FAKE_CHILD (a \x1f-separated
// command line run as a child).
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"time"
)

func main() {
	name := filepath.Base(os.Args[0])
	if err := run(name, os.Args[1:]); err != nil {
		fmt.Fprintf(os.Stderr, "fake %s: %v\n", name, err)
		os.Exit(1)
	}
}

func run(name string, args []string) error {
	sigs := make(chan os.Signal, 1)
	if os.Getenv("FAKE_IGNORE_TERM") == "1" {
		signal.Ignore(syscall.SIGTERM)
		signal.Notify(sigs, syscall.SIGINT)
	} else {
		signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
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

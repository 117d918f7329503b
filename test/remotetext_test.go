package test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// hostileSSH is an ssh that is a hostile host: on its standard error it
// writes a window title, a clipboard write (OSC 52), a clear screen and a
// C1 CSI, in the middle of the words the client reports; on its standard
// output, where the relay's 9P should be, the same; then it fails.
const hostileSSH = `#!/bin/sh
printf '\033]0;pwned-title\007\033]52;c;cHduZWQ=\007\033[2J\033[H' >&2
printf 'Permission denied \033]52;c;Zm9vYmFy\033\\ (publickey) \302\2332J\r\n' >&2
printf 'hostile said \033]0;second-title\007\033[2J\033[3J done\n' >&2
printf '\033[2J\033]52;c;c3Rkb3V0\007not 9P at all\n'
exit 255
`

// TestRemoteTextQuoted: whatever a remote host prints (ssh's or the relay's
// last words, garbage for 9P) reaches the user as text: no ESC, BEL or C1
// control byte from it is on the client's standard output or standard
// error, in any command that talks to a host (ps --ssh, ps --all, events,
// wait, ls, cat, stat, move, mount), while the host's words themselves are
// shown.
//
// Guards rule 9: no process gets through 9harness what the kernel refuses
// it directly (a host cannot write to the user's terminal).
func TestRemoteTextQuoted(t *testing.T) {
	// Its own fake ssh, home and runtime directory, and no daemon: it
	// shares nothing with any other test (the followers each run 15 s).
	t.Parallel()
	base := t.TempDir()
	fakebin := filepath.Join(base, "bin")
	must(t, os.MkdirAll(fakebin, 0o755))
	writeExe(t, filepath.Join(fakebin, "ssh"), []byte(hostileSSH))
	hosts := filepath.Join(base, "hosts")
	must(t, os.WriteFile(hosts, []byte("evil\nevil2\n"), 0o644))
	run := filepath.Join(base, "run")
	must(t, os.MkdirAll(run, 0o700))
	env := []string{
		"PATH=" + fakebin + ":/usr/bin:/bin", "HOME=" + base, "XDG_RUNTIME_DIR=" + run,
		"XDG_CONFIG_HOME=" + filepath.Join(base, "config"), "TERM=xterm",
	}
	mnt := filepath.Join(base, "mnt")
	must(t, os.MkdirAll(mnt, 0o755))
	for _, args := range [][]string{
		{"--ssh", "evil", "ps"},
		{"--ssh", "evil", "ps", "--json"},
		{"ps", "--hosts", hosts, "--all", "--timeout", "5s"},
		{"ps", "--hosts", hosts, "--timeout", "5s"},
		{"--ssh", "evil", "events"},
		{"events", "--hosts", hosts},
		{"--ssh", "evil", "wait", "--timeout", "2s"},
		{"wait", "--hosts", hosts, "--timeout", "0"},
		{"--ssh", "evil", "ls", "/"},
		{"--ssh", "evil", "cat", "/pid"},
		{"--ssh", "evil", "stat", "/"},
		{"--ssh", "evil", "move", "claude/1", "rescued"},
		{"--ssh", "evil", "mount", "-f", mnt},
		{"mount", "-f", "--hosts", hosts, mnt},
	} {
		var touch func()
		if slices.Contains(args, "mount") {
			// A fleet mount dials a host when a path of it is used, and
			// logs the host's failure on its standard error.
			requireFuse(t)
			touch = func() {
				deadline := time.Now().Add(10 * time.Second)
				for time.Now().Before(deadline) {
					if ents, err := os.ReadDir(mnt); err == nil && len(ents) > 0 {
						for _, e := range ents {
							os.ReadDir(filepath.Join(mnt, e.Name()))
							os.ReadFile(filepath.Join(mnt, e.Name(), "pid"))
						}
						break
					}
					time.Sleep(100 * time.Millisecond)
				}
				exec.Command("fusermount3", "-u", mnt).Run()
			}
		}
		out, errOut := runKilled(t, env, 15*time.Second, touch, args...)
		for name, b := range map[string][]byte{"stdout": out, "stderr": errOut} {
			if i := bytes.IndexAny(b, "\x1b\x07\x9b"); i >= 0 || bytes.Contains(b, []byte("\u009b")) {
				t.Errorf("9harness %s: a control byte on %s at %d: %q", strings.Join(args, " "), name, i, b)
			}
		}
		// Teeth: the host's words were there to be quoted.
		if !bytes.Contains(errOut, []byte("hostile said")) && !bytes.Contains(errOut, []byte("Permission denied")) &&
			!bytes.Contains(errOut, []byte("not 9P")) && !bytes.Contains(errOut, []byte("evil")) {
			t.Errorf("9harness %s: stderr names neither the host nor its words: %q", strings.Join(args, " "), errOut)
		}
		t.Logf("9harness %s: stderr %q", strings.Join(args, " "), headLine(errOut))
	}
}

// runKilled runs the client with env, killing it after d (a follower such
// as events runs until then), and returns what it wrote.
func runKilled(t *testing.T, env []string, d time.Duration, touch func(), args ...string) (stdout, stderr []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin("9harness"), args...)
	cmd.Env = env
	var o, e syncBuffer
	cmd.Stdout, cmd.Stderr = &o, &e
	cmd.WaitDelay = 2 * time.Second
	must(t, cmd.Start())
	if touch != nil {
		touch()
	}
	cmd.Wait()
	return []byte(o.String()), []byte(e.String())
}

// headLine is b's first line.
func headLine(b []byte) string {
	s, _, _ := strings.Cut(string(b), "\n")
	return s
}

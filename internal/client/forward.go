package client

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/fnv"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/9harness/9harness/internal/sockpath"
)

// The forward: a host reached once through `ssh HOST 9harness relay` is
// reached next time through a unix socket that the user's own ssh
// ControlMaster forwards to the remote daemon's socket (ssh -O forward -L
// LOCAL:REMOTE). A call then starts no ssh, no remote shell and no relay:
// it dials LOCAL, and the master opens a channel on the connection it
// already holds, which the remote sshd joins to the daemon's socket as the
// same user. Three things make this no wider than the relay:
//
//   - LOCAL lives beside the master's control socket (its ControlPath's
//     directory, named after it). Whoever can reach LOCAL can reach the
//     control socket, and with it run any command on the host through the
//     master (`ssh -O forward` is one such); the forward gives nothing a
//     process without that access could not get. A master is never made for
//     the forward: without one already running, the relay is all there is.
//   - REMOTE is the socket the relay would use, printed by `9harness relay
//     --where` on the host after it checked every directory above it is
//     the user's or root's and writable by nobody else (sticky ones aside).
//     sshd connects by path on every use, so the path must stay the user's.
//   - The remote daemon judges sshd's session process, the user's uid in
//     the host's namespaces, as it judges the relay: the same policy, the
//     same audit.
//
// What the client remembers, per host, is one line in a file of the
// user's socket directory (sockpath.Dir()/fwd/KEY, KEY a hash of how the
// host is reached and of ssh's configuration files' identity): "forward
// LOCAL", or "relay UNIX-TIME REASON" when a forward cannot be made, not
// tried again before that time. A forward that no longer answers is
// forgotten and the call goes through the relay, which makes it again.

// fwdRetry is how long a host where no forward could be made is reached
// through the relay before the forward is tried again: a master started
// later is used within it, and a host without one pays the few ssh -G/-O
// calls of a try at most once in it.
const fwdRetry = 10 * time.Minute

// fwdSetupTimeout bounds a forward's setup, which runs beside a relay
// call and which that call's Close waits for.
const fwdSetupTimeout = 10 * time.Second

// fwdRecordMax bounds the record read back: a path and a reason.
const fwdRecordMax = 4 << 10

// fwdRecordPath is where the host's record lives: "" when there is no
// place for it (no socket directory of the user's can be made).
func (s SSH) fwdRecordPath() string {
	dir := filepath.Join(sockpath.Dir(), "fwd")
	if err := sockpath.EnsureDir(filepath.Dir(dir)); err != nil {
		return ""
	}
	if err := sockpath.EnsureDir(dir); err != nil {
		return ""
	}
	// FNV, not a cryptographic hash: the key only tells hosts apart in
	// the user's own directory, and crypto/sha256 would add its package
	// initialisation (0.8 ms) to every start of the client.
	h := fnv.New128a()
	for _, w := range append([]string{"9harness-forward-1", s.Program, s.Dest, s.Command, s.Socket}, s.Options...) {
		h.Write([]byte(w))
		h.Write([]byte{0})
	}
	// ssh's configuration decides the host and the master: an edit of
	// either file is a new key, so no forward outlives the setting that
	// made it.
	home, _ := os.UserHomeDir()
	for _, f := range []string{filepath.Join(home, ".ssh", "config"), "/etc/ssh/ssh_config"} {
		var st syscall.Stat_t
		if syscall.Stat(f, &st) == nil {
			fmt.Fprintf(h, "%s %d %d %d %d.%d\x00", f, st.Dev, st.Ino, st.Size, st.Mtim.Sec, st.Mtim.Nsec)
		}
	}
	return filepath.Join(dir, hex.EncodeToString(h.Sum(nil)))
}

// fwdRecord is a host's record: a forward's local socket, or until when
// the relay is used without trying one.
type fwdRecord struct {
	local  string
	until  time.Time
	reason string
}

func readFwdRecord(path string) (fwdRecord, bool) {
	f, err := os.Open(path)
	if err != nil {
		return fwdRecord{}, false
	}
	defer f.Close()
	b := make([]byte, fwdRecordMax)
	n, _ := f.Read(b)
	line, _, _ := strings.Cut(string(b[:n]), "\n")
	kind, rest, _ := strings.Cut(line, " ")
	switch kind {
	case "forward":
		if filepath.IsAbs(rest) {
			return fwdRecord{local: rest}, true
		}
	case "relay":
		t, reason, _ := strings.Cut(rest, " ")
		if sec, err := strconv.ParseInt(t, 10, 64); err == nil {
			return fwdRecord{until: time.Unix(sec, 0), reason: reason}, true
		}
	}
	return fwdRecord{}, false
}

// writeFwdRecord replaces the record whole (a temporary file renamed over
// it), so a reader never sees half of one.
func writeFwdRecord(path string, r fwdRecord) error {
	line := "forward " + r.local + "\n"
	if r.local == "" {
		line = fmt.Sprintf("relay %d %s\n", r.until.Unix(), strings.ReplaceAll(r.reason, "\n", " "))
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".tmp-*")
	if err != nil {
		return err
	}
	_, err = tmp.WriteString(line)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		os.Remove(tmp.Name())
	}
	return err
}

// dialForward attaches through the host's forward, if it has a working
// one. A nil client means use the relay; setup says whether that call
// should then try to make a forward.
func dialForward(ctx context.Context, record string) (c *Client, setup bool) {
	r, ok := readFwdRecord(record)
	switch {
	case !ok:
		return nil, true
	case r.local == "":
		return nil, time.Now().After(r.until)
	}
	conn, err := sockpath.Dial(r.local, 5*time.Second)
	if err == nil {
		if c, err = NewContext(ctx, conn); err == nil {
			return c, false
		}
	}
	if ctx.Err() != nil {
		return nil, false // given up, which says nothing of the forward
	}
	// Gone (the master exited), refused (the remote side would not
	// join it) or not the user's: forgotten, and made again after the
	// relay has shown the host answers.
	os.Remove(record)
	return nil, true
}

// sshArgs is ssh with the user's options and then ours: ssh takes an
// option's first value, so the user's win.
func (s SSH) sshArgs(args ...string) []string {
	prog := s.Program
	if prog == "" {
		prog = "ssh"
	}
	argv := []string{prog}
	for _, o := range s.Options {
		argv = append(argv, "-o", o)
	}
	return append(argv, args...)
}

// sshRun runs one short ssh call; its output, or an error with ssh's last
// line.
func sshRun(deadline time.Time, argv []string) (stdout, stderr string, err error) {
	cmd := exec.Command(argv[0], argv[1:]...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	cmd.WaitDelay = time.Second
	if err := cmd.Start(); err != nil {
		return "", "", err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err = <-done:
	case <-time.After(time.Until(deadline)):
		cmd.Process.Kill()
		<-done
		err = errors.New("timed out")
	}
	stdout, stderr = out.String(), errb.String()
	if err != nil {
		last := strings.TrimSpace(stderr)
		if i := strings.LastIndexByte(last, '\n'); i >= 0 {
			last = last[i+1:]
		}
		if last != "" {
			err = fmt.Errorf("%v: %s", err, last)
		}
	}
	return stdout, stderr, err
}

// setupForward makes the host's forward after a relay call reached it
// (relayPID is that call's ssh) and records the outcome either way.
func setupForward(s SSH, record string, relayPID int) {
	deadline := time.Now().Add(fwdSetupTimeout)
	local, err := makeForward(s, deadline, relayPID)
	r := fwdRecord{local: local}
	if err != nil {
		r = fwdRecord{until: time.Now().Add(fwdRetry), reason: err.Error()}
	}
	writeFwdRecord(record, r)
}

// fwdSocket is the forward's local socket: beside the control socket,
// named after it and the remote socket.
func fwdSocket(control, remote string) string {
	h := fnv.New32a()
	h.Write([]byte(remote))
	return control + ".9p-" + hex.EncodeToString(h.Sum(nil))
}

func makeForward(s SSH, deadline time.Time, relayPID int) (string, error) {
	dest := []string{"--", s.Dest}
	// The master's control socket, as ssh's configuration names it.
	out, _, err := sshRun(deadline, s.sshArgs(append([]string{"-G"}, dest...)...))
	if err != nil {
		return "", fmt.Errorf("ssh -G: %w", err)
	}
	control := ""
	for _, line := range strings.Split(out, "\n") {
		if v, ok := strings.CutPrefix(line, "controlpath "); ok {
			control = strings.TrimSpace(v)
		}
	}
	if control == "" || control == "none" || !filepath.IsAbs(control) {
		return "", errors.New("no ControlPath: ssh keeps no master to forward through")
	}
	// A master runs, and it is not the relay call's own ssh, which ends
	// with that call (a master without ControlPersist).
	_, errOut, err := sshRun(deadline, s.sshArgs(append([]string{"-O", "check"}, dest...)...))
	if err != nil {
		return "", fmt.Errorf("no ssh master running: %w", err)
	}
	var pid int
	if i := strings.Index(errOut, "(pid="); i >= 0 {
		pid, _ = strconv.Atoi(strings.TrimRight(strings.Fields(errOut[i+5:])[0], ")"))
	}
	if pid == 0 || pid == relayPID {
		return "", errors.New("the ssh master is the relay call's own and ends with it (ControlPersist is off)")
	}
	// The remote daemon's socket, checked on the host.
	where := s
	where.Command = s.RemoteCommand() + " --where"
	where.Socket = ""
	argv, err := where.Argv()
	if err != nil {
		return "", err
	}
	out, _, err = sshRun(deadline, argv)
	if err != nil {
		return "", fmt.Errorf("%s: %w", where.Command, err)
	}
	remote := strings.TrimSpace(out)
	if !filepath.IsAbs(remote) || strings.ContainsAny(remote, "\n:") {
		return "", fmt.Errorf("%s printed %q, not a socket path", where.Command, remote)
	}
	local := fwdSocket(control, remote)
	// A unix socket's path holds at most 107 bytes.
	if len(local) > 107 {
		return "", fmt.Errorf("the forward's socket %s would be longer than a unix socket path may be", local)
	}
	// A socket left by a master that exited refuses connections; only a
	// socket of this name, in the master's directory, is removed.
	if c, err := net.DialTimeout("unix", local, time.Second); err == nil {
		c.Close()
	} else if errors.Is(err, syscall.ECONNREFUSED) {
		os.Remove(local)
	}
	if _, _, err := sshRun(deadline, s.sshArgs(append([]string{"-O", "forward", "-L", local + ":" + remote}, dest...)...)); err != nil {
		return "", fmt.Errorf("ssh -O forward: %w", err)
	}
	// Proven once: a 9P session through it (sshd may refuse stream
	// forwarding, or the daemon this peer).
	conn, err := sockpath.Dial(local, time.Until(deadline))
	if err == nil {
		// The setup is bounded, and a Close waits for it: a host that
		// takes the channel and never answers fails the proof in time.
		conn.SetDeadline(deadline)
		var c *Client
		if c, err = New(conn); err == nil {
			c.Close()
			return local, nil
		}
	}
	// The cancel has time of its own: the proof may have used up the
	// setup's.
	sshRun(time.Now().Add(2*time.Second), s.sshArgs(append([]string{"-O", "cancel", "-L", local + ":" + remote}, dest...)...))
	return "", fmt.Errorf("the forward %s does not reach the daemon: %w", local, err)
}

package test

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"9fans.net/go/plan9"
	"github.com/hugelgupf/p9/linux"
	"golang.org/x/sys/unix"

	"github.com/9harness/9harness/internal/audit"
	"github.com/9harness/9harness/internal/client"
	"github.com/9harness/9harness/internal/move"
)

// The fault matrix (RELIABILITY.md): each test breaks one thing
// on purpose, with real components (the daemon binary, the fake harness,
// the fake zmx, real tmux), and checks what the daemon does about it.

// p9frame builds a 9P message: size[4] type[1] tag[2] body.
func p9frame(typ byte, tag uint16, body ...[]byte) []byte {
	m := make([]byte, 7)
	m[4] = typ
	binary.LittleEndian.PutUint16(m[5:], tag)
	for _, b := range body {
		m = append(m, b...)
	}
	binary.LittleEndian.PutUint32(m, uint32(len(m)))
	return m
}

func le16(v uint16) []byte { return binary.LittleEndian.AppendUint16(nil, v) }
func le32(v uint32) []byte { return binary.LittleEndian.AppendUint32(nil, v) }
func le64(v uint64) []byte { return binary.LittleEndian.AppendUint64(nil, v) }
func p9s(s string) []byte  { return append(le16(uint16(len(s))), s...) }

// rawOpen dials the daemon and, one message at a time, versions (msize
// 1 MiB), attaches, walks fid 1 to path and opens it for reading.
func rawOpen(t *testing.T, sock, path string) net.Conn {
	t.Helper()
	c, err := netDial(sock)
	must(t, err)
	c.SetDeadline(time.Now().Add(20 * time.Second))
	call := func(m []byte, want byte) {
		t.Helper()
		if _, err := c.Write(m); err != nil {
			t.Fatal(err)
		}
		var hdr [7]byte
		if _, err := io.ReadFull(c, hdr[:]); err != nil {
			t.Fatalf("reply to type %d: %v", m[4], err)
		}
		if _, err := io.CopyN(io.Discard, c, int64(binary.LittleEndian.Uint32(hdr[:]))-7); err != nil {
			t.Fatal(err)
		}
		if hdr[4] != want {
			t.Fatalf("reply type %d to type %d, want %d", hdr[4], m[4], want)
		}
	}
	var names []byte
	parts := client.Split(path)
	for _, s := range parts {
		names = append(names, p9s(s)...)
	}
	call(p9frame(100, 0xffff, le32(1<<20), p9s("9P2000.L")), 101)
	call(p9frame(104, 1, le32(0), le32(^uint32(0)), p9s(""), p9s(""), le32(0)), 105)
	call(p9frame(110, 2, le32(0), le32(1), le16(uint16(len(parts))), names), 111)
	call(p9frame(12, 3, le32(1), le32(0)), 13)
	return c
}

// processes is a set of the test's own processes, by the inode their
// pidfds have (pidfs names a process by its inode): taken while they live,
// it still names them once they are gone, and never a later process that
// reuses a pid.
type processes map[uint64]bool

// ownProcesses names pids, which the test started and which still run.
func ownProcesses(t *testing.T, pids ...int) processes {
	t.Helper()
	ps := processes{}
	for _, pid := range pids {
		fd, err := unix.PidfdOpen(pid, 0)
		if err != nil {
			t.Fatalf("pidfd of %d: %v", pid, err)
		}
		var st unix.Stat_t
		err = unix.Fstat(fd, &st)
		unix.Close(fd)
		if err != nil {
			t.Fatal(err)
		}
		ps[st.Ino] = true
	}
	return ps
}

// fdCounts is what the daemon (pid) holds that the test can account for:
// its descriptors that are not pidfds, plus its pidfds of the test's own
// processes. The daemon keeps a pidfd for every candidate agent on the
// machine, so a count of all its pidfds changes whenever an agent-like
// process of someone else's starts or exits.
func fdCounts(t *testing.T, pid int, ours processes) (fds, pidfds int) {
	t.Helper()
	dir := fmt.Sprintf("/proc/%d/fd", pid)
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		name := filepath.Join(dir, e.Name())
		if l, err := os.Readlink(name); err != nil || l != "anon_inode:[pidfd]" {
			fds++
			continue
		}
		var st unix.Stat_t
		if unix.Stat(name, &st) == nil && ours[st.Ino] {
			fds++
			pidfds++
		}
	}
	return fds, pidfds
}

// waitFDs waits until the daemon's counts (fdCounts) are at most the
// given ones (connections end asynchronously after a hang-up), up to 10 s.
func waitFDs(t *testing.T, pid int, ours processes, fds, pidfds int) (int, int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		f, p := fdCounts(t, pid, ours)
		if f <= fds && p <= pidfds || time.Now().After(deadline) {
			return f, p
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// stableFDs is the daemon's counts (fdCounts) once they stop changing
// (five equal readings 20 ms apart, within 10 s): the baseline after the
// last connection closed.
func stableFDs(t *testing.T, pid int, ours processes) (int, int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	var f, p, same int
	for same < 5 && time.Now().Before(deadline) {
		f2, p2 := fdCounts(t, pid, ours)
		if f2 == f && p2 == p {
			same++
		} else {
			f, p, same = f2, p2, 0
		}
		time.Sleep(20 * time.Millisecond)
	}
	return f, p
}

// TestFaultHangUpMidRead: clients hang up in the middle of a read and of a
// listing (before the reply, after its first bytes while the daemon is
// still writing it, and with eight requests pipelined and never read).
// The daemon keeps serving every other client, serves the same file and
// listing whole afterwards, and holds no descriptor of any of them.
//
// Guards rule 10: bounded memory, fids, requests and connections.
func TestFaultHangUpMidRead(t *testing.T) {
	t.Parallel()
	home := fixtureHome(t)
	// A 4 MiB file and a 4,000-entry directory: each reply (1 MiB, 370 KB) is more
	// than a unix socket buffer, so a hang-up after the first bytes lands
	// while the daemon is still writing it.
	big := make([]byte, 4<<20)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range big {
		big[i] = byte(rng.Uint32())
	}
	must(t, os.WriteFile(filepath.Join(home, ".dsh", "big.bin"), big, 0o644))
	many := filepath.Join(home, ".hermes", "many")
	must(t, os.Mkdir(many, 0o755))
	const entries = 4000
	for i := range entries {
		must(t, unix.Mknod(filepath.Join(many, fmt.Sprintf("entry-%05d-%s.jsonl", i, strings.Repeat("x", 48))), unix.S_IFREG|0o644, 0))
	}
	d := startDaemon(t, home)
	pid := d.cmd.Process.Pid
	c := d.client()
	if _, err := c.ReadDir("/hermes/many"); err != nil {
		t.Fatal(err)
	}
	c.Close()
	// The clients are this test process: its pidfds are the ones the
	// daemon holds for them.
	ours := ownProcesses(t, os.Getpid())
	fds0, pidfds0 := stableFDs(t, pid, ours)

	// A bystander reads throughout.
	stop := make(chan struct{})
	var bystander sync.WaitGroup
	var byReads, byErrs atomic.Int64
	bystander.Add(1)
	go func() {
		defer bystander.Done()
		b := d.client()
		defer b.Close()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if got, err := b.ReadFile("/codex/history"); err != nil || len(got) == 0 {
				byErrs.Add(1)
				t.Errorf("bystander: %q, %v", got, err)
			}
			byReads.Add(1)
		}
	}()

	const rounds = 10
	hangups := 0
	for range rounds {
		for _, target := range []struct {
			path string
			typ  byte // Tread or Treaddir
		}{{"/dsh/big.bin", 116}, {"/hermes/many", 40}} {
			req := func(tag uint16) []byte {
				return p9frame(target.typ, tag, le32(1), le64(0), le32(1<<20-24))
			}
			// Before any of the reply.
			r := rawOpen(t, d.sock, target.path)
			r.Write(req(4))
			r.Close()
			// After the first 4 KiB of a 1 MiB reply.
			r = rawOpen(t, d.sock, target.path)
			r.Write(req(4))
			if _, err := io.ReadFull(r, make([]byte, 4096)); err != nil {
				t.Fatalf("first bytes of %s: %v", target.path, err)
			}
			r.Close()
			// Eight pipelined, none read.
			r = rawOpen(t, d.sock, target.path)
			for tag := uint16(4); tag < 12; tag++ {
				r.Write(req(tag))
			}
			time.Sleep(20 * time.Millisecond)
			r.Close()
			hangups += 3
		}
	}
	close(stop)
	bystander.Wait()

	c = d.client()
	got, err := c.ReadFile("/dsh/big.bin")
	if err != nil || !bytes.Equal(got, big) {
		t.Fatalf("after the hang-ups, /dsh/big.bin: %d bytes (want %d), %v", len(got), len(big), err)
	}
	ents, err := c.ReadDir("/hermes/many")
	if err != nil || len(ents) != entries {
		t.Fatalf("after the hang-ups, /hermes/many: %d entries (want %d), %v", len(ents), entries, err)
	}
	c.Close()
	fds1, pidfds1 := waitFDs(t, pid, ours, fds0, pidfds0)
	t.Logf("%d hang-ups; bystander %d reads, %d errors; daemon fds %d -> %d, pidfds %d -> %d",
		hangups, byReads.Load(), byErrs.Load(), fds0, fds1, pidfds0, pidfds1)
	if fds1 > fds0 || pidfds1 > pidfds0 {
		t.Errorf("daemon holds descriptors of hung-up clients: fds %d -> %d, pidfds %d -> %d", fds0, fds1, pidfds0, pidfds1)
	}
	if byReads.Load() == 0 {
		t.Error("the bystander never read")
	}
	// A hang-up is a connection's normal end: the daemon does not log it.
	for _, l := range strings.Split(d.stderr.String(), "\n") {
		if strings.Contains(l, "broken pipe") || strings.Contains(l, "connection reset") {
			t.Errorf("the daemon logged a client's hang-up: %s", l)
		}
	}
	if s := d.stderr.String(); strings.Contains(s, "panic") {
		t.Errorf("daemon panicked:\n%s", s)
	}
}

// parseLogfmt reads one logfmt line (audit's stderr form) into its fields.
func parseLogfmt(s string) map[string]string {
	f := map[string]string{}
	for s = strings.TrimLeft(s, " "); s != ""; s = strings.TrimLeft(s, " ") {
		k, rest, ok := strings.Cut(s, "=")
		if !ok {
			break
		}
		var v string
		if strings.HasPrefix(rest, `"`) {
			q, err := strconv.QuotedPrefix(rest)
			if err != nil {
				break
			}
			v, _ = strconv.Unquote(q)
			rest = rest[len(q):]
		} else {
			v, rest, _ = strings.Cut(rest, " ")
		}
		f[k] = v
		s = rest
	}
	return f
}

// auditEntries are the daemon's audit entries (--audit stderr) with id.
func auditEntries(log, id string) []map[string]string {
	var out []map[string]string
	for _, ln := range strings.Split(log, "\n") {
		if rest, ok := strings.CutPrefix(ln, "audit "); ok {
			if f := parseLogfmt(rest); f["message_id"] == id {
				out = append(out, f)
			}
		}
	}
	return out
}

// TestFaultAgentExitsDuringMove: the agent exits on its own in the middle
// of a move, and just before one.
//
// Guards rule 5: nothing is killed that has nowhere to come back to.
func TestFaultAgentExitsDuringMove(t *testing.T) {
	t.Parallel()
	// During the grace period after SIGTERM (the agent ignores SIGTERM and
	// then exits of its own accord): the move sees the exit through its
	// pidfd, sends no SIGKILL, and goes on to resume the session.
	t.Run("during", func(t *testing.T) {
		m := newMoveEnv(t)
		const sid = "3b4c5d6e-7f8a-4b9c-8d0e-1f2a3b4c5d6e"
		agent := m.startClaude(t, sid, "FAKE_IGNORE_TERM=1")
		d := startDaemon(t, m.home, "--allow-move")
		errc := make(chan error, 1)
		go func() {
			errc <- d.client().WriteFile("/active/claude/"+strconv.Itoa(agent.pid())+"/tmux", []byte("selfexit"))
		}()
		eventually(t, func() bool { return len(auditEntries(d.stderr.String(), audit.IDMoveStarted)) == 1 }, "the move's start (SIGTERM is next)")
		started := time.Now()
		time.Sleep(200 * time.Millisecond)
		agent.cmd.Process.Signal(syscall.SIGINT) // the test's own child: it exits on its own
		var err error
		select {
		case err = <-errc:
		case <-time.After(60 * time.Second):
			t.Fatalf("the move did not return\n%s", d.stderr.String())
		}
		took := time.Since(started)
		if err != nil {
			t.Fatalf("move: %v\n%s", err, d.stderr.String())
		}
		// The SIGKILL would come TermGrace after SIGTERM; a move that
		// returned before it did not wait for it (a correctness bound:
		// the exit was seen, not timed out).
		if took >= move.TermGrace {
			t.Errorf("the move returned %v after SIGTERM; an agent that exits on its own must not wait out the %v grace", took, move.TermGrace)
		}
		t.Logf("move returned %v after its start, the agent exiting 200 ms in", took.Round(time.Millisecond))
		recs := m.records(t)
		if len(recs) != 2 || strings.Join(recs[1].Argv[1:], " ") != "--resume "+sid {
			t.Fatalf("relaunch: %+v", recs)
		}
		panes, err := m.tmux("list-panes", "-s", "-t", "=selfexit", "-F", "#{pane_pid}")
		if err != nil || panes != strconv.Itoa(recs[1].PID) {
			t.Errorf("session selfexit panes %q (%v), want %d", panes, err, recs[1].PID)
		}
		// The daemon's stderr reaches the test through a pipe: a moment later.
		eventually(t, func() bool { return len(auditEntries(d.stderr.String(), audit.IDMoveDone)) == 1 }, "the move's end in the audit")
		if e := auditEntries(d.stderr.String(), audit.IDMoveDone); e[0]["new_pid"] != strconv.Itoa(recs[1].PID) {
			t.Errorf("audit of the end: %v", e)
		}
		if p, err := os.FindProcess(recs[1].PID); err == nil {
			p.Signal(os.Interrupt)
		}
	})
	// Between the client's walk to the file and its write: nothing is
	// started, the refusal says the agent is gone, nothing is relaunched.
	t.Run("before", func(t *testing.T) {
		m := newMoveEnv(t)
		agent := m.startClaude(t, "4c5d6e7f-8a9b-4c0d-9e1f-2a3b4c5d6e7f")
		d := startDaemon(t, m.home, "--allow-move")
		c := d.client()
		f, err := c.Walk("/active/claude/" + strconv.Itoa(agent.pid()) + "/zmx")
		must(t, err)
		if err := f.Open(client.WriteOnly); err != nil {
			t.Fatal(err)
		}
		agent.stop(t)
		if _, err := f.WriteAt([]byte("gone"), 0); !isErrno(err, linux.ENOENT) {
			t.Errorf("move of an agent that exited: %v, want ENOENT", err)
		}
		if n := len(m.records(t)); n != 1 {
			t.Errorf("%d launches, want only the original", n)
		}
		eventually(t, func() bool { return len(auditEntries(d.stderr.String(), audit.IDMoveRefused)) == 1 }, "the refusal in the audit")
		log := d.stderr.String()
		if len(auditEntries(log, audit.IDMoveStarted)) != 0 {
			t.Errorf("a move of a gone agent was started:\n%s", log)
		}
		if e := auditEntries(log, audit.IDMoveRefused); len(e) != 1 || !strings.Contains(e[0]["reason"], "gone") {
			t.Errorf("refusal: %v", e)
		}
		if _, err := c.ReadFile("/pid"); err != nil {
			t.Errorf("daemon after the refusal: %v", err)
		}
	})
}

// TestFaultHostFailsAfterKill: the session host fails once the agent is
// already stopped (a zmx that cannot create the session). The write is
// EIO; the journal entry (MESSAGE_ID move-failed) names the exact command
// that resumes the session by hand, and that command, run as printed,
// does resume it; the daemon keeps serving and holds no pidfd.
//
// Guards rule 5: nothing is killed that has nowhere to come back to.
func TestFaultHostFailsAfterKill(t *testing.T) {
	t.Parallel()
	m := newMoveEnv(t)
	broken := t.TempDir()
	writeExe(t, filepath.Join(broken, "zmx"), []byte("#!/bin/sh\necho 'zmx: fault injected: cannot create a session' >&2\nexit 1\n"))
	const sid = "5d6e7f8a-9b0c-4d1e-8f2a-3b4c5d6e7f8a"
	agent := m.startClaude(t, sid, "PATH="+broken+":"+bins+":/usr/bin:/bin")
	d := startDaemon(t, m.home, "--allow-move", "--host-path", broken+":"+bins+":/usr/bin:/bin")
	pid := d.cmd.Process.Pid
	c := d.client()
	ours := ownProcesses(t, agent.pid())
	_, pidfds0 := fdCounts(t, pid, ours)
	err := c.WriteFile("/active/claude/"+strconv.Itoa(agent.pid())+"/zmx", []byte("doomed"))
	if !isErrno(err, linux.EIO) {
		t.Fatalf("move with a failing host: %v, want EIO\n%s", err, d.stderr.String())
	}
	select {
	case <-agent.done:
	case <-time.After(5 * time.Second):
		t.Fatal("the agent was not stopped: the failure is not after the kill")
	}
	eventually(t, func() bool { return len(auditEntries(d.stderr.String(), audit.IDMoveFailed)) > 0 }, "the failure in the audit")
	log := d.stderr.String()
	fails := auditEntries(log, audit.IDMoveFailed)
	if len(fails) != 1 {
		t.Fatalf("%d move-failed entries, want 1:\n%s", len(fails), log)
	}
	f := fails[0]
	want := "cd " + m.cwd + " && claude --resume " + sid
	if f["resume"] != want || f["outcome"] != "failed" || f["session"] != sid || f["target"] != "doomed" {
		t.Errorf("move-failed entry: resume %q (want %q), outcome %q, session %q, target %q", f["resume"], want, f["outcome"], f["session"], f["target"])
	}
	if !strings.Contains(f["message"], "resume by hand: "+want) || !strings.Contains(f["reason"], "fault injected") {
		t.Errorf("message %q / reason %q: want the command and the host's own words", f["message"], f["reason"])
	}
	if pri := f["priority"]; pri != "3" {
		t.Errorf("priority %s, want 3 (err)", pri)
	}
	// The daemon keeps serving, and holds no pidfd of the failed move. A
	// listing first: the process table holds each candidate's pidfd (its
	// uid's source) until a scan finds the process gone.
	if _, err := c.ReadFile("/pid"); err != nil {
		t.Fatalf("daemon after the failed move: %v", err)
	}
	if _, err := c.ReadDir("/active/claude"); err != nil {
		t.Fatalf("listing after the failed move: %v", err)
	}
	if _, p := waitFDs(t, pid, ours, 1<<30, pidfds0); p > pidfds0 {
		t.Errorf("daemon pidfds %d before the move, %d after", pidfds0, p)
	}
	// The printed command, run by hand in the agent's environment,
	// resumes the session.
	sh := exec.Command("/bin/sh", "-c", f["resume"])
	sh.Env = append(append([]string{}, m.env...), "HOME="+m.home)
	sh.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	must(t, sh.Start())
	t.Cleanup(func() {
		syscall.Kill(-sh.Process.Pid, syscall.SIGTERM) // the group this test started
		sh.Wait()
	})
	eventually(t, func() bool { return len(m.records(t)) == 2 }, "the hand-resumed agent")
	nw := m.records(t)[1]
	if strings.Join(nw.Argv[1:], " ") != "--resume "+sid || nw.Cwd != m.cwd {
		t.Errorf("hand resume ran %q in %s", nw.Argv, nw.Cwd)
	}
	eventually(t, func() bool {
		s, err := readField(c, "/active/claude/"+strconv.Itoa(nw.PID)+"/session")
		return err == nil && s == sid
	}, "the hand-resumed agent under /active with its session")
}

// TestFaultDaemonStopsMidMove: SIGTERM reaches the daemon while a move is
// in flight (an agent that ignores SIGTERM, so the move lasts past the
// 5 s grace). The daemon stops accepting, finishes the move (the journal
// has its end, the agent runs in its new session), then exits 0; the moved
// agent outlives it.
//
// Both dialects: p9 (9P2000.L) waits for its handlers when the connection
// closes, srv9p (9P2000) does not, so there only the daemon's own wait for
// moves in flight (daemon.Run, Mover.Bound) keeps the move alive.
//
// Guards rule 6: a move completes, whatever its client and the daemon do.
func TestFaultDaemonStopsMidMove(t *testing.T) {
	t.Parallel()
	t.Run("9P2000.L", func(t *testing.T) {
		stopMidMove(t, func(d *daemon, path string) {
			go d.client().WriteFile(path, []byte("drained"))
		})
	})
	t.Run("9P2000", func(t *testing.T) {
		stopMidMove(t, func(d *daemon, path string) {
			w, err := mount9(t, d.sock).Open(path, plan9.OWRITE|plan9.OTRUNC)
			must(t, err)
			go w.Write([]byte("drained"))
		})
	})
}

func stopMidMove(t *testing.T, write func(d *daemon, path string)) {
	m := newMoveEnv(t)
	const sid = "6e7f8a9b-0c1d-4e2f-9a3b-4c5d6e7f8a9b"
	agent := m.startClaude(t, sid, "FAKE_IGNORE_TERM=1")
	d := startDaemon(t, m.home, "--allow-move")
	write(d, "/active/claude/"+strconv.Itoa(agent.pid())+"/tmux")
	eventually(t, func() bool { return len(auditEntries(d.stderr.String(), audit.IDMoveStarted)) == 1 }, "the move's start")
	sent := time.Now()
	must(t, d.cmd.Process.Signal(syscall.SIGTERM))
	// New connections are no longer served once SIGTERM is handled.
	eventually(t, func() bool {
		c, err := client.Dial(d.sock)
		if err == nil {
			c.Close()
		}
		return err != nil
	}, "the socket to stop serving")
	if len(auditEntries(d.stderr.String(), audit.IDMoveDone)) != 0 {
		t.Fatal("the move ended before the grace period: the test did not catch it in flight")
	}
	var err error
	bound := (&move.Mover{}).Bound() // the daemon's own wait, default bounds
	select {
	case err = <-d.done:
		d.done <- err
	case <-time.After(bound + 30*time.Second):
		t.Fatalf("daemon still running %v after SIGTERM\n%s", time.Since(sent), d.stderr.String())
	}
	took := time.Since(sent)
	if err != nil {
		t.Errorf("daemon exit: %v\n%s", err, d.stderr.String())
	}
	log := d.stderr.String()
	done := auditEntries(log, audit.IDMoveDone)
	if len(done) != 1 {
		t.Fatalf("the daemon exited without finishing the move:\n%s", log)
	}
	if took > bound {
		t.Errorf("daemon took %v after SIGTERM, beyond the move's bound %v", took, bound)
	}
	if !agentExited(agent) {
		t.Error("the old agent still runs")
	}
	recs := m.records(t)
	if len(recs) != 2 || done[0]["new_pid"] != strconv.Itoa(recs[1].PID) {
		t.Fatalf("relaunch %+v, audit %v", recs, done)
	}
	panes, perr := m.tmux("list-panes", "-s", "-t", "=drained", "-F", "#{pane_pid}")
	if perr != nil || panes != strconv.Itoa(recs[1].PID) {
		t.Errorf("after the daemon exited, session drained panes %q (%v), want %d", panes, perr, recs[1].PID)
	}
	t.Logf("daemon exited %v after SIGTERM (move bound %v), the move done", took.Round(time.Millisecond), bound)
	if p, err := os.FindProcess(recs[1].PID); err == nil {
		p.Signal(os.Interrupt)
	}
}

func agentExited(a *fakeAgent) bool {
	select {
	case <-a.done:
		return true
	case <-time.After(5 * time.Second):
		return false
	}
}

// TestFaultRegistryRewritten: the harness rewrites its registry record
// (Claude's sessions/<pid>.json) non-atomically, in a loop, while a client
// reads the agent's fields. A torn record is a missing fact, not an error:
// every read either returns the right value or ENOENT, never EIO, and the
// agent stays listed.
func TestFaultRegistryRewritten(t *testing.T) {
	t.Parallel()
	home := fixtureHome(t)
	cwd := filepath.Join(home, "src", "x")
	must(t, os.MkdirAll(cwd, 0o755))
	const sid = "7f8a9b0c-1d2e-4f3a-8b4c-5d6e7f8a9b0c"
	agent := startFake(t, "claude", home, cwd, "FAKE_SESSION="+sid)
	registry := waitRegistry(t, home, agent.pid())
	orig, err := os.ReadFile(registry)
	must(t, err)
	var rec map[string]any
	dec := json.NewDecoder(bytes.NewReader(orig))
	dec.UseNumber()
	must(t, dec.Decode(&rec))
	var versions [][]byte
	for _, st := range []string{"busy", "idle"} {
		rec["status"] = st
		b, err := json.Marshal(rec)
		must(t, err)
		versions = append(versions, b)
	}

	d := startDaemon(t, home)
	c := d.client()
	dir := "/active/claude/" + strconv.Itoa(agent.pid())
	eventually(t, func() bool { s, _ := readField(c, dir+"/session"); return s == sid }, "the session before the rewrites")

	stop := make(chan struct{})
	var writes atomic.Int64
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		rng := rand.New(rand.NewPCG(3, 4))
		for i := 0; ; i++ {
			select {
			case <-stop:
				os.WriteFile(registry, orig, 0o600)
				return
			default:
			}
			b := versions[i%2]
			cut := rng.IntN(len(b) + 1)
			f, err := os.OpenFile(registry, os.O_WRONLY|os.O_TRUNC, 0o600)
			if err != nil {
				t.Errorf("rewrite: %v", err)
				return
			}
			f.Write(b[:cut]) // torn here for a moment
			time.Sleep(time.Duration(rng.IntN(200)) * time.Microsecond)
			f.Write(b[cut:])
			f.Close()
			writes.Add(1)
			time.Sleep(time.Duration(rng.IntN(2000)) * time.Microsecond) // whole for a while

		}
	}()

	allowed := map[string]map[string]bool{
		"session": {sid: true},
		"status":  {"busy": true, "idle": true},
		"name":    {"x": true},
		"cwd":     {cwd: true},
		"pid":     {strconv.Itoa(agent.pid()): true},
	}
	seen := map[string]map[string]int{}
	absent := map[string]int{}
	reads := 0
	for i := range 400 {
		for _, field := range []string{"session", "status", "name", "cwd", "pid", "via"} {
			v, err := readField(c, dir+"/"+field)
			reads++
			switch {
			case isErrno(err, linux.ENOENT):
				absent[field]++
				if field == "pid" || field == "cwd" {
					t.Errorf("%s absent: it does not come from the registry", field)
				}
			case err != nil:
				t.Fatalf("read %s while the registry is rewritten: %v (want a value or ENOENT)", field, err)
			case allowed[field] != nil && !allowed[field][v]:
				t.Errorf("%s = %q, which the registry never said", field, v)
			default:
				if seen[field] == nil {
					seen[field] = map[string]int{}
				}
				seen[field][v]++
			}
		}
		if i%20 == 0 && !contains(listNames(t, c, "/active/claude"), strconv.Itoa(agent.pid())) {
			t.Errorf("the agent dropped out of /active/claude while its registry was torn")
		}
	}
	close(stop)
	wg.Wait()
	t.Logf("%d rewrites, %d field reads; absent: %v; values seen: %v", writes.Load(), reads, absent, seen)
	// Both sides were seen: torn records (absent) and whole ones (values).
	if writes.Load() == 0 || absent["session"] == 0 || seen["session"][sid] == 0 || seen["status"]["busy"]+seen["status"]["idle"] == 0 {
		t.Fatalf("the run did not see both torn and whole records (%d rewrites)", writes.Load())
	}
	eventually(t, func() bool { s, _ := readField(c, dir+"/session"); return s == sid }, "the session once the record is whole again")
}

// TestFaultRootRecreated: a mirror root (~/.dsh) is deleted and recreated,
// thirty times, while another client reads it. While gone it is absent
// (ENOENT, not listed in /); once recreated it is served again at once,
// with the new content; no read ever fails with anything but ENOENT or
// returns bytes that were never in the file; the other roots and the
// daemon keep serving.
//
// Guards rule 1: no byte from outside the roots.
func TestFaultRootRecreated(t *testing.T) {
	t.Parallel()
	home := fixtureHome(t)
	d := startDaemon(t, home)
	c := d.client()
	root := filepath.Join(home, ".dsh")
	content := regexp.MustCompile(`^cycle [0-9]+\n$`)

	stop := make(chan struct{})
	var wg sync.WaitGroup
	var reads, absent atomic.Int64
	wg.Add(1)
	go func() {
		defer wg.Done()
		r := d.client()
		for {
			select {
			case <-stop:
				return
			default:
			}
			b, err := r.ReadFile("/dsh/cycle.txt")
			reads.Add(1)
			switch {
			case isErrno(err, linux.ENOENT):
				absent.Add(1)
			case err != nil:
				t.Errorf("read during the churn: %v (want content or ENOENT)", err)
				return
			case !content.Match(b):
				t.Errorf("read during the churn: %q", b)
				return
			}
			if _, err := r.ReadDir("/dsh"); err != nil && !isErrno(err, linux.ENOENT) {
				t.Errorf("listing during the churn: %v", err)
				return
			}
		}
	}()

	const cycles = 30
	for k := range cycles {
		must(t, os.RemoveAll(root))
		if _, _, err := c.Stat("/dsh"); !isErrno(err, linux.ENOENT) {
			t.Fatalf("cycle %d: deleted root: %v, want ENOENT", k, err)
		}
		if contains(listNames(t, c, "/"), "dsh") {
			t.Fatalf("cycle %d: deleted root still listed in /", k)
		}
		if _, err := c.ReadFile("/codex/history"); err != nil {
			t.Fatalf("cycle %d: another root while dsh is gone: %v", k, err)
		}
		must(t, os.Mkdir(root, 0o755))
		tmp := filepath.Join(home, "cycle.tmp")
		must(t, os.WriteFile(tmp, fmt.Appendf(nil, "cycle %d\n", k), 0o644))
		must(t, os.Rename(tmp, filepath.Join(root, "cycle.txt")))
		got, err := c.ReadFile("/dsh/cycle.txt")
		if err != nil || string(got) != fmt.Sprintf("cycle %d\n", k) {
			t.Fatalf("cycle %d: recreated root: %q, %v", k, got, err)
		}
		if !contains(listNames(t, c, "/"), "dsh") {
			t.Fatalf("cycle %d: recreated root not listed in /", k)
		}
	}
	close(stop)
	wg.Wait()
	if _, err := c.ReadFile("/pid"); err != nil {
		t.Fatalf("daemon after the churn: %v", err)
	}
	t.Logf("%d delete/recreate cycles; the other client read %d times, %d of them while the root was gone (ENOENT)", cycles, reads.Load(), absent.Load())
}

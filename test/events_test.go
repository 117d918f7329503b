package test

import (
	"bufio"
	"net"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/9harness/9harness/internal/client"
	"github.com/9harness/9harness/internal/ninep/proto"
)

// /active/events against a real daemon: a blocked reader released by a
// Tflush in both dialects, the lines a fake agent's changes make, 1,000
// blocked readers' cost, and cat on the FUSE mount.

// walkNames is a Twalk of fid to newfid by names.
func walkNames(fid, newfid uint32, names ...string) []byte {
	b := proto.AppendUint32(nil, fid)
	b = proto.AppendUint32(b, newfid)
	b = proto.AppendUint16(b, uint16(len(names)))
	for _, n := range names {
		b = proto.AppendString(b, n)
	}
	return b
}

// openEventsRaw walks fid 1 (attached as 0) to /active/events and opens
// it for reading, in r's dialect.
func (r *raw9) openEventsRaw(t testing.TB, fid uint32) {
	t.Helper()
	if _, _, err := r.rpc(proto.Twalk, walkNames(0, fid, "active", "events")); err != nil {
		t.Fatalf("walk /active/events: %v", err)
	}
	var err error
	if r.dialect == proto.Version2000 {
		_, _, err = r.rpc(proto.Topen, append(proto.AppendUint32(nil, fid), 0))
	} else {
		_, _, err = r.rpc(proto.Tlopen, proto.AppendUint32(proto.AppendUint32(nil, fid), 0))
	}
	if err != nil {
		t.Fatalf("open /active/events: %v", err)
	}
}

func readBody(fid uint32, count uint32) []byte {
	b := proto.AppendUint32(nil, fid)
	b = proto.AppendUint64(b, 0)
	return proto.AppendUint32(b, count)
}

// flushBlockedEvents sends a read of the events file on tag 5, checks
// that nothing answers it for a moment, then flushes it and returns how
// long the Rflush took. It fails if no Rflush comes within 10 s.
func flushBlockedEvents(t testing.TB, r *raw9, fid uint32) time.Duration {
	t.Helper()
	if err := r.send(frame(proto.Tread, 5, readBody(fid, 4096))); err != nil {
		t.Fatal(err)
	}
	// Nothing happens: the read must still be waiting.
	r.c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	if _, err := r.r.Peek(1); err == nil {
		typ, tag, _, _ := r.recv()
		t.Fatalf("the read was answered (type %d tag %d) with no event", typ, tag)
	} else if ne, ok := err.(net.Error); !ok || !ne.Timeout() {
		t.Fatalf("peek: %v", err)
	}
	began := time.Now()
	if err := r.send(frame(proto.Tflush, 6, proto.AppendUint16(nil, 5))); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		r.c.SetReadDeadline(deadline)
		f, err := proto.ReadFrame(r.r, r.msize+proto.HeaderSize)
		if err != nil {
			t.Fatalf("no Rflush within 10 s: %v", err)
		}
		_, typ, tag := proto.Header(f)
		if typ == proto.Rflush && tag == 6 {
			return time.Since(began)
		}
		if tag != 5 {
			t.Fatalf("unexpected reply type %d tag %d", typ, tag)
		}
	}
}

// TestEventsFlush: a read of /active/events with nothing to report blocks,
// and a Tflush naming it releases it, in both dialects; the connection
// then serves the next request (a second blocked read, flushed too).
func TestEventsFlush(t *testing.T) {
	t.Parallel()
	// An empty process table: with the machine's /proc, any agent-like
	// process that starts or exits (another test's) is an event, and the
	// read that must block is answered.
	d := startDaemon(t, fixtureHome(t), "--proc", emptyProc(t))
	forDialects(t, func(t *testing.T, dialect string) {
		r := dial9(t, d.sock, 64<<10, dialect)
		must(t, r.attach(0))
		r.openEventsRaw(t, 1)
		for i := 0; i < 2; i++ {
			took := flushBlockedEvents(t, r, 1)
			t.Logf("%s: released %v after the Tflush", dialect, took)
		}
		must(t, r.stat(1))
	})
}

var eventLineRE = regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ \S+ \S+ \S+( .*)?$`)

// eventLines reads /active/events over its own connection into a channel.
func eventLines(t *testing.T, sock string) <-chan string {
	t.Helper()
	c, err := client.Dial(sock)
	must(t, err)
	t.Cleanup(func() { c.Close() })
	r, err := c.Open("/active/events")
	must(t, err)
	ch := make(chan string, 256)
	go func() {
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			ch <- sc.Text()
		}
		close(ch)
	}()
	return ch
}

// expectLine waits up to d for a line ending in want, failing on a line
// of the wrong shape; the lines before it are returned for the log.
func expectLine(t *testing.T, ch <-chan string, want string, d time.Duration) {
	t.Helper()
	timeout := time.After(d)
	var seen []string
	for {
		select {
		case l, ok := <-ch:
			if !ok {
				t.Fatalf("stream ended before %q; saw %q", want, seen)
			}
			if !eventLineRE.MatchString(l) {
				t.Fatalf("line %q is not TIME HARNESS PID EVENT [WHAT]", l)
			}
			if strings.HasSuffix(l, " "+want) {
				return
			}
			seen = append(seen, l)
		case <-timeout:
			t.Fatalf("no line %q within %v; saw %q", want, d, seen)
		}
	}
}

// TestEventsStates: the fake Claude's registry rewritten as Claude does
// gives waiting (with what), idle and working lines; a fake agent started
// after the open gives appear, and its end exit.
func TestEventsStates(t *testing.T) {
	t.Parallel()
	e := newPsEnv(t)
	e.setClaudeStatus(t, "busy", "")
	ch := eventLines(t, e.d.sock)
	pid := strconv.Itoa(e.claude.pid())
	for _, c := range []struct{ status, waiting, want string }{
		{"waiting", "approve Bash", "claude " + pid + " waiting approve Bash"},
		{"idle", "", "claude " + pid + " idle"},
		{"busy", "", "claude " + pid + " working"},
	} {
		e.setClaudeStatus(t, c.status, c.waiting)
		expectLine(t, ch, c.want, 5*time.Second)
	}
	a := startFake(t, "codex", e.home, e.cwd, "FAKE_SESSION=00000000-0000-4000-8000-00000000e1e1")
	apid := strconv.Itoa(a.pid())
	expectLine(t, ch, "codex "+apid+" appear", 5*time.Second)
	a.stop(t)
	expectLine(t, ch, "codex "+apid+" exit", 5*time.Second)
}

// TestEventsCLI: 9harness events prints the lines as they happen, and
// --harness keeps only that harness's.
func TestEventsCLI(t *testing.T) {
	t.Parallel()
	e := newPsEnv(t)
	e.setClaudeStatus(t, "busy", "")
	all := start9harness(t, []string{"HOME=" + e.home}, "-s", e.d.sock, "events")
	codex := start9harness(t, []string{"HOME=" + e.home}, "-s", e.d.sock, "events", "--harness", "codex", "--json")
	// A reader prints what changes once it reads, and on a loaded
	// machine it may start reading late: a new change is made until its
	// line comes (each waits for something else, as a state the watcher
	// saw for less than its period may make no line).
	pid := strconv.Itoa(e.claude.pid())
	pokeUntil(t, all.stdout, func(try int) string {
		what := []string{"Edit", "Write", "Bash", "Read", "Glob"}[try]
		e.setClaudeStatus(t, "waiting", "approve "+what)
		return "claude " + pid + " waiting approve " + what + "\n"
	})
	pokeUntil(t, codex.stdout, func(int) string {
		a := startFake(t, "codex", e.home, e.cwd, "FAKE_SESSION=00000000-0000-4000-8000-00000000e2e2")
		return `"harness":"codex","pid":` + strconv.Itoa(a.pid()) + `,"event":"appear"`
	})
	if s := codex.stdout.String(); strings.Contains(s, "claude") {
		t.Fatalf("--harness codex printed %q", s)
	}
	if all.exited() || codex.exited() {
		t.Fatalf("events exited: %q %q", all.stderr.String(), codex.stderr.String())
	}
}

// TestEventsManyReaders: 1,000 reads blocked on /active/events across 63
// connections (16 each, the per-connection bound, under the daemon's cap
// of 64) cost the daemon less than 32 MiB (VmRSS), and every one of them
// is told of a change: an agent started (or any other of this uid).
func TestEventsManyReaders(t *testing.T) {
	t.Parallel()
	const readers, perConn, limit = 1000, 16, 32 << 20
	home := fixtureHome(t)
	d := startDaemon(t, home)
	pid := d.cmd.Process.Pid
	before, _, err := procStatus(pid)
	must(t, err)
	var conns []*raw9
	for n := 0; n < readers; n += perConn {
		r := dial9(t, d.sock, 8<<10, "")
		must(t, r.attach(0))
		k := min(perConn, readers-n)
		for i := 0; i < k; i++ {
			r.openEventsRaw(t, uint32(1+i))
		}
		for i := 0; i < k; i++ {
			must(t, r.send(frame(proto.Tread, uint16(100+i), readBody(uint32(1+i), 4096))))
		}
		conns = append(conns, r)
	}
	// Every read is in: a stat on each connection is answered after its
	// reads were taken (and none of them was answered).
	// Another test's agents (of this uid) may make a line meanwhile: a
	// read answered already is counted, and not waited for below.
	early := make([]int, len(conns))
	for i, r := range conns {
		typ, body := r.statReq(0)
		must(t, r.send(frame(typ, 1, body)))
		for {
			rt, tag, rb, err := r.recv()
			if err != nil {
				t.Fatalf("connection %d: stat: %v", i, err)
			}
			if tag == 1 {
				if rt != typ+1 {
					t.Fatalf("connection %d: stat: reply type %d %q", i, rt, rb)
				}
				break
			}
			if rt != proto.Rread {
				t.Fatalf("connection %d: read tag %d: reply type %d %q", i, tag, rt, rb)
			}
			early[i]++
		}
	}
	time.Sleep(500 * time.Millisecond)
	after, _, err := procStatus(pid)
	must(t, err)
	t.Logf("%d blocked readers on %d connections: VmRSS %d → %d KiB (+%d KiB)", readers, len(conns), before>>10, after>>10, (after-before)>>10)
	// Under the race detector the daemon is built with -race too, and
	// even outside its shadow (procStatus) the detector's own state per
	// goroutine and lock multiplies what each blocked reader costs
	// (measured: +50 MiB against +12-14 MiB); the bound is the issue's
	// 32 MiB for the daemon users run.
	bound := int64(limit)
	if raceEnabled {
		bound *= 4
	}
	if after-before > bound {
		t.Errorf("VmRSS grew by %d KiB, want < %d KiB", (after-before)>>10, bound>>10)
	}
	// A change reaches every reader.
	cwd := t.TempDir()
	a := startFake(t, "codex", home, cwd, "FAKE_SESSION=00000000-0000-4000-8000-00000000e3e3")
	want := " codex " + strconv.Itoa(a.pid()) + " appear\n"
	got, n := 0, 0
	for i, r := range conns {
		k := min(perConn, readers-n)
		n += k
		got += early[i]
		for range k - early[i] {
			typ, _, body, err := r.recv()
			if err != nil {
				t.Fatalf("reader %d: %v", got, err)
			}
			// Other agents of this uid (a concurrent test's) may come
			// first: any line will do, the one it started or another.
			first, _, _ := strings.Cut(string(body[min(4, len(body)):]), "\n")
			if typ != proto.Rread || !eventLineRE.MatchString(first) {
				t.Fatalf("reader %d: reply type %d %q, want lines such as%q", got, typ, body, want)
			}
			got++
		}
	}
}

// TestEventsMount: cat of the events file on the FUSE mount prints each
// line as it happens, not when a buffer fills, and ends on SIGINT.
func TestEventsMount(t *testing.T) {
	t.Parallel()
	requireFuse(t)
	// Its daemon lists only the test's agent, so the stream it reads
	// holds its own agent's lines and no other process's.
	e := newOwnedPsEnv(t)
	e.setClaudeStatus(t, "busy", "")
	m := mountTree(t, e.d.sock)
	out := &syncBuffer{}
	cat := exec.Command("cat", m.path("/active/events"))
	cat.Stdout, cat.Stderr = out, out
	must(t, cat.Start())
	done := make(chan struct{})
	go func() { cat.Wait(); close(done) }()
	t.Cleanup(func() {
		select {
		case <-done:
		default:
			cat.Process.Kill()
			<-done
		}
	})
	// cat prints what changes once its open reached the daemon, which on
	// a loaded machine may be late: a new change until its line comes.
	pid := strconv.Itoa(e.claude.pid())
	pokeUntil(t, out, func(try int) string {
		what := []string{"Edit", "Write", "Bash", "Read", "Glob"}[try]
		e.setClaudeStatus(t, "waiting", "approve "+what)
		return "claude " + pid + " waiting approve " + what + "\n"
	})
	e.setClaudeStatus(t, "idle", "")
	awaitOut(t, out, "claude "+pid+" idle\n")
	cat.Process.Signal(syscall.SIGINT)
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("cat not interrupted by SIGINT")
	}
}

// awaitOut fails unless b holds sub within Await's 10 s.
// pokeUntil makes a change (poke, told which try it is, returns the line
// it should make) until its line is in b: up to five times, 3 s apart.
func pokeUntil(t *testing.T, b *syncBuffer, poke func(try int) string) {
	t.Helper()
	for try := range 5 {
		sub := poke(try)
		deadline := time.Now().Add(3 * time.Second)
		for time.Now().Before(deadline) {
			if strings.Contains(b.String(), sub) {
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	t.Fatalf("no line made by any of 5 changes 3 s apart in %q", b.String())
}

func awaitOut(t *testing.T, b *syncBuffer, sub string) {
	t.Helper()
	if s := b.Await(sub); !strings.Contains(s, sub) {
		t.Fatalf("no %q within 10 s in %q", sub, s)
	}
}

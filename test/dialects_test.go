package test

import (
	"bytes"
	"encoding/binary"
	"io"
	"net"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"9fans.net/go/plan9"
	plan9client "9fans.net/go/plan9/client"
)

func mount9(t testing.TB, sock string) *plan9client.Fsys {
	t.Helper()
	conn, err := plan9client.Dial("unix", sock)
	if err != nil {
		t.Fatalf("9P2000 dial: %v", err)
	}
	fs, err := conn.Attach(nil, "glenda", "")
	if err != nil {
		t.Fatalf("9P2000 attach: %v", err)
	}
	t.Cleanup(func() { fs.Close() })
	return fs
}

func walk9(t testing.TB, fs *plan9client.Fsys) []string {
	t.Helper()
	var out []string
	var rec func(dir string)
	rec = func(dir string) {
		fid, err := fs.Open(dir, plan9.OREAD)
		if err != nil {
			t.Fatalf("9P2000 open %s: %v", dir, err)
		}
		ds, err := fid.Dirreadall()
		fid.Close()
		if err != nil {
			t.Fatalf("9P2000 dirread %s: %v", dir, err)
		}
		for _, d := range ds {
			p := strings.TrimSuffix(dir, "/") + "/" + d.Name
			if d.Qid.Type&plan9.QTDIR != 0 {
				out = append(out, p+"/")
				rec(p)
			} else {
				out = append(out, p)
			}
		}
	}
	out = append(out, "/")
	rec("/")
	sort.Strings(out)
	return out
}

// TestDialectsConform: on one socket, plain 9P2000 (rsc's client) and
// 9P2000.L (the project's client) see the same tree: the same names, and
// for every path the same qid, mode, size, mtime and bytes.
func TestDialectsConform(t *testing.T) {
	t.Parallel()
	home := fixtureHome(t)
	d := startDaemon(t, home, "--proc", emptyProc(t))
	fs := mount9(t, d.sock)
	c := d.client()

	got9 := walk9(t, fs)
	want := expectedTree(t)
	if missing, extra := diffSets(want, got9); len(missing)+len(extra) > 0 {
		t.Fatalf("9P2000 tree differs: missing %q extra %q", missing, extra)
	}
	for _, p := range got9 {
		if p == "/uptime" {
			continue // a clock: its size and mtime move
		}
		p = strings.TrimSuffix(p, "/")
		if p == "" {
			p = "/"
		}
		d9, err := fs.Stat(p)
		if err != nil {
			t.Fatalf("9P2000 stat %s: %v", p, err)
		}
		q, a, err := c.Stat(p)
		if err != nil {
			t.Fatalf("9P2000.L stat %s: %v", p, err)
		}
		if d9.Qid.Path != q.Path || d9.Qid.Vers != q.Version || d9.Length != a.Size ||
			uint32(d9.Mode&0o777) != a.Perm || d9.Mtime != uint32(a.Mtime.Unix()) ||
			(d9.Qid.Type&plan9.QTDIR != 0) != (q.Type&0x80 != 0) {
			t.Errorf("%s: 9P2000 %v mode %o len %d mtime %d; 9P2000.L %v mode %o len %d mtime %d",
				p, d9.Qid, d9.Mode, d9.Length, d9.Mtime, q, a.Perm, a.Size, a.Mtime.Unix())
		}
		if d9.Qid.Type&plan9.QTDIR != 0 {
			continue
		}
		f, err := fs.Open(p, plan9.OREAD)
		if err != nil {
			t.Fatalf("9P2000 open %s: %v", p, err)
		}
		b9, err := io.ReadAll(f)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		bl, err := c.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(b9, bl) {
			t.Errorf("%s: 9P2000 read %d bytes, 9P2000.L %d", p, len(b9), len(bl))
		}
	}
}

// TestDialectsRefuse: the 9P2000 side refuses what the 9P2000.L side
// refuses, with the strings Linux and plan9port map back to errno.
//
// Guards rule 4: read-only by absence.
func TestDialectsRefuse(t *testing.T) {
	t.Parallel()
	home := fixtureHome(t)
	d := startDaemon(t, home)
	fs := mount9(t, d.sock)
	for _, tc := range []struct {
		name string
		err  func() error
		want string
	}{
		{"open for write", func() error { _, err := fs.Open("/codex/history", plan9.OWRITE); return err }, "read only file system"},
		{"open rdwr", func() error { _, err := fs.Open("/codex/history", plan9.ORDWR); return err }, "read only file system"},
		{"truncate", func() error { _, err := fs.Open("/codex/history", plan9.OREAD|plan9.OTRUNC); return err }, "read only file system"},
		{"credential", func() error { _, err := fs.Stat("/codex/auth.json"); return err }, "not found"},
		{"credential at the root", func() error { _, err := fs.Stat("/.ssh"); return err }, "does not exist"},
		{"missing", func() error { _, err := fs.Stat("/dsh/nosuch"); return err }, "not found"},
		{"create", func() error { _, err := fs.Create("/dsh/new", plan9.OWRITE, 0o644); return err }, "prohibited"},
		{"remove", func() error { return fs.Remove("/dsh/cordis.patch.yml") }, "prohibited"},
		{"wstat", func() error {
			dir := plan9.Dir{}
			dir.Null()
			dir.Name = "renamed"
			return fs.Wstat("/dsh/cordis.patch.yml", &dir)
		}, "read only file system"},
	} {
		err := tc.err()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
	// The root's ".." is the root; ".." elsewhere is the walk's parent.
	root, err := fs.Stat("/")
	must(t, err)
	up, err := fs.Stat("/..")
	must(t, err)
	if up.Qid != root.Qid {
		t.Errorf("/.. = %v, want the root %v", up.Qid, root.Qid)
	}
	sub, err := fs.Stat("/dsh/profiles/..")
	must(t, err)
	dsh, _ := fs.Stat("/dsh")
	if sub.Qid != dsh.Qid {
		t.Errorf("/dsh/profiles/.. = %v, want /dsh %v", sub.Qid, dsh.Qid)
	}
}

// TestDialectsTogether: 9P2000, the hugelgupf client and diod's clients
// work on the same socket at the same time.
func TestDialectsTogether(t *testing.T) {
	t.Parallel()
	home := fixtureHome(t)
	d := startDaemon(t, home)
	require(t, "diodcat")
	want, err := d.client().ReadFile("/codex/history")
	must(t, err)
	var wg sync.WaitGroup
	errc := make(chan string, 64)
	for i := 0; i < 4; i++ {
		wg.Add(3)
		go func() {
			defer wg.Done()
			fs := mount9(t, d.sock)
			for j := 0; j < 50; j++ {
				f, err := fs.Open("/codex/history", plan9.OREAD)
				if err != nil {
					errc <- "9P2000: " + err.Error()
					return
				}
				b, _ := io.ReadAll(f)
				f.Close()
				if !bytes.Equal(b, want) {
					errc <- "9P2000: wrong bytes"
					return
				}
			}
		}()
		go func() {
			defer wg.Done()
			c := d.client()
			for j := 0; j < 50; j++ {
				b, err := c.ReadFile("/codex/history")
				if err != nil || !bytes.Equal(b, want) {
					errc <- "9P2000.L: wrong read"
					return
				}
			}
		}()
		go func() {
			defer wg.Done()
			for j := 0; j < 5; j++ {
				b, err := d.diod("diodcat", "codex/history")
				if err != nil || !bytes.Equal(b, want) {
					errc <- "diodcat: wrong read"
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errc)
	for e := range errc {
		t.Error(e)
	}
}

// TestFrontDoor: garbage, a first message that is not a Tversion, an
// oversized or silent first message, msize below the floor and an unknown
// version close only that connection (the last after Rversion "unknown").
//
// Guards rule 3: a peer the kernel does not allow gets nothing.
// Guards rule 10: bounded memory, fids, requests and connections.
func TestFrontDoor(t *testing.T) {
	t.Parallel()
	home := fixtureHome(t)
	d := startDaemon(t, home)
	keep := d.client() // a connection that must survive everything below
	tattach := []byte{19, 0, 0, 0, 104, 1, 0, 0, 0, 0, 0, 255, 255, 255, 255, 0, 0, 0, 0}
	big := make([]byte, 16)
	binary.LittleEndian.PutUint32(big, 1<<20)
	big[4] = 100
	cases := []struct {
		name string
		send []byte
		want string // "" = closed with no reply
	}{
		{"garbage", []byte("GET / HTTP/1.0\r\n\r\n"), ""},
		{"tattach first", tattach, ""},
		{"oversized", big, ""},
		{"tiny msize", tversion(1, 512, "9P2000.L"), ""},
		{"tiny msize 9P2000", tversion(1, 23, "9P2000"), ""},
		{"unknown version", tversion(7, 8192, "9P1"), "unknown"},
	}
	for _, tc := range cases {
		c, err := net.Dial("unix", d.sock)
		must(t, err)
		c.Write(tc.send)
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		reply, _ := io.ReadAll(c)
		c.Close()
		if tc.want == "" && len(reply) != 0 {
			t.Errorf("%s: got %d reply bytes, want none", tc.name, len(reply))
		}
		if tc.want != "" && !bytes.Contains(reply, []byte(tc.want)) {
			t.Errorf("%s: reply %q, want %q", tc.name, reply, tc.want)
		}
	}
	// A silent client is closed after the first-message timeout.
	c, err := net.Dial("unix", d.sock)
	must(t, err)
	start := time.Now()
	c.SetReadDeadline(time.Now().Add(20 * time.Second))
	n, _ := io.Copy(io.Discard, c)
	if n != 0 || time.Since(start) > 15*time.Second {
		t.Errorf("silent client: %d bytes after %v", n, time.Since(start))
	}
	c.Close()
	if _, err := keep.ReadFile("/pid"); err != nil {
		t.Fatalf("an innocent connection was hurt: %v", err)
	}
}

// TestDialectsActiveAndMove: plain 9P2000 reaches /active like 9P2000.L
// does, and performs a move with the same authorization and result.
func TestDialectsActiveAndMove(t *testing.T) {
	t.Parallel()
	m := newMoveEnv(t)
	const sid = "6b7c8d9e-0f1a-4b2c-8d3e-4f5a6b7c8d9e"
	agent := m.startClaude(t, sid)
	ro := startDaemon(t, m.home)
	d := startDaemon(t, m.home, "--allow-move")
	fs := mount9(t, d.sock)
	dir := "/active/claude/" + strconv.Itoa(agent.pid())
	f, err := fs.Open("/active/claude", plan9.OREAD)
	must(t, err)
	ds, err := f.Dirreadall()
	f.Close()
	must(t, err)
	found := false
	for _, e := range ds {
		found = found || e.Name == strconv.Itoa(agent.pid())
	}
	if !found {
		t.Fatalf("9P2000 listing of /active/claude lacks %d", agent.pid())
	}
	read9 := func(p string) string {
		f, err := fs.Open(p, plan9.OREAD)
		if err != nil {
			return "error: " + err.Error()
		}
		defer f.Close()
		b, _ := io.ReadAll(f)
		return strings.TrimSpace(string(b))
	}
	if got := read9(dir + "/session"); got != sid {
		t.Fatalf("9P2000 session = %q", got)
	}
	if st, err := fs.Stat(dir + "/tmux"); err != nil || st.Mode&0o777 != 0o644 {
		t.Fatalf("9P2000 stat of tmux: %v %v", st, err)
	}
	// Refused where 9P2000.L refuses: a read-only daemon, a bad name.
	if _, err := mount9(t, ro.sock).Open(dir+"/tmux", plan9.OWRITE); err == nil || !strings.Contains(err.Error(), "read only") {
		t.Errorf("write open on a read-only daemon: %v", err)
	}
	w, err := fs.Open(dir+"/tmux", plan9.OWRITE|plan9.OTRUNC)
	must(t, err)
	if _, err := w.Write([]byte("bad name")); err == nil || !strings.Contains(err.Error(), "invalid argument") {
		t.Errorf("bad name over 9P2000: %v", err)
	}
	if _, err := w.Write([]byte("plan9moved\n")); err != nil {
		t.Fatalf("move over 9P2000: %v\n%s", err, d.stderr.String())
	}
	w.Close()
	<-agent.done
	eventually(t, func() bool { return len(m.records(t)) >= 2 }, "the relaunch")
	nw := m.records(t)[1]
	defer func() {
		if p, err := os.FindProcess(nw.PID); err == nil {
			p.Signal(os.Interrupt)
		}
	}()
	if out, err := m.tmux("list-panes", "-s", "-t", "=plan9moved", "-F", "#{pane_pid}"); err != nil || out != strconv.Itoa(nw.PID) {
		t.Fatalf("tmux session plan9moved: %q %v, want pid %d", out, err, nw.PID)
	}
	// And the 9P2000.L side sees the same agent.
	if got, _ := readField(d.client(), "/active/claude/"+strconv.Itoa(nw.PID)+"/session"); got != sid {
		t.Errorf("9P2000.L after the move: session %q", got)
	}
}

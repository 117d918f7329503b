package tree

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/9harness/9harness/internal/harness"
	"github.com/9harness/9harness/internal/proc"
	"github.com/9harness/9harness/internal/proc/proctest"
	"github.com/9harness/9harness/internal/saferoot"
)

// tableFixture is n Claude agents (pids 100, 101, …) all working in /w,
// each with a registry record and a transcript in the one project dir,
// the transcripts written one second apart (so every agent's /clear check
// finds the later ones newer than its own and must see that another
// record claims them). Agent 100 has a sub-agent; agents with an odd pid
// run in tmux, on one of two servers. It returns /active and the claude
// root's path.
func tableFixture(t *testing.T, n int, host SessionHost, pad ...int) (*activeRoot, string) {
	t.Helper()
	dir := t.TempDir()
	home := t.TempDir()
	uid := uint32(os.Getuid())
	croot := filepath.Join(home, ".claude")
	proj := filepath.Join(croot, "projects", "-w")
	for _, d := range []string{filepath.Join(croot, "sessions"), proj} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	base := time.Now().Add(-time.Hour).Truncate(time.Second)
	var ps []proctest.Proc
	for i := 0; i < n; i++ {
		pid := 100 + i
		sid := fmt.Sprintf("00000000-0000-4000-8000-%012d", pid)
		p := proctest.Proc{PID: pid, PPID: 1, UID: uid, Start: uint64(pid), Argv: []string{"claude"}, Cwd: "/w"}
		if pid%2 == 1 {
			p.Env = []string{fmt.Sprintf("TMUX=/tmp/tmux-%d/s%d,77,0", uid, pid%4), "TMUX_PANE=%" + strconv.Itoa(pid)}
		}
		ps = append(ps, p)
		rec := fmt.Sprintf(`{"pid":%d,"sessionId":%q,"cwd":"/w","startedAt":%d,"procStart":"%d","status":"busy","name":"n%d"}`,
			pid, sid, base.UnixMilli(), pid, pid)
		write(t, filepath.Join(croot, "sessions", strconv.Itoa(pid)+".json"), rec, base)
		tr := fmt.Sprintf(`{"type":"user","timestamp":%q,"message":{"content":"task %d"}}`+"\n"+
			`{"type":"assistant","timestamp":%q,"message":{"model":"claude-x-%d","content":[]}}`+"\n",
			base.Add(time.Second).Format(time.RFC3339), pid, base.Add(2*time.Second).Format(time.RFC3339), pid%3)
		if len(pad) > 0 {
			// A transcript of realistic size: assistant turns up to pad bytes.
			ln := `{"type":"assistant","timestamp":"` + base.Format(time.RFC3339) + `","message":{"id":"m1","model":"claude-x-1","content":[{"type":"text","text":"` + strings.Repeat("x", 900) + `"}]}}` + "\n"
			tr += strings.Repeat(ln, pad[0]/len(ln))
		}
		write(t, filepath.Join(proj, sid+".jsonl"), tr, base.Add(time.Duration(i+10)*time.Second))
		if i == 0 {
			write(t, filepath.Join(proj, sid, "subagents", "agent-a1.jsonl"),
				`{"type":"assistant","message":{"model":"claude-sub","content":[]}}`+"\n", base)
		}
	}
	if err := proctest.Write(dir, ps...); err != nil {
		t.Fatal(err)
	}
	tb := proc.New(dir)
	envs := map[string]harness.Env{}
	for _, h := range Harnesses {
		envs[h] = harness.Env{Procs: tb, Home: home, TmpDir: dir, Root: saferoot.New(filepath.Join(home, "."+h))}
	}
	return newActive(ActiveConfig{Procs: tb, UID: uid, Envs: envs, Sessions: host}, time.Now()).root(), croot
}

func write(t *testing.T, p, content string, mtime time.Time) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(p, mtime, mtime); err != nil {
		t.Fatal(err)
	}
}

func readTable(t *testing.T, r *activeRoot) []map[string]any {
	t.Helper()
	n, err := r.Lookup("table")
	if err != nil {
		t.Fatal(err)
	}
	h, err := n.(File).Open()
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	b, err := io.ReadAll(io.NewSectionReader(h, 0, 1<<30))
	if err != nil {
		t.Fatal(err)
	}
	var rows []map[string]any
	for _, ln := range bytes.Split(bytes.TrimSuffix(b, []byte("\n")), []byte("\n")) {
		if len(ln) == 0 {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal(ln, &m); err != nil {
			t.Fatalf("table line %q: %v", ln, err)
		}
		rows = append(rows, m)
	}
	return rows
}

// rowFromFiles is what an agent's own directory holds, in the table's
// shape: what a client reading every file would build.
func rowFromFiles(t *testing.T, r *activeRoot, h, pid string) map[string]any {
	t.Helper()
	hn, _ := r.Lookup(h)
	an, err := hn.(Dir).Lookup(pid)
	if err != nil {
		t.Fatal(err)
	}
	ents, err := an.(Dir).List()
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]any{"harness": h, "zmx": "", "tmux": ""}
	for _, e := range ents {
		switch e.Name {
		case "resume", "messages":
			continue // the agent's own file only, never a column
		case "transcript":
			m["transcript"] = "/active/" + h + "/" + pid + "/transcript"
			continue
		case "agents":
			sn, _ := an.(Dir).Lookup("agents")
			subs, _ := sn.(Dir).List()
			var names []any
			for _, s := range subs {
				names = append(names, s.Name)
			}
			m["agents"] = names
			continue
		}
		fn, err := an.(Dir).Lookup(e.Name)
		if err != nil {
			t.Fatal(err)
		}
		fh, err := fn.(File).Open()
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(io.NewSectionReader(fh, 0, 1<<20))
		fh.Close()
		v := strings.TrimSuffix(string(b), "\n")
		if numeric[e.Name] {
			n, _ := strconv.Atoi(v)
			m[e.Name] = float64(n)
		} else {
			m[e.Name] = v
		}
	}
	return m
}

// TestTableMatchesFiles: every row of /active/table equals what the
// agent's own files hold, in harness-then-pid order, with the tmux file's
// session too.
func TestTableMatchesFiles(t *testing.T) {
	host := &countingHost{}
	r, _ := tableFixture(t, 6, host)
	rows := readTable(t, r)
	if len(rows) != 6 {
		t.Fatalf("table has %d rows, want 6: %v", len(rows), rows)
	}
	for i, row := range rows {
		pid := strconv.Itoa(100 + i)
		if row["harness"] != "claude" || row["pid"] != float64(100+i) {
			t.Fatalf("row %d is %v/%v, want claude/%s", i, row["harness"], row["pid"], pid)
		}
		want := rowFromFiles(t, r, "claude", pid)
		if !reflect.DeepEqual(row, want) {
			t.Errorf("pid %s:\ntable %v\nfiles %v", pid, row, want)
		}
	}
	if rows[0]["session"] != "00000000-0000-4000-8000-000000000100" || rows[0]["model"] != "claude-x-1" {
		t.Errorf("row 0 not resolved: %v", rows[0])
	}
	if got := rows[0]["agents"]; !reflect.DeepEqual(got, []any{"agent-a1"}) {
		t.Errorf("row 0 agents = %v", got)
	}
	if rows[1]["tmux"] != "work:rescued" || rows[0]["tmux"] != "" {
		t.Errorf("tmux: row 0 %q, row 1 %q", rows[0]["tmux"], rows[1]["tmux"])
	}
}

// TestTableMatchesFilesAfterClear: a transcript no record claims, newer
// than the agents' own (what /clear leaves), is taken by the table's rows
// exactly as by the agents' files, though the table reads the project dir
// once for all of them.
func TestTableMatchesFilesAfterClear(t *testing.T) {
	r, croot := tableFixture(t, 5, nil)
	cleared := "11111111-1111-4111-8111-111111111111"
	now := time.Now()
	write(t, filepath.Join(croot, "projects", "-w", cleared+".jsonl"),
		`{"type":"user","timestamp":"`+now.UTC().Format(time.RFC3339)+`","message":{"content":"after clear"}}`+"\n", now)
	rows := readTable(t, r)
	took := 0
	for _, row := range rows {
		pid := strconv.Itoa(int(row["pid"].(float64)))
		if want := rowFromFiles(t, r, "claude", pid); !reflect.DeepEqual(row, want) {
			t.Errorf("pid %s:\ntable %v\nfiles %v", pid, row, want)
		}
		if row["session"] == cleared {
			took++
		}
	}
	if took == 0 {
		t.Fatalf("no agent took the cleared session: %v", rows)
	}
}

// TestTableNotListed: /active lists only the harness directories (an
// older client takes every entry for one), and the table is found by name.
func TestTableNotListed(t *testing.T) {
	r, _ := tableFixture(t, 1, nil)
	ents, err := r.List()
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if !e.Dir {
			t.Errorf("/active lists the file %s", e.Name)
		}
	}
	n, err := r.Lookup("table")
	if err != nil {
		t.Fatal(err)
	}
	if a, err := n.Attr(); err != nil || a.Dir || a.Mode != 0o444 {
		t.Fatalf("/active/table: %+v, %v", a, err)
	}
}

// opens counts the opens inotify reports in the claude root's sessions
// and project directories (each directory listing is an open of the
// directory; each record or transcript read an open of the file) while f
// runs.
func opens(t *testing.T, croot string, f func()) int {
	t.Helper()
	fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	for _, d := range []string{"sessions", "projects", "projects/-w"} {
		if _, err := unix.InotifyAddWatch(fd, filepath.Join(croot, d), unix.IN_OPEN); err != nil {
			t.Fatal(err)
		}
	}
	f()
	n := 0
	buf := make([]byte, 1<<16)
	for {
		k, err := unix.Read(fd, buf)
		if k <= 0 || err != nil {
			return n
		}
		for off := 0; off < k; {
			ev := (*unix.InotifyEvent)(unsafePointer(&buf[off]))
			if ev.Mask&unix.IN_Q_OVERFLOW != 0 {
				t.Fatal("inotify queue overflowed: count unknown")
			}
			n++
			off += unix.SizeofInotifyEvent + int(ev.Len)
		}
	}
}

// TestTableWorkLinear: a table read of n agents in one working directory
// opens O(n) files and directories of the harness root, not O(n²): every
// agent's /clear check used to list the project dir and read every other
// agent's registry record. The bound is counted, not timed.
func TestTableWorkLinear(t *testing.T) {
	const n = 60
	r, croot := tableFixture(t, n, nil)
	var rows []map[string]any
	got := opens(t, croot, func() { rows = readTable(t, r) })
	if len(rows) != n {
		t.Fatalf("%d rows, want %d", len(rows), n)
	}
	// Per agent: its record, its transcript (a few windows), its
	// sub-agent dir; shared: the sessions dir, the project dir, every
	// record once. The quadratic walk opened about n²/2 records.
	if limit := 10 * n; got > limit {
		t.Fatalf("a table read of %d agents in one directory opened %d files (limit %d): cost grows with n²", n, got, limit)
	}
	t.Logf("%d agents: %d opens", n, got)
}

// tableHost is a SessionTable that counts the servers asked.
type tableHost struct {
	countingHost
	mu      sync.Mutex
	servers []string
}

func (h *tableHost) TmuxServer(ctx context.Context, socket string) func(proc.Proc, string, string) string {
	h.mu.Lock()
	h.servers = append(h.servers, socket)
	h.mu.Unlock()
	// As slow as a tmux client: rows derived at once all meet the
	// question in flight.
	time.Sleep(20 * time.Millisecond)
	return func(p proc.Proc, pane, tmpdir string) string {
		return filepath.Base(socket) + ":" + pane
	}
}

// TestTableTmuxOncePerServer: one table read asks each tmux server once,
// however many agents it serves, and never asks per agent.
func TestTableTmuxOncePerServer(t *testing.T) {
	host := &tableHost{}
	r, _ := tableFixture(t, 12, host)
	rows := readTable(t, r)
	uid := os.Getuid()
	for _, row := range rows {
		pid := int(row["pid"].(float64))
		want := ""
		if pid%2 == 1 {
			want = fmt.Sprintf("s%d:%%%d", pid%4, pid)
		}
		if row["tmux"] != want {
			t.Errorf("pid %d tmux %q, want %q", pid, row["tmux"], want)
		}
	}
	sort.Strings(host.servers)
	want := []string{fmt.Sprintf("/tmp/tmux-%d/s1", uid), fmt.Sprintf("/tmp/tmux-%d/s3", uid)}
	if !reflect.DeepEqual(host.servers, want) || host.count() != 0 {
		t.Fatalf("servers asked %q (want each once: %q), per-agent questions %d", host.servers, want, host.count())
	}
}

// TestTableManyAgents: a table of enough agents to be derived on several
// goroutines (proc.Split) has every agent once, in order, each row its
// own (its session, its tmux pane), every tmux server asked once, and its
// roots held for the read only (every descriptor closed after).
func TestTableManyAgents(t *testing.T) {
	const n = 300
	host := &tableHost{}
	r, _ := tableFixture(t, n, host)
	before := fdCount(t)
	for range 2 { // the second read from the file cache
		host.servers = nil
		rows := readTable(t, r)
		if len(rows) != n {
			t.Fatalf("%d rows, want %d", len(rows), n)
		}
		for i, row := range rows {
			pid := 100 + i
			if int(row["pid"].(float64)) != pid {
				t.Fatalf("row %d is pid %v, want %d (order)", i, row["pid"], pid)
			}
			if want := fmt.Sprintf("00000000-0000-4000-8000-%012d", pid); row["session"] != want {
				t.Errorf("pid %d session %v, want %s", pid, row["session"], want)
			}
			want := ""
			if pid%2 == 1 {
				want = fmt.Sprintf("s%d:%%%d", pid%4, pid)
			}
			if row["tmux"] != want {
				t.Errorf("pid %d tmux %q, want %q", pid, row["tmux"], want)
			}
		}
		if len(host.servers) != 2 {
			t.Errorf("servers asked %q, want each of 2 once", host.servers)
		}
	}
	if after := fdCount(t); after != before {
		t.Errorf("descriptors: %d before the reads, %d after: a held root was not released", before, after)
	}
}

func fdCount(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

func unsafePointer(b *byte) unsafe.Pointer { return unsafe.Pointer(b) }

// BenchmarkTableOneDir reads /active/table over 100 fixture agents in
// one working directory, with 2 MiB transcripts.
func BenchmarkTableOneDir(b *testing.B) {
	t := &testing.T{}
	r, _ := tableFixture(t, 100, nil, 2<<20)
	// Files written a moment ago are read afresh every time (fileCacheStill):
	// measure the steady state, after they have settled and one read kept
	// their facts.
	time.Sleep(1100 * time.Millisecond)
	if h, err := (&tableFile{r.a}).Open(); err == nil {
		h.Close()
	}
	b.ResetTimer()
	for range b.N {
		h, err := (&tableFile{r.a}).Open()
		if err != nil {
			b.Fatal(err)
		}
		h.Close()
	}
}

// TestTableFactsFollowTheFile: facts kept between reads (the file cache)
// are re-validated on every read: a transcript that changes shows its new
// title and model at the next read of the table and of the agent's files.
func TestTableFactsFollowTheFile(t *testing.T) {
	r, croot := tableFixture(t, 2, nil)
	if rows := readTable(t, r); rows[0]["title"] != "task 100" || rows[0]["model"] != "claude-x-1" {
		t.Fatalf("before: %v", rows[0])
	}
	tr := filepath.Join(croot, "projects", "-w", "00000000-0000-4000-8000-000000000100.jsonl")
	f, err := os.OpenFile(tr, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(`{"type":"custom-title","customTitle":"renamed"}` + "\n" + `{"type":"assistant","message":{"model":"claude-y","content":[]}}` + "\n")
	f.Close()
	row := readTable(t, r)[0]
	if row["title"] != "renamed" || row["model"] != "claude-y" {
		t.Fatalf("after the transcript changed, the table says %v", row)
	}
	if want := rowFromFiles(t, r, "claude", "100"); !reflect.DeepEqual(row, want) {
		t.Fatalf("table %v\nfiles %v", row, want)
	}
}

// jsonString writes what the JSON encoder (HTML left unescaped) writes,
// with or without its fast path.
func TestJSONString(t *testing.T) {
	for _, s := range []string{"", "claude", "/home/u/src/a b", "<&>", `say "hi"`, `C:\x`, "tab\there", "nl\n",
		"\x00\x1f\x7f", "é漢字", "\u2028\u2029", "bad \xff utf-8", "emoji 🙂"} {
		var got, want bytes.Buffer
		jsonString(&got, s)
		enc := json.NewEncoder(&want)
		enc.SetEscapeHTML(false)
		enc.Encode(s)
		if w := strings.TrimSuffix(want.String(), "\n"); got.String() != w {
			t.Errorf("jsonString(%q) = %s, want %s", s, got.String(), w)
		}
	}
}

// TestTableEmpty: with no agent the table is an empty file, not an error.
func TestTableEmpty(t *testing.T) {
	r, _ := tableFixture(t, 0, nil)
	if rows := readTable(t, r); len(rows) != 0 {
		t.Fatalf("no agents, %d rows: %v", len(rows), rows)
	}
}

// TestTablePendingThenComplete: a table read past its budget of window
// bytes leaves the titles, models and token sums it did not derive out of
// its rows and names them under "pending", never a value derived before
// and not checked again; the agents' own files answer complete at once;
// and once the daemon has derived them after the read, a later read has
// every row complete and equal to the files.
func TestTablePendingThenComplete(t *testing.T) {
	old := windowBudget
	windowBudget = 0
	defer func() { windowBudget = old }()
	r, croot := tableFixture(t, 4, nil)
	counts := &harness.Counts{}
	for h, env := range r.a.cfg.Envs {
		env.Counts = counts
		r.a.cfg.Envs[h] = env
	}
	// Usage on the newest line, as Claude writes it: a context from the
	// tail, and sums that need the whole file.
	old2 := time.Now().Add(-time.Minute)
	for i := 0; i < 4; i++ {
		pid := 100 + i
		p := filepath.Join(croot, "projects", "-w", fmt.Sprintf("00000000-0000-4000-8000-%012d.jsonl", pid))
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		b = append(b, fmt.Sprintf(`{"type":"assistant","timestamp":"2026-12-01T00:00:01Z","message":{"id":"m%d","model":"claude-x-1","content":[],`+
			`"usage":{"input_tokens":3,"cache_creation_input_tokens":5,"cache_read_input_tokens":%d,"output_tokens":7}}}`+"\n", pid, 1000+pid)...)
		write(t, p, string(b), old2.Add(time.Duration(i)*time.Second))
	}
	rows := readTable(t, r)
	if len(rows) != 4 {
		t.Fatalf("%d rows, want 4", len(rows))
	}
	for i, row := range rows {
		pid := strconv.Itoa(100 + i)
		pend, _ := row["pending"].([]any)
		if !reflect.DeepEqual(pend, []any{"title", "model", "tokens"}) {
			t.Errorf("pid %s: pending %v, want [title model tokens]", pid, row["pending"])
		}
		if _, ok := row["title"]; ok {
			t.Errorf("pid %s: a pending title is in the row: %v", pid, row["title"])
		}
		if _, ok := row["model"]; ok {
			t.Errorf("pid %s: a pending model is in the row: %v", pid, row["model"])
		}
		if want := fmt.Sprintf("context %d", 1000+100+i+5+3); row["tokens"] != want {
			t.Errorf("pid %s: tokens %q, want the context alone, %q", pid, row["tokens"], want)
		}
		files := rowFromFiles(t, r, "claude", pid)
		if files["title"] != "task "+pid || files["model"] != "claude-x-1" {
			t.Errorf("pid %s: the files are not complete: %v", pid, files)
		}
		if want := fmt.Sprintf("context %d\ninput 3\noutput 7\ncache_read %d\ncache_write 5", 1000+100+i+5+3, 1000+100+i); files["tokens"] != want {
			t.Errorf("pid %s: tokens file %q, want %q", pid, files["tokens"], want)
		}
		// The row, its pending facts aside, is the files'.
		for k, v := range row {
			if k != "pending" && k != "tokens" && !reflect.DeepEqual(files[k], v) {
				t.Errorf("pid %s: %s is %v in the table, %v in the files", pid, k, v, files[k])
			}
		}
	}
	select {
	case <-counts.Settled():
	case <-time.After(time.Minute):
		t.Fatal("the pending facts were not derived within a minute")
	}
	for i, row := range readTable(t, r) {
		pid := strconv.Itoa(100 + i)
		if want := rowFromFiles(t, r, "claude", pid); !reflect.DeepEqual(row, want) {
			t.Errorf("pid %s after the derivation:\ntable %v\nfiles %v", pid, row, want)
		}
	}
}

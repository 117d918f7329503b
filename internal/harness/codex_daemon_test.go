package harness

import (
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	_ "github.com/ncruces/go-sqlite3/driver"

	"github.com/9harness/9harness/internal/budget"
	"github.com/9harness/9harness/internal/dbsnap"
	"github.com/9harness/9harness/internal/proc"
	"github.com/9harness/9harness/internal/proc/proctest"
	"github.com/9harness/9harness/internal/saferoot"
)

// A Codex TUI under the shared app-server daemon (Codex 0.169's default)
// holds no rollout: the daemon does. The fixtures: the TUI's process (no
// rollout fd), rollouts, and state_5.sqlite's threads table with the real
// schema, written by a live writer that keeps every commit in the -wal.

const (
	cxdA    = "01a232b8-d04a-70e2-9d14-623edefa2bef"
	cxdB    = "01a232b8-d780-7e40-9dc8-b143132c7352"
	cxdOld  = "01a23200-0000-7000-8000-000000000001"
	cxdPID  = 5151
	cxdTick = 1001 // the TUI's start, in ticks after the fixture's boot: boot+10.01s
)

func cxdRoll(id string, sec int) string {
	return fmt.Sprintf("%srollout-2026-09-20T12-%02d-%02d-%s.jsonl", cxDay, sec/60, sec%60, id)
}

// cxdWriter creates home/.codex/state_5.sqlite with the real threads
// table and returns its writer (closed at the test's end: closing it would
// checkpoint and remove the -wal).
func cxdWriter(t *testing.T, f *fx) *sql.DB {
	t.Helper()
	dir := filepath.Join(f.home, ".codex")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite3", "file:"+filepath.Join(dir, "state_5.sqlite")+"?_pragma=journal_mode(wal)&_pragma=wal_autocheckpoint(0)")
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	t.Cleanup(func() { db.Close() })
	schema, err := os.ReadFile("testdata/codex/threads-0.169.0.sql")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(string(schema)); err != nil {
		t.Fatal(err)
	}
	return db
}

type cxdThread struct {
	id, cwd, title, name string
	created              float64 // seconds after the fixture's boot
	sub                  bool
}

// cxdThreads writes each thread's rollout (a session_meta and a turn with
// model gpt-mock) and its row, as Codex 0.169 does under the daemon.
func cxdThreads(t *testing.T, f *fx, db *sql.DB, ths ...cxdThread) {
	t.Helper()
	for _, th := range ths {
		rel := cxdRoll(th.id, int(th.created))
		f.write(".codex/"+rel, jsonl(cxMeta(th.id, `"vscode"`), cxTurn("gpt-mock")), at(th.created+1))
		var name, agentPath any
		if th.name != "" {
			name = th.name
		}
		if th.sub {
			agentPath = "/root/explorer"
		}
		ms := at(th.created).UnixMilli()
		if _, err := db.Exec(`INSERT INTO threads (id, rollout_path, created_at, updated_at, source, model_provider, cwd, title,
			sandbox_policy, approval_mode, model, created_at_ms, updated_at_ms, name, agent_path, originator)
			VALUES (?, ?, ?, ?, 'vscode', 'mock', ?, ?, '{}', 'on-request', 'gpt-mock', ?, ?, ?, ?, 'codex-tui')`,
			th.id, filepath.Join(f.home, ".codex", rel), ms/1000, ms/1000, th.cwd, th.title, ms, ms, name, agentPath); err != nil {
			t.Fatal(err)
		}
	}
}

// cxdTUI adds the native TUI (under its node wrapper) with argv extra,
// holding no rollout.
func cxdTUI(f *fx, pid int, start uint64, cwd string, extra ...string) proc.Proc {
	native := "/usr/lib/node_modules/@openai/codex/node_modules/@openai/codex-linux-x64/vendor/x86_64-unknown-linux-musl/bin/codex"
	f.add(proctest.Proc{PID: pid - 1, PPID: 100, Start: start - 1, Argv: []string{"node", "/usr/lib/node_modules/.bin/codex"}, Env: f.stdEnv(), Cwd: cwd})
	return f.add(proctest.Proc{PID: pid, PPID: pid - 1, Start: start, Argv: append([]string{native}, extra...), Env: f.stdEnv(), Cwd: cwd,
		FDs: []string{"/dev/pts/3", "socket:[91]", f.home + "/.codex/state_5.sqlite", f.home + "/.codex/logs_2.sqlite"}})
}

func cxdWant(f *fx, p proc.Proc) Agent {
	return Agent{Harness: "codex", PID: p.PID, PPID: p.PPID, Start: p.Start, Cwd: f.cwd(), Via: "none", Zmx: "work", TmuxSocket: "/tmp/tmux-1000/default"}
}

const cxdSwitchedVia = "dir (the last written of 2 threads of this cwd begun since the process started, after /new or a fork; Codex's app-server daemon holds them, not the TUI)"

const cxdDirVia = "dir (the one thread of this cwd begun since the process started; Codex's app-server daemon holds it, not the TUI)"

func TestResolveCodexDaemon(t *testing.T) {
	runResolve(t, []resolveCase{
		{"codex-daemon/dir", func(f *fx) (Harness, Env, proc.Proc, Agent) {
			// The one thread of the cwd begun since the TUI started; an
			// older one, another cwd's and a sub-agent's do not count.
			db := cxdWriter(t, f)
			cxdThreads(t, f, db,
				cxdThread{id: cxdOld, cwd: f.cwd(), title: "old work", created: 5},
				cxdThread{id: cxdA, cwd: f.cwd(), title: "say hello bravo", created: 30},
				cxdThread{id: cxdB, cwd: f.home + "/src/y", title: "elsewhere", created: 40},
				cxdThread{id: cxOther, cwd: f.cwd(), title: "a sub-agent", created: 50, sub: true},
			)
			p := cxdTUI(f, cxdPID, cxdTick, f.cwd())
			want := cxdWant(f, p)
			want.Session, want.Transcript, want.Via = cxdA, cxdRoll(cxdA, 30), cxdDirVia
			want.Model, want.Title = "gpt-mock", "say hello bravo"
			return codex{}, f.env(".codex"), p, want
		}},
		{"codex-daemon/renamed", func(f *fx) (Harness, Env, proc.Proc, Agent) {
			// threads.name, the /rename name, wins over the first message.
			db := cxdWriter(t, f)
			cxdThreads(t, f, db, cxdThread{id: cxdA, cwd: f.cwd(), title: "say hello bravo", name: "bravo work", created: 30})
			p := cxdTUI(f, cxdPID, cxdTick, f.cwd())
			want := cxdWant(f, p)
			want.Session, want.Transcript, want.Via = cxdA, cxdRoll(cxdA, 30), cxdDirVia
			want.Model, want.Title = "gpt-mock", "bravo work"
			return codex{}, f.env(".codex"), p, want
		}},
		{"codex-daemon/after-new", func(f *fx) (Harness, Env, proc.Proc, Agent) {
			// /new (or /fork) made a second thread: with no other TUI in
			// the cwd both are this TUI's, and the one it shows is the one
			// written last (test/realcli's TestCodexNewFork).
			db := cxdWriter(t, f)
			cxdThreads(t, f, db,
				cxdThread{id: cxdA, cwd: f.cwd(), title: "first", created: 30},
				cxdThread{id: cxdB, cwd: f.cwd(), title: "second", created: 60})
			p := cxdTUI(f, cxdPID, cxdTick, f.cwd())
			want := cxdWant(f, p)
			want.Session, want.Transcript, want.Model, want.Title = cxdB, cxdRoll(cxdB, 60), "gpt-mock", "second"
			want.Via = cxdSwitchedVia
			return codex{}, f.env(".codex"), p, want
		}},
		{"codex-daemon/back-to-the-first", func(f *fx) (Harness, Env, proc.Proc, Agent) {
			// The user went back to the first thread (/resume) and wrote
			// to it since: it is the one written last.
			db := cxdWriter(t, f)
			cxdThreads(t, f, db,
				cxdThread{id: cxdA, cwd: f.cwd(), title: "first", created: 30},
				cxdThread{id: cxdB, cwd: f.cwd(), title: "second", created: 60})
			f.write(".codex/"+cxdRoll(cxdA, 30), jsonl(cxMeta(cxdA, `"vscode"`), cxTurn("gpt-mock"), cxTurn("gpt-mock")), at(90))
			p := cxdTUI(f, cxdPID, cxdTick, f.cwd())
			want := cxdWant(f, p)
			want.Session, want.Transcript, want.Model, want.Title = cxdA, cxdRoll(cxdA, 30), "gpt-mock", "first"
			want.Via = cxdSwitchedVia
			return codex{}, f.env(".codex"), p, want
		}},
		{"codex-daemon/two-threads-later-rival-ambiguous", func(f *fx) (Harness, Env, proc.Proc, Agent) {
			// Another TUI in the cwd started after the first thread but
			// before the second (test/realcli's TestCodexTwoInOneCwd): the
			// second could be its, so this TUI's is not known.
			db := cxdWriter(t, f)
			cxdThreads(t, f, db,
				cxdThread{id: cxdA, cwd: f.cwd(), title: "first", created: 30},
				cxdThread{id: cxdB, cwd: f.cwd(), title: "second", created: 60})
			cxdTUI(f, cxdPID+10, 4000, f.cwd())
			p := cxdTUI(f, cxdPID, cxdTick, f.cwd())
			want := cxdWant(f, p)
			want.Via = "ambiguous (2 threads of this cwd begun since the process started, which could be codex " + strconv.Itoa(cxdPID+10) + "'s, in the same cwd; Codex's app-server daemon holds them, not the TUI)"
			return codex{}, f.env(".codex"), p, want
		}},
		{"codex-daemon/two-threads-rival-ambiguous", func(f *fx) (Harness, Env, proc.Proc, Agent) {
			// Two threads and another TUI in the cwd, started before the
			// first: which TUI has which is not on disk.
			db := cxdWriter(t, f)
			cxdThreads(t, f, db,
				cxdThread{id: cxdA, cwd: f.cwd(), title: "first", created: 30},
				cxdThread{id: cxdB, cwd: f.cwd(), title: "second", created: 60})
			cxdTUI(f, cxdPID+10, cxdTick+5, f.cwd())
			p := cxdTUI(f, cxdPID, cxdTick, f.cwd())
			want := cxdWant(f, p)
			want.Via = "ambiguous (2 threads of this cwd begun since the process started, which could be codex " + strconv.Itoa(cxdPID+10) + "'s, in the same cwd; Codex's app-server daemon holds them, not the TUI)"
			return codex{}, f.env(".codex"), p, want
		}},
		{"codex-daemon/rival-ambiguous", func(f *fx) (Harness, Env, proc.Proc, Agent) {
			// Two TUIs in one cwd, both started before the one thread:
			// it could be either's, so neither gets it.
			db := cxdWriter(t, f)
			cxdThreads(t, f, db, cxdThread{id: cxdA, cwd: f.cwd(), title: "whose", created: 30})
			cxdTUI(f, cxdPID+10, cxdTick+100, f.cwd())
			p := cxdTUI(f, cxdPID, cxdTick, f.cwd())
			want := cxdWant(f, p)
			want.Via = fmt.Sprintf("ambiguous (the one thread of this cwd begun since the process started could be codex %d's, in the same cwd)", cxdPID+10)
			return codex{}, f.env(".codex"), p, want
		}},
		{"codex-daemon/rival-started-later", func(f *fx) (Harness, Env, proc.Proc, Agent) {
			// A second TUI started after the thread was created cannot
			// have created it: the first TUI's thread stays its own.
			db := cxdWriter(t, f)
			cxdThreads(t, f, db, cxdThread{id: cxdA, cwd: f.cwd(), title: "mine", created: 30})
			cxdTUI(f, cxdPID+10, 4000, f.cwd()) // boot+40s
			p := cxdTUI(f, cxdPID, cxdTick, f.cwd())
			want := cxdWant(f, p)
			want.Session, want.Transcript, want.Via = cxdA, cxdRoll(cxdA, 30), cxdDirVia
			want.Model, want.Title = "gpt-mock", "mine"
			return codex{}, f.env(".codex"), p, want
		}},
		{"codex-daemon/resumed-by-argv", func(f *fx) (Harness, Env, proc.Proc, Agent) {
			// A resumed thread predates its TUI: only argv names it.
			db := cxdWriter(t, f)
			cxdThreads(t, f, db, cxdThread{id: cxdOld, cwd: f.cwd(), title: "old work", created: 5})
			p := cxdTUI(f, cxdPID, cxdTick, f.cwd(), "-m", "gpt-mock", "resume", cxdOld)
			want := cxdWant(f, p)
			want.Session, want.Transcript, want.Via = cxdOld, cxdRoll(cxdOld, 5), "argv (codex resume "+cxdOld+")"
			want.Model, want.Title = "gpt-mock", "old work"
			return codex{}, f.env(".codex"), p, want
		}},
		{"codex-daemon/resumed-old-unresolved", func(f *fx) (Harness, Env, proc.Proc, Agent) {
			// Resumed through the picker (no id in argv): the thread is
			// older than the TUI, and nothing else ties them.
			db := cxdWriter(t, f)
			cxdThreads(t, f, db, cxdThread{id: cxdOld, cwd: f.cwd(), title: "old work", created: 5})
			p := cxdTUI(f, cxdPID, cxdTick, f.cwd(), "resume")
			want := cxdWant(f, p)
			want.Via = "none (no rollout open, and no thread of this cwd begun since the process started)"
			return codex{}, f.env(".codex"), p, want
		}},
		{"codex-daemon/relaunched", func(f *fx) (Harness, Env, proc.Proc, Agent) {
			// 9harness relaunched it ("codex resume <id>") and recorded the
			// rollout: the corroborated route, whatever argv says.
			db := cxdWriter(t, f)
			cxdThreads(t, f, db, cxdThread{id: cxdOld, cwd: f.cwd(), title: "old work", created: 5})
			p := cxdTUI(f, cxdPID, cxdTick, f.cwd(), "resume", cxdOld)
			env := f.env(".codex")
			env.Relaunches = &Relaunches{}
			env.Relaunches.Note(p.PID, p.Start, cxdRoll(cxdOld, 5))
			want := cxdWant(f, p)
			want.Session, want.Transcript, want.Via = cxdOld, cxdRoll(cxdOld, 5), "relaunch"
			want.Model, want.Title = "gpt-mock", "old work"
			return codex{}, env, p, want
		}},
		{"codex-daemon/no-thread-yet", func(f *fx) (Harness, Env, proc.Proc, Agent) {
			// Never prompted: no row, no rollout.
			cxdWriter(t, f)
			p := cxdTUI(f, cxdPID, cxdTick, f.cwd())
			want := cxdWant(f, p)
			want.Via = "none (no rollout open yet)"
			return codex{}, f.env(".codex"), p, want
		}},
	})
}

// The threads table while it is written: a snapshot taken after each
// commit sees it, though every commit is still only in the -wal, and no
// -shm is made by the reader.
func TestCodexThreadsLiveWriter(t *testing.T) {
	f := newFx(t)
	db := cxdWriter(t, f)
	env := f.env(".codex")
	for i := 0; i < 20; i++ {
		id := fmt.Sprintf("01a232b8-0000-7000-8000-%012d", i)
		cxdThreads(t, f, db, cxdThread{id: id, cwd: f.cwd(), title: fmt.Sprintf("thread %d", i), created: float64(20 + i)})
		got := codexThreads(env.DBs, env.Root)
		if len(got) != i+1 {
			t.Fatalf("after %d commits: %d threads", i+1, len(got))
		}
		if last := got[len(got)-1]; last.id != id || last.title != fmt.Sprintf("thread %d", i) || last.rel != cxdRoll(id, 20+i) ||
			!last.created.Equal(at(float64(20+i)).Truncate(time.Millisecond)) {
			t.Fatalf("after %d commits: %+v", i+1, last)
		}
	}
	if _, err := os.Stat(filepath.Join(f.home, ".codex", "state_5.sqlite-wal")); err != nil {
		t.Fatalf("the writer's -wal: %v", err)
	}
}

// A default TUI that is ambiguous or unresolved is never moved.
func TestResumeCodexDaemonRefused(t *testing.T) {
	for _, via := range []string{
		"ambiguous (2 threads of this cwd begun since the process started; Codex's app-server daemon holds them, not the TUI)",
		"none (no rollout open, and no thread of this cwd begun since the process started)",
	} {
		_, err := codex{}.Resume(Agent{Harness: "codex", PID: cxdPID, Via: via}, Env{})
		if err == nil || !strings.Contains(err.Error(), "session unresolved") {
			t.Errorf("via %q: Resume = %v, want refused as unresolved", via, err)
		}
	}
}

func TestCodexResumeID(t *testing.T) {
	for _, c := range []struct {
		argv []string
		want string
	}{
		{[]string{"codex", "resume", cxdA}, cxdA},
		{[]string{"codex", "-m", "gpt-5", "-c", "features.x=true", "resume", cxdA}, cxdA},
		{[]string{"codex", "resume", "--last"}, ""},
		{[]string{"codex", "resume"}, ""},
		{[]string{"codex", "resume", "-m", "x", cxdA}, cxdA},
		{[]string{"codex", "fix", cxdA}, ""},
		{[]string{"codex", "-m", "resume", cxdA}, ""}, // "resume" is -m's value; the id is a prompt
		{[]string{"codex", "resume", "not-a-uuid"}, ""},
		{[]string{"codex"}, ""},
	} {
		if got := codexResumeID(c.argv); got != c.want {
			t.Errorf("codexResumeID(%q) = %q, want %q", c.argv, got, c.want)
		}
	}
}

// BenchmarkCodexThreads: a snapshot of a heavy user's state_5.sqlite
// (2000 threads, rows of the real schema with a long first message and
// preview), half of them still in the -wal, read to threads.
func BenchmarkCodexThreads(b *testing.B) {
	dir := b.TempDir()
	home := filepath.Join(dir, "home")
	if err := os.MkdirAll(filepath.Join(home, ".codex"), 0o700); err != nil {
		b.Fatal(err)
	}
	db, err := sql.Open("sqlite3", "file:"+filepath.Join(home, ".codex", "state_5.sqlite")+"?_pragma=journal_mode(wal)&_pragma=wal_autocheckpoint(0)")
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	schema, err := os.ReadFile("testdata/codex/threads-0.169.0.sql")
	if err != nil {
		b.Fatal(err)
	}
	if _, err := db.Exec(string(schema)); err != nil {
		b.Fatal(err)
	}
	msg := strings.Repeat("please fix the flaky integration test in the scheduler ", 8)
	insert := func(from, to int) {
		tx, _ := db.Begin()
		for i := from; i < to; i++ {
			id := fmt.Sprintf("01a232b8-0000-7000-8000-%012d", i)
			ms := int64(1790000000000 + i*60000)
			if _, err := tx.Exec(`INSERT INTO threads (id, rollout_path, created_at, updated_at, source, model_provider, cwd, title,
				sandbox_policy, approval_mode, model, created_at_ms, updated_at_ms, first_user_message, preview, originator, cli_version)
				VALUES (?, ?, ?, ?, 'vscode', 'openai', ?, ?, '{"type":"workspace-write"}', 'on-request', 'gpt-5.6', ?, ?, ?, ?, 'codex-tui', '0.169.0')`,
				id, home+"/.codex/sessions/2026/12/01/rollout-2026-12-01T10-00-00-"+id+".jsonl", ms/1000, ms/1000,
				fmt.Sprintf("/home/goblin/src/project-%d", i%40), msg, ms, ms, msg, msg); err != nil {
				b.Fatal(err)
			}
		}
		if err := tx.Commit(); err != nil {
			b.Fatal(err)
		}
	}
	insert(0, 1000)
	if _, err := db.Exec(`PRAGMA wal_checkpoint(TRUNCATE)`); err != nil {
		b.Fatal(err)
	}
	for i := 1000; i < 2000; i += 10 {
		insert(i, i+10) // 100 commits still in the -wal
	}
	root := saferoot.New(filepath.Join(home, ".codex"))
	v, _ := dbsnap.Stat(root, "state_5.sqlite")
	b.Run("image", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if _, err := dbsnap.Image(root, "state_5.sqlite"); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(v.DB.Size+v.WAL.Size)/1e6, "MB-read")
	})
	b.Run("threads", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if n := len(codexThreads(nil, root)); n != 2000 {
				b.Fatalf("%d threads", n)
			}
		}
		b.ReportMetric(float64(v.DB.Size+v.WAL.Size)/1e6, "MB-read")
	})
}

// A state database that does not fit the daemon's budget gives no threads
// (their facts are absent, as those of an absent database), and leaves
// nothing charged; one that fits is read and charged while held.
func TestCodexThreadsBudget(t *testing.T) {
	f := newFx(t)
	db := cxdWriter(t, f)
	cxdThreads(t, f, db, cxdThread{id: "01a232b8-0000-7000-8000-000000000001", cwd: f.cwd(), title: "t", created: 20})
	env := f.env(".codex")

	tiny := budget.New("tiny", 4<<10)
	env.DBs = &dbsnap.Cache{Budget: tiny}
	if got := codexThreads(env.DBs, env.Root); got != nil {
		t.Errorf("threads read past a budget too small for the database: %+v", got)
	}
	if u := tiny.Used(); u != 0 {
		t.Errorf("a refused snapshot left %d bytes charged", u)
	}

	pool := budget.New("pool", 64<<20)
	env.DBs = &dbsnap.Cache{Budget: pool}
	if got := codexThreads(env.DBs, env.Root); len(got) != 1 {
		t.Errorf("%d threads, want 1", len(got))
	}
	if pool.Peak() == 0 {
		t.Error("the snapshot was not charged")
	}
	env.DBs.Close()
	if u := pool.Used(); u != 0 {
		t.Errorf("%d bytes charged after the cache was closed", u)
	}
}

package harness

import (
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	_ "github.com/ncruces/go-sqlite3/driver"

	"github.com/9harness/9harness/internal/proc"
	"github.com/9harness/9harness/internal/proc/proctest"
)

// The opencode fixtures are databases made at test time from the schema
// opencode 1.18.33 wrote (testdata/opencode/schema-1.18.33.sql, dumped from
// the real CLI's opencode.db), in WAL mode with checkpoints off, so that
// the rows a test reads are in the -wal, as they are while opencode runs.

const (
	ocRoot = ".local/share/opencode"
	ocPID  = 5151
	ocSID  = "ses_dcd52f36dffe751L6CBXfxCamD"
	ocSID2 = "ses_dcd5300000001aaaaaaaaaaaaa"
	ocOld  = "ses_dc0000000000000000000000000"
)

// ocRow is one session row and its messages' models (assistant modelIDs,
// oldest first).
type ocRow struct {
	id, dir, title, model string
	parent, agent         string  // agent "" is "build"
	created, updated      float64 // seconds after the fixture's boot
	answered              []string
}

func ms(sec float64) int64 { return at(sec).UnixMilli() }

// ocWriter creates home/<ocRoot>/opencode.db with the real schema and
// returns a writer that keeps every commit in the -wal (it is closed at
// the test's end; closing it would checkpoint and remove the -wal).
func ocWriter(t *testing.T, f *fx) *sql.DB {
	t.Helper()
	dir := filepath.Join(f.home, ocRoot)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite3", "file:"+filepath.Join(dir, "opencode.db")+"?_pragma=journal_mode(wal)&_pragma=wal_autocheckpoint(0)")
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	t.Cleanup(func() { db.Close() })
	schema, err := os.ReadFile("testdata/opencode/schema-1.18.33.sql")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(string(schema)); err != nil {
		t.Fatal(err)
	}
	// The tokens that make the file a credential store.
	ocExec(t, db, `INSERT INTO account (id, email, url, access_token, refresh_token, token_expiry, time_created, time_updated) VALUES ('acc_1', 'g@example.org', 'https://opencode.ai', 'oc-access-SECRET', 'oc-refresh-SECRET', 0, 0, 0)`)
	ocExec(t, db, `INSERT INTO project (id, worktree, time_created, time_updated, sandboxes) VALUES ('global', '/', 0, 0, '[]')`)
	return db
}

func ocExec(t *testing.T, db *sql.DB, q string, args ...any) {
	t.Helper()
	if _, err := db.Exec(q, args...); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}

// ocInsert writes rows, one transaction each.
func ocInsert(t *testing.T, db *sql.DB, rows ...ocRow) {
	t.Helper()
	for _, r := range rows {
		model := ""
		if r.model != "" {
			model = fmt.Sprintf(`{"id":%q,"providerID":"mock"}`, r.model)
		}
		var parent any
		if r.parent != "" {
			parent = r.parent
		}
		agent := r.agent
		if agent == "" {
			agent = "build"
		}
		tx, err := db.Begin()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(`INSERT INTO session (id, project_id, parent_id, slug, directory, path, title, version, agent, model, time_created, time_updated)
			VALUES (?, 'global', ?, 'calm-orchid', ?, ?, ?, '1.18.33', ?, ?, ?, ?)
			ON CONFLICT(id) DO UPDATE SET title = excluded.title, time_updated = excluded.time_updated`,
			r.id, parent, r.dir, strings.TrimPrefix(r.dir, "/"), r.title, agent, model, ms(r.created), ms(r.updated)); err != nil {
			t.Fatal(err)
		}
		for i, m := range r.answered {
			mt := r.created + float64(i+1)
			user := fmt.Sprintf(`{"role":"user","time":{"created":%d},"agent":"build","model":{"providerID":"mock","modelID":%q}}`, ms(mt), m)
			asst := fmt.Sprintf(`{"parentID":"msg_u%d","role":"assistant","mode":"build","agent":"build","path":{"cwd":%q,"root":"/"},"cost":0,"tokens":{"total":18,"input":10,"output":8,"reasoning":0,"cache":{"write":0,"read":0}},"modelID":%q,"providerID":"mock","time":{"created":%d,"completed":%d},"finish":"stop"}`, i, r.dir, m, ms(mt)+1, ms(mt)+2)
			for j, d := range []string{user, asst} {
				if _, err := tx.Exec(`INSERT INTO message (id, session_id, time_created, time_updated, data) VALUES (?, ?, ?, ?, ?)`,
					fmt.Sprintf("msg_%s_%d_%d", r.id, i, j), r.id, ms(mt)+int64(j), ms(mt)+int64(j), d); err != nil {
					t.Fatal(err)
				}
			}
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
	}
}

// ocProcFx adds an opencode process started start seconds after boot, in
// cwd, with args; pid ocPID unless pid says otherwise.
func ocProcFx(f *fx, pid int, start float64, cwd string, args ...string) proc.Proc {
	return f.add(proctest.Proc{PID: pid, PPID: 100, Start: uint64(start * 100), Argv: append([]string{"opencode"}, args...), Env: f.stdEnv(), Cwd: cwd})
}

// ocBase is what /proc alone says of p, running in the fixture's cwd.
func ocBase(f *fx, p proc.Proc) Agent {
	return Agent{Harness: "opencode", PID: p.PID, PPID: 100, Start: p.Start, Cwd: f.cwd(), Zmx: "work", TmuxSocket: "/tmp/tmux-1000/default"}
}

const (
	viaOne  = "dir (heuristic: the one session in the cwd written since the process started)"
	viaNone = "none (no session in the cwd written since the process started)"
)

func TestResolveOpencode(t *testing.T) {
	runResolve(t, []resolveCase{
		{"one session since start: title, and the model that answered", func(f *fx) (Harness, Env, proc.Proc, Agent) {
			db := ocWriter(t, f)
			ocInsert(t, db,
				ocRow{id: ocOld, dir: f.cwd(), title: "older work", model: "mock-oc", created: 5, updated: 8},
				ocRow{id: ocSID, dir: f.cwd(), title: "Mock title 1", model: "mock-oc", created: 20, updated: 30, answered: []string{"mock-oc", "mock-oc-2"}},
				ocRow{id: ocSID2, dir: "/elsewhere", title: "another dir", model: "mock-oc", created: 21, updated: 31},
			)
			p := ocProcFx(f, ocPID, 10, f.cwd())
			want := ocBase(f, p)
			want.Session, want.Via, want.Title, want.Model = ocSID, viaOne, "Mock title 1", "mock-oc-2"
			return opencode{}, f.env(ocRoot), p, want
		}},
		{"the cwd recorded through a symlink", func(f *fx) (Harness, Env, proc.Proc, Agent) {
			link := f.home + "/x-link"
			if err := os.Symlink(f.cwd(), link); err != nil {
				t.Fatal(err)
			}
			db := ocWriter(t, f)
			ocInsert(t, db, ocRow{id: ocSID, dir: link, title: "Mock title 1", model: "mock-oc", created: 20, updated: 30})
			p := ocProcFx(f, ocPID, 10, f.cwd())
			want := ocBase(f, p)
			want.Session, want.Via, want.Title, want.Model = ocSID, viaOne, "Mock title 1", "mock-oc"
			return opencode{}, f.env(ocRoot), p, want
		}},
		{"no message yet: the session row's model", func(f *fx) (Harness, Env, proc.Proc, Agent) {
			db := ocWriter(t, f)
			ocInsert(t, db, ocRow{id: ocSID, dir: f.cwd(), title: "New session - 2026-12-01T17:35:31.476Z", model: "mock-oc", created: 20, updated: 20})
			p := ocProcFx(f, ocPID, 10, f.cwd())
			want := ocBase(f, p)
			want.Session, want.Via, want.Title, want.Model = ocSID, viaOne, "New session - 2026-12-01T17:35:31.476Z", "mock-oc"
			return opencode{}, f.env(ocRoot), p, want
		}},
		{"a fresh TUI: only sessions from before its start", func(f *fx) (Harness, Env, proc.Proc, Agent) {
			db := ocWriter(t, f)
			ocInsert(t, db, ocRow{id: ocOld, dir: f.cwd(), title: "older work", model: "mock-oc", created: 5, updated: 8})
			p := ocProcFx(f, ocPID, 10, f.cwd())
			want := ocBase(f, p)
			want.Via = viaNone
			return opencode{}, f.env(ocRoot), p, want
		}},
		{"an old session resumed by another TUI is not this one's", func(f *fx) (Harness, Env, proc.Proc, Agent) {
			db := ocWriter(t, f)
			// Written after the start, but begun before it, and this
			// process was not started with it.
			ocInsert(t, db, ocRow{id: ocOld, dir: f.cwd(), title: "older work", model: "mock-oc", created: 5, updated: 30})
			p := ocProcFx(f, ocPID, 10, f.cwd())
			want := ocBase(f, p)
			want.Via = viaNone
			return opencode{}, f.env(ocRoot), p, want
		}},
		{"two sessions since start (/new): never guessed", func(f *fx) (Harness, Env, proc.Proc, Agent) {
			db := ocWriter(t, f)
			ocInsert(t, db,
				ocRow{id: ocSID, dir: f.cwd(), title: "first", model: "mock-oc", created: 20, updated: 30},
				ocRow{id: ocSID2, dir: f.cwd(), title: "second", model: "mock-oc", created: 40, updated: 50},
			)
			p := ocProcFx(f, ocPID, 10, f.cwd())
			want := ocBase(f, p)
			want.Via = "ambiguous (2 sessions in the cwd written since the process started)"
			return opencode{}, f.env(ocRoot), p, want
		}},
		{"two TUIs in one cwd, both started before the session: ambiguous", func(f *fx) (Harness, Env, proc.Proc, Agent) {
			db := ocWriter(t, f)
			ocInsert(t, db, ocRow{id: ocSID, dir: f.cwd(), title: "Mock title 1", model: "mock-oc", created: 20, updated: 30})
			p := ocProcFx(f, ocPID, 10, f.cwd())
			ocProcFx(f, ocPID+1, 12, f.cwd())
			want := ocBase(f, p)
			want.Via = fmt.Sprintf("ambiguous (opencode pid %d in the same cwd could have written session %s too)", ocPID+1, ocSID)
			return opencode{}, f.env(ocRoot), p, want
		}},
		{"a second TUI started after the session was last written: told apart", func(f *fx) (Harness, Env, proc.Proc, Agent) {
			db := ocWriter(t, f)
			ocInsert(t, db, ocRow{id: ocSID, dir: f.cwd(), title: "Mock title 1", model: "mock-oc", created: 20, updated: 30, answered: []string{"mock-oc"}})
			p := ocProcFx(f, ocPID, 10, f.cwd())
			ocProcFx(f, ocPID+1, 40, f.cwd())                                                                             // same cwd, later
			ocProcFx(f, ocPID+2, 12, f.home+"/src/y")                                                                     // earlier, another cwd
			f.add(proctest.Proc{PID: ocPID + 3, PPID: 1, Start: 1200, Argv: []string{"opencode", "serve"}, Cwd: f.cwd()}) // a helper
			want := ocBase(f, p)
			want.Session, want.Via, want.Title, want.Model = ocSID, viaOne, "Mock title 1", "mock-oc"
			return opencode{}, f.env(ocRoot), p, want
		}},
		{"the later TUI of the two: nothing of its own yet", func(f *fx) (Harness, Env, proc.Proc, Agent) {
			db := ocWriter(t, f)
			ocInsert(t, db, ocRow{id: ocSID, dir: f.cwd(), title: "Mock title 1", model: "mock-oc", created: 20, updated: 30})
			ocProcFx(f, ocPID, 10, f.cwd())
			p := ocProcFx(f, ocPID+1, 40, f.cwd())
			want := ocBase(f, p)
			want.Via = viaNone
			return opencode{}, f.env(ocRoot), p, want
		}},
		{"resumed with --session, quiet since: the argv route", func(f *fx) (Harness, Env, proc.Proc, Agent) {
			db := ocWriter(t, f)
			ocInsert(t, db, ocRow{id: ocSID, dir: f.cwd(), title: "Mock title 1", model: "mock-oc", created: 5, updated: 8, answered: []string{"mock-oc"}})
			p := ocProcFx(f, ocPID, 10, f.cwd(), "--session", ocSID, "-m", "mock/mock-oc")
			want := ocBase(f, p)
			want.Session, want.Title, want.Model = ocSID, "Mock title 1", "mock-oc"
			want.Via = "argv (nothing written since the process started; the session its --session names)"
			return opencode{}, f.env(ocRoot), p, want
		}},
		{"relaunched by 9harness with --session, quiet since: the relaunch record", func(f *fx) (Harness, Env, proc.Proc, Agent) {
			db := ocWriter(t, f)
			ocInsert(t, db, ocRow{id: ocSID, dir: f.cwd(), title: "Mock title 1", model: "mock-oc", created: 5, updated: 8, answered: []string{"mock-oc"}})
			p := ocProcFx(f, ocPID, 10, f.cwd(), "--session", ocSID)
			env := f.env(ocRoot)
			env.Relaunches = &Relaunches{}
			env.Relaunches.Note(ocPID, p.Start, ocSID)
			env.Relaunches.Note(ocPID, p.Start+1, ocSID2) // another process that had this pid
			want := ocBase(f, p)
			want.Session, want.Title, want.Model = ocSID, "Mock title 1", "mock-oc"
			want.Via = "relaunch (9harness resumed this session in this process)"
			return opencode{}, env, p, want
		}},
		{"resumed with -s, and written since: the heuristic holds", func(f *fx) (Harness, Env, proc.Proc, Agent) {
			db := ocWriter(t, f)
			ocInsert(t, db, ocRow{id: ocSID, dir: f.cwd(), title: "Mock title 1", model: "mock-oc", created: 5, updated: 30, answered: []string{"mock-oc"}})
			p := ocProcFx(f, ocPID, 10, f.cwd(), "-s", ocSID)
			want := ocBase(f, p)
			want.Session, want.Via, want.Title, want.Model = ocSID, viaOne, "Mock title 1", "mock-oc"
			return opencode{}, f.env(ocRoot), p, want
		}},
		{"a sub-agent's session is no candidate, but a sub-agent", func(f *fx) (Harness, Env, proc.Proc, Agent) {
			db := ocWriter(t, f)
			ocInsert(t, db,
				ocRow{id: ocSID, dir: f.cwd(), title: "Mock title 1", model: "mock-oc", created: 20, updated: 30},
				ocRow{id: ocSID2, parent: ocSID, agent: "explore", dir: f.cwd(), title: "find the tests (@explore subagent)", model: "mock-oc", created: 25, updated: 28, answered: []string{"mock-oc-small"}},
				ocRow{id: ocOld, parent: ocSID, agent: "explore", dir: f.cwd(), title: "again", model: "mock-oc", created: 26, updated: 29},
			)
			p := ocProcFx(f, ocPID, 10, f.cwd())
			want := ocBase(f, p)
			want.Session, want.Via, want.Title, want.Model = ocSID, viaOne, "Mock title 1", "mock-oc"
			want.Agents = []Sub{{Name: "explore-" + ocOld, Model: "mock-oc"}, {Name: "explore-" + ocSID2, Model: "mock-oc-small"}}
			return opencode{}, f.env(ocRoot), p, want
		}},
		{"a torn last WAL frame: the commit before it", func(f *fx) (Harness, Env, proc.Proc, Agent) {
			db := ocWriter(t, f)
			ocInsert(t, db, ocRow{id: ocSID, dir: f.cwd(), title: "first title", model: "mock-oc", created: 20, updated: 30, answered: []string{"mock-oc"}})
			ocInsert(t, db, ocRow{id: ocSID, dir: f.cwd(), title: "second title", model: "mock-oc", created: 20, updated: 40})
			// A copy of the files as a crash mid-commit leaves them: the
			// last frame cut short, so its commit never happened.
			src, dst := filepath.Join(f.home, ocRoot), filepath.Join(f.home, ".torn")
			if err := os.MkdirAll(dst, 0o700); err != nil {
				t.Fatal(err)
			}
			for _, n := range []string{"opencode.db", "opencode.db-wal"} {
				b, err := os.ReadFile(filepath.Join(src, n))
				if err != nil {
					t.Fatal(err)
				}
				if n == "opencode.db-wal" {
					if len(b) < 2*(24+4096) {
						t.Fatalf("the rows are not in the -wal (%d bytes): the fixture tests nothing", len(b))
					}
					b = b[:len(b)-100]
				}
				if err := os.WriteFile(filepath.Join(dst, n), b, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			p := ocProcFx(f, ocPID, 10, f.cwd())
			want := ocBase(f, p)
			want.Session, want.Via, want.Title, want.Model = ocSID, viaOne, "first title", "mock-oc"
			return opencode{}, f.env(".torn"), p, want
		}},
		{"no database", func(f *fx) (Harness, Env, proc.Proc, Agent) {
			p := ocProcFx(f, ocPID, 10, f.cwd())
			want := ocBase(f, p)
			want.Via = "none (no opencode.db)"
			return opencode{}, f.env(ocRoot), p, want
		}},
		{"the database is a symlink: not followed", func(f *fx) (Harness, Env, proc.Proc, Agent) {
			db := ocWriter(t, f)
			ocInsert(t, db, ocRow{id: ocSID, dir: f.cwd(), title: "Mock title 1", model: "mock-oc", created: 20, updated: 30})
			dir := filepath.Join(f.home, ocRoot)
			for _, n := range []string{"opencode.db", "opencode.db-wal", "opencode.db-shm"} {
				if err := os.Rename(filepath.Join(dir, n), filepath.Join(f.tmp, n)); err != nil {
					t.Fatal(err)
				}
				if err := os.Symlink(filepath.Join(f.tmp, n), filepath.Join(dir, n)); err != nil {
					t.Fatal(err)
				}
			}
			p := ocProcFx(f, ocPID, 10, f.cwd())
			want := ocBase(f, p)
			want.Via = "none (no opencode.db)"
			return opencode{}, f.env(ocRoot), p, want
		}},
	})
}

func TestClassifyOpencode(t *testing.T) {
	native := proc.Proc{PID: 10, Argv: []string{"opencode"}}
	for _, c := range []struct {
		argv, parent []string
		want         Kind
	}{
		{[]string{"opencode"}, nil, Session},
		{[]string{"/home/u/.opencode/bin/opencode", "/home/u/src/x"}, nil, Session}, // a project path
		{[]string{"opencode.exe", "-m", "mock/mock-oc"}, nil, Session},
		{[]string{"opencode", "-s", "serve"}, nil, Session}, // a session id, not a subcommand
		{[]string{"opencode", "--session", "ses_x", "--agent", "plan"}, nil, Session},
		{[]string{"opencode", "run", "fix it"}, nil, Session}, // an agent at work, like codex exec
		{[]string{"opencode", "serve"}, nil, Helper},
		{[]string{"opencode", "--port", "4096", "web"}, nil, Helper},
		{[]string{"opencode", "attach", "http://127.0.0.1:4096"}, nil, Helper},
		{[]string{"opencode", "acp"}, nil, Helper},
		{[]string{"opencode", "session", "list"}, nil, Helper},
		{[]string{"opencode", "auth", "login"}, nil, Helper},
		{[]string{"opencode", "--version"}, nil, Helper},
		{[]string{"opencode"}, native.Argv, Helper}, // spawned by an opencode
		{[]string{"node", "/usr/lib/node_modules/opencode-ai/bin/opencode"}, nil, Helper},
		{[]string{"/usr/lib/node_modules/opencode-ai/node_modules/opencode-linux-x64/bin/opencode"}, []string{"node", "/usr/lib/node_modules/opencode-ai/bin/opencode"}, Session},
		{[]string{"opencode-server"}, nil, None},
		{[]string{"node", "opencode.js"}, nil, None},
		{[]string{"vim", "opencode"}, nil, None},
	} {
		got := opencode{}.Classify(proc.Proc{PID: 11, Argv: c.argv}, proc.Proc{PID: 10, Argv: c.parent})
		if got != c.want {
			t.Errorf("Classify(%q, parent %q) = %v, want %v", c.argv, c.parent, got, c.want)
		}
	}
	// Scan's one list: the native process is claimed by opencode.
	if h, k := classify(proc.Proc{PID: 11, Argv: []string{"opencode"}}, proc.Proc{}); h == nil || h.Name() != "opencode" || k != Session {
		t.Errorf("classify(opencode) = %v %v, want opencode session", h, k)
	}
	if !mayBeHarness([]string{"opencode.exe"}) {
		t.Error("Scan's pre-filter drops opencode.exe")
	}
}

func TestOcPair(t *testing.T) {
	const start = 100_000
	s := func(id string, created, updated int64) ocSession {
		return ocSession{ID: id, Created: start + created, Updated: start + updated}
	}
	self := ocProc{PID: 1, Start: start}
	for _, c := range []struct {
		name     string
		self     ocProc
		peers    []ocProc
		sessions []ocSession
		id, via  string
	}{
		{"none", self, nil, nil, "", viaNone},
		{"one since start", self, nil, []ocSession{s("a", 5000, 9000)}, "a", viaOne},
		{"within the slack", self, nil, []ocSession{s("a", -900, -500)}, "a", viaOne},
		{"before the start", self, nil, []ocSession{s("a", -5000, -2000)}, "", viaNone},
		{"older session written since", self, nil, []ocSession{s("a", -5000, 2000)}, "", viaNone},
		{"--continue takes an older one", ocProc{PID: 1, Start: start, Continue: true}, nil, []ocSession{s("a", -5000, 2000)}, "a", viaOne},
		{"--session takes an older one", ocProc{PID: 1, Start: start, Session: "a"}, nil, []ocSession{s("a", -5000, 2000), s("b", -6000, 3000)}, "a", viaOne},
		{"--session, quiet", ocProc{PID: 1, Start: start, Session: "a"}, nil, []ocSession{s("a", -5000, -2000)}, "a", "argv (nothing written since the process started; the session its --session names)"},
		{"--session of a session not in the db", ocProc{PID: 1, Start: start, Session: "z"}, nil, []ocSession{s("a", -5000, -2000)}, "", viaNone},
		{"two", self, nil, []ocSession{s("a", 5000, 9000), s("b", 10000, 11000)}, "", "ambiguous (2 sessions in the cwd written since the process started)"},
		{"a peer that could have", self, []ocProc{{PID: 2, Start: start + 1000}}, []ocSession{s("a", 5000, 9000)}, "", "ambiguous (opencode pid 2 in the same cwd could have written session a too)"},
		{"a peer started after it was written", self, []ocProc{{PID: 2, Start: start + 20000}}, []ocSession{s("a", 5000, 9000)}, "a", viaOne},
		{"a peer that began before it but resumed it", self, []ocProc{{PID: 2, Start: start - 50000, Session: "a"}}, []ocSession{s("a", 5000, 9000)}, "", "ambiguous (opencode pid 2 in the same cwd could have written session a too)"},
		{"a peer that began after it was created, not resumed", self, []ocProc{{PID: 2, Start: start + 5000}}, []ocSession{s("a", 1000, 9000)}, "a", viaOne},
		{"itself among the peers", self, []ocProc{self}, []ocSession{s("a", 5000, 9000)}, "a", viaOne},
	} {
		id, via := ocPair(c.self, func() []ocProc { return c.peers }, c.sessions)
		if id != c.id || via != c.via {
			t.Errorf("%s: ocPair = %q, %q; want %q, %q", c.name, id, via, c.id, c.via)
		}
	}
}

func TestResumeOpencode(t *testing.T) {
	a := Agent{Harness: "opencode", PID: ocPID, Session: ocSID, Via: viaOne,
		Argv: []string{"opencode", "--model", "mock/mock-oc-2", "--prompt", "do it", "-s", "ses_other", "--agent", "plan", "--port", "4096", "--auto", "/home/u/src/x"}}
	argv, kept, dropped, err := ResumeArgv(opencode{}, a, Env{})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"opencode", "--session", ocSID, "--model", "mock/mock-oc-2", "--agent", "plan", "--auto"}
	if strings.Join(argv, " ") != strings.Join(want, " ") {
		t.Errorf("argv %q, want %q", argv, want)
	}
	if strings.Join(kept, " ") != "--model --agent --auto" || strings.Join(dropped, " ") != "--prompt -s --port" {
		t.Errorf("kept %q dropped %q", kept, dropped)
	}
	for _, b := range []Agent{
		{Harness: "opencode", PID: ocPID, Via: "ambiguous (2 sessions in the cwd written since the process started)"},
		{Harness: "opencode", PID: ocPID, Via: viaNone},
		{Harness: "opencode", PID: ocPID, Session: "-s", Via: viaOne},
		{Harness: "opencode", PID: ocPID, Session: "not-an-id", Via: viaOne},
	} {
		if _, err := (opencode{}).Resume(b, Env{}); err == nil {
			t.Errorf("Resume(%q via %q) resumed", b.Session, b.Via)
		}
	}
}

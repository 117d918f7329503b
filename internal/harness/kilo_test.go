package harness

import (
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/9harness/9harness/internal/proc"
	"github.com/9harness/9harness/internal/proc/proctest"
	"github.com/9harness/9harness/internal/saferoot"
)

// The Kilo fixtures are databases made at test time from the schema Kilo
// CLI 7.7.7 wrote (testdata/kilo/schema-7.7.7.sql, dumped from the real
// CLI's kilo.db), in WAL mode with checkpoints off, as kilo.db is while
// Kilo runs. The rows are the ones it wrote of a turn against the mock.

const (
	kiloRoot = ".local/share/kilo"
	kiloPID  = 6161
	kiloSID  = "ses_db4d585d1ffejPQpVRS6XWynS1"
)

func kiloWriter(t *testing.T, f *fx) *sql.DB {
	t.Helper()
	dir := filepath.Join(f.home, kiloRoot)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite3", "file:"+filepath.Join(dir, "kilo.db")+"?_pragma=journal_mode(wal)&_pragma=wal_autocheckpoint(0)")
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	t.Cleanup(func() { db.Close() })
	schema, err := os.ReadFile("testdata/kilo/schema-7.7.7.sql")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(string(schema)); err != nil {
		t.Fatal(err)
	}
	ocExec(t, db, `INSERT INTO account (id, email, url, access_token, refresh_token, token_expiry, time_created, time_updated) VALUES ('acc_1', 'g@example.org', 'https://kilo.ai', 'kilo-access-SECRET', 'kilo-refresh-SECRET', 0, 0, 0)`)
	ocExec(t, db, `INSERT INTO project (id, worktree, time_created, time_updated, sandboxes) VALUES ('global', '/', 0, 0, '[]')`)
	return db
}

// kiloSession writes the session row and the two messages Kilo 7.7.7
// wrote of one turn (agent "code"), created and updated seconds after
// the fixture's boot.
func kiloSession(t *testing.T, db *sql.DB, id, dir, title string, created, updated float64) {
	t.Helper()
	ocExec(t, db, `INSERT INTO session (id, project_id, slug, directory, path, title, version, tokens_input, tokens_output, agent, model, time_created, time_updated)
		VALUES (?, 'global', 'swift-panda', ?, ?, ?, '7.7.7', 10, 8, 'code', '{"id":"mock-oc-2","providerID":"mock"}', ?, ?)`,
		id, dir, strings.TrimPrefix(dir, "/"), title, ms(created), ms(updated))
	user := fmt.Sprintf(`{"role":"user","time":{"created":%d},"agent":"code","model":{"providerID":"mock","modelID":"mock-oc-2"},"summary":{"diffs":[]}}`, ms(created+1))
	asst := fmt.Sprintf(`{"parentID":"msg_u","role":"assistant","mode":"code","agent":"code","path":{"cwd":%q,"root":"/"},"cost":0,"tokens":{"total":18,"input":10,"output":8,"reasoning":0,"cache":{"write":0,"read":0}},"modelID":"mock-oc-2","providerID":"mock","time":{"created":%d,"completed":%d},"finish":"stop"}`, dir, ms(created+2), ms(created+3))
	for j, d := range []string{user, asst} {
		ocExec(t, db, `INSERT INTO message (id, session_id, time_created, time_updated, data) VALUES (?, ?, ?, ?, ?)`,
			fmt.Sprintf("msg_%s_%d", id, j), id, ms(created+1)+int64(j), ms(created+1)+int64(j), d)
	}
}

func kiloProcFx(f *fx, pid int, start float64, cwd string, args ...string) proc.Proc {
	return f.add(proctest.Proc{PID: pid, PPID: 100, Start: uint64(start * 100),
		Argv: append([]string{"/usr/lib/node_modules/@kilocode/cli/bin/.kilo"}, args...), Env: f.stdEnv(), Cwd: cwd})
}

func kiloBase(f *fx, p proc.Proc) Agent {
	return Agent{Harness: "kilo", PID: p.PID, PPID: 100, Start: p.Start, Cwd: f.cwd(), Zmx: "work", TmuxSocket: "/tmp/tmux-1000/default"}
}

func TestResolveKilo(t *testing.T) {
	runResolve(t, []resolveCase{
		{"one session since start: its title and model", func(f *fx) (Harness, Env, proc.Proc, Agent) {
			db := kiloWriter(t, f)
			kiloSession(t, db, kiloSID, f.cwd(), "Mock title 1", 20, 30)
			p := kiloProcFx(f, kiloPID, 10, f.cwd(), "--model", "mock/mock-oc-2")
			want := kiloBase(f, p)
			want.Session, want.Via, want.Title, want.Model = kiloSID, viaOne, "Mock title 1", "mock-oc-2"
			return kilo{}, f.env(kiloRoot), p, want
		}},
		{"the title before the title agent answered", func(f *fx) (Harness, Env, proc.Proc, Agent) {
			db := kiloWriter(t, f)
			kiloSession(t, db, kiloSID, f.cwd(), "New session - 2026-12-06T11:43:24.718Z", 20, 30)
			p := kiloProcFx(f, kiloPID, 10, f.cwd())
			want := kiloBase(f, p)
			want.Session, want.Via, want.Title, want.Model = kiloSID, viaOne, "New session - 2026-12-06T11:43:24.718Z", "mock-oc-2"
			return kilo{}, f.env(kiloRoot), p, want
		}},
		{"a fresh TUI", func(f *fx) (Harness, Env, proc.Proc, Agent) {
			kiloWriter(t, f)
			p := kiloProcFx(f, kiloPID, 10, f.cwd())
			want := kiloBase(f, p)
			want.Via = viaNone
			return kilo{}, f.env(kiloRoot), p, want
		}},
		{"no kilo.db", func(f *fx) (Harness, Env, proc.Proc, Agent) {
			if err := os.MkdirAll(filepath.Join(f.home, kiloRoot), 0o700); err != nil {
				t.Fatal(err)
			}
			p := kiloProcFx(f, kiloPID, 10, f.cwd())
			want := kiloBase(f, p)
			want.Via = "none (no kilo.db)"
			return kilo{}, f.env(kiloRoot), p, want
		}},
	})
}

func TestClassifyKilo(t *testing.T) {
	const native = "/usr/lib/node_modules/@kilocode/cli/bin/.kilo"
	wrapper := []string{"node", "/usr/lib/node_modules/.bin/kilo", "--model", "mock/mock-oc-2"}
	for _, c := range []struct {
		argv, parent []string
		want         Kind
	}{
		{wrapper, nil, Helper},
		{[]string{native, "--model", "mock/mock-oc-2"}, wrapper, Session},
		{[]string{"kilo"}, nil, Session},
		{[]string{native, "-s", "serve"}, nil, Session}, // a session id, not a subcommand
		{[]string{native, "run", "fix it"}, nil, Session},
		{[]string{native, "serve"}, nil, Helper},
		{[]string{native, "daemon", "start"}, nil, Helper},
		{[]string{native, "remote"}, nil, Helper},
		{[]string{native, "--help"}, nil, Helper},
		{[]string{native}, []string{native}, Helper}, // spawned by a kilo
		{[]string{"kilo-sandbox-seccomp"}, nil, None},
		{[]string{"vim", "kilo"}, nil, None},
	} {
		got := kilo{}.Classify(proc.Proc{PID: 11, Argv: c.argv}, proc.Proc{PID: 10, Argv: c.parent})
		if got != c.want {
			t.Errorf("Classify(%q, parent %q) = %v, want %v", c.argv, c.parent, got, c.want)
		}
	}
	if h, k := classify(proc.Proc{PID: 11, Argv: []string{native}}, proc.Proc{PID: 10, Argv: wrapper}); h == nil || h.Name() != "kilo" || k != Session {
		t.Errorf("classify(.kilo) = %v %v, want kilo session", h, k)
	}
	if !mayBeHarness([]string{native}) {
		t.Error("Scan's pre-filter drops .kilo")
	}
	if !kiloSpec.OwnExecutable(native) {
		t.Error("the npm package's .kilo is not its own executable")
	}
}

func TestResumeKilo(t *testing.T) {
	a := Agent{Harness: "kilo", PID: kiloPID, Session: kiloSID, Via: viaOne,
		Argv: []string{".kilo", "--model", "mock/mock-oc-2", "-s", "ses_other", "--port", "4096", "--pure"}}
	argv, _, _, err := ResumeArgv(kilo{}, a, Env{})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := strings.Join(argv, " "), "kilo --session "+kiloSID+" --model mock/mock-oc-2 --pure"; got != want {
		t.Errorf("argv %q, want %q", got, want)
	}
	if _, _, _, err := ResumeArgv(kilo{}, Agent{Harness: "kilo", PID: kiloPID, Via: viaNone}, Env{}); err == nil {
		t.Error("an unresolved kilo resumes")
	}
}

// TestKiloStoresHidden: the files Kilo keeps its keys in, named as it
// names them, are hidden at any depth.
func TestKiloStoresHidden(t *testing.T) {
	for _, n := range []string{"kilo.db", "kilo.db-wal", "auth.json", "mcp-auth.json"} {
		if !saferoot.Excluded(n) {
			t.Errorf("%s is not hidden", n)
		}
	}
}

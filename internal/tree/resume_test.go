package tree

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/9harness/9harness/internal/errs"
	"github.com/9harness/9harness/internal/harness"
	"github.com/9harness/9harness/internal/proc"
	"github.com/9harness/9harness/internal/proc/proctest"
	"github.com/9harness/9harness/internal/saferoot"
)

// TestResumeFile: an agent's resume file is the move's own resume argv,
// run in its directory, as one shell line: the kept flags (a --settings
// value that could hold a key among them) written out in full for the
// owner; absent for an agent with nothing to resume yet; never in a
// grantee's view (not listed, ENOENT by name) nor in the table.
func TestResumeFile(t *testing.T) {
	dir, home := t.TempDir(), t.TempDir()
	uid := uint32(os.Getuid())
	croot := filepath.Join(home, ".claude")
	base := time.Now().Add(-time.Hour).Truncate(time.Second)
	const settings = `{"apiKeyHelper": "it's secret"}`
	sid := func(pid int) string { return "00000000-0000-4000-8000-" + strconv.Itoa(100000000000+pid) }
	var ps []proctest.Proc
	for _, pid := range []int{100, 101} {
		ps = append(ps, proctest.Proc{PID: pid, PPID: 1, UID: uid, Start: uint64(pid), Cwd: "/w",
			Argv: []string{"claude", "--model", "opus", "--settings", settings, "-p2", "--verbose", "fix the build"}})
		write(t, filepath.Join(croot, "sessions", strconv.Itoa(pid)+".json"),
			`{"pid":`+strconv.Itoa(pid)+`,"sessionId":"`+sid(pid)+`","cwd":"/w","startedAt":`+strconv.FormatInt(base.UnixMilli(), 10)+`,"procStart":"`+strconv.Itoa(pid)+`"}`, base)
	}
	// Only 100 has been prompted: 101 has no transcript, nothing to resume.
	write(t, filepath.Join(croot, "projects", "-w", sid(100)+".jsonl"),
		`{"type":"user","timestamp":"`+base.Format(time.RFC3339)+`","message":{"content":"fix the build"}}`+"\n", base)
	if err := proctest.Write(dir, ps...); err != nil {
		t.Fatal(err)
	}
	tb := proc.New(dir)
	envs := map[string]harness.Env{}
	for _, h := range Harnesses {
		envs[h] = harness.Env{Procs: tb, Home: home, TmpDir: dir, Root: saferoot.New(filepath.Join(home, "."+h))}
	}

	// What the move runs (move.Mover.Move: Resolve, then ResumeArgv).
	p, err := tb.Stat(100)
	if err != nil {
		t.Fatal(err)
	}
	h := harness.ByName("claude")
	agent := h.Resolve(envs["claude"], p)
	argv, _, _, err := harness.ResumeArgv(h, agent, envs["claude"])
	if err != nil {
		t.Fatal(err)
	}
	wantArgv := []string{"claude", "--resume", sid(100), "--model", "opus", "--settings", settings}
	if !slices.Equal(argv, wantArgv) {
		t.Fatalf("the move's argv %q, want %q", argv, wantArgv)
	}
	want := harness.ResumeLine(agent.Cwd, argv) + "\n"
	if lit := "cd /w && claude --resume " + sid(100) + ` --model opus --settings '{"apiKeyHelper": "it'\''s secret"}'` + "\n"; want != lit {
		t.Fatalf("the move's line %q, want %q", want, lit)
	}

	for _, grantee := range []bool{false, true} {
		r := newActive(ActiveConfig{Procs: tb, UID: uid, Envs: envs, grantee: grantee}, time.Now()).root()
		for _, row := range readTable(t, r) {
			if _, ok := row["resume"]; ok {
				t.Errorf("grantee %v: the table has a resume column: %v", grantee, row)
			}
		}
		for _, pid := range []int{100, 101} {
			path := "/claude/" + strconv.Itoa(pid) + "/resume"
			n, err := lookupPath(r, "/claude/"+strconv.Itoa(pid))
			if err != nil {
				t.Fatal(err)
			}
			ents, err := n.(Dir).List()
			if err != nil {
				t.Fatal(err)
			}
			listed := slices.ContainsFunc(ents, func(e Entry) bool { return e.Name == "resume" })
			_, err = lookupPath(r, path)
			switch {
			case grantee || pid == 101:
				if listed || !errs.Is(err, errs.NotExist) {
					t.Errorf("grantee %v: %s listed %v, lookup %v, want absent (ENOENT)", grantee, path, listed, err)
				}
			default:
				if !listed || err != nil {
					t.Fatalf("%s listed %v, lookup %v", path, listed, err)
				}
				if got := readFact(t, r, "claude", pid, "resume"); got != want {
					t.Errorf("%s: %q, want the move's %q", path, got, want)
				}
			}
		}
	}
}

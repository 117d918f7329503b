package tree

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/9harness/9harness/internal/budget"
	"github.com/9harness/9harness/internal/errs"
	"github.com/9harness/9harness/internal/harness"
	"github.com/9harness/9harness/internal/proc"
	"github.com/9harness/9harness/internal/proc/proctest"
	"github.com/9harness/9harness/internal/saferoot"
)

// TestMessagesFile: an agent's messages file is its conversation's last
// messages as its harness renders them, derived at the read (a line
// written after the open's lookup is in it); absent for an agent with no
// conversation yet; in a grantee's view only because the transcript it is
// rendered from is (the grantee could read it itself); never in the
// table; a read past the byte budget is refused with ENOMEM.
func TestMessagesFile(t *testing.T) {
	dir, home := t.TempDir(), t.TempDir()
	uid := uint32(os.Getuid())
	croot := filepath.Join(home, ".claude")
	base := time.Now().Add(-time.Hour).Truncate(time.Second)
	sid := func(pid int) string { return "00000000-0000-4000-8000-" + strconv.Itoa(100000000000+pid) }
	var ps []proctest.Proc
	for _, pid := range []int{100, 101} {
		ps = append(ps, proctest.Proc{PID: pid, PPID: 1, UID: uid, Start: uint64(pid), Cwd: "/w", Argv: []string{"claude"}})
		write(t, filepath.Join(croot, "sessions", strconv.Itoa(pid)+".json"),
			`{"pid":`+strconv.Itoa(pid)+`,"sessionId":"`+sid(pid)+`","cwd":"/w","startedAt":`+strconv.FormatInt(base.UnixMilli(), 10)+`,"procStart":"`+strconv.Itoa(pid)+`"}`, base)
	}
	// Only 100 has been prompted: 101 has no conversation.
	tr := filepath.Join(croot, "projects", "-w", sid(100)+".jsonl")
	write(t, tr, `{"type":"user","timestamp":"`+base.Format(time.RFC3339)+`","message":{"role":"user","content":"fix the \u001b[2Jbuild"}}`+"\n", base)
	if err := proctest.Write(dir, ps...); err != nil {
		t.Fatal(err)
	}
	tb := proc.New(dir)
	envs := map[string]harness.Env{}
	for _, h := range Harnesses {
		envs[h] = harness.Env{Procs: tb, Home: home, TmpDir: dir, Root: saferoot.New(filepath.Join(home, "."+h))}
	}
	answer := `{"type":"assistant","message":{"role":"assistant","content":[{"type":"text","text":"On it."},{"type":"tool_use","name":"Bash","input":{"command":"make"}}]}}` + "\n"
	want := "user: fix the ?[2Jbuild\nassistant: On it. [tool Bash]\n"

	for _, grantee := range []bool{false, true} {
		r := newActive(ActiveConfig{Procs: tb, UID: uid, Envs: envs, grantee: grantee}, time.Now()).root()
		for _, row := range readTable(t, r) {
			if _, ok := row["messages"]; ok {
				t.Errorf("grantee %v: the table has a messages column: %v", grantee, row)
			}
		}
		for _, pid := range []int{100, 101} {
			path := "/claude/" + strconv.Itoa(pid) + "/messages"
			n, err := lookupPath(r, "/claude/"+strconv.Itoa(pid))
			if err != nil {
				t.Fatal(err)
			}
			ents, err := n.(Dir).List()
			if err != nil {
				t.Fatal(err)
			}
			listed := slices.ContainsFunc(ents, func(e Entry) bool { return e.Name == "messages" })
			m, err := lookupPath(r, path)
			if pid == 101 {
				if listed || !errs.Is(err, errs.NotExist) {
					t.Errorf("grantee %v: %s listed %v, lookup %v, want absent (ENOENT)", grantee, path, listed, err)
				}
				continue
			}
			if !listed || err != nil {
				t.Fatalf("grantee %v: %s listed %v, lookup %v", grantee, path, listed, err)
			}
			if at, err := m.Attr(); err != nil || at.Mode != 0o444 || at.Size != 0 {
				t.Errorf("%s: %+v, %v; want 0444, size 0 (derived at the read)", path, at, err)
			}
			if !grantee {
				// Written after the lookup: the read derives it.
				f, err := os.OpenFile(tr, os.O_APPEND|os.O_WRONLY, 0)
				if err != nil {
					t.Fatal(err)
				}
				f.WriteString(answer)
				f.Close()
			}
			if got := readFact(t, r, "claude", pid, "messages"); got != want {
				t.Errorf("grantee %v: %s: %q, want %q", grantee, path, got, want)
			}
		}
	}

	// The transcript's window (here the whole file) is charged to the
	// daemon's pool while held.
	pool := budget.New("test", 16)
	env := envs["claude"]
	env.Budget = pool
	envs["claude"] = env
	r := newActive(ActiveConfig{Procs: tb, UID: uid, Envs: envs}, time.Now()).root()
	n, err := lookupPath(r, "/claude/100/messages")
	if err != nil {
		t.Fatal(err)
	}
	fh, err := n.(File).Open()
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	if _, err := fh.ReadAt(make([]byte, 64), 0); !errs.Is(err, errs.NoMem) {
		t.Errorf("a read past the budget: %v, want NoMem", err)
	}
}

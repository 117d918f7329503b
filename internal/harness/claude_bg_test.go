package harness

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/9harness/9harness/internal/errs"
	"github.com/9harness/9harness/internal/proc"
	"github.com/9harness/9harness/internal/proc/proctest"
)

const (
	bgJob    = "3d289299"
	bgSID    = "3d289299-6937-4726-8e41-b2da2cdacfa6"
	bgWorker = 21708
	bgTick   = 60000
)

// bgRecord is the registry record a real 2.1.332 background worker wrote
// (testdata/claude-bg-2.1.332), moved to this fixture's pid, start, cwd
// and times.
func bgRecord(t *testing.T, file string, pid int, procStart, cwd string, ms int64) string {
	t.Helper()
	b, err := os.ReadFile("testdata/claude-bg-2.1.332/" + file)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	m["pid"], m["procStart"], m["cwd"] = pid, procStart, cwd
	m["startedAt"], m["updatedAt"], m["statusUpdatedAt"] = ms, ms, ms
	m["messagingSocketPath"] = "/run/user/1000/cc-socks/" + fmt.Sprint(pid) + ".sock"
	// The fixture table's pid namespace.
	m["pidDomain"] = "linux:3d1219c7c4c5404aaa1f6d2a48adfda4:pid:[4026531836]"
	out, _ := json.Marshal(m)
	return string(out)
}

// bgState is the job's state.json of the real run with state, tempo and
// updatedAt set.
func bgState(t *testing.T, state, tempo string, updated time.Time) string {
	t.Helper()
	b, err := os.ReadFile("testdata/claude-bg-2.1.332/state-running.json")
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	m["state"], m["tempo"], m["updatedAt"] = state, tempo, updated.UTC().Format("2006-01-02T15:04:05.000Z")
	out, _ := json.Marshal(m)
	return string(out)
}

// bgFixture is a background session as 2.1.332 runs it: the supervisor,
// two pty hosts, the claimed worker (with its registry record and
// transcript) and an unclaimed spare.
func bgFixture(t *testing.T, f *fx) (worker proc.Proc) {
	bin := "/opt/cc/node_modules/@anthropic-ai/claude-code/bin/claude.exe"
	sock := "/tmp/cc-daemon-1000/4ef69446/spare/"
	cwd := f.cwd()
	for _, p := range []proctest.Proc{
		{PID: 21595, PPID: 1, Start: 59000, Argv: []string{bin, "daemon", "run", "--origin", "transient", "--spawned-by", `{"label":"claude --bg","cwd":"` + cwd + `","pid":21520}`}, Cwd: cwd},
		{PID: 21662, PPID: 21595, Start: 59500, Argv: []string{"claude bg-pty-host", "--bg-pty-host", sock + "b38ba0b9.pty.sock", "200", "50", "--", bin, "--bg-spare", sock + "b38ba0b9.claim.sock"}, Cwd: cwd},
		{PID: 21663, PPID: 21595, Start: 59500, Argv: []string{"claude bg-pty-host", "--bg-pty-host", sock + "05648da6.pty.sock", "200", "50", "--", bin, "--bg-spare", sock + "05648da6.claim.sock"}, Cwd: cwd},
		{PID: 21709, PPID: 21663, Start: 59600, Argv: []string{"claude bg-spare", "--bg-spare", sock + "05648da6.claim.sock"}, Cwd: cwd, Env: []string{"HOME=" + f.home, "CLAUDE_CODE_SESSION_KIND=bg"}},
	} {
		f.add(p)
	}
	worker = f.add(proctest.Proc{PID: bgWorker, PPID: 21662, Start: bgTick, Argv: []string{"claude bg-spare", "--bg-spare", sock + "b38ba0b9.claim.sock"}, Cwd: cwd, Env: []string{"HOME=" + f.home, "CLAUDE_CODE_SESSION_KIND=bg"}})
	f.write(".claude/sessions/21708.json", bgRecord(t, "registry-claimed-spare.json", bgWorker, fmt.Sprint(bgTick), cwd, at(601).UnixMilli()), at(601))
	f.write(".claude/sessions/21708.e9c6f059.key", "peer-token", at(601))
	proj := ".claude/projects/" + claudeSanitize(cwd)
	f.write(proj+"/"+bgSID+".jsonl", jsonl(
		ccUser(bgSID, cwd, "say hello bg", 602),
		ccAssistant(bgSID, cwd, "claude-opus-4-8", 603),
	), at(603))
	return worker
}

// TestClaudeBackground: of a background session's processes only the
// claimed worker is an agent; it resolves through its registry record,
// names its attach command, and refuses a move with it as the reason.
func TestClaudeBackground(t *testing.T) {
	f := newFx(t)
	worker := bgFixture(t, f)
	env := f.env(".claude")
	found, err := Scan(env.Procs, 1000, nil)
	if err != nil {
		t.Fatal(err)
	}
	var scanned, listed []int
	for _, fd := range found {
		scanned = append(scanned, fd.Proc.PID)
	}
	found = Confirmed(found, func(string) Env { return env })
	for _, fd := range found {
		listed = append(listed, fd.Proc.PID)
	}
	if fmt.Sprint(scanned) != "[21708 21709]" || fmt.Sprint(listed) != "[21708]" {
		t.Errorf("scan found %v and kept %v; want the two workers, then the claimed one", scanned, listed)
	}
	a := claude{}.Resolve(env, worker)
	if a.Session != bgSID || a.Via != RouteRegistry || a.Attach != "claude attach "+bgJob || a.Title != "say hello bg" {
		t.Errorf("resolved %+v", a)
	}
	if a.Name != "say hello bg" || a.Status != "idle" || a.State != StateIdle {
		t.Errorf("name %q status %q state %q", a.Name, a.Status, a.State)
	}
	_, err = claude{}.Resume(a, env)
	var e *errs.Error
	if err == nil || !errors.As(err, &e) || e.Kind != errs.Permission || !strings.Contains(err.Error(), "a background session: claude attach "+bgJob) {
		t.Errorf("Resume of a background session: %v, want EPERM naming claude attach %s", err, bgJob)
	}
	// The job's state is fresher than the registry's status: it wins.
	f.write(".claude/jobs/"+bgJob+"/state.json", bgState(t, "working", "active", at(700)), at(700))
	a = claude{}.Resolve(env, worker)
	if a.State != StateWorking || !a.Since.Equal(at(700).UTC().Truncate(time.Millisecond)) || !strings.HasPrefix(a.StateVia, "job ") {
		t.Errorf("with a fresher job state: state %q since %v via %q", a.State, a.Since, a.StateVia)
	}
	// An older one does not.
	f.write(".claude/jobs/"+bgJob+"/state.json", bgState(t, "working", "active", at(500)), at(500))
	if a = (claude{}).Resolve(env, worker); a.State != StateIdle || a.StateVia != RouteRegistry {
		t.Errorf("with an older job state: state %q via %q", a.State, a.StateVia)
	}
	// An interactive session is not a background one.
	p, _, _ := ccFixture(f, f.cwd())
	f.write(".claude/sessions/345104.json", ccRecord(ccSID, f.cwd(), "50424", "linux::pid:[4026531836]"), at(900))
	if a := (claude{}).Resolve(env, p); a.Attach != "" {
		t.Errorf("an interactive session has attach %q", a.Attach)
	}
}

// TestClaudeBgRespawned: the worker the supervisor respawns runs
// claude.exe --resume <transcript> (or the versioned binary of a native
// install); with its "bg" record it is the same background session.
func TestClaudeBgRespawned(t *testing.T) {
	f := newFx(t)
	cwd := f.cwd()
	tr := f.home + "/.claude/projects/" + claudeSanitize(cwd) + "/" + bgSID + ".jsonl"
	native := f.home + "/.local/share/claude/versions/2.1.332"
	for i, argv := range [][]string{
		{"/opt/cc/bin/claude.exe", "--resume", tr},
		{native, "--resume", tr},
	} {
		pid := 26974 + i
		p := f.add(proctest.Proc{PID: pid, PPID: 26909, Start: bgTick + uint64(i), Argv: argv, Cwd: cwd})
		f.write(fmt.Sprintf(".claude/sessions/%d.json", pid), bgRecord(t, "registry-respawned.json", pid, fmt.Sprint(p.Start), cwd, at(650).UnixMilli()), at(650))
		env := f.env(".claude")
		if k := (claude{}).Classify(p, proc.Proc{}); k != Session {
			t.Errorf("%q: %s, want session", argv, k)
		}
		if !(claude{}).Confirm(env, p) {
			t.Errorf("%q: not confirmed", argv)
		}
		if a := (claude{}).Resolve(env, p); a.Attach != "claude attach "+bgJob || a.Session != bgSID {
			t.Errorf("%q: attach %q session %q", argv, a.Attach, a.Session)
		}
	}
	// The native worker without a record (not yet claimed) is not confirmed.
	p := f.add(proctest.Proc{PID: 27000, PPID: 26909, Start: bgTick, Argv: []string{native, "--bg-spare", "/tmp/x.claim.sock"}, Cwd: cwd})
	if (claude{}).Confirm(f.env(".claude"), p) {
		t.Error("an unclaimed native spare is confirmed")
	}
}

// TestClaudeStale: the registry records of dead and reused pids and the
// jobs that claim a process nobody runs are stale; a live worker's record
// and its job, and an ended job, are not.
func TestClaudeStale(t *testing.T) {
	f := newFx(t)
	bgFixture(t, f)
	cwd := f.cwd()
	// A live job: its worker's record is alive.
	f.write(".claude/jobs/"+bgJob+"/state.json", bgState(t, "running", "idle", at(700)), at(700))
	// A killed interactive Claude: its record stays (SIGKILL), its pid is gone.
	f.write(".claude/sessions/4668.json", strings.Replace(ccRecord(ccSIDB, cwd, "125170", "linux::pid:[4026531836]"), `"pid":345104`, `"pid":4668`, 1), at(800))
	// A record whose pid now runs another program.
	f.add(proctest.Proc{PID: 4700, PPID: 1, Start: 99999, Argv: []string{"vim"}, Cwd: cwd})
	f.write(".claude/sessions/4700.json", strings.Replace(ccRecord(ccSIDC, cwd, "125171", "linux::pid:[4026531836]"), `"pid":345104`, `"pid":4700`, 1), at(810))
	// A record of another pid namespace: not judged.
	f.write(".claude/sessions/4800.json", strings.Replace(ccRecord(ccSIDC, cwd, "1", "linux::pid:[4026532999]"), `"pid":345104`, `"pid":4800`, 1), at(810))
	// A job that claims to run, whose worker and supervisor are gone.
	f.write(".claude/jobs/a1b2c3d4/state.json", bgState(t, "running", "active", at(820)), at(820))
	// An ended job.
	f.write(".claude/jobs/e5f6a7b8/state.json", bgState(t, "stopped", "idle", at(830)), at(830))
	got := StaleRecords("claude", f.env(".claude"))
	byID := map[string]Stale{}
	var ids []string
	for _, s := range got {
		byID[s.ID] = s
		ids = append(ids, s.ID)
	}
	if fmt.Sprint(ids) != "[registry-4668 registry-4700 job-a1b2c3d4]" {
		t.Fatalf("stale records %v", ids)
	}
	if s := byID["registry-4668"]; s.PID != 4668 || s.Why != "pid 4668 is not running" || s.Session != ccSIDB ||
		s.Claim != "registry: session "+ccSIDB+" busy (interactive)" || !s.Since.Equal(at(900).Truncate(time.Millisecond)) {
		t.Errorf("registry-4668: %+v", s)
	}
	if s := byID["registry-4700"]; !strings.HasPrefix(s.Why, "pid 4700 is another process") {
		t.Errorf("registry-4700: %+v", s)
	}
	if s := byID["job-a1b2c3d4"]; s.PID != 0 || s.Claim != "job a1b2c3d4: running" || s.Session != bgSID || !s.Since.Equal(at(820).UTC().Truncate(time.Millisecond)) {
		t.Errorf("job-a1b2c3d4: %+v", s)
	}
	if StaleRecords("codex", f.env(".codex")) != nil {
		t.Error("codex keeps no records 9harness judges")
	}
}

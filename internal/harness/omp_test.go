package harness

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/9harness/9harness/internal/proc"
	"github.com/9harness/9harness/internal/proc/proctest"
)

const (
	ompSID  = "0199a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b"
	ompSID2 = "0199a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5c"
	ompPID  = 155574
	ompTick = 12000 // 120 s after boot
)

// ompSlot is a v3 title slot: exactly 256 bytes with its newline.
func ompSlot(t *testing.T, title string) string {
	head := fmt.Sprintf(`{"type":"title","v":1,"title":%q,"source":"auto","updatedAt":"2026-09-20T10:01:00.000Z","pad":"`, title)
	n := 255 - len(head) - len(`"}`)
	if n < 0 {
		t.Fatal("title too long for the slot")
	}
	s := head + strings.Repeat(" ", n) + `"}`
	if len(s)+1 != 256 {
		t.Fatalf("slot is %d bytes", len(s)+1)
	}
	return s
}

func ompHeader(id, cwd, extra string) string {
	return fmt.Sprintf(`{"type":"session","version":3,"id":%q,"timestamp":"2026-09-20T10:00:00.000Z","cwd":%q%s}`, id, cwd, extra)
}

const ompEntries = `{"type":"model_change","id":"a1b2c3d4","parentId":null,"timestamp":"2026-09-20T10:00:00.100Z","model":"anthropic/claude-opus-4-6"}
{"type":"message","id":"b2c3d4e5","parentId":"a1b2c3d4","timestamp":"2026-09-20T10:00:01.000Z","message":{"role":"user","content":"Hello"}}
{"type":"message","id":"c3d4e5f6","parentId":"b2c3d4e5","timestamp":"2026-09-20T10:00:02.000Z","message":{"role":"assistant","content":[{"type":"text","text":"Hi!"}],"provider":"anthropic","model":"claude-opus-4-6","stopReason":"stop"}}
`

// ompProc is the omp process; its environment names the fixture's home and
// temp dir, as omp's os.homedir() and os.tmpdir() would see them.
func ompProc(f *fx, argv0, cwd string, fds ...string) (proc.Proc, Agent) {
	p := f.add(proctest.Proc{PID: ompPID, PPID: 100, Start: ompTick, Argv: []string{argv0}, Env: f.stdEnv("TMPDIR=" + f.tmp), Cwd: cwd, FDs: fds})
	return p, Agent{Harness: base(argv0), PID: ompPID, PPID: 100, Start: ompTick, Cwd: cwd, Via: "none", Zmx: "work", TmuxSocket: "/tmp/tmux-1000/default"}
}

func TestResolveOmp(t *testing.T) {
	file := "2026-09-20T10-00-00-000Z_" + ompSID + ".jsonl"
	legacy := func(f *fx) string { return piLegacyDir(f.cwd()) }
	runResolve(t, []resolveCase{
		{"omp/dir-home-title-slot", func(f *fx) (Harness, Env, proc.Proc, Agent) {
			rel := "agent/sessions/-src-x/" + file
			f.write(".omp/"+rel, jsonl(ompSlot(t, "Wire the retry queue"), ompHeader(ompSID, f.cwd(), `,"title":"header title"`))+ompEntries, at(600))
			// An older session of the same cwd, and a sub-agent's transcript.
			f.write(".omp/agent/sessions/-src-x/2026-09-19T10-00-00-000Z_"+ompSID2+".jsonl", jsonl(ompHeader(ompSID2, f.cwd(), ""))+ompEntries, at(500))
			f.write(".omp/agent/sessions/-src-x/"+strings.TrimSuffix(file, ".jsonl")+"/0-Explore.jsonl",
				jsonl(ompHeader("sub1", f.cwd(), ""), `{"type":"model_change","provider":"anthropic","modelId":"claude-haiku-4-5"}`), at(590))
			p, want := ompProc(f, "omp", f.cwd())
			want.Session, want.Via, want.Transcript = ompSID, "dir", rel
			want.Title, want.Model = "Wire the retry queue", "claude-opus-4-6"
			want.Agents = []Sub{{Name: "0-Explore", Model: "claude-haiku-4-5", Transcript: "agent/sessions/-src-x/" + strings.TrimSuffix(file, ".jsonl") + "/0-Explore.jsonl"}}
			return omp{}, f.env(".omp"), p, want
		}},
		{"omp/dir-legacy-header-first", func(f *fx) (Harness, Env, proc.Proc, Agent) {
			rel := "agent/sessions/" + legacy(f) + "/" + file
			f.write(".omp/"+rel, jsonl(ompHeader(ompSID, f.cwd(), `,"title":"Legacy title"`),
				`{"type":"model_change","id":"x","provider":"openai","modelId":"gpt-5"}`,
				`{"type":"message","id":"y","message":{"role":"assistant","provider":"openai","model":"gpt-5.6"}}`), at(600))
			p, want := ompProc(f, "omp", f.cwd())
			want.Session, want.Via, want.Transcript = ompSID, "dir", rel
			want.Title, want.Model = "Legacy title", "gpt-5.6"
			return omp{}, f.env(".omp"), p, want
		}},
		{"omp/dir-newest-across-schemes", func(f *fx) (Harness, Env, proc.Proc, Agent) {
			f.write(".omp/agent/sessions/"+legacy(f)+"/old_"+ompSID2+".jsonl", jsonl(ompHeader(ompSID2, f.cwd(), "")), at(550))
			rel := "agent/sessions/-src-x/" + file
			f.write(".omp/"+rel, jsonl(ompHeader(ompSID, f.cwd(), "")), at(560))
			p, want := ompProc(f, "omp", f.cwd())
			want.Session, want.Via, want.Transcript = ompSID, "dir", rel
			return omp{}, f.env(".omp"), p, want
		}},
		{"omp/dir-tmp", func(f *fx) (Harness, Env, proc.Proc, Agent) {
			cwd := f.tmp + "/scratch/a"
			rel := "agent/sessions/-tmp-scratch-a/" + file
			f.write(".omp/"+rel, jsonl(ompHeader(ompSID, cwd, "")), at(600))
			p, want := ompProc(f, "omp", cwd)
			want.Session, want.Via, want.Transcript = ompSID, "dir", rel
			return omp{}, f.env(".omp"), p, want
		}},
		{"omp/dir-cwd-through-symlink", func(f *fx) (Harness, Env, proc.Proc, Agent) {
			// The header recorded the cwd through a link; /proc names the
			// real directory. A header with no id leaves the file name's.
			if err := os.Symlink("src", f.home+"/code"); err != nil {
				t.Fatal(err)
			}
			rel := "agent/sessions/-src-x/" + file
			f.write(".omp/"+rel, jsonl(`{"type":"session","version":3,"timestamp":"2026-09-20T10:00:00.000Z","cwd":"`+f.home+`/code/x"}`), at(600))
			p, want := ompProc(f, "omp", f.cwd())
			want.Session, want.Via, want.Transcript = ompSID, "dir", rel
			return omp{}, f.env(".omp"), p, want
		}},
		{"omp/dir-cwd-mismatch", func(f *fx) (Harness, Env, proc.Proc, Agent) {
			// Legacy names collide ("/a-b" and "/a/b"): the header decides.
			f.write(".omp/agent/sessions/-src-x/"+file, jsonl(ompHeader(ompSID, f.home+"/src-x", "")), at(600))
			p, want := ompProc(f, "omp", f.cwd())
			want.Via = "none (no transcript in the cwd's session dir names this cwd)"
			return omp{}, f.env(".omp"), p, want
		}},
		{"omp/dir-predates-process", func(f *fx) (Harness, Env, proc.Proc, Agent) {
			f.write(".omp/agent/sessions/-src-x/"+file, jsonl(ompHeader(ompSID, f.cwd(), "")), at(50))
			p, want := ompProc(f, "omp", f.cwd())
			want.Via = "none (no transcript for this cwd written since the process started)"
			return omp{}, f.env(".omp"), p, want
		}},
		{"omp/no-dir", func(f *fx) (Harness, Env, proc.Proc, Agent) {
			p, want := ompProc(f, "omp", f.cwd())
			want.Via = "none (no transcript for this cwd)"
			return omp{}, f.env(".omp"), p, want
		}},
		{"omp/fd", func(f *fx) (Harness, Env, proc.Proc, Agent) {
			// The held file wins over a newer one the dir route would pick,
			// and a held sub-agent transcript is not the session.
			rel := "agent/sessions/-src-x/" + file
			abs := f.write(".omp/"+rel, jsonl(ompSlot(t, "Held"), ompHeader(ompSID, f.cwd(), ""))+ompEntries, at(600))
			f.write(".omp/agent/sessions/-src-x/newer_"+ompSID2+".jsonl", jsonl(ompHeader(ompSID2, f.cwd(), "")), at(700))
			subAbs := f.write(".omp/agent/sessions/-src-x/"+strings.TrimSuffix(file, ".jsonl")+"/1-Task.jsonl", jsonl(ompHeader("s", f.cwd(), "")), at(800))
			p, want := ompProc(f, "omp", f.cwd(), "/dev/null", subAbs, abs)
			want.Session, want.Via, want.Transcript = ompSID, "fd", rel
			want.Title, want.Model = "Held", "claude-opus-4-6"
			want.Agents = []Sub{{Name: "1-Task", Transcript: "agent/sessions/-src-x/" + strings.TrimSuffix(file, ".jsonl") + "/1-Task.jsonl"}}
			return omp{}, f.env(".omp"), p, want
		}},
		{"pi/dir", func(f *fx) (Harness, Env, proc.Proc, Agent) {
			rel := "agent/sessions/" + legacy(f) + "/" + file
			f.write(".pi/"+rel, jsonl(`{"type":"session","id":"`+ompSID+`","timestamp":"2026-09-20T10:00:00.000Z","cwd":"`+f.cwd()+`","provider":"anthropic","modelId":"claude-sonnet-4-5"}`,
				`{"type":"model_change","provider":"anthropic","modelId":"claude-opus-4-6"}`), at(600))
			p, want := ompProc(f, "pi", f.cwd())
			want.Session, want.Via, want.Transcript, want.Model = ompSID, "dir", rel, "claude-opus-4-6"
			return pi{}, f.env(".pi"), p, want
		}},
		{"pi/no-home-scheme", func(f *fx) (Harness, Env, proc.Proc, Agent) {
			// pi never used omp's home-relative names.
			f.write(".pi/agent/sessions/-src-x/"+file, jsonl(ompHeader(ompSID, f.cwd(), "")), at(600))
			p, want := ompProc(f, "pi", f.cwd())
			want.Via = "none (no transcript for this cwd)"
			return pi{}, f.env(".pi"), p, want
		}},
	})
}

func TestOmpDirNames(t *testing.T) {
	rows := []struct {
		cwd         string
		homes, tmps []string
		want        []string
	}{
		{"/home/goblin/src/x", []string{"/home/goblin"}, []string{"/tmp"}, []string{"-src-x", "--home-goblin-src-x--"}},
		{"/home/goblin", []string{"/home/goblin"}, []string{"/tmp"}, []string{"-", "--home-goblin--"}},
		{"/tmp", []string{"/home/goblin"}, []string{"/tmp"}, []string{"-tmp", "--tmp--"}},
		{"/tmp/foo/bar", []string{"/home/goblin"}, []string{"/tmp"}, []string{"-tmp-foo-bar", "--tmp-foo-bar--"}},
		{"/srv/a:b", []string{"/home/goblin"}, []string{"/tmp"}, []string{"--srv-a-b--"}},
		{"/home/goblinx/y", []string{"/home/goblin"}, nil, []string{"--home-goblinx-y--"}},
		{"/home/g/tmp/x", []string{"/home/g"}, []string{"/home/g/tmp"}, []string{"-tmp-x", "--home-g-tmp-x--"}},
	}
	for _, r := range rows {
		if got := ompDirNames(r.cwd, r.homes, r.tmps); !slices.Equal(got, r.want) {
			t.Errorf("%q: got %q, want %q", r.cwd, got, r.want)
		}
	}
}

// An absolute resume path is built from the root as configured.
func TestOmpResumePath(t *testing.T) {
	f := newFx(t)
	env := f.env(".omp")
	f.write(".omp/agent/sessions/-src-x/a.jsonl", jsonl(ompHeader(ompSID, f.cwd(), "")), at(50))
	argv, err := omp{}.Resume(Agent{Session: ompSID, Transcript: "agent/sessions/-src-x/a.jsonl"}, env)
	if err != nil || argv[2] != filepath.Join(f.home, ".omp/agent/sessions/-src-x/a.jsonl") {
		t.Errorf("got %q %v", argv, err)
	}
}

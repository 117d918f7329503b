package harness

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/9harness/9harness/internal/proc"
	"github.com/9harness/9harness/internal/proc/proctest"
)

const (
	dsID    = "session-5b0e2c1a-7d3f-4e9a-8c21-9f0a1b2c3d4e"
	dsSubID = "session-6c1f3d2b-8e4a-4f0b-9d32-0a1b2c3d4e5f"
	dsPID   = 3080
)

func dsHeader(id, cwd, extra string) string {
	return fmt.Sprintf(`{"type":"session","version":0,"id":%q,"createdAt":%d,"cwd":%q,"delegationDepth":0,"agentPreset":"standard"%s}`, id, at(200).UnixMilli(), cwd, extra)
}

func dsAssistant(seq int, model string) string {
	return fmt.Sprintf(`{"type":"assistant/message","seq":%d,"time":1790013003000,"data":{"turn":1,"step":1,"message":{"id":"message-%d","role":"assistant","content":[{"type":"text","text":"done"}],"source":{"kind":"model","provider":"deepseek","model":%q}},"usage":{"inputTokens":12,"outputTokens":3}}}`, seq, seq, model)
}

func dsTitle(seq int, title string) string {
	return fmt.Sprintf(`{"type":"session/title","seq":%d,"time":1790013004000,"data":{"title":%q,"sourceSeqs":[1],"source":{"kind":"fallback"}}}`, seq, title)
}

const dsUser = `{"type":"user/message","seq":1,"time":1790013001000,"data":{"message":{"id":"message-1","role":"user","content":[{"type":"text","text":"run the tests"}],"source":{"kind":"human"}}}}`

func dsProc(f *fx, argv ...string) (proc.Proc, Agent) {
	if len(argv) == 0 {
		argv = []string{"node", "/usr/local/bin/dsh", "--profile", "standard"}
	}
	p := f.add(proctest.Proc{PID: dsPID, PPID: 100, Start: 15000, Argv: argv, Env: f.stdEnv(), Cwd: f.cwd()})
	return p, Agent{Harness: "dsh", PID: dsPID, PPID: 100, Start: 15000, Cwd: f.cwd(), Via: "none", Zmx: "work", TmuxSocket: "/tmp/tmux-1000/default"}
}

func TestResolveDsh(t *testing.T) {
	dir := func(f *fx) string { return "sessions/" + dshProjectKey(f.cwd()) }
	runResolve(t, []resolveCase{
		{"dsh/dir-two-frames", func(f *fx) (Harness, Env, proc.Proc, Agent) {
			rel := dir(f) + "/" + dsID + "/session.jsonl.zstd"
			f.writeBytes(".dsh/"+rel, zframes(t, jsonl(dsHeader(dsID, f.cwd(), "")),
				jsonl(dsUser, dsAssistant(2, "deepseek-v4-pro"), dsTitle(3, "Run the tests"))), at(600))
			// An older session of the same cwd.
			f.writeBytes(".dsh/"+dir(f)+"/session-old/session.jsonl.zstd", zframes(t, jsonl(dsHeader("session-old", f.cwd(), ""))), at(300))
			p, want := dsProc(f)
			want.Session, want.Via, want.Transcript = dsID, "dir", rel
			want.Title, want.Model = "Run the tests", "deepseek-v4-pro"
			return dsh{}, f.env(".dsh"), p, want
		}},
		{"dsh/torn-last-frame", func(f *fx) (Harness, Env, proc.Proc, Agent) {
			rel := dir(f) + "/" + dsID + "/session.jsonl.zstd"
			log := zframes(t, jsonl(dsHeader(dsID, f.cwd(), "")),
				jsonl(dsUser, dsAssistant(2, "deepseek-v4-pro"), dsTitle(3, "Run the tests")),
				jsonl(dsTitle(4, "Renamed"), dsAssistant(5, "deepseek-v4-flash")))
			third := zframes(t, jsonl(dsTitle(6, "never landed"), dsAssistant(7, "torn-model")))
			f.writeBytes(".dsh/"+rel, append(log, third[:len(third)-9]...), at(600))
			p, want := dsProc(f)
			want.Session, want.Via, want.Transcript = dsID, "dir", rel
			want.Title, want.Model = "Renamed", "deepseek-v4-flash"
			return dsh{}, f.env(".dsh"), p, want
		}},
		{"dsh/subagent", func(f *fx) (Harness, Env, proc.Proc, Agent) {
			rel := dir(f) + "/" + dsID + "/session.jsonl.zstd"
			f.writeBytes(".dsh/"+rel, zframes(t, jsonl(dsHeader(dsID, f.cwd(), "")), jsonl(dsAssistant(2, "deepseek-v4-pro"))), at(600))
			// The sub-agent's log is newer, in the same project dir.
			subRel := dir(f) + "/" + dsSubID + "/session.jsonl.zstd"
			f.writeBytes(".dsh/"+subRel, zframes(t, jsonl(dsHeader(dsSubID, f.cwd(), `,"parentSession":"`+dsID+`","origin":"subagent","delegationDepth":1`)),
				jsonl(dsAssistant(1, "deepseek-v4-flash"))), at(700))
			p, want := dsProc(f)
			want.Session, want.Via, want.Transcript, want.Model = dsID, "dir", rel, "deepseek-v4-pro"
			want.Agents = []Sub{{Name: dsSubID, Model: "deepseek-v4-flash", Transcript: subRel}}
			return dsh{}, f.env(".dsh"), p, want
		}},
		{"dsh/raw-mode", func(f *fx) (Harness, Env, proc.Proc, Agent) {
			rel := dir(f) + "/" + dsID + "/session.jsonl"
			f.write(".dsh/"+rel, jsonl(dsHeader(dsID, f.cwd(), ""), dsTitle(1, "Raw")), at(600))
			p, want := dsProc(f)
			want.Session, want.Via, want.Transcript, want.Title = dsID, "dir", rel, "Raw"
			return dsh{}, f.env(".dsh"), p, want
		}},
		{"dsh/fd", func(f *fx) (Harness, Env, proc.Proc, Agent) {
			// Should a dsh ever hold its log, the held one wins over a newer
			// one in the project dir.
			rel := dir(f) + "/" + dsID + "/session.jsonl.zstd"
			abs := f.writeBytes(".dsh/"+rel, zframes(t, jsonl(dsHeader(dsID, f.cwd(), "")), jsonl(dsTitle(1, "Held"))), at(600))
			f.writeBytes(".dsh/"+dir(f)+"/session-newer/session.jsonl.zstd", zframes(t, jsonl(dsHeader("session-newer", f.cwd(), ""))), at(700))
			p, want := dsProc(f)
			proctest.Add(f.procDir, proctest.Proc{PID: dsPID, PPID: 100, Start: 15000, Argv: p.Argv, Env: f.stdEnv(), Cwd: f.cwd(), FDs: []string{abs}})
			want.Session, want.Via, want.Transcript, want.Title = dsID, "fd", rel, "Held"
			return dsh{}, f.env(".dsh"), p, want
		}},
		{"dsh/versioned-log-name", func(f *fx) (Harness, Env, proc.Proc, Agent) {
			rel := dir(f) + "/" + dsID + "/session.v4.jsonl.zstd"
			f.writeBytes(".dsh/"+rel, zframes(t, jsonl(dsHeader(dsID, f.cwd(), "")), jsonl(dsAssistant(1, "deepseek-v4-pro"))), at(600))
			p, want := dsProc(f)
			want.Session, want.Via, want.Transcript, want.Model = dsID, "dir", rel, "deepseek-v4-pro"
			return dsh{}, f.env(".dsh"), p, want
		}},
		{"dsh/cwd-mismatch", func(f *fx) (Harness, Env, proc.Proc, Agent) {
			f.writeBytes(".dsh/"+dir(f)+"/"+dsID+"/session.jsonl.zstd", zframes(t, jsonl(dsHeader(dsID, "/elsewhere", ""))), at(600))
			p, want := dsProc(f)
			want.Via = "none (no session log in the project dir names this cwd)"
			return dsh{}, f.env(".dsh"), p, want
		}},
		{"dsh/predates-process", func(f *fx) (Harness, Env, proc.Proc, Agent) {
			f.writeBytes(".dsh/"+dir(f)+"/"+dsID+"/session.jsonl.zstd", zframes(t, jsonl(dsHeader(dsID, f.cwd(), ""))), at(100))
			p, want := dsProc(f)
			want.Via = "none (no session log for this cwd written since the process started)"
			return dsh{}, f.env(".dsh"), p, want
		}},
		{"dsh/no-session", func(f *fx) (Harness, Env, proc.Proc, Agent) {
			p, want := dsProc(f)
			want.Via = "none (no session log for this cwd)"
			return dsh{}, f.env(".dsh"), p, want
		}},
	})
}

// A log much bigger than the windows, of many small frames: the header and
// the early title come from the head window, the model from a tail window
// cut mid-frame.
func TestDshBigLog(t *testing.T) {
	f := newFx(t)
	rng := rand.New(rand.NewPCG(1, 2))
	parts := []string{jsonl(dsHeader(dsID, f.cwd(), "")), jsonl(dsUser, dsTitle(2, "Early title"))}
	noise := make([]byte, 3000)
	size := 0
	for i := 0; size < 3<<20; i++ {
		for j := range noise {
			noise[j] = byte(rng.Uint32())
		}
		p := jsonl(fmt.Sprintf(`{"type":"tool/result","seq":%d,"data":{"out":%q}}`, i+3, base64.StdEncoding.EncodeToString(noise)))
		parts = append(parts, p)
		size += len(p)
	}
	parts = append(parts, jsonl(dsAssistant(99999, "deepseek-v4-late")))
	log := zframes(t, parts...)
	if len(log) < zHeadWindow+zTailWindow {
		t.Fatalf("log too small: %d", len(log))
	}
	rel := "sessions/" + dshProjectKey(f.cwd()) + "/" + dsID + "/session.jsonl.zstd"
	f.writeBytes(".dsh/"+rel, log, at(600))
	title, model := dshFacts(nil, f.env(".dsh").Root, rel, true)
	if title != "Early title" || model != "deepseek-v4-late" {
		t.Errorf("big log: got %q %q", title, model)
	}
}

func TestDshProjectKey(t *testing.T) {
	for in, want := range map[string]string{
		"/home/goblin/src/x":           "--home-goblin-src-x--",
		"/home//goblin/":               "--home-goblin---",
		`C:\Users\g`:                   "--C-Users-g--",
		"/a b/~c":                      "--a~0020b-~007Ec--",
		"/é":                           "--~00E9--",
		"/\U0001F600":                  "--~D83D~DE00--",
		"/":                            "--root--",
		"":                             "_no-cwd",
		"/" + strings.Repeat("a", 300): "--" + strings.Repeat("a", 251) + "--",
	} {
		if got := dshProjectKey(in); got != want {
			t.Errorf("dshProjectKey(%q): got %q, want %q", in, got, want)
		}
	}
}

// unzstd keeps what came before a torn or corrupt frame, and unzstdTail
// finds a frame start inside a window cut mid-frame.
func TestZstd(t *testing.T) {
	a, b := jsonl(`{"n":1}`), jsonl(`{"n":2}`)
	two := zframes(t, a, b)
	if got := string(unzstd(two, 1<<20)); got != a+b {
		t.Errorf("two frames: got %q", got)
	}
	if got := string(unzstd(append(bytes.Clone(two), 0x28, 0xb5, 0x2f, 0xfd, 1, 2), 1<<20)); got != a+b {
		t.Errorf("torn third frame: got %q", got)
	}
	if got := string(unzstd(two, 3)); got != a[:3] {
		t.Errorf("limit: got %q", got)
	}
	first := zframes(t, a)
	if got := string(unzstdTail(two[5:], 1<<20)); got != b {
		t.Errorf("tail cut inside frame 1: got %q", got)
	}
	if got := string(unzstdTail(two[len(first):], 1<<20)); got != b {
		t.Errorf("tail at frame 2: got %q", got)
	}
	if got := unzstdTail([]byte("no frames here"), 1<<20); got != nil {
		t.Errorf("no frame: got %q", got)
	}
}

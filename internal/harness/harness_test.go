package harness

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/9harness/9harness/internal/errs"
	"github.com/9harness/9harness/internal/proc"
	"github.com/9harness/9harness/internal/proc/proctest"
	"github.com/9harness/9harness/internal/saferoot"
)

// ---- fixtures ----

var boot = time.Unix(proctest.Boot, 0)

// at is a wall time sec seconds after the fixture table's boot.
func at(sec float64) time.Time { return boot.Add(time.Duration(sec * float64(time.Second))) }

// iso is at(sec) as a transcript timestamp.
func iso(sec float64) string { return at(sec).UTC().Format("2006-01-02T15:04:05.000Z") }

// fx is one fake machine: a home with harness roots and a proc table, all
// under t.TempDir().
type fx struct {
	t       *testing.T
	home    string
	tmp     string
	procDir string
}

func newFx(t *testing.T) *fx {
	t.Helper()
	base := t.TempDir()
	f := &fx{t: t, home: base + "/home/goblin", tmp: base + "/tmp", procDir: base + "/proc"}
	for _, d := range []string{f.cwd(), f.tmp} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := proctest.Write(f.procDir); err != nil {
		t.Fatal(err)
	}
	return f
}

// cwd is the project directory the agents run in.
func (f *fx) cwd() string { return f.home + "/src/x" }

// write puts content at home/rel, modified at mtime, and returns its path.
func (f *fx) write(rel, content string, mtime time.Time) string {
	return f.writeBytes(rel, []byte(content), mtime)
}

func (f *fx) writeBytes(rel string, content []byte, mtime time.Time) string {
	f.t.Helper()
	p := filepath.Join(f.home, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		f.t.Fatal(err)
	}
	if err := os.WriteFile(p, content, 0o600); err != nil {
		f.t.Fatal(err)
	}
	if err := os.Chtimes(p, mtime, mtime); err != nil {
		f.t.Fatal(err)
	}
	return p
}

// add puts a process in the table and returns it as the table reads it.
func (f *fx) add(p proctest.Proc) proc.Proc {
	f.t.Helper()
	if p.UID == 0 {
		p.UID = 1000
	}
	if err := proctest.Add(f.procDir, p); err != nil {
		f.t.Fatal(err)
	}
	got, err := proc.New(f.procDir).Stat(p.PID)
	if err != nil {
		f.t.Fatal(err)
	}
	return got
}

// env is the Env for the harness rooted at home/root.
func (f *fx) env(root string) Env {
	return Env{Procs: proc.New(f.procDir), Root: saferoot.New(filepath.Join(f.home, root)), Home: f.home, TmpDir: f.tmp, PIDDomain: "linux::pid:[4026531836]"}
}

// stdEnv is the environment of an agent under zmx and tmux.
func (f *fx) stdEnv(extra ...string) []string {
	return append([]string{"HOME=" + f.home, "ZMX_SESSION=work", "TMUX=/tmp/tmux-1000/default,4242,0", "TMUX_PANE=%3"}, extra...)
}

// lines joins JSONL lines.
func jsonl(ls ...string) string { return strings.Join(ls, "\n") + "\n" }

// zframes compresses each part as its own zstd frame and concatenates them,
// the way dsh and Codex write multi-frame logs.
func zframes(t *testing.T, parts ...string) []byte {
	t.Helper()
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderCRC(true))
	if err != nil {
		t.Fatal(err)
	}
	defer enc.Close()
	var out []byte
	for _, p := range parts {
		out = enc.EncodeAll([]byte(p), out)
	}
	return out
}

// agentDiff reports the fields where got and want differ.
func agentDiff(got, want Agent) string {
	var b strings.Builder
	gv, wv := reflect.ValueOf(got), reflect.ValueOf(want)
	for i := 0; i < gv.NumField(); i++ {
		switch gv.Type().Field(i).Name {
		case "State", "Waiting", "Since", "StateVia", "Tokens":
			continue // the turn state and tokens have their own tables (state_test.go)
		}
		if g, w := gv.Field(i).Interface(), wv.Field(i).Interface(); !reflect.DeepEqual(g, w) {
			fmt.Fprintf(&b, "\n\t%s: got %#v, want %#v", gv.Type().Field(i).Name, g, w)
		}
	}
	return b.String()
}

// resolveCase is one row of the resolution matrix: a fresh fixture, the
// process to resolve, and the whole Agent expected.
type resolveCase struct {
	name  string
	setup func(f *fx) (Harness, Env, proc.Proc, Agent)
}

func runResolve(t *testing.T, cases []resolveCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newFx(t)
			h, env, p, want := c.setup(f)
			// The environment is known exactly when the table can read
			// it (every fixture row writes one unless it tests its loss).
			if env.Procs != nil {
				_, err := env.Procs.Environ(p.PID)
				want.EnvKnown = err == nil
			}
			if want.Argv == nil {
				want.Argv = normArgv(p.Argv)
			}
			got := h.Resolve(env, p)
			if d := agentDiff(got, want); d != "" {
				t.Errorf("%s: Resolve differs:%s", c.name, d)
			}
		})
	}
}

// ---- the scan ----

func TestScan(t *testing.T) {
	f := newFx(t)
	claudeVer := f.home + "/.local/share/claude/versions/2.1.201"
	codexDir := "/usr/lib/node_modules/@openai/codex/bin/"
	procs := []proctest.Proc{
		{PID: 1, UID: 0, Argv: []string{"/sbin/init"}},
		{PID: 2, UID: 0, Comm: "kthreadd"},           // kernel thread: no argv
		{PID: 100, PPID: 1, Argv: []string{"-bash"}}, // the user's shell
		{PID: 101, PPID: 100, Comm: "2.1.212", Argv: []string{"claude", "--dangerously-skip-permissions"}, Threads: []int{1011, 1012}},
		{PID: 102, PPID: 101, Argv: []string{claudeVer, "--bg-spare", "--fd", "3"}},         // background worker
		{PID: 103, PPID: 100, Argv: []string{"claude"}},                                     // npm install after process.title
		{PID: 104, PPID: 100, Argv: []string{"claude", "-p", "summarize"}},                  // a print run: a session
		{PID: 105, PPID: 101, Argv: []string{"claude", "--dangerously-skip-permissions"}},   // 101's fork before its exec
		{PID: 110, PPID: 100, Argv: []string{"node", codexDir + "codex.js", "resume", "x"}}, // npm wrapper
		{PID: 111, PPID: 110, Argv: []string{codexDir + "codex-x86_64-unknown-linux-musl", "resume", "x"}},
		{PID: 112, PPID: 100, Argv: []string{"codex", "app-server"}},
		{PID: 113, PPID: 111, Argv: []string{codexDir + "codex-x86_64-unknown-linux-musl", "--codex-run-as-apply-patch", "x"}},
		{PID: 120, PPID: 100, Argv: []string{"omp"}},
		{PID: 121, PPID: 120, Argv: []string{"bun", f.home + "/.bun/bin/omp", "__omp_worker_daemon_broker"}},
		{PID: 122, PPID: 100, Argv: []string{"bun", f.home + "/.bun/install/global/node_modules/@oh-my-pi/pi-coding-agent/src/cli.ts"}},
		{PID: 123, PPID: 100, Comm: "omp", Argv: []string{"bun", "/opt/x/main.js"}},
		{PID: 130, PPID: 100, Argv: []string{"node", "/usr/lib/node_modules/@earendil-works/pi-coding-agent/dist/cli.js"}},
		{PID: 140, PPID: 100, Argv: []string{f.home + "/.hermes/venv/bin/python3", f.home + "/.local/bin/hermes", "--tui"}},
		{PID: 141, PPID: 1, Argv: []string{f.home + "/.hermes/venv/bin/python", "-m", "hermes_cli.main", "gateway", "run", "--replace"}},
		{PID: 142, PPID: 100, Argv: []string{"python3", "-m", "http.server"}},
		{PID: 150, PPID: 100, Argv: []string{"node", "/usr/local/bin/dsh", "--profile", "standard"}},
		{PID: 151, PPID: 1, Argv: []string{"node", "/usr/local/bin/dsh", "web"}},
		{PID: 152, PPID: 100, Argv: []string{"node", "/usr/local/bin/dsh", "--profile", "headless", "run the tests"}},
		{PID: 160, PPID: 1, UID: 1001, Argv: []string{"claude"}},    // another user's
		{PID: 170, PPID: 100, Argv: []string{"claude", "--resume"}}, // the daemon's own ancestry
		{PID: 180, PPID: 100, Comm: "claude"},                       // a zombie: no argv
		{PID: 190, PPID: 100, Argv: []string{"vim", "claude.md"}},
	}
	for _, p := range procs {
		if p.UID == 0 && p.PID > 2 {
			p.UID = 1000
		}
		if err := proctest.Add(f.procDir, p); err != nil {
			t.Fatal(err)
		}
	}
	found, err := Scan(proc.New(f.procDir), 1000, map[int]bool{170: true, 100: true})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, fd := range found {
		got = append(got, fmt.Sprintf("%s/%d", fd.Harness, fd.Proc.PID))
		if fd.Proc.PPID == 0 || len(fd.Proc.Argv) == 0 || fd.Proc.UID != 1000 {
			t.Errorf("%s/%d: the found process is not stat'ed: %+v", fd.Harness, fd.Proc.PID, fd.Proc)
		}
	}
	// 102 is a background worker: Scan finds it by its shape, and the
	// listing keeps it only if its registry record confirms it (Confirmed).
	want := []string{"claude/101", "claude/102", "claude/103", "claude/104", "codex/111", "omp/120", "omp/122", "omp/123", "pi/130", "hermes/140", "dsh/150"}
	if !slices.Equal(got, want) {
		t.Errorf("Scan: got %v, want %v", got, want)
	}
	if _, err := Scan(proc.New(f.procDir+"/absent"), 1000, nil); err == nil {
		t.Error("Scan of a missing table: no error")
	}
}

// TestScanOwners: where the table's directory owners are the kernel's
// (procfs, or a fixture that says so), a process whose directory another
// user owns is passed over before its cmdline is read, even if its status
// (a fixture's, here, that no kernel would write) names the daemon's uid;
// one that root owns (a process that is not dumpable) is read and judged
// by its status, as before.
func TestScanOwners(t *testing.T) {
	if os.Getuid() != 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("needs root, to give fixture directories their owners")
		}
		t.Skip("needs root, to give fixture directories their owners")
	}
	f := newFx(t)
	for _, p := range []proctest.Proc{
		{PID: 10, PPID: 1, UID: 1000, Argv: []string{"claude"}}, // owned by 1000
		{PID: 11, PPID: 1, UID: 1000, Argv: []string{"claude"}}, // owned by 1001
		{PID: 12, PPID: 1, UID: 1000, Argv: []string{"claude"}}, // owned by root
		{PID: 13, PPID: 1, UID: 1001, Argv: []string{"claude"}}, // owned by root, another's
	} {
		if err := proctest.Add(f.procDir, p); err != nil {
			t.Fatal(err)
		}
	}
	for pid, owner := range map[int]int{10: 1000, 11: 1001, 12: 0, 13: 0} {
		if err := os.Chown(filepath.Join(f.procDir, strconv.Itoa(pid)), owner, owner); err != nil {
			t.Fatal(err)
		}
	}
	scan := func(owners bool) []int {
		tab := proc.New(f.procDir)
		tab.SetOwners(owners)
		found, err := Scan(tab, 1000, nil)
		if err != nil {
			t.Fatal(err)
		}
		var pids []int
		for _, fd := range found {
			pids = append(pids, fd.Proc.PID)
		}
		return pids
	}
	if got, want := scan(true), []int{10, 12}; !slices.Equal(got, want) {
		t.Errorf("owners known: got %v, want %v", got, want)
	}
	if got, want := scan(false), []int{10, 11, 12}; !slices.Equal(got, want) {
		t.Errorf("a fixture's owners: got %v, want %v (by status alone)", got, want)
	}
}

// TestScanSplit: a table big enough to be read by several goroutines gives
// the same sessions, in pid order, whatever the split; wrappers whose child
// falls in another goroutine's run are still recognised by their child's
// rule (the parent's argv is looked up across runs).
func TestScanSplit(t *testing.T) {
	f := newFx(t)
	codexDir := "/usr/lib/node_modules/@openai/codex/bin/"
	var want []string
	for pid := 3; pid < 1500; pid++ {
		p := proctest.Proc{PID: pid, PPID: 1, UID: 1000, Argv: []string{"sleep", "60"}}
		switch pid % 7 {
		case 0:
			p.Argv = []string{"claude"}
			want = append(want, fmt.Sprintf("claude/%d", pid))
		case 1:
			p.Argv = []string{"claude", "mcp", "serve"} // never a session
		case 2:
			// A codex native child whose node wrapper is far away, in
			// another run: the wrapper is the helper, the child the session.
			p.PPID = 1500 + pid
			p.Argv = []string{codexDir + "codex-x86_64-unknown-linux-musl", "resume", "x"}
			want = append(want, fmt.Sprintf("codex/%d", pid))
		case 3:
			p.UID = 1001 // another user's
			p.Argv = []string{"claude"}
		case 4:
			// A native codex spawned by another native codex (a case-2
			// process 698 pids later, in another run): a helper, which
			// only the parent's argv can tell.
			if pid+698 < 1500 {
				p.PPID = pid + 698
				p.Argv = []string{codexDir + "codex-x86_64-unknown-linux-musl", "resume", "y"}
			}
		}
		if err := proctest.Add(f.procDir, p); err != nil {
			t.Fatal(err)
		}
		if pid%7 == 2 {
			w := proctest.Proc{PID: 1500 + pid, PPID: 1, UID: 1000, Argv: []string{"node", codexDir + "codex.js", "resume", "x"}}
			if err := proctest.Add(f.procDir, w); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, procs := range []int{1, 2, 3, 8} {
		prev := runtime.GOMAXPROCS(procs)
		found, err := Scan(proc.New(f.procDir), 1000, nil)
		runtime.GOMAXPROCS(prev)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, fd := range found {
			got = append(got, fmt.Sprintf("%s/%d", fd.Harness, fd.Proc.PID))
		}
		if !slices.Equal(got, want) {
			t.Errorf("GOMAXPROCS=%d: %d sessions, want %d; first differences: %v", procs, len(got), len(want), firstDiff(got, want))
		}
	}
}

func firstDiff(a, b []string) string {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return fmt.Sprintf("at %d: %s vs %s", i, a[i], b[i])
		}
	}
	return fmt.Sprintf("lengths %d vs %d", len(a), len(b))
}

// ---- classification ----

func TestClassify(t *testing.T) {
	type row struct {
		name    string
		argv    []string
		comm    string
		parent  []string
		harness string // "" for no harness
		kind    Kind
	}
	vers := "/home/g/.local/share/claude/versions/"
	cx := "/usr/lib/node_modules/@openai/codex/"
	rows := []row{
		{"claude/native", []string{"claude", "--dangerously-skip-permissions"}, "2.1.212", nil, "claude", Session},
		{"claude/full-path", []string{"/home/g/.local/bin/claude"}, "", nil, "claude", Session},
		{"claude/resume-picker", []string{"claude", "--resume"}, "", nil, "claude", Session},
		{"claude/prompt-word", []string{"claude", "fix the mcp server"}, "", nil, "claude", Session},
		{"claude/npm-title", []string{"claude"}, "node", nil, "claude", Session},
		{"claude/npm-title-spaces", []string{"claude --resume 776cd19e-24b2-42a4-b1de-792f056ae0eb"}, "node", nil, "claude", Session},
		{"claude/npm-untitled", []string{"node", "/usr/lib/node_modules/@anthropic-ai/claude-code/cli.js", "--continue"}, "", nil, "claude", Session},
		// A background worker is a session (listed once its registry
		// record confirms a job claimed it); its pty host, the supervisor
		// and other --bg-* processes are helpers.
		{"claude/bg-spare", []string{vers + "2.1.201", "--bg-spare"}, "2.1.201", nil, "claude", Session},
		{"claude/bg-pty-host", []string{vers + "2.1.201", "--bg-pty-host", "--sock", "x"}, "2.1.201", nil, "claude", Helper},
		{"claude/bg-flag-on-claude", []string{"claude", "--bg-spare"}, "", nil, "claude", Session},
		// 2.1.332 titles argv[0] alone, and keeps the rest of argv.
		{"claude/bg-spare-2.1.332", []string{"claude bg-spare", "--bg-spare", "/tmp/cc-daemon-0/4e/spare/b3.claim.sock"}, "", nil, "claude", Session},
		{"claude/bg-pty-host-2.1.332", []string{"claude bg-pty-host", "--bg-pty-host", "/tmp/cc-daemon-0/4e/spare/b3.pty.sock", "200", "50", "--", "/x/claude.exe", "--bg-spare", "/tmp/cc-daemon-0/4e/spare/b3.claim.sock"}, "", nil, "claude", Helper},
		{"claude/bg-other", []string{"claude", "--bg-gateway"}, "", nil, "claude", Helper},
		{"claude/daemon-2.1.332", []string{"/x/claude.exe", "daemon", "run", "--origin", "transient"}, "", nil, "claude", Helper},
		{"claude/versioned-daemon", []string{vers + "2.1.201", "daemon", "run"}, "", nil, "claude", Helper},
		{"claude/versioned-path", []string{vers + "2.1.201"}, "", nil, "claude", Session},
		{"claude/versioned-respawn", []string{vers + "2.1.332", "--resume", "/home/g/.claude/projects/-x/3d289299-6937-4726-8e41-b2da2cdacfa6.jsonl"}, "", nil, "claude", Session},
		{"claude/print", []string{"claude", "-p", "hello"}, "", nil, "claude", Session},
		{"claude/print-sdk-string", []string{"claude", "--print", "--output-format", "stream-json", "--verbose", "fix the flaky test"}, "", nil, "claude", Helper},
		{"claude/print-long", []string{"claude", "--print", "--output-format", "json", "--max-turns", "30", "fix the flaky test"}, "", nil, "claude", Session},
		{"claude/print-subcommand", []string{"claude", "-p", "mcp", "list"}, "", nil, "claude", Helper},
		// The Agent SDK's engine, which its program drives over stdin.
		{"claude/print-sdk", []string{"claude", "--output-format", "stream-json", "--verbose", "--input-format", "stream-json", "--print"}, "", nil, "claude", Helper},
		{"claude/print-sdk-eq", []string{"node", "/x/node_modules/@anthropic-ai/claude-code/cli.js", "-p", "--input-format=stream-json", "--output-format=stream-json"}, "", nil, "claude", Helper},
		{"claude/print-text-input", []string{"claude", "-p", "--input-format", "text", "summarize"}, "", nil, "claude", Session},
		{"claude/mcp-serve", []string{"claude", "mcp", "serve"}, "", nil, "claude", Helper},
		{"claude/model-value-not-subcommand", []string{"claude", "--model", "update"}, "", nil, "claude", Session},
		{"claude/exe", []string{"claude.exe"}, "", nil, "claude", Session},
		{"codex/native", []string{"codex"}, "", []string{"-bash"}, "codex", Session},
		{"codex/native-resume", []string{"/usr/local/bin/codex", "resume", "019e763f-ff0c-7683-a4e9-a17e2bf964fb"}, "", nil, "codex", Session},
		{"codex/exec", []string{"codex", "exec", "fix it"}, "", nil, "codex", Session},
		{"codex/wrapper", []string{"node", cx + "bin/codex.js"}, "", nil, "codex", Helper},
		{"codex/wrapper-bin-link", []string{"node", "/usr/local/bin/codex", "resume", "x"}, "", nil, "codex", Helper},
		{"codex/wrapped-child-musl", []string{cx + "bin/codex-x86_64-unknown-linux-musl"}, "", []string{"node", cx + "bin/codex.js"}, "codex", Session},
		{"codex/wrapped-child-vendor", []string{cx + "vendor/x86_64-unknown-linux-musl/codex/codex"}, "", []string{"node", cx + "bin/codex.js"}, "codex", Session},
		{"codex/app-server", []string{"codex", "app-server"}, "", nil, "codex", Helper},
		{"codex/mcp-server", []string{"codex", "-c", "model=x", "mcp-server"}, "", nil, "codex", Helper},
		{"codex/exec-server", []string{"codex", "exec-server"}, "", nil, "codex", Helper},
		{"codex/mcp", []string{"codex", "mcp", "list"}, "", nil, "codex", Helper},
		{"codex/child-of-codex", []string{"codex", "--codex-run-as-apply-patch", "x"}, "", []string{"codex"}, "codex", Helper},
		{"codex/config-value-not-subcommand", []string{"codex", "-m", "mcp"}, "", nil, "codex", Session},
		{"codex/sandbox-arg0", []string{"codex-linux-sandbox", "--", "ls"}, "", []string{"codex"}, "", None},
		{"codex/not-a-triple", []string{"codex-acp"}, "", nil, "", None},
		{"omp/binary", []string{"omp", "--resume"}, "", nil, "omp", Session},
		{"omp/bun-bin", []string{"bun", "/home/g/.bun/bin/omp"}, "", nil, "omp", Session},
		{"omp/bun-cli", []string{"bun", "run", "/x/node_modules/@oh-my-pi/pi-coding-agent/src/cli.ts", "hi"}, "", nil, "omp", Session},
		{"omp/bun-comm", []string{"bun", "/x/main.js"}, "omp", nil, "omp", Session},
		{"omp/worker-broker", []string{"bun", "/home/g/.bun/bin/omp", "__omp_worker_daemon_broker"}, "", nil, "omp", Helper},
		{"omp/print", []string{"omp", "-p", "hello"}, "", nil, "omp", Helper},
		{"omp/rpc", []string{"omp", "--mode", "rpc"}, "", nil, "omp", Helper},
		{"omp/daemon-word", []string{"omp", "daemon"}, "", nil, "omp", Helper},
		{"omp/bun-other", []string{"bun", "/x/server.ts"}, "bun", nil, "", None},
		{"pi/binary", []string{"pi"}, "", nil, "pi", Session},
		{"pi/node-cli", []string{"node", "/usr/lib/node_modules/@mariozechner/pi-coding-agent/dist/cli.js"}, "", nil, "pi", Session},
		{"pi/node-bin", []string{"node", "/usr/local/bin/pi", "--session", "/x.jsonl"}, "", nil, "pi", Session},
		{"pi/rpc", []string{"pi", "--mode", "rpc"}, "", nil, "pi", Helper},
		{"hermes/bare", []string{"hermes"}, "", nil, "hermes", Session},
		{"hermes/chat", []string{"hermes", "chat", "-q", "hello"}, "", nil, "hermes", Session},
		{"hermes/console-script", []string{"/v/bin/python3", "/home/g/.local/bin/hermes", "--tui"}, "", nil, "hermes", Session},
		{"hermes/module", []string{"/v/bin/python", "-m", "hermes_cli.main", "--resume", "20260920_100000_a1b2c3"}, "", nil, "hermes", Session},
		{"hermes/continue-name", []string{"hermes", "-c", "gateway"}, "", nil, "hermes", Session},
		{"hermes/gateway", []string{"/v/bin/python", "-m", "hermes_cli.main", "gateway", "run", "--replace"}, "", nil, "hermes", Helper},
		{"hermes/dashboard", []string{"hermes", "dashboard", "--port", "9119"}, "", nil, "hermes", Helper},
		{"hermes/serve", []string{"/v/bin/python3", "/v/bin/hermes", "serve"}, "", nil, "hermes", Helper},
		{"hermes/acp", []string{"hermes", "acp"}, "", nil, "hermes", Helper},
		{"hermes/oneshot", []string{"hermes", "-z", "hello"}, "", nil, "hermes", Helper},
		{"hermes/other-module", []string{"python3", "-m", "http.server"}, "", nil, "", None},
		{"hermes/other-script", []string{"python3", "/x/manage.py", "runserver"}, "", nil, "", None},
		{"dsh/node", []string{"node", "/usr/local/bin/dsh", "--profile", "standard"}, "", nil, "dsh", Session},
		{"dsh/node-bin-js", []string{"node", "/usr/lib/node_modules/@deepseek-ai/dsh/lib/bin.js"}, "", nil, "dsh", Session},
		{"dsh/bare", []string{"dsh"}, "", nil, "dsh", Session},
		{"dsh/web", []string{"node", "/usr/local/bin/dsh", "web"}, "", nil, "dsh", Helper},
		{"dsh/plugin", []string{"node", "/usr/local/bin/dsh", "plugin", "--profile", "web", "add", "x"}, "", nil, "dsh", Helper},
		{"dsh/headless", []string{"node", "/usr/local/bin/dsh", "--profile", "headless", "job"}, "", nil, "dsh", Helper},
		{"dsh/headless-eq", []string{"dsh", "--profile=headless"}, "", nil, "dsh", Helper},
		{"none/empty-argv", nil, "claude", nil, "", None},
		{"none/node-other", []string{"node", "/srv/app.js"}, "", nil, "", None},
		{"none/vim", []string{"vim", "claude"}, "", nil, "", None},
	}
	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			p := proc.Proc{PID: 10, PPID: 9, Comm: r.comm, Argv: r.argv}
			h, k := classify(p, proc.Proc{PID: 9, Argv: r.parent})
			name := ""
			if h != nil {
				name = h.Name()
			}
			if name != r.harness || k != r.kind {
				t.Errorf("%q: got %s %v, want %s %v", r.argv, name, k, r.harness, r.kind)
			}
			// Exactly one harness claims it.
			claims := 0
			for _, h := range All() {
				if h.Classify(p, proc.Proc{PID: 9, Argv: r.parent}) != None {
					claims++
				}
			}
			if (r.kind == None && claims != 0) || (r.kind != None && claims != 1) {
				t.Errorf("%q: claimed by %d harnesses", r.argv, claims)
			}
		})
	}
}

func TestKindString(t *testing.T) {
	for k, want := range map[Kind]string{None: "none", Session: "session", Helper: "helper", Kind(9): "kind(?)"} {
		if k.String() != want {
			t.Errorf("%d: got %q, want %q", int(k), k.String(), want)
		}
	}
}

func TestAllByName(t *testing.T) {
	var names []string
	for _, h := range All() {
		names = append(names, h.Name())
		if ByName(h.Name()) == nil {
			t.Errorf("ByName(%q) = nil", h.Name())
		}
	}
	if want := []string{"claude", "codex", "omp", "pi", "hermes", "dsh", "gemini"}; !slices.Contains(names, "gemini") || !slices.Equal(names[:6], want[:6]) {
		t.Errorf("All: got %v, want %v first", names, want)
	}
	if ByName("aider") != nil {
		t.Error("ByName(aider) != nil")
	}
	All()[0] = nil
	if All()[0] == nil {
		t.Error("All returns the package's own slice")
	}
}

// ---- resume ----

func TestResume(t *testing.T) {
	root := saferoot.New("/home/goblin/.omp")
	piRoot := saferoot.New("/home/goblin/.pi")
	const sid = "1f9a74f7-3c2e-4d51-9a0b-6f2d8c1e7a55"
	type row struct {
		name    string
		h       Harness
		a       Agent
		env     Env
		want    []string
		wantErr string
	}
	rows := []row{
		{"claude/resume", claude{}, Agent{Session: sid, Transcript: "projects/-x/" + sid + ".jsonl"}, Env{}, []string{"claude", "--resume", sid}, ""},
		{"claude/never-prompted", claude{}, Agent{Session: sid, Via: "registry"}, Env{}, nil, NothingYet},
		{"claude/unresolved", claude{}, Agent{Via: "none"}, Env{}, nil, "session unresolved"},
		{"claude/option-shaped", claude{}, Agent{Session: "--dangerously-skip-permissions"}, Env{}, nil, "session unresolved"},
		{"codex/resume", codex{}, Agent{Session: "019e763f-ff0c-7683-a4e9-a17e2bf964fb", Transcript: "sessions/2026/12/01/rollout-2026-12-01T13-13-02-019e763f-ff0c-7683-a4e9-a17e2bf964fb.jsonl"}, Env{}, []string{"codex", "resume", "019e763f-ff0c-7683-a4e9-a17e2bf964fb"}, ""},
		{"codex/no-rollout", codex{}, Agent{Session: "019e763f-ff0c-7683-a4e9-a17e2bf964fb"}, Env{}, nil, NothingYet},
		{"codex/unresolved", codex{}, Agent{}, Env{}, nil, "session unresolved"},
		{"omp/gone", omp{}, Agent{Session: "x", Transcript: "agent/sessions/-src-x/a_b.jsonl"}, Env{Root: root}, nil, NothingYet},
		{"omp/no-transcript", omp{}, Agent{Session: "x"}, Env{Root: root}, nil, "session unresolved"},
		{"omp/no-root", omp{}, Agent{Transcript: "agent/sessions/-/a.jsonl"}, Env{}, nil, "session unresolved"},
		{"omp/escaping-transcript", omp{}, Agent{Transcript: "../x.jsonl"}, Env{Root: root}, nil, "session unresolved"},
		{"pi/gone", pi{}, Agent{Transcript: "agent/sessions/--x--/t_u.jsonl"}, Env{Root: piRoot}, nil, NothingYet},
		{"pi/no-session-file", pi{}, Agent{Via: "none (no transcript for this cwd)"}, Env{Root: piRoot}, nil, NothingYet},
		{"pi/ambiguous", pi{}, Agent{Via: "ambiguous (several transcripts for this cwd, none written since the process started)"}, Env{Root: piRoot}, nil, "session unresolved (via ambiguous"},
		{"hermes/resume", hermes{}, Agent{Session: "20260920_100000_a1b2c3"}, Env{}, []string{"hermes", "--resume", "20260920_100000_a1b2c3"}, ""},
		{"hermes/option-shaped", hermes{}, Agent{Session: "-c"}, Env{}, nil, "session unresolved"},
		{"dsh/refused", dsh{}, Agent{Session: "session-5b0e2c1a-7d3f-4e9a-8c21-9f0a1b2c3d4e", Transcript: "sessions/--x--/s/session.jsonl.zstd"}, Env{}, nil, "dsh's shipped profiles take no resume flag"},
	}
	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			got, err := r.h.Resume(r.a, r.env)
			if r.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), r.wantErr) || !errs.Is(err, errs.Permission) {
					t.Errorf("%s: got %q, %v; want a Permission error saying %q", r.name, got, err, r.wantErr)
				}
				return
			}
			if err != nil || !slices.Equal(got, r.want) {
				t.Errorf("%s: got %q, %v; want %q", r.name, got, err, r.want)
			}
		})
	}
}

// ---- the live table: only our own process ----

func TestLiveSelf(t *testing.T) {
	tab := proc.New("/proc")
	p, err := tab.Stat(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if h, k := classify(p, proc.Proc{PID: p.PPID}); k != None {
		t.Errorf("the test binary is classified %s %v", h.Name(), k)
	}
	a := claude{}.Resolve(Env{Procs: tab}, p)
	wd, _ := os.Getwd()
	if a.PID != os.Getpid() || a.PPID != os.Getppid() || a.Start != p.Start || a.Cwd != wd || a.Via != "none" || a.Session != "" {
		t.Errorf("self: %+v", a)
	}
}

// ---- pure helpers ----

func TestPositional(t *testing.T) {
	f := flags{value: set("-m"), optional: set("-c")}
	rows := []struct {
		args []string
		want string
	}{
		{nil, ""},
		{[]string{"-m", "x", "sub"}, "sub"},
		{[]string{"-m=x", "sub"}, "sub"},
		{[]string{"-c", "name", "sub"}, "sub"},
		{[]string{"-c", "-v", "sub"}, "sub"},
		{[]string{"--", "sub"}, ""},
		{[]string{"-v"}, ""},
	}
	for _, r := range rows {
		if got := f.positional(r.args); got != r.want {
			t.Errorf("%q: got %q, want %q", r.args, got, r.want)
		}
	}
}

func TestIsUUID(t *testing.T) {
	for s, want := range map[string]bool{
		"1f9a74f7-3c2e-4d51-9a0b-6f2d8c1e7a55": true,
		"019E763F-FF0C-7683-A4E9-A17E2BF964FB": true,
		"1f9a74f7-3c2e-4d51-9a0b-6f2d8c1e7a5":  false,
		"1f9a74f7x3c2e-4d51-9a0b-6f2d8c1e7a55": false,
		"1f9a74f7-3c2e-4d51-9a0b-6f2d8c1e7a5g": false,
		"":                                     false,
	} {
		if isUUID(s) != want {
			t.Errorf("isUUID(%q) != %v", s, want)
		}
	}
}

func TestComponentName(t *testing.T) {
	for in, want := range map[string]string{
		"Explore":                "Explore",
		"general-purpose":        "general-purpose",
		"a/b c":                  "a-b-c",
		"../..":                  "",
		"Ünïcode agent!":         "n-code-agent",
		strings.Repeat("a", 300): strings.Repeat("a", 100),
	} {
		got := componentName(in)
		if got != want || (got != "" && saferoot.ValidName(got) != nil) {
			t.Errorf("componentName(%q): got %q, want %q", in, got, want)
		}
	}
}

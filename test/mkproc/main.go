// Command mkproc writes testdata/proc, the fixture process table that goes
// with testdata/home: the live processes of a machine on which the fixture
// home's sessions are running, as a directory shaped like /proc.
//
//	go run ./test/mkproc -out testdata/proc
//
// The output is deterministic and committed. Every process belongs to uid 0
// in the committed files (the test rewrites the Uid lines to its own uid),
// and every path names the fixture home as /home/goblin (the test rewrites
// the fd links into its copy of the home, so the fd route sees the roots).
//
// Times: the table's btime is proctest.Boot (1790000000, 2026-09-21). A
// process's start is btime plus its starttime in ticks of 1/100 s. Every
// fixture process started before the fixture home was committed, so files
// with checkout-time mtimes count as "written since the process started".
//
// The processes, one per shape /active must list, resolve or leave out:
//
//   - claude 345104: the modern registry record sessions/345104.json
//     (procStart "50424", starttime 50424); its comm holds ") (" and
//     mimics stat fields, so only a split after the last ')' reads it right
//   - claude 4189: the old-shape record (no procStart), an npm install whose
//     process.title rewrote its cmdline to "claude"
//   - claude --bg-spare worker, a zombie whose comm is "claude": never
//     listed
//   - claude -p run from a script (no controlling terminal, no registry
//     record): listed, reach detached, session unresolved
//   - codex: node …/codex.js wrapper (never listed) and its native child
//     codex-x86_64-unknown-linux-musl holding the 12:00 rollout open
//   - codex with no rollout yet (listed, session unresolved)
//   - codex app-server under an editor's extension host: never listed
//   - omp run by bun (argv "bun …/omp") in /home/goblin/src/x, holding only
//     agent.db: found by the dir route (the title-slot transcript in -src-x)
//   - pi (node …/bin/pi) in /home/goblin/src/x: the dir route
//   - hermes (venv python …/bin/hermes), pid 155574 and starttime 1200051:
//     btime + 12000.51 s is both leases' process_start_time; started with
//     setsid, so it has no controlling terminal (reach detached), as the
//     claude -p has none, while every other agent's is its pane's, which
//     its shell holds (tty), and claude 345104 runs in zmx
//   - hermes gateway (python -m hermes_cli.main gateway run --replace) and
//     dsh web: never listed
//   - dsh (node …/bin/dsh) in /home/goblin/src/x: the dir route
//   - kernel threads, shells, an editor, a language server, test runners:
//     never listed
//
// Threads live under <pid>/task/<tid>/ and are never listed. Git keeps no
// empty directory, so a process without descriptors has no fd/ here, and
// each task/<tid>/ holds that thread's stat and comm.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/9harness/9harness/internal/proc/proctest"
)

const home = "/home/goblin"

// env is a login environment of the fixture user, plus extra variables. It
// holds no TMUX, though the shells run in tmux panes: the tmux file asks
// the tmux server that TMUX names, and a fixture must never ask the test
// machine's own server.
func env(extra ...string) []string {
	base := []string{
		"HOME=" + home,
		"USER=goblin",
		"LOGNAME=goblin",
		"SHELL=/bin/bash",
		"PATH=" + home + "/.local/bin:" + home + "/.bun/bin:" + home + "/.npm-global/bin:/usr/local/bin:/usr/bin:/bin",
		"LANG=C.UTF-8",
		"TERM=tmux-256color",
		"XDG_RUNTIME_DIR=/run/user/0",
	}
	return append(base, extra...)
}

// tty is the descriptors of a process in a terminal.
func tty(n int, more ...string) []string {
	t := fmt.Sprintf("/dev/pts/%d", n)
	return append([]string{t, t, t}, more...)
}

func threads(pid, n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = pid + i
	}
	return out
}

const (
	codexPkg = home + "/.npm-global/lib/node_modules/@openai/codex/bin"
	rollout  = home + "/.codex/sessions/2026/09/20/rollout-2026-09-20T12-00-00-019e763f-ff0c-7683-a4e9-a17e2bf964fb.jsonl"
	venv     = home + "/.hermes/hermes-agent/venv/bin"
	vscode   = home + "/.vscode-server/cli/servers/Stable-4f3c2a1b/server"
	srcX     = home + "/src/x"
)

var procs = []proctest.Proc{
	// The system.
	{PID: 1, PPID: 0, Start: 12, Comm: "systemd", Argv: []string{"/sbin/init", "splash"}, Cwd: "/",
		FDs: []string{"/dev/null", "/dev/null", "/dev/null", "anon_inode:[eventpoll]", "socket:[1201]"}},
	{PID: 2, PPID: 0, Start: 12, Comm: "kthreadd", Cwd: "/"},
	{PID: 3, PPID: 2, Start: 12, Comm: "pool_workqueue_release", Cwd: "/"},
	{PID: 15, PPID: 2, Start: 14, Comm: "ksoftirqd/0", Cwd: "/"},
	{PID: 88, PPID: 2, Start: 40, Comm: "kworker/1:1H-kblockd", Cwd: "/"},
	{PID: 640, PPID: 1, Start: 310, Comm: "systemd-journal", Argv: []string{"/usr/lib/systemd/systemd-journald"}, Cwd: "/",
		FDs: []string{"/dev/null", "/dev/null", "socket:[9081]", "/var/log/journal/0b1c/system.journal"}},
	{PID: 812, PPID: 1, Start: 520, Comm: "sshd", Argv: []string{"sshd: /usr/sbin/sshd -D [listener] 0 of 10-100 startups"}, Cwd: "/",
		FDs: []string{"/dev/null", "/dev/null", "/dev/null", "socket:[11250]"}},
	{PID: 1290, PPID: 1, Start: 2100, Comm: "systemd", Argv: []string{"/usr/lib/systemd/systemd", "--user"}, Cwd: home, Env: env(),
		FDs: []string{"/dev/null", "/dev/null", "/dev/null", "anon_inode:[eventpoll]"}},
	{PID: 1301, PPID: 1290, Start: 2101, Comm: "(sd-pam)", Argv: []string{"(sd-pam)"}, Cwd: "/"},
	{PID: 1552, PPID: 1290, Start: 2610, Comm: "python", Cwd: home + "/.hermes/hermes-agent", Env: env(),
		Argv: []string{venv + "/python", "-m", "hermes_cli.main", "gateway", "run", "--replace"},
		FDs:  []string{"/dev/null", "socket:[15520]", "socket:[15520]", home + "/.hermes/logs/gateway.log", home + "/.hermes/state.db"}, Threads: threads(1552, 4)},
	{PID: 2901, PPID: 1, Start: 3000, Comm: "tmux: server", Argv: []string{"tmux", "new-session", "-s", "main"}, Cwd: home, Env: env(),
		FDs: []string{"/dev/null", "/dev/null", "/dev/null", "socket:[29010]", "/dev/ptmx", "/dev/ptmx"}},

	// Shells, one per tmux pane.
	{PID: 2902, PPID: 2901, Start: 3005, Comm: "bash", Argv: []string{"-bash"}, Cwd: home, Env: env(), FDs: tty(0)},
	{PID: 2915, PPID: 2901, Start: 3012, Comm: "bash", Argv: []string{"-bash"}, Cwd: srcX, Env: env(), FDs: tty(1)},
	{PID: 2930, PPID: 2901, Start: 3020, Comm: "bash", Argv: []string{"-bash"}, Cwd: srcX, Env: env(), FDs: tty(2)},
	{PID: 2944, PPID: 2901, Start: 3031, Comm: "bash", Argv: []string{"-bash"}, Cwd: srcX, Env: env(), FDs: tty(3)},
	{PID: 2958, PPID: 2901, Start: 3040, Comm: "bash", Argv: []string{"-bash"}, Cwd: srcX, Env: env(), FDs: tty(4)},
	{PID: 2972, PPID: 2901, Start: 3050, Comm: "bash", Argv: []string{"-bash"}, Cwd: srcX, Env: env(), FDs: tty(5)},
	{PID: 2986, PPID: 2901, Start: 3061, Comm: "bash", Argv: []string{"-bash"}, Cwd: srcX, Env: env(), FDs: tty(6)},
	{PID: 2999, PPID: 2901, Start: 3072, Comm: "bash", Argv: []string{"-bash"}, Cwd: srcX, Env: env(), FDs: tty(7)},
	{PID: 3013, PPID: 2901, Start: 3080, Comm: "bash", Argv: []string{"-bash"}, Cwd: srcX, Env: env(), FDs: tty(8)},

	// Claude: the old npm install (process.title "claude"), old-shape record.
	{PID: 4189, PPID: 2915, Start: 3521, Comm: "claude", Argv: []string{"claude"}, Cwd: srcX, Env: env(),
		FDs: tty(1, "anon_inode:[eventpoll]", "pipe:[41890]", "pipe:[41890]", "/dev/null"), Threads: threads(4189, 7)},
	// Claude: the native install, modern record. The comm mimics the
	// start of stat's fields: a split at the first ')' reads ppid 1.
	{PID: 345104, PPID: 2902, Start: 50424, Comm: "claude) (R 1 1", Argv: []string{"claude", "--dangerously-skip-permissions"},
		Cwd: home, Env: env("ZMX_SESSION=work"),
		FDs: tty(0, "anon_inode:[eventpoll]", "socket:[345200]", "anon_inode:[eventfd]"), Threads: threads(345104, 9)},
	// Its background worker, run from the versioned binary.
	{PID: 345131, PPID: 345104, Start: 50610, Comm: "2.1.284", Argv: []string{home + "/.local/share/claude/versions/2.1.284", "--bg-spare"},
		Cwd: home, Env: env(), FDs: []string{"/dev/null", "pipe:[345132]", "pipe:[345133]"}, Threads: threads(345131, 3)},
	// A child of it that exited and was not yet reaped: no cmdline.
	{PID: 345160, PPID: 345104, Start: 51001, Comm: "claude"},
	// A one-shot print run from a script.
	{PID: 74020, PPID: 3013, Start: 141000, Comm: "claude", Argv: []string{"claude", "-p", "summarize the diff"}, Cwd: srcX, Env: env(),
		FDs: []string{"pipe:[74021]", "pipe:[74022]", "/dev/pts/8"}, Threads: threads(74020, 5)},

	// Codex, npm install: the node wrapper and its native child.
	{PID: 61020, PPID: 2930, Start: 90021, Comm: "node", Argv: []string{"node", codexPkg + "/codex.js"}, Cwd: srcX, Env: env(),
		FDs: tty(2, "anon_inode:[eventpoll]", "pipe:[61021]"), Threads: threads(61020, 7)},
	{PID: 61034, PPID: 61020, Start: 90058, Argv: []string{codexPkg + "/codex-x86_64-unknown-linux-musl"}, Cwd: srcX,
		Env:     env("CODEX_MANAGED_BY_NPM=1"),
		FDs:     tty(2, home+"/.codex/log/codex-tui.log", "anon_inode:[eventpoll]", "socket:[61035]", home+"/.codex/state_5.sqlite", rollout),
		Threads: threads(61034, 12)},
	// Codex, standalone, started but nothing persisted yet: no rollout.
	{PID: 62810, PPID: 2944, Start: 98300, Argv: []string{"codex"}, Cwd: srcX, Env: env(),
		FDs: tty(3, home+"/.codex/log/codex-tui.log", "anon_inode:[eventpoll]", home+"/.codex/state_5.sqlite"), Threads: threads(62810, 10)},
	// Codex app-server under an editor's extension host.
	{PID: 64001, PPID: 1290, Start: 101000, Comm: "node", Argv: []string{vscode + "/node", vscode + "/out/server-main.js", "--host=127.0.0.1", "--port=0"},
		Cwd: home, Env: env(), FDs: []string{"/dev/null", "/dev/null", "/dev/null", "socket:[64002]"}, Threads: threads(64001, 8)},
	{PID: 64050, PPID: 64001, Start: 101500, Comm: "node",
		Argv: []string{vscode + "/node", "--dns-result-order=ipv4first", vscode + "/out/bootstrap-fork", "--type=extensionHost", "--transformURIs", "--useHostProxy=false"},
		Cwd:  home, Env: env(), FDs: []string{"/dev/null", "pipe:[64051]", "pipe:[64052]", "socket:[64053]"}, Threads: threads(64050, 8)},
	{PID: 64100, PPID: 64050, Start: 102200,
		Argv: []string{home + "/.vscode-server/extensions/openai.chatgpt-26.5.90-linux-x64/bin/linux-x86_64/codex", "app-server", "--analytics-default-enabled"},
		Cwd:  home, Env: env(), FDs: []string{"pipe:[64101]", "pipe:[64102]", "pipe:[64103]", home + "/.codex/state_5.sqlite"}, Threads: threads(64100, 6)},

	// omp, a bun-script install; process.title changed only comm.
	{PID: 71500, PPID: 2958, Start: 110000, Comm: "omp", Argv: []string{"bun", home + "/.bun/bin/omp"}, Cwd: srcX, Env: env(),
		FDs: tty(4, "anon_inode:[eventpoll]", home+"/.omp/agent/agent.db", home+"/.omp/agent/models.db"), Threads: threads(71500, 6)},
	// pi, an npm install.
	{PID: 72001, PPID: 2972, Start: 120000, Comm: "node", Argv: []string{"node", home + "/.npm-global/bin/pi"}, Cwd: srcX, Env: env(),
		FDs: tty(5, "anon_inode:[eventpoll]"), Threads: threads(72001, 7)},
	// hermes, interactive: the console script runs under the venv's python,
	// started with setsid: no controlling terminal (reach detached), its
	// descriptors still on the pane's terminal.
	{PID: 155574, PPID: 2986, Start: 1200051, Comm: "hermes", Argv: []string{venv + "/python3", venv + "/hermes"}, Cwd: srcX, Env: env(),
		FDs: tty(6, home+"/.hermes/state.db", home+"/.hermes/state.db-wal", home+"/.hermes/logs/agent.log"), Threads: threads(155574, 3)},
	// dsh: node runs bin/dsh; no process.title.
	{PID: 81234, PPID: 2999, Start: 130000, Comm: "node", Argv: []string{"node", home + "/.npm-global/bin/dsh"}, Cwd: srcX, Env: env(),
		FDs: tty(7, "anon_inode:[eventpoll]"), Threads: threads(81234, 7)},
	{PID: 81300, PPID: 1290, Start: 130500, Comm: "node", Argv: []string{"node", home + "/.npm-global/bin/dsh", "web"}, Cwd: home, Env: env(),
		FDs: []string{"/dev/null", "/dev/null", "/dev/null", "socket:[81301]"}, Threads: threads(81300, 7)},

	// Everything else on the desk: not agents.
	{PID: 73010, PPID: 3013, Start: 140000, Comm: "nvim", Argv: []string{"nvim", "main.go"}, Cwd: srcX, Env: env(), FDs: tty(8, srcX+"/main.go")},
	{PID: 73022, PPID: 73010, Start: 140100, Comm: "node",
		Argv: []string{"node", home + "/.npm-global/lib/node_modules/typescript-language-server/lib/cli.mjs", "--stdio"},
		Cwd:  srcX, Env: env(), FDs: []string{"pipe:[73023]", "pipe:[73024]", "pipe:[73025]"}, Threads: threads(73022, 7)},
	{PID: 73100, PPID: 3013, Start: 142000, Comm: "python3", Argv: []string{"python3", "-m", "pytest", "-x"}, Cwd: srcX, Env: env(), FDs: tty(8)},
	{PID: 73200, PPID: 3013, Start: 142500, Comm: "bun", Argv: []string{"bun", "run", "build"}, Cwd: srcX, Env: env(), FDs: tty(8)},
	{PID: 73300, PPID: 1, Start: 900, Comm: "networkd-dispat", Argv: []string{"/usr/bin/python3", "/usr/bin/networkd-dispatcher", "--run-startup-triggers"},
		Cwd: "/", FDs: []string{"/dev/null", "/dev/null", "/dev/null", "socket:[7330]"}},
	{PID: 73400, PPID: 2944, Start: 143000, Comm: "sleep", Argv: []string{"sleep", "600"}, Cwd: srcX, Env: env(), FDs: tty(3)},
}

func main() {
	out := flag.String("out", "testdata/proc", "the directory to write (replaced)")
	flag.Parse()
	if err := write(*out); err != nil {
		fmt.Fprintln(os.Stderr, "mkproc:", err)
		os.Exit(1)
	}
}

func write(dir string) error {
	// Replace only a table this program wrote (or nothing at all).
	if _, err := os.Stat(dir); err == nil {
		b, err := os.ReadFile(filepath.Join(dir, "stat"))
		if err != nil || !strings.Contains(string(b), "btime ") {
			return fmt.Errorf("%s exists and is not a process table; not replacing it", dir)
		}
		if err := os.RemoveAll(dir); err != nil {
			return err
		}
	}
	for i, p := range procs {
		// A process on a terminal has it as its controlling terminal,
		// as its session's leader (the pane's shell) took it: but the
		// one setsid started.
		if len(p.FDs) >= 3 && p.FDs[0] == p.FDs[1] && p.FDs[1] == p.FDs[2] && p.PID != 155574 {
			if n, ok := strings.CutPrefix(p.FDs[0], "/dev/pts/"); ok {
				k, _ := strconv.Atoi(n)
				procs[i].TTY = 136<<8 | uint32(k)
			}
		}
	}
	if err := proctest.Write(dir, procs...); err != nil {
		return err
	}
	for _, p := range procs {
		d := filepath.Join(dir, strconv.Itoa(p.PID))
		if len(p.FDs) == 0 {
			if err := os.Remove(filepath.Join(d, "fd")); err != nil {
				return err
			}
		}
		// Each thread's own stat and comm, as /proc/<pid>/task/<tid>/ has.
		stat, err := os.ReadFile(filepath.Join(d, "stat"))
		if err != nil {
			return err
		}
		comm := string(stat[strings.IndexByte(string(stat), '(')+1 : strings.LastIndexByte(string(stat), ')')])
		rest := string(stat[strings.LastIndexByte(string(stat), ')'):])
		for _, tid := range p.Threads {
			td := filepath.Join(d, "task", strconv.Itoa(tid))
			if err := os.WriteFile(filepath.Join(td, "stat"), fmt.Appendf(nil, "%d (%s%s", tid, comm, rest), 0o644); err != nil {
				return err
			}
			if err := os.WriteFile(filepath.Join(td, "comm"), []byte(comm+"\n"), 0o644); err != nil {
				return err
			}
		}
	}
	return nil
}

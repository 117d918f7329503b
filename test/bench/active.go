package main

import (
	"errors"
	"fmt"
	"github.com/9harness/9harness/internal/harness"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/9harness/9harness/internal/client"
	"github.com/9harness/9harness/internal/proc/proctest"
)

// ---------------------------------------------------------------- /active

const (
	fixtureProcs = 2000  // processes in the smaller generated fixture table
	fixtureLarge = 10000 // processes in the larger one
	liveSleepers = 500   // harness-shaped sleepers added to the live table
)

// activeRun is the /active section: its cells and what they were measured on.
type activeRun struct {
	cells                   []*cell
	fixtureAgents           int // agents each fixture table holds
	fixtureFiles, liveFiles int // field files one listing reads
	liveAgents, liveProcs   int // agents listed and processes in the live table
	sizes                   string
}

// activeCells builds the fixture tables and home, starts the sleepers and
// three daemons (one per fixture table, one on the live table), checks each
// listing once, and measures them against ps -eo pid,args, interleaved over
// the rounds. It stops the sleepers and the daemons when done.
func activeCells(ours, tmp string) *activeRun {
	dir := filepath.Join(tmp, "active")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		fatalf("%v", err)
	}
	run := &activeRun{sizes: transcriptSizesText()}
	fixSock := map[int]string{}
	var daemons []*server
	sizes := []int{fixtureProcs, fixtureLarge}
	t0 := time.Now()
	// The fixtures go on tmpfs when there is one: /proc is in memory too,
	// and 12,000 process directories take long to create on a busy disk.
	fixDir := filepath.Join(dir, "fixture")
	if d, err := os.MkdirTemp("/dev/shm", "9harness-bench-"); err == nil {
		atExit(func() { os.RemoveAll(d) })
		fixDir = d
	}
	procDirs, home, agents := makeActiveFixture(fixDir, sizes)
	run.fixtureAgents = agents
	for i, n := range sizes {
		fmt.Printf("/active: fixture table of %d processes (%d agents) in %s\n", n, agents, procDirs[i])
		sock := filepath.Join(dir, fmt.Sprintf("fixture%d.sock", n))
		args := []string{"--unix", sock, "--quiet", "--proc", procDirs[i]}
		for _, h := range harness.Names() {
			args = append(args, "--root", h+"="+harness.DefaultRoot(h, home, ""))
		}
		daemons = append(daemons, start(fmt.Sprintf("9harnessd (fixture table, %d processes)", n), sock, ours, args...))
		fixSock[n] = sock
	}
	fmt.Printf("/active: fixtures written in %s\n", time.Since(t0).Round(100*time.Millisecond))

	sleepers := startSleepers(filepath.Join(dir, "bin"), liveSleepers)
	empty := filepath.Join(dir, "empty-home")
	if err := os.MkdirAll(empty, 0o755); err != nil {
		fatalf("%v", err)
	}
	liveSock := filepath.Join(dir, "live.sock")
	args := []string{"--unix", liveSock, "--quiet"}
	for _, h := range harness.Names() {
		args = append(args, "--root", h+"="+harness.DefaultRoot(h, empty, ""))
	}
	daemons = append(daemons, start("9harnessd (live table)", liveSock, ours, args...))

	// Check each once: a fixture lists exactly its agents, each with a
	// session; the live table lists every sleeper.
	fmt.Println("/active: verifying the listings once")
	for _, n := range []int{fixtureProcs, fixtureLarge} {
		got, err := listActive(fixSock[n], false, func(h, pid string, fields map[string]string) {
			if fields["session"] == "" {
				fatalf("fixture (%d) /active/%s/%s: no session (via %q)", n, h, pid, fields["via"])
			}
		})
		if err != nil {
			fatalf("fixture (%d) listing: %v", n, err)
		}
		if got.agents != run.fixtureAgents {
			fatalf("fixture (%d) listing: %d agents, want %d", n, got.agents, run.fixtureAgents)
		}
		run.fixtureFiles = got.files
	}
	seen := map[string]bool{}
	got, err := listActive(liveSock, true, func(h, pid string, _ map[string]string) {
		if h == "claude" {
			seen[pid] = true
		}
	})
	if err != nil {
		fatalf("live listing: %v", err)
	}
	for _, pid := range sleepers {
		if !seen[fmt.Sprint(pid)] {
			fatalf("live listing: sleeper %d (argv[0] claude) is not listed", pid)
		}
	}
	run.liveAgents, run.liveFiles = got.agents, got.files
	run.liveProcs = countProcs()

	null, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		fatalf("%v", err)
	}
	defer null.Close()
	e := &env{null: null}
	ps := e.repeat(*listMin, 1, "ps", "-eo", "pid,args")
	for _, d := range procDirs {
		// ps's library resolves /proc/self before it lists: point it at
		// the table's pid 1 (the daemon never lists non-numeric names).
		if err := os.Symlink("1", filepath.Join(d, "self")); err != nil && !os.IsExist(err) {
			fatalf("%v", err)
		}
		if _, err := psOnTable(d)(); err != nil {
			fatalf("ps over the fixture table %s: %v", d, err)
		}
	}
	run.cells = []*cell{
		{section: "active", key: "ps-fixture", unit: "ms",
			name:    fmt.Sprintf("ps -eo pid,args, fixture table (%s processes)", commas(fixtureProcs)),
			measure: psOnTable(procDirs[0])},
		{section: "active", key: "fixture-names", unit: "ms", anchor: "ps-fixture",
			name:    fmt.Sprintf("/active listing, fixture table (%s processes, %d agents)", commas(fixtureProcs), run.fixtureAgents),
			measure: timeListing(fixSock[fixtureProcs], false, false)},
		{section: "active", key: "fixture", unit: "ms", anchor: "ps-fixture",
			name:    "every field of every agent, same table",
			measure: timeListing(fixSock[fixtureProcs], false, true)},
		{section: "active", key: "ps-fixture10k", unit: "ms",
			name:    fmt.Sprintf("ps -eo pid,args, fixture table (%s processes)", commas(fixtureLarge)),
			measure: psOnTable(procDirs[1])},
		{section: "active", key: "fixture10k-names", unit: "ms", anchor: "ps-fixture10k",
			name:    fmt.Sprintf("/active listing, fixture table (%s processes, %d agents)", commas(fixtureLarge), run.fixtureAgents),
			measure: timeListing(fixSock[fixtureLarge], false, false)},
		{section: "active", key: "fixture10k", unit: "ms", anchor: "ps-fixture10k",
			name:    "every field of every agent, same table",
			measure: timeListing(fixSock[fixtureLarge], false, true)},
		{section: "active", key: "ps", unit: "ms",
			name:    fmt.Sprintf("ps -eo pid,args, live table (%s processes)", commas(int64(run.liveProcs))),
			measure: func() (float64, error) { v, err := ps(); return 1000 / v, err }},
		{section: "active", key: "live-names", unit: "ms", anchor: "ps",
			name:    fmt.Sprintf("/active listing, live table (%d agents)", run.liveAgents),
			measure: timeListing(liveSock, true, false)},
		{section: "active", key: "live", unit: "ms", anchor: "ps",
			name:    "every field of every agent, same table",
			measure: timeListing(liveSock, true, true)},
	}
	fmt.Printf("measuring /active: %d rounds, %d cells\n", *rounds, len(run.cells))
	t0 = time.Now()
	for r := 0; r < *rounds; r++ {
		for _, c := range run.cells {
			v, err := c.measure()
			if err != nil {
				fatalf("round %d, %s: %v", r+1, c.name, err)
			}
			c.samples = append(c.samples, v)
			printSample(r, c, v)
		}
	}
	fmt.Printf("measured /active in %s\n", time.Since(t0).Round(time.Second))
	stopSleepers()
	for _, d := range daemons {
		d.stop()
	}
	return run
}

// listing is what one full listing of /active read.
type listing struct{ agents, files int }

// listActive reads the whole of /active the way a client shows it: every
// harness directory, every agent directory, and every field file in it
// (transcripts and sub-agent directories are listed, not read). It dials
// and attaches first: that is part of a listing. With live set, an agent
// that exits during the listing is skipped; otherwise any error ends it.
// each, if set, sees every agent's fields.
func listActive(sock string, live bool, each func(h, pid string, fields map[string]string)) (listing, error) {
	return walkActive(sock, live, true, each)
}

// walkActive is listActive; without fields it stops at the agents' names
// (the listings of /active/<harness>), which is what ps's pid column is to
// its args.
func walkActive(sock string, live, fields bool, each func(h, pid string, fields map[string]string)) (listing, error) {
	var l listing
	c, err := client.Dial(sock)
	if err != nil {
		return l, err
	}
	defer c.Close()
	hs, err := c.ReadDir("/active")
	if err != nil {
		return l, err
	}
	gone := func(err error) bool {
		return live && client.IsErrno(err, syscall.ENOENT)
	}
	for _, h := range hs {
		pids, err := c.ReadDir("/active/" + h.Name)
		if err != nil {
			return l, err
		}
		if !fields {
			l.agents += len(pids)
			continue
		}
		for _, p := range pids {
			dir := "/active/" + h.Name + "/" + p.Name
			ents, err := c.ReadDir(dir)
			if gone(err) {
				continue
			}
			if err != nil {
				return l, fmt.Errorf("%s: %w", dir, err)
			}
			var fields map[string]string
			if each != nil {
				fields = map[string]string{}
			}
			for _, e := range ents {
				if e.QID.IsDir() || e.Name == "transcript" {
					continue
				}
				b, err := c.ReadFile(dir + "/" + e.Name)
				if gone(err) {
					break
				}
				if err != nil {
					return l, fmt.Errorf("%s/%s: %w", dir, e.Name, err)
				}
				l.files++
				if fields != nil {
					fields[e.Name] = strings.TrimSuffix(string(b), "\n")
				}
			}
			l.agents++
			if each != nil {
				each(h.Name, p.Name, fields)
			}
		}
	}
	return l, nil
}

// timeListing returns a measurement of milliseconds per full listing,
// repeated for at least listMin.
func timeListing(sock string, live, fields bool) func() (float64, error) {
	return func() (float64, error) {
		runs := 0
		t0 := time.Now()
		for runs == 0 || time.Since(t0) < *listMin {
			if _, err := walkActive(sock, live, fields, nil); err != nil {
				return 0, err
			}
			runs++
		}
		return float64(time.Since(t0).Microseconds()) / 1000 / float64(runs), nil
	}
}

func countProcs() int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		fatalf("%v", err)
	}
	n := 0
	for _, e := range ents {
		if c := e.Name()[0]; c >= '1' && c <= '9' {
			n++
		}
	}
	return n
}

// psOnTable measures ps -eo pid,args over a fixture table: in a new pid
// and mount namespace, the table is bound over /proc and ps runs in a
// loop for at least listMin, timed with bash's clock (no process between
// two ps runs but ps itself). It reports milliseconds per run.
func psOnTable(dir string) func() (float64, error) {
	const script = `mount --bind "$1" /proc || exit 1
now() { local t=${EPOCHREALTIME/./}; echo ${t#0}; }
n=0; s=$(now); e=$s
while [ $((e - s)) -lt $2 ]; do ps -eo pid,args >/dev/null || exit 1; n=$((n + 1)); e=${EPOCHREALTIME/./}; done
echo $n $((e - s))`
	return func() (float64, error) {
		cmd := exec.Command("unshare", "--pid", "--fork", "--mount", "--propagation", "private",
			"bash", "-c", script, "ps-on-table", dir, strconv.FormatInt(listMin.Microseconds(), 10))
		out, err := cmd.CombinedOutput()
		if err != nil {
			return 0, fmt.Errorf("ps over %s: %v: %s", dir, err, out)
		}
		var n, us int64
		if _, err := fmt.Sscan(string(out), &n, &us); err != nil || n == 0 {
			return 0, fmt.Errorf("ps over %s: %q", dir, out)
		}
		return float64(us) / 1000 / float64(n), nil
	}
}

// ---- the sleepers

var (
	sleeperMu   sync.Mutex
	sleeperCmds []*exec.Cmd
)

// startSleepers runs n copies of sleep named claude (argv[0] basename
// "claude", argv "claude 600") and returns their pids. They are killed by
// pid, each by its own handle, when the section ends or the bench exits.
func startSleepers(bin string, n int) []int {
	src, err := exec.LookPath("sleep")
	if err != nil {
		fatalf("sleep: %v", err)
	}
	b, err := os.ReadFile(src)
	if err != nil {
		fatalf("%v", err)
	}
	if err := os.MkdirAll(bin, 0o755); err != nil {
		fatalf("%v", err)
	}
	exe := filepath.Join(bin, "claude")
	if err := os.WriteFile(exe, b, 0o755); err != nil {
		fatalf("%v", err)
	}
	atExit(stopSleepers)
	// A fixed environment: no TMUX or ZMX_SESSION from the shell the bench
	// runs in (the tmux file would ask that tmux server on every read).
	environ := []string{"PATH=/usr/bin:/bin", "HOME=" + bin, "LANG=C.UTF-8"}
	var pids []int
	for range n {
		cmd := exec.Command(exe, "600")
		cmd.Dir, cmd.Env = bin, environ
		if err := cmd.Start(); err != nil {
			fatalf("start sleeper: %v", err)
		}
		sleeperMu.Lock()
		sleeperCmds = append(sleeperCmds, cmd)
		sleeperMu.Unlock()
		pids = append(pids, cmd.Process.Pid)
	}
	fmt.Printf("/active: %d sleepers running as %s 600\n", n, exe)
	return pids
}

// stopSleepers kills the sleepers this program started, by their handles.
func stopSleepers() {
	sleeperMu.Lock()
	defer sleeperMu.Unlock()
	for _, c := range sleeperCmds {
		c.Process.Kill()
		c.Wait()
	}
	sleeperCmds = nil
}

// ---- the fixture

// transcriptSizes cycle over the fixture's sessions: from a short session
// to one past the reader's windows (head 256 KiB + tail 768 KiB).
var transcriptSizes = []int{64 << 10, 256 << 10, 1 << 20, 2 << 20}

func transcriptSizesText() string {
	var s []string
	for _, n := range transcriptSizes {
		if n >= 1<<20 {
			s = append(s, fmt.Sprintf("%d MiB", n>>20))
		} else {
			s = append(s, fmt.Sprintf("%d KiB", n>>10))
		}
	}
	return strings.Join(s, ", ")
}

// benchUUID is a deterministic v7-shaped id.
func benchUUID(kind, i int) string {
	return fmt.Sprintf("019e%04x-%04x-7%03x-8%03x-%012x", kind, i, kind, i, kind*1000+i)
}

// filler is JSON-safe text of about n bytes.
func filler(n int) string {
	const w = "the quick brown fox jumps over the lazy dog while the build runs again "
	return strings.Repeat(w, n/len(w)+1)[:n]
}

// writeLines writes head, then body lines until the file is about size
// bytes, then tail.
func writeLines(path string, size int, head []string, body func(i int) string, tail []string) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		fatalf("%v", err)
	}
	var b strings.Builder
	for _, l := range head {
		b.WriteString(l + "\n")
	}
	for i := 0; b.Len() < size; i++ {
		b.WriteString(body(i) + "\n")
	}
	for _, l := range tail {
		b.WriteString(l + "\n")
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		fatalf("%v", err)
	}
}

// makeActiveFixture writes a fixture home (every harness's on-disk state,
// in the shapes of testdata/home) and a process table of nprocs
// processes in dir: mostly not harnesses (kernel threads, shells, servers,
// interpreters), plus helpers that are never listed, plus the agents. It
// returns the table, the home and the number of agents.
func makeActiveFixture(dir string, sizes []int) ([]string, string, int) {
	home := filepath.Join(dir, "home")
	nprocs := slices.Max(sizes)
	uid := uint32(os.Getuid())
	now := time.Now()
	boot := now.Add(-48 * time.Hour).Unix()
	// Every agent started a day ago, a second apart; its files are written
	// now, after it started.
	tick := func(i int) uint64 { return uint64((now.Add(-24*time.Hour).Unix()-boot)*100) + uint64(i)*100 }
	startOf := func(t uint64) time.Time { return time.Unix(boot, 0).Add(time.Duration(t) * 10 * time.Millisecond) }
	ts := func(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z") }
	const fakeHome = "/home/bench"
	envOf := func() []string {
		return []string{"HOME=" + fakeHome, "USER=bench", "PATH=/usr/local/bin:/usr/bin:/bin", "LANG=C.UTF-8", "TERM=xterm-256color"}
	}
	rng := rand.New(rand.NewPCG(9, 9))
	var procs []proctest.Proc
	pid := 1000
	nextPID := func() int { pid += 1 + rng.IntN(7); return pid }
	add := func(p proctest.Proc) proctest.Proc {
		p.UID = uid
		if p.Env == nil && len(p.Argv) > 0 {
			p.Env = envOf()
		}
		if p.FDs == nil && len(p.Argv) > 0 {
			p.FDs = []string{"/dev/null", "/dev/null", "/dev/null"}
		}
		procs = append(procs, p)
		return p
	}
	shell := func(cwd string) int {
		p := add(proctest.Proc{PID: nextPID(), PPID: 1, Start: 500, Argv: []string{"-bash"}, Comm: "bash", Cwd: cwd})
		return p.PID
	}
	agents, n := 0, 0
	size := func() int { n++; return transcriptSizes[n%len(transcriptSizes)] }

	// claude: 12 sessions, each with its registry record and transcript;
	// 3 background workers and 2 MCP servers (helpers).
	for i := range 12 {
		cwd := fmt.Sprintf("%s/src/claude-%02d", fakeHome, i)
		sid := benchUUID(1, i)
		t := tick(agents)
		p := add(proctest.Proc{PID: nextPID(), PPID: shell(cwd), Start: t, Comm: "2.1.284", Argv: []string{"claude"}, Cwd: cwd})
		agents++
		reg := fmt.Sprintf(`{"pid":%d,"sessionId":%q,"cwd":%q,"startedAt":%d,"procStart":"%d","version":"2.1.284","kind":"interactive","entrypoint":"cli","name":"claude-%02d","nameSource":"derived","status":"idle"}`,
			p.PID, sid, cwd, startOf(t).UnixMilli(), t, i)
		writeFile(filepath.Join(home, ".claude", "sessions", fmt.Sprintf("%d.json", p.PID)), reg)
		proj := strings.Map(func(r rune) rune {
			if r < 0x80 && (r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
				return r
			}
			return '-'
		}, cwd)
		at := ts(startOf(t).Add(time.Minute))
		writeLines(filepath.Join(home, ".claude", "projects", proj, sid+".jsonl"), size(),
			[]string{fmt.Sprintf(`{"parentUuid":null,"isSidechain":false,"userType":"external","cwd":%q,"sessionId":%q,"version":"2.1.284","type":"user","message":{"role":"user","content":"fix the build %d"},"timestamp":%q}`, cwd, sid, i, at)},
			func(j int) string {
				return fmt.Sprintf(`{"isSidechain":false,"cwd":%q,"sessionId":%q,"type":"assistant","message":{"role":"assistant","model":"claude-opus-4-6","content":[{"type":"text","text":%q}]},"timestamp":%q}`, cwd, sid, filler(2000), at)
			},
			[]string{fmt.Sprintf(`{"type":"ai-title","aiTitle":"Fixing build %d","sessionId":%q}`, i, sid)})
	}
	for range 3 {
		add(proctest.Proc{PID: nextPID(), PPID: 1, Start: 900, Comm: "2.1.284", Argv: []string{fakeHome + "/.local/share/claude/versions/2.1.284", "--bg-spare"}, Cwd: fakeHome})
	}
	for range 2 {
		add(proctest.Proc{PID: nextPID(), PPID: 1, Start: 900, Argv: []string{"claude", "mcp", "serve"}, Cwd: fakeHome})
	}

	// codex: 10 node wrappers (helpers) with their native children, each
	// holding its rollout open; 2 app-servers (helpers).
	day := filepath.Join(home, ".codex", "sessions", "2026", "11", "30")
	var index strings.Builder
	for i := range 10 {
		cwd := fmt.Sprintf("%s/src/codex-%02d", fakeHome, i)
		sid := benchUUID(2, i)
		t := tick(agents)
		rollout := filepath.Join(day, fmt.Sprintf("rollout-2026-11-30T%02d-00-00-%s.jsonl", i, sid))
		at := ts(startOf(t))
		writeLines(rollout, size(),
			[]string{
				fmt.Sprintf(`{"timestamp":%q,"type":"session_meta","payload":{"id":%q,"timestamp":%q,"cwd":%q,"originator":"codex_cli_rs","cli_version":"0.128.0","source":"cli","model_provider":"openai"}}`, at, sid, at, cwd),
				fmt.Sprintf(`{"timestamp":%q,"type":"turn_context","payload":{"cwd":%q,"approval_policy":"on-request","model":"gpt-5.6","effort":"medium","summary":"auto"}}`, at, cwd),
			},
			func(j int) string {
				return fmt.Sprintf(`{"timestamp":%q,"type":"response_item","payload":{"type":"message","role":"assistant","content":[{"type":"output_text","text":%q}]}}`, at, filler(2000))
			}, nil)
		fmt.Fprintf(&index, `{"id":%q,"thread_name":"codex task %d","updated_at":%q}`+"\n", sid, i, at)
		w := add(proctest.Proc{PID: nextPID(), PPID: shell(cwd), Start: t, Comm: "node", Argv: []string{"node", fakeHome + "/.npm-global/lib/node_modules/@openai/codex/bin/codex.js"}, Cwd: cwd})
		add(proctest.Proc{PID: nextPID(), PPID: w.PID, Start: t + 5, Argv: []string{fakeHome + "/.npm-global/lib/node_modules/@openai/codex/bin/codex-x86_64-unknown-linux-musl"}, Cwd: cwd,
			FDs: []string{"/dev/pts/1", "/dev/pts/1", "/dev/pts/1", "anon_inode:[eventpoll]", rollout}})
		agents++
	}
	writeFile(filepath.Join(home, ".codex", "session_index.jsonl"), index.String())
	for range 2 {
		add(proctest.Proc{PID: nextPID(), PPID: 1, Start: 900, Argv: []string{"codex", "app-server"}, Cwd: fakeHome})
	}

	// omp (bun) and pi (node): 8 each, found by the dir route.
	for i := range 8 {
		cwd := fmt.Sprintf("%s/src/omp-%02d", fakeHome, i)
		sid := benchUUID(3, i)
		t := tick(agents)
		at := ts(startOf(t))
		writeLines(filepath.Join(home, ".omp", "agent", "sessions", fmt.Sprintf("-src-omp-%02d", i), "2026-11-30T00-00-00-000Z_"+sid+".jsonl"), size(),
			[]string{
				fmt.Sprintf(`{"type":"title","v":1,"title":"omp task %d","source":"auto","updatedAt":%q}`, i, at),
				fmt.Sprintf(`{"type":"session","version":3,"id":%q,"timestamp":%q,"cwd":%q}`, sid, at, cwd),
				fmt.Sprintf(`{"type":"model_change","id":"a1b2c3d4","parentId":null,"timestamp":%q,"model":"anthropic/claude-opus-4-6"}`, at),
			},
			func(j int) string {
				return fmt.Sprintf(`{"type":"message","id":"%08x","timestamp":%q,"message":{"role":"assistant","content":[{"type":"text","text":%q}],"provider":"anthropic","model":"claude-opus-4-6"}}`, j, at, filler(2000))
			}, nil)
		add(proctest.Proc{PID: nextPID(), PPID: shell(cwd), Start: t, Comm: "omp", Argv: []string{"bun", fakeHome + "/.bun/bin/omp"}, Cwd: cwd})
		agents++
	}
	for i := range 8 {
		cwd := fmt.Sprintf("%s/src/pi-%02d", fakeHome, i)
		sid := benchUUID(4, i)
		t := tick(agents)
		at := ts(startOf(t))
		writeLines(filepath.Join(home, ".pi", "agent", "sessions", fmt.Sprintf("--home-bench-src-pi-%02d--", i), "2026-11-30T00-00-00-000Z_"+sid+".jsonl"), size(),
			[]string{
				fmt.Sprintf(`{"type":"session","version":3,"id":%q,"timestamp":%q,"cwd":%q}`, sid, at, cwd),
				fmt.Sprintf(`{"type":"model_change","id":"0a1b2c3d","parentId":null,"timestamp":%q,"provider":"openai","modelId":"gpt-5.6"}`, at),
			},
			func(j int) string {
				return fmt.Sprintf(`{"type":"message","id":"%08x","timestamp":%q,"message":{"role":"assistant","content":[{"type":"text","text":%q}],"provider":"openai","model":"gpt-5.6"}}`, j, at, filler(2000))
			}, nil)
		add(proctest.Proc{PID: nextPID(), PPID: shell(cwd), Start: t, Comm: "node", Argv: []string{"node", fakeHome + "/.npm-global/bin/pi"}, Cwd: cwd})
		agents++
	}

	// hermes: 6 interactive processes with their leases; 2 gateways.
	var leases []string
	for i := range 6 {
		cwd := fmt.Sprintf("%s/src/hermes-%02d", fakeHome, i)
		t := tick(agents)
		p := add(proctest.Proc{PID: nextPID(), PPID: shell(cwd), Start: t, Comm: "hermes", Argv: []string{fakeHome + "/.hermes/venv/bin/python3", fakeHome + "/.hermes/venv/bin/hermes"}, Cwd: cwd})
		st := float64(startOf(t).UnixNano()) / 1e9
		leases = append(leases, fmt.Sprintf(`{"lease_id":"%032x","pid":%d,"process_start_time":%.2f,"session_id":"20261130_%06d_%06x","started_at":%.1f,"surface":"cli","updated_at":%.1f}`,
			i+1, p.PID, st, i, i, st+1, st+60))
		agents++
	}
	writeFile(filepath.Join(home, ".hermes", "runtime", "active_sessions.json"), `{"entries":[`+strings.Join(leases, ",")+`]}`)
	for range 2 {
		add(proctest.Proc{PID: nextPID(), PPID: 1, Start: 900, Argv: []string{fakeHome + "/.hermes/venv/bin/python", "-m", "hermes_cli.main", "gateway", "run", "--replace"}, Cwd: fakeHome})
	}

	// dsh: 6 sessions (raw session.jsonl), found by the dir route; 1 dsh web.
	for i := range 6 {
		cwd := fmt.Sprintf("%s/src/dsh-%02d", fakeHome, i)
		sid := "session-" + benchUUID(5, i)
		t := tick(agents)
		ms := startOf(t).UnixMilli()
		writeLines(filepath.Join(home, ".dsh", "sessions", fmt.Sprintf("--home-bench-src-dsh-%02d--", i), sid, "session.jsonl"), size(),
			[]string{fmt.Sprintf(`{"type":"session","version":0,"id":%q,"createdAt":%d,"cwd":%q,"delegationDepth":0,"agentPreset":"standard"}`, sid, ms, cwd)},
			func(j int) string {
				return fmt.Sprintf(`{"type":"assistant/message","seq":%d,"time":%d,"data":{"message":{"role":"assistant","content":[{"type":"text","text":%q}],"source":{"kind":"model","provider":"deepseek","model":"deepseek-v4-pro"}}}}`, j+1, ms, filler(2000))
			},
			[]string{fmt.Sprintf(`{"type":"session/title","seq":999999,"time":%d,"data":{"title":"dsh task %d"}}`, ms, i)})
		add(proctest.Proc{PID: nextPID(), PPID: shell(cwd), Start: t, Comm: "node", Argv: []string{"node", fakeHome + "/.npm-global/bin/dsh"}, Cwd: cwd})
		agents++
	}
	add(proctest.Proc{PID: nextPID(), PPID: 1, Start: 900, Argv: []string{"node", fakeHome + "/.npm-global/bin/dsh", "web"}, Cwd: fakeHome})

	// Everything else: kernel threads, daemons, shells, servers,
	// interpreters (node, python and bun ones pass the argv pre-filter and
	// are classified; the rest are not).
	others := [][]string{
		{"-bash"}, {"sleep", "infinity"}, {"/usr/sbin/cron", "-f"}, {"nginx: worker process"},
		{"/usr/lib/postgresql/16/bin/postgres", "-D", "/var/lib/postgresql/16/main"}, {"postgres: 16/main: checkpointer"},
		{"/usr/bin/python3", "/opt/app/worker.py", "--queue", "default"}, {"python3", "-m", "http.server", "8000"},
		{"node", "/srv/app/server.js"}, {"/usr/bin/node", "--max-old-space-size=4096", "/srv/app/dist/main.js"},
		{"bun", "run", "dev"}, {"gopls", "serve"}, {"/usr/bin/dbus-daemon", "--session", "--address=systemd:"},
		{"sshd: bench@pts/3"}, {"tmux", "new-session", "-s", "work"}, {"nvim", "main.go"}, {"/usr/bin/containerd"},
	}
	procs = append([]proctest.Proc{{PID: 1, UID: uid, Start: 10, Comm: "systemd", Argv: []string{"/sbin/init"}, Cwd: "/", FDs: []string{"/dev/null"}}}, procs...)
	for k := 2; len(procs) < nprocs; k++ {
		if k < 150 {
			procs = append(procs, proctest.Proc{PID: k, PPID: 2, UID: uid, Start: 12, Comm: fmt.Sprintf("kworker/%d:1", k%2), Cwd: "/"})
			continue
		}
		argv := others[rng.IntN(len(others))]
		add(proctest.Proc{PID: nextPID(), PPID: 1, Start: uint64(1000 + rng.IntN(100000)), Argv: argv, Cwd: "/srv/app"})
	}
	// The smaller tables are prefixes of the largest: the same agents and
	// helpers, fewer other processes.
	var dirs []string
	for _, n := range sizes {
		procDir := filepath.Join(dir, fmt.Sprintf("proc%d", n))
		writeTable(procDir, procs[:n])
		writeFile(filepath.Join(procDir, "stat"), fmt.Sprintf("cpu  1 2 3 4\nbtime %d\nprocesses %d\n", boot, n))
		dirs = append(dirs, procDir)
	}
	return dirs, home, agents
}

// writeTable writes a fixture table with proctest, two writers at once
// (each process is its own directory).
func writeTable(dir string, procs []proctest.Proc) {
	if err := proctest.Write(dir); err != nil {
		fatalf("write the fixture table: %v", err)
	}
	const writers = 2
	var wg sync.WaitGroup
	errs := make([]error, writers)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < len(procs); i += writers {
				if err := proctest.Add(dir, procs[i]); err != nil {
					errs[w] = err
					return
				}
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		fatalf("write the fixture table: %v", err)
	}
}

func writeFile(path, content string) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		fatalf("%v", err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		fatalf("%v", err)
	}
}

// activeReport renders the /active section.
func activeReport(a *activeRun) string {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	st := map[string]stat{}
	for _, c := range a.cells {
		st[c.key] = summarize(c.samples)
	}
	p("## /active listing\n\n")
	p("A listing of `/active` as a client makes it: through the project's client library, dial and\n")
	p("attach, list `/active` and every `/active/<harness>`. That names every live agent on the table\n")
	p("by harness and pid, after the daemon has scanned the process table, recognised each harness\n")
	p("(wrappers, helpers and daemons excluded) and checked each agent is alive: the counterpart of\n")
	p("`ps -eo pid,args`, which names every process by pid and argv. That is the row with the target.\n\n")
	p("Below each, \"every field of every agent\" goes on to list every agent's directory and read\n")
	p("every field file in it (what `9harness ps` shows; transcripts and sub-agent directories are\n")
	p("listed, not read): %s field files for each fixture table, %s for the live one. It is\n", commas(int64(a.fixtureFiles)), commas(int64(a.liveFiles)))
	p("bounded by the tree's contract, one small file per fact: every file costs a walk, an open, a\n")
	p("read to its end and a clunk, about five 9P round trips, each re-deriving the fact from disk.\n\n")
	p("* Fixture tables: %s and %s processes, written with `proctest` into a temporary directory\n", commas(fixtureProcs), commas(fixtureLarge))
	p("  on tmpfs (`/dev/shm`; /proc is in memory too), each served by its own\n")
	p("  `9harnessd --proc DIR --root NAME=…` over one generated fixture home. The smaller table is\n")
	p("  the first %s processes of the larger: in both, the same %d are agents\n", commas(fixtureProcs), a.fixtureAgents)
	p("  (12 claude with registry records, 10 codex native children holding their rollouts, 8 omp,\n")
	p("  8 pi, 6 hermes with leases, 6 dsh), all resolved to a session; 21 are helpers that are never\n")
	p("  listed (codex node wrappers and app-servers, claude --bg-spare and -p, hermes gateways, dsh\n")
	p("  web); the rest are kernel threads, shells, servers and interpreters. Transcript sizes cycle\n")
	p("  through %s.\n", a.sizes)
	p("* `ps` over a fixture table: in a new pid and mount namespace (`unshare --pid --fork --mount`)\n")
	p("  the table is bound over `/proc` (with a `self` link to its pid 1, which procps resolves\n")
	p("  first), and bash runs `ps -eo pid,args > /dev/null` in a loop timed with its own clock, so\n")
	p("  both sides read the same files from the same tmpfs.\n")
	p("* Live table: this machine's /proc with %d copies of `sleep` named `claude` running\n", liveSleepers)
	p("  (`claude 600`, outside tmux and zmx), served by its own daemon whose roots point into an\n")
	p("  empty home; `ps` reads the same /proc.\n")
	p("* %d rounds, rows interleaved (A B A B); each sample repeats its command for at least %s\n", *rounds, *listMin)
	p("  and reports milliseconds per run, process start-up included for `ps`, dial and attach\n")
	p("  included for the listing. Median and min–max over the rounds; ratios are of medians.\n")
	p("* Checked once before timing: each fixture listing holds exactly its %d agents, each with a\n", a.fixtureAgents)
	p("  session; the live listing holds every sleeper; `ps` over each fixture table succeeds.\n\n")
	p("Target: a listing of `/active` takes no longer than `ps -eo pid,args` on the same table.\n\n")
	p("| row | median (ms) | spread | vs ps on the same table | target |\n")
	p("|---|---:|---:|---:|---|\n")
	for _, c := range a.cells {
		s := st[c.key]
		if c.anchor == "" {
			p("| %s | %s | %s–%s | 1.00x | anchor |\n", c.name, num(s.med), num(s.lo), num(s.hi))
			continue
		}
		r := s.med / st[c.anchor].med
		target := "(breakdown: every field, per-file round trips)"
		if strings.HasSuffix(c.key, "-names") {
			target = "≤ 1.0x ps: **met**"
			if r > 1 {
				target = "≤ 1.0x ps: **not met**"
			}
		}
		p("| %s | %s | %s–%s | %.2fx | %s |\n", c.name, num(s.med), num(s.lo), num(s.hi), r, target)
	}
	p("\nRatios here are times: below 1.00x is faster than `ps`.\n")
	return b.String()
}

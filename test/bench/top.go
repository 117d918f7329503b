package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/9harness/9harness/internal/harness"
)

// ---------------------------------------------------------------- top

// The top section: 9harness top in a real terminal (a pane of a private
// tmux server, 200x50) over a daemon with topAgents Claude-shaped agents.
//
//   - change to frame: an agent's registry record is rewritten as Claude
//     does (status waiting, a new waitingFor); the clock stops when the
//     pane shows that text. It spans the daemon noticing the change, the
//     event, the view's read of that one row, and the redraw; the pane is
//     polled every 2 ms.
//   - idle CPU: with nothing changing for topIdle, the CPU time of the
//     view's process and of the daemon's, as a share of one CPU; and the
//     reads the view counted meanwhile (it must make none).

const (
	topAgents  = 100
	topChanges = 10 // changes per round
	topIdle    = 10 * time.Second
)

type topRun struct {
	latency     *cell // ms, one sample per change
	viewCPU     *cell // % of one CPU while idle, one sample per round
	daemonCPU   *cell
	idleReads   []string // the view's read counts before and after each idle stretch
	agents      int
	firstFrames []float64
}

func topSection(e *env) *topRun {
	run := &topRun{
		latency:   &cell{section: "top", key: "top-latency", unit: "ms", name: fmt.Sprintf("change to frame, %d agents", topAgents)},
		viewCPU:   &cell{section: "top", key: "top-cpu-view", unit: "%", name: "idle CPU of the view"},
		daemonCPU: &cell{section: "top", key: "top-cpu-daemon", unit: "%", name: "idle CPU of the daemon, one view following"},
		agents:    topAgents,
	}
	base := psScaleBase(e.tmp, "top")
	sock := psScaleAgentsUp(base, topAgents, false)
	home := filepath.Join(base, "home")
	args := []string{"--unix", sock, "--quiet"}
	for _, h := range harness.Names() {
		args = append(args, "--root", h+"="+harness.DefaultRoot(h, home, ""))
	}
	d := start("9harnessd (top)", sock, e.ours, args...)
	defer func() {
		d.stop()
		stopSleepers()
		os.RemoveAll(base)
	}()
	tmuxSock := filepath.Join(base, "tmux.sock")
	tmux := func(a ...string) (string, error) {
		cmd := exec.Command("tmux", append([]string{"-S", tmuxSock, "-f", "/dev/null"}, a...)...)
		cmd.Env = []string{"PATH=/usr/bin:/bin", "LANG=C.UTF-8", "TERM=xterm-256color"}
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	defer tmux("kill-server")
	screen := func() string {
		out, err := tmux("capture-pane", "-p", "-t", "top")
		if err != nil {
			fatalf("top: capture-pane: %v %s", err, out)
		}
		return out
	}
	awaitScreen := func(what string, limit time.Duration, cond func(string) bool) time.Duration {
		t0 := time.Now()
		for !cond(screen()) {
			if time.Since(t0) > limit {
				fatalf("top: no %s within %v:\n%s", what, limit, screen())
			}
			time.Sleep(2 * time.Millisecond)
		}
		return time.Since(t0)
	}
	registry := filepath.Join(harness.DefaultRoot("claude", home, ""), "sessions")
	recs, err := os.ReadDir(registry)
	if err != nil || len(recs) < topAgents {
		fatalf("top: the registry: %v (%d records)", err, len(recs))
	}
	for r := 0; r < *rounds; r++ {
		t0 := time.Now()
		cmdline := fmt.Sprintf("exec env HOME=%s LANG=C.UTF-8 %s -s %s top --count-reads", home, e.client, sock)
		if out, err := tmux("new-session", "-d", "-s", "top", "-x", "200", "-y", "50", cmdline); err != nil {
			fatalf("top: tmux: %v %s", err, out)
		}
		awaitScreen("first frame", 60*time.Second, func(s string) bool { return strings.Contains(s, "q quit") })
		// The daemon lists every agent of the uid: the view is filtered
		// to this section's.
		tmux("send-keys", "-t", "top", "/")
		tmux("send-keys", "-t", "top", "-l", base)
		tmux("send-keys", "-t", "top", "Enter")
		awaitScreen("frame with every agent", 60*time.Second, func(s string) bool {
			n := strconv.Itoa(topAgents)
			return strings.Contains(s, " "+n+" agents ·") && !strings.Contains(s, " shown") || strings.Contains(s, " "+n+" shown")
		})
		run.firstFrames = append(run.firstFrames, float64(time.Since(t0).Milliseconds()))
		fmt.Printf("  round %d  start to a frame with every agent: %d ms\n", r+1, time.Since(t0).Milliseconds())
		pidOut, _ := tmux("display-message", "-p", "-t", "top", "#{pane_pid}")
		viewPID, _ := strconv.Atoi(strings.TrimSpace(pidOut))
		for i := range topChanges {
			rec := filepath.Join(registry, recs[(r*topChanges+i)%len(recs)].Name())
			mark := fmt.Sprintf("approve T%d", r*topChanges+i)
			setRegistryStatus(rec, "waiting", mark)
			v := awaitScreen("the change "+mark, 30*time.Second, func(s string) bool { return strings.Contains(s, mark) })
			ms := float64(v.Microseconds()) / 1000
			run.latency.samples = append(run.latency.samples, ms)
			printSample(r, run.latency, ms)
			setRegistryStatus(rec, "busy", "")
			time.Sleep(300 * time.Millisecond)
		}
		// Settle, then idle.
		time.Sleep(3 * time.Second)
		before := topReadCounts(screen())
		fmt.Printf("  round %d  reads before idle: %s\n", r+1, before)
		v0, d0 := cpuTicks(viewPID), cpuTicks(d.pid())
		time.Sleep(topIdle)
		v1, d1 := cpuTicks(viewPID), cpuTicks(d.pid())
		after := topReadCounts(screen())
		run.idleReads = append(run.idleReads, before+" → "+after)
		secs := topIdle.Seconds()
		vc := float64(v1-v0) / clkTck / secs * 100
		dc := float64(d1-d0) / clkTck / secs * 100
		run.viewCPU.samples = append(run.viewCPU.samples, vc)
		run.daemonCPU.samples = append(run.daemonCPU.samples, dc)
		printSample(r, run.viewCPU, vc)
		printSample(r, run.daemonCPU, dc)
		fmt.Printf("  round %d  idle reads: %s\n", r+1, before+" → "+after)
		tmux("send-keys", "-t", "top", "q")
		time.Sleep(500 * time.Millisecond)
		tmux("kill-session", "-t", "top")
	}
	return run
}

// clkTck is the kernel's clock ticks per second (USER_HZ), in which
// /proc/PID/stat counts CPU time.
const clkTck = 100

// cpuTicks is a process's user and system time, in clock ticks.
func cpuTicks(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		fatalf("top: %v", err)
	}
	_, rest, _ := strings.Cut(string(b), ") ")
	f := strings.Fields(rest)
	u, _ := strconv.ParseInt(f[11], 10, 64)
	s, _ := strconv.ParseInt(f[12], 10, 64)
	return u + s
}

// topReadCounts is the header's "reads N tables M rows".
func topReadCounts(screen string) string {
	i := strings.Index(screen, "reads ")
	if i < 0 {
		return "?"
	}
	s := screen[i:]
	if j := strings.Index(s, " rows"); j >= 0 {
		return s[:j+len(" rows")]
	}
	return s
}

// setRegistryStatus rewrites a Claude registry record as Claude does: a
// new file renamed over the old.
func setRegistryStatus(path, status, waitingFor string) {
	b, err := os.ReadFile(path)
	if err != nil {
		fatalf("top: %v", err)
	}
	s := string(b)
	s = s[:strings.Index(s, `"status":`)] + fmt.Sprintf(`"status":%q,"updatedAt":%d`, status, time.Now().UnixMilli())
	if waitingFor != "" {
		s += fmt.Sprintf(`,"waitingFor":%q`, waitingFor)
	}
	s += `,"kind":"interactive"}`
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(s), 0o644); err != nil {
		fatalf("top: %v", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		fatalf("top: %v", err)
	}
}

func topReport(r *topRun) string {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	p("## top\n\n")
	p("`9harness top --count-reads` in a 200x50 pane of a private tmux server, over a daemon with\n")
	p("%d Claude-shaped agents (sleepers with registry records and 2 MiB transcripts). Change to\n", r.agents)
	p("frame: an agent's registry record is rewritten as Claude does (status waiting, a new\n")
	p("waitingFor), and the clock stops when the pane shows the new text (polled every 2 ms): the\n")
	p("daemon's noticing, the event, the view's read of that one row and the redraw. %d changes a\n", topChanges)
	p("round, %d rounds. Idle CPU: the CPU time of the view's process and the daemon's over %v with\n", *rounds, topIdle)
	p("nothing changing, as a share of one CPU, one sample a round. Median and min–max.\n\n")
	p("| row | median | spread |\n")
	p("|---|---:|---:|\n")
	for _, c := range []*cell{r.latency, r.viewCPU, r.daemonCPU} {
		s := summarize(c.samples)
		p("| %s | %s %s | %s–%s |\n", c.name, num(s.med), c.unit, num(s.lo), num(s.hi))
	}
	if len(r.firstFrames) > 0 {
		s := summarize(r.firstFrames)
		p("| start to a frame with every agent (a warm daemon; includes typing the filter) | %s ms | %s–%s |\n", num(s.med), num(s.lo), num(s.hi))
	}
	p("\nThe view's own read counts before and after each idle stretch (the same means no read):\n\n")
	for i, s := range r.idleReads {
		p("- round %d: %s\n", i+1, s)
	}
	return b.String()
}

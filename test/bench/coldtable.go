package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/9harness/9harness/internal/harness"
)

// The cold-table sections: the first table a client gets from a daemon
// that socket activation has just started (as after an idle exit: a new
// process, nothing derived yet, the page cache warm), at 50, 200 and 500
// Claude-shaped agents (the ps section's fixture, each agent in its own
// directory), against `ps -eo pid,args` on the same process table.
// coldps times `9harness ps`, coldtop `9harness top --once`.

// coldTableRounds is the activations per row and size.
func coldTableRounds() int { return max(*rounds, 5) }

type coldTableRun struct {
	cmd   string // "ps" or "top --once"
	cells []*cell
	// pending is, per size, how many rows of the first table's --json
	// named facts pending, and settled how long after it a read had none.
	pending map[int]int
	settled map[int]float64
	sizes   []int
}

// coldTableCells measures the first `9harness <cmd>` from a cold,
// socket-activated daemon. With cmd "top --once" a client without top is
// an error, never a silent skip.
func coldTableCells(e *env, cmd string) *coldTableRun {
	ssa, err := exec.LookPath("systemd-socket-activate")
	if err != nil {
		fatalf("systemd-socket-activate is not installed (Debian package systemd)")
	}
	args := strings.Fields(cmd)
	if args[0] == "top" {
		out, err := exec.Command(e.client, "top", "--help").CombinedOutput()
		if err != nil {
			fatalf("cold table, top: %s has no top command (%v: %s); build 9harness with top (make build) and run -only coldtop again",
				e.client, err, strings.TrimSpace(string(out)))
		}
	}
	run := &coldTableRun{cmd: cmd, pending: map[int]int{}, settled: map[int]float64{}}
	null, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		fatalf("%v", err)
	}
	defer null.Close()
	for _, n := range psSizeList() {
		key := fmt.Sprintf("cold%d", n)
		base := psScaleBase(e.tmp, key)
		sock := psScaleAgentsUp(base, n, false)
		daemon := []string{e.ours, "--quiet"}
		for _, h := range harness.Names() {
			daemon = append(daemon, "--root", h+"="+harness.DefaultRoot(h, filepath.Join(base, "home"), ""))
		}
		// Checked once: every agent listed and resolved; how many rows
		// the first table left facts pending in, and how soon a later
		// read of the same daemon had them all.
		first := true
		check := func(sockPath string) error {
			if !first {
				return nil
			}
			first = false
			out, err := exec.Command(e.client, "-s", sockPath, "ps", "--json").Output()
			if err != nil {
				return fmt.Errorf("9harness ps --json: %v", err)
			}
			rows, pend, err := coldRows(out, base)
			if err != nil {
				return err
			}
			if rows != n {
				return fmt.Errorf("%d of %d agents resolved", rows, n)
			}
			run.pending[n] = pend
			t0 := time.Now()
			for {
				out, err := exec.Command(e.client, "-s", sockPath, "ps", "--json").Output()
				if err != nil {
					return fmt.Errorf("9harness ps --json: %v", err)
				}
				_, pend, err := coldRows(out, base)
				if err != nil {
					return err
				}
				if pend == 0 {
					run.settled[n] = time.Since(t0).Seconds()
					return nil
				}
				if time.Since(t0) > 2*time.Minute {
					return fmt.Errorf("%d rows still pending after %s", pend, time.Since(t0).Round(time.Second))
				}
				time.Sleep(100 * time.Millisecond)
			}
		}
		if _, err := activateRun(ssa, sock, daemon, func() error { return check(sock) }); err != nil {
			fatalf("cold table, %d agents: %v", n, err)
		}
		fmt.Printf("cold %s: %d agents: first table left %d rows pending; a later read had none after %.1f s\n",
			cmd, n, run.pending[n], run.settled[n])
		timed := func(path string, args ...string) func() error {
			return func() error {
				var stderr strings.Builder
				c := exec.Command(path, args...)
				c.Stdout, c.Stderr = null, &stderr
				if err := c.Run(); err != nil {
					return fmt.Errorf("%s: %v: %s", filepath.Base(path), err, stderr.String())
				}
				return nil
			}
		}
		anchor := &cell{section: "cold" + args[0], key: key + "-ps", unit: "ms",
			name: fmt.Sprintf("ps -eo pid,args, %d agents", n)}
		ours := &cell{section: "cold" + args[0], key: key, unit: "ms", anchor: anchor.key,
			name: fmt.Sprintf("9harness %s, first from a cold daemon, %d agents", cmd, n)}
		client := timed(e.client, append([]string{"-s", sock}, args...)...)
		ps := timed("ps", "-eo", "pid,args")
		for r := 0; r < coldTableRounds(); r++ {
			t0 := time.Now()
			if err := ps(); err != nil {
				fatalf("round %d, %s: %v", r+1, anchor.name, err)
			}
			v := float64(time.Since(t0).Microseconds()) / 1000
			anchor.samples = append(anchor.samples, v)
			printSample(r, anchor, v)
			d, err := activateRun(ssa, sock, daemon, client)
			if err != nil {
				fatalf("round %d, %s: %v", r+1, ours.name, err)
			}
			v = float64(d.Microseconds()) / 1000
			ours.samples = append(ours.samples, v)
			printSample(r, ours, v)
		}
		run.cells = append(run.cells, anchor, ours)
		run.sizes = append(run.sizes, n)
		stopSleepers()
		os.RemoveAll(base)
	}
	return run
}

// coldRows counts the rows of a ps --json whose cwd is under base and
// whose session is resolved, and of them those that name pending facts.
func coldRows(out []byte, base string) (rows, pending int, err error) {
	var all []struct {
		Session string   `json:"session"`
		Cwd     string   `json:"cwd"`
		Pending []string `json:"pending"`
	}
	if err := json.Unmarshal(out, &all); err != nil {
		return 0, 0, err
	}
	for _, r := range all {
		if r.Session == "" || !strings.HasPrefix(r.Cwd, base) {
			continue
		}
		rows++
		if len(r.Pending) > 0 {
			pending++
		}
	}
	return rows, pending, nil
}

// psSizeList is the ps section's sizes (-ps-sizes narrows them).
func psSizeList() []int {
	if *psSizes == "" {
		return psScaleAgents
	}
	var out []int
	for _, f := range strings.Split(*psSizes, ",") {
		var n int
		if _, err := fmt.Sscan(strings.TrimSpace(f), &n); err != nil || n <= 0 {
			fatalf("-ps-sizes: %q is not a count", f)
		}
		out = append(out, n)
	}
	return out
}

// activateRun starts systemd-socket-activate -l sock argv..., waits until
// it listens, then times client, whose first connect starts the daemon.
// It stops the activation (by its own handle) before returning.
func activateRun(ssa, sock string, argv []string, client func() error) (time.Duration, error) {
	os.Remove(sock)
	cmd := exec.Command(ssa, append([]string{"-l", sock}, argv...)...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return 0, err
	}
	coldMu.Lock()
	if err := cmd.Start(); err != nil {
		coldMu.Unlock()
		return 0, err
	}
	coldCur = cmd
	coldMu.Unlock()
	done := make(chan error, 1)
	var log bytes.Buffer
	listening := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stderr)
		signalled := false
		for sc.Scan() {
			log.WriteString(sc.Text() + "\n")
			if !signalled && strings.HasPrefix(sc.Text(), "Listening on ") {
				close(listening)
				signalled = true
			}
		}
		io.Copy(io.Discard, stderr)
		done <- cmd.Wait()
	}()
	defer func() {
		defer func() { coldMu.Lock(); coldCur = nil; coldMu.Unlock() }()
		select {
		case <-done:
			return
		default:
		}
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	}()
	select {
	case <-listening:
	case err := <-done:
		done <- err
		return 0, fmt.Errorf("exited before listening: %v: %s", err, log.String())
	case <-time.After(10 * time.Second):
		return 0, fmt.Errorf("not listening after 10s: %s", log.String())
	}
	t0 := time.Now()
	if err := client(); err != nil {
		return 0, fmt.Errorf("%v: %s", err, log.String())
	}
	return time.Since(t0), nil
}

func coldTableReport(r *coldTableRun) string {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	st := map[string]stat{}
	for _, c := range r.cells {
		st[c.key] = summarize(c.samples)
	}
	name := strings.Fields(r.cmd)[0]
	p("## 9harness %s from a cold daemon\n\n", r.cmd)
	p("The first `9harness -s SOCK %s` (output to /dev/null, process start-up included) from a\n", r.cmd)
	p("daemon that socket activation has just started, as after an idle exit: `systemd-socket-activate\n")
	p("-l SOCK 9harnessd --quiet --root …` listens, and the client's connect starts a new daemon that\n")
	p("has derived nothing yet (the page cache warm). The agents are the ps section's (copies of\n")
	p("`sleep` named `claude`, each in its own directory with a registry record and a %d MiB\n", psScaleTranscript>>20)
	p("transcript of one long streaming response, with usage on every line). Anchor: `ps -eo\n")
	p("pid,args` on the same process table. %d rounds, a fresh activation per %s sample, the rows\n", coldTableRounds(), name)
	p("alternating; milliseconds, median and min–max.\n\n")
	p("Target: the 500-agent row within 10x `ps`.\n\n")
	p("| row | median (ms) | spread | vs ps on the same table | target |\n")
	p("|---|---:|---:|---:|---|\n")
	for _, c := range r.cells {
		s := st[c.key]
		if c.anchor == "" {
			p("| %s | %s | %s–%s | 1.00x | anchor |\n", c.name, num(s.med), num(s.lo), num(s.hi))
			continue
		}
		ratio := s.med / st[c.anchor].med
		target := ""
		if c.key == "cold500" {
			target = "≤ 10x ps: **met**"
			if ratio > 10 {
				target = "≤ 10x ps: **not met**"
			}
		}
		p("| %s | %s | %s–%s | %.2fx | %s |\n", c.name, num(s.med), num(s.lo), num(s.hi), ratio, target)
	}
	p("\nA first table leaves out what its read had no budget for (titles and models not yet\n")
	p("derived, token sums that need a whole transcript read) and names it under `pending`; the\n")
	p("daemon derives it after the read. Once per size, from a separate activation: rows of the\n")
	p("first `ps --json` naming facts pending, and how long after it a read had none:\n\n")
	p("| agents | rows pending in the first table | no row pending after (s) |\n|---:|---:|---:|\n")
	for _, n := range r.sizes {
		p("| %d | %d | %.1f |\n", n, r.pending[n], r.settled[n])
	}
	return b.String()
}

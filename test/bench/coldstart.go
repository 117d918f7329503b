package main

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/9harness/9harness/internal/harness"
)

// The cold-start section: systemd-socket-activate holds the socket; the
// clock starts at connect() and stops when Rversion has been read. The
// anchor is the same tool activating a hello-world Go program that accepts
// one connection, reads one message and writes a reply.

const helloSrc = `package main

import (
	"encoding/binary"
	"io"
	"net"
	"os"
)

// A socket-activated hello world: take the listening socket on fd 3,
// accept one connection, read one 9P message, answer with an Rversion.
func main() {
	if os.Getenv("LISTEN_FDS") != "1" {
		os.Exit(2)
	}
	l, err := net.FileListener(os.NewFile(3, "listener"))
	if err != nil {
		os.Exit(1)
	}
	c, err := l.Accept()
	if err != nil {
		os.Exit(1)
	}
	var h [4]byte
	if _, err := io.ReadFull(c, h[:]); err != nil {
		os.Exit(1)
	}
	body := make([]byte, binary.LittleEndian.Uint32(h[:])-4)
	if _, err := io.ReadFull(c, body); err != nil || len(body) < 7 {
		os.Exit(1)
	}
	r := []byte{0, 0, 0, 0, 101, body[1], body[2], body[3], body[4], body[5], body[6], 8, 0}
	r = append(r, "9P2000.L"...)
	binary.LittleEndian.PutUint32(r, uint32(len(r)))
	c.Write(r)
	c.Close()
}
`

// coldCur is the activation in progress, killed (by its own handle) if the
// bench is stopped in the middle of one.
var (
	coldMu  sync.Mutex
	coldCur *exec.Cmd
)

type coldRun struct {
	cells []*cell // "hello", "ours": one sample per activation, in ms
	tool  string
}

// buildHello compiles the hello-world program in dir and returns its path.
func buildHello(dir string) string {
	src := filepath.Join(dir, "hello")
	if err := os.MkdirAll(src, 0o755); err != nil {
		fatalf("%v", err)
	}
	writeFile(filepath.Join(src, "go.mod"), "module hello\n\ngo 1.22\n")
	writeFile(filepath.Join(src, "main.go"), helloSrc)
	exe := filepath.Join(dir, "hello-activated")
	cmd := exec.Command("go", "build", "-o", exe, ".")
	cmd.Dir = src
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=")
	if out, err := cmd.CombinedOutput(); err != nil {
		fatalf("build the hello-world program: %v\n%s", err, out)
	}
	return exe
}

func coldStart(e *env) *coldRun {
	ssa, err := exec.LookPath("systemd-socket-activate")
	if err != nil {
		fatalf("systemd-socket-activate is not installed (Debian package systemd)")
	}
	dir := filepath.Join(e.tmp, "coldstart")
	hello := buildHello(dir)
	var ourArgs []string
	for _, h := range harness.Names() {
		ourArgs = append(ourArgs, "--root", h+"=/nonexistent/9harness-bench")
	}
	ourArgs = append([]string{"--quiet"}, ourArgs...)
	if e.data != "" {
		if _, err := os.Stat(e.data); err == nil {
			ourArgs[len(ourArgs)-1] = "dsh=" + e.data
		}
	}
	sock := filepath.Join(dir, "activate.sock")
	atExit(func() {
		coldMu.Lock()
		if coldCur != nil {
			coldCur.Process.Kill()
		}
		coldMu.Unlock()
	})
	run := &coldRun{tool: ssa, cells: []*cell{
		{section: "coldstart", key: "hello", unit: "ms", name: "hello-world Go program"},
		{section: "coldstart", key: "ours", unit: "ms", name: "9harnessd"},
	}}
	progs := map[string][]string{"hello": {hello}, "ours": append([]string{e.ours}, ourArgs...)}

	// Each path once before timing.
	for _, c := range run.cells {
		if _, err := activate(ssa, sock, progs[c.key]); err != nil {
			fatalf("cold start, %s: %v", c.name, err)
		}
	}
	fmt.Printf("measuring cold start: %d rounds of %d activations per row\n", *rounds, *coldN)
	t0 := time.Now()
	for r := 0; r < *rounds; r++ {
		for range *coldN {
			for _, c := range run.cells {
				d, err := activate(ssa, sock, progs[c.key])
				if err != nil {
					fatalf("round %d, cold start, %s: %v", r+1, c.name, err)
				}
				c.samples = append(c.samples, float64(d.Microseconds())/1000)
			}
		}
		for _, c := range run.cells {
			s := summarize(c.samples[len(c.samples)-*coldN:])
			fmt.Printf("  round %d  cold start, %-40s median %.2f ms (%.2f–%.2f)\n", r+1, c.name, s.med, s.lo, s.hi)
		}
	}
	fmt.Printf("measured cold start in %s\n", time.Since(t0).Round(time.Second))
	return run
}

// activate starts systemd-socket-activate -l sock argv..., waits until it
// listens, then times connect() to the Rversion of a Tversion
// (activateRun). It stops the activated program before returning.
func activate(ssa, sock string, argv []string) (time.Duration, error) {
	req := newFrame(tversion, notag).u32(diodCap).str("9P2000.L").bytes()
	return activateRun(ssa, sock, argv, func() error {
		c, err := net.Dial("unix", sock)
		if err != nil {
			return err
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := c.Write(req); err != nil {
			return err
		}
		var h [4]byte
		if _, err := io.ReadFull(c, h[:]); err != nil {
			return fmt.Errorf("no Rversion: %v", err)
		}
		n := binary.LittleEndian.Uint32(h[:])
		if n < 7 || n > 1<<16 {
			return fmt.Errorf("reply size %d", n)
		}
		body := make([]byte, n-4)
		if _, err := io.ReadFull(c, body); err != nil {
			return err
		}
		if body[0] != tversion+1 {
			return fmt.Errorf("reply type %d, want Rversion", body[0])
		}
		if !bytes.HasSuffix(body, []byte("9P2000.L")) {
			return fmt.Errorf("Rversion %q", body[7:])
		}
		return nil
	})
}

func coldReport(r *coldRun) string {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	h, o := summarize(r.cells[0].samples), summarize(r.cells[1].samples)
	p("## Cold start\n\n")
	p("`systemd-socket-activate -l SOCK PROGRAM ...` (from the Debian package `systemd`) binds and\n")
	p("listens on SOCK; once it reports listening, the clock starts at connect() and stops when\n")
	p("the reply to a Tversion (`9P2000.L`, msize 64 KiB) has been read: the tool accepts nothing,\n")
	p("it execs PROGRAM with the socket as fd 3 (`LISTEN_FDS=1`), which then accepts and answers.\n")
	p("PROGRAM is `9harnessd --quiet --root …` (the data directory as its dsh root, the other roots\n")
	p("absent), or the anchor: a hello-world Go program built by the benchmark (`go build`, no\n")
	p("dependencies) that takes fd 3, accepts one connection, reads one message and writes a fixed\n")
	p("Rversion. Each activation is a fresh process, stopped after its sample; the page cache is\n")
	p("warm (both binaries were run before timing). %d rounds of %d activations per row, the rows\n", *rounds, *coldN)
	p("alternating; median and min–max over all %d samples of a row.\n\n", len(r.cells[0].samples))
	p("| row | median (ms) | spread | vs hello world | target |\n")
	p("|---|---:|---:|---:|---|\n")
	p("| %s | %.2f | %.2f–%.2f | 1.00x | anchor |\n", r.cells[0].name, h.med, h.lo, h.hi)
	p("| %s | %.2f | %.2f–%.2f | %.2fx | (report) |\n", r.cells[1].name, o.med, o.lo, o.hi, o.med/h.med)
	p("\nRatios here are times: above 1.00x is slower to first reply than the hello world.\n")
	return b.String()
}

// Command bench measures 9harnessd side by side with diod, the independent
// 9P2000.L server, on the same data and the same socket transport, and
// writes the result as BENCHMARKS.md.
//
//	go run ./test/bench [-rounds N] [-out BENCHMARKS.md]
//
// It needs root (diod runs as root) and diod's tools (Debian package diod).
// Every cell is measured once per round, the cells interleaved within a
// round (A B A B over the rounds), and reported as median and min–max.
// Before anything is timed, each path is checked once for correctness, so a
// broken server is never reported as a fast one.
package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

const (
	bigSize  = 100 << 20 // bytes in the file read sequentially
	dirCount = 10000     // entries in the listed directory
	diodCap  = 65536     // diod's largest msize
	ourMsize = 1 << 20   // 9harnessd's default largest msize
)

var (
	rounds   = flag.Int("rounds", 5, "interleaved rounds per cell")
	outPath  = flag.String("out", "BENCHMARKS.md", "where to write the report (\"-\": standard output only)")
	rpcDur   = flag.Duration("getattr", 3*time.Second, "duration of one getattr sample")
	readMin  = flag.Duration("read-min", time.Second, "minimum duration of one sequential-read sample (the read is repeated)")
	listMin  = flag.Duration("list-min", 500*time.Millisecond, "minimum duration of one listing sample (the listing is repeated)")
	parallel = flag.Int("conns", 16, "connections in the concurrent getattr cells")
)

func main() {
	flag.Usage = func() {
		fmt.Fprintf(os.Stderr, "usage: go run ./test/bench [-rounds N] [-out BENCHMARKS.md]\n\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	if *rounds < 1 {
		fatalf("-rounds must be at least 1")
	}
	if os.Geteuid() != 0 {
		fmt.Fprintln(os.Stderr, "bench: needs root: diod, the reference server, runs as root (try: sudo make bench)")
		os.Exit(2)
	}
	code := run()
	cleanup()
	os.Exit(code)
}

// ---------------------------------------------------------------- cleanup

var (
	cleanMu  sync.Mutex
	cleanups []func()
)

func atExit(f func()) {
	cleanMu.Lock()
	cleanups = append(cleanups, f)
	cleanMu.Unlock()
}

// cleanup runs the registered cleanups, newest first. The lock is held
// throughout, so a second caller (a signal arriving while a failure is being
// handled) waits until the servers are stopped and the data removed.
func cleanup() {
	cleanMu.Lock()
	defer cleanMu.Unlock()
	for len(cleanups) > 0 {
		f := cleanups[len(cleanups)-1]
		cleanups = cleanups[:len(cleanups)-1]
		f()
	}
}

func fatalf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "bench: "+format+"\n", args...)
	cleanup()
	os.Exit(1)
}

// ---------------------------------------------------------------- run

type env struct {
	tmp, data         string
	diodSock, ourSock string
	diodcat, diodls   string
	null              *os.File
}

func run() int {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	go func() {
		s := <-sig
		fmt.Fprintf(os.Stderr, "bench: %v: stopping\n", s)
		cleanup()
		os.Exit(1)
	}()

	diod := tool("diod")
	e := &env{diodcat: tool("diodcat"), diodls: tool("diodls")}
	ours := ourDaemon()

	m := machine(ours)
	fmt.Println("machine:", m)

	tmp, err := os.MkdirTemp("", "9harness-bench-")
	if err != nil {
		fatalf("%v", err)
	}
	atExit(func() { os.RemoveAll(tmp) })
	e.tmp, e.data = tmp, filepath.Join(tmp, "data")
	e.diodSock, e.ourSock = filepath.Join(tmp, "diod.sock"), filepath.Join(tmp, "9harnessd.sock")
	if e.null, err = os.OpenFile(os.DevNull, os.O_WRONLY, 0); err != nil {
		fatalf("%v", err)
	}

	fmt.Printf("data: %d MB random file, %d-entry directory in %s\n", bigSize>>20, dirCount, e.data)
	sum := makeData(e.data)

	start("diod", e.diodSock, diod, "-f", "-n", "-N", "-e", e.data, "-l", e.diodSock)
	args := []string{"--unix", e.ourSock, "--quiet"}
	for _, h := range []string{"claude", "codex", "omp", "pi", "hermes"} {
		args = append(args, "--root", h+"=/nonexistent/9harness-bench")
	}
	args = append(args, "--root", "dsh="+e.data)
	start("9harnessd", e.ourSock, ours, args...)

	verify(e, sum)

	cells := plan(e)
	fmt.Printf("measuring: %d rounds, %d cells\n", *rounds, len(cells))
	t0 := time.Now()
	for r := 0; r < *rounds; r++ {
		for _, c := range cells {
			v, err := c.measure()
			if err != nil {
				fatalf("round %d, %s: %v", r+1, c.name, err)
			}
			c.samples = append(c.samples, v)
			fmt.Printf("  round %d  %-44s %12.0f %s\n", r+1, c.name, v, c.unit)
		}
	}
	fmt.Printf("measured in %s\n", time.Since(t0).Round(time.Second))

	md := report(m, cells)
	fmt.Println()
	fmt.Print(md)
	if *outPath != "-" {
		if err := os.WriteFile(*outPath, []byte(md), 0o644); err != nil {
			fatalf("%v", err)
		}
		fmt.Println("wrote", *outPath)
	}
	return 0
}

// tool finds one of diod's programs on PATH or in the sbin directories.
func tool(name string) string {
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	for _, d := range []string{"/usr/sbin", "/sbin"} {
		p := filepath.Join(d, name)
		if fi, err := os.Stat(p); err == nil && fi.Mode()&0o111 != 0 {
			return p
		}
	}
	fatalf("%s is not installed (Debian package diod; make deps installs it)", name)
	return ""
}

// ourDaemon returns ./bin/9harnessd, building ./cmd/... first if it is missing.
func ourDaemon() string {
	p, err := filepath.Abs(filepath.Join("bin", "9harnessd"))
	if err != nil {
		fatalf("%v", err)
	}
	if _, err := os.Stat(p); err == nil {
		return p
	}
	fmt.Println("building bin/9harnessd: go build -o bin/ ./cmd/...")
	cmd := exec.Command("go", "build", "-o", "bin/", "./cmd/...")
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		fatalf("build 9harnessd (run from the repository root): %v", err)
	}
	return p
}

// ---------------------------------------------------------------- machine

func machine(ours string) string {
	var uts syscall.Utsname
	kernel := "?"
	if syscall.Uname(&uts) == nil {
		kernel = cstr(uts.Sysname[:]) + " " + cstr(uts.Release[:])
	}
	cpu := "?"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
				cpu = strings.Join(strings.Fields(v), " ")
				break
			}
		}
	}
	mem := "?"
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		var kb int64
		for _, l := range strings.Split(string(b), "\n") {
			if _, err := fmt.Sscanf(l, "MemTotal: %d kB", &kb); err == nil {
				mem = fmt.Sprintf("%.1f GiB", float64(kb)/(1<<20))
				break
			}
		}
	}
	diodV := "unknown"
	if out, err := exec.Command("dpkg-query", "-W", "-f=${Version}", "diod").Output(); err == nil && len(out) > 0 {
		diodV = strings.TrimSpace(string(out))
	}
	oursV := "unknown"
	if out, err := exec.Command(ours, "-version").CombinedOutput(); err == nil {
		oursV = strings.TrimSpace(string(out))
	}
	return fmt.Sprintf("%s, %s, nproc %d, memory %s, %s, diod %s, %s, %s",
		kernel, cpu, runtime.NumCPU(), mem, runtime.Version(), diodV, oursV,
		time.Now().UTC().Format("2006-01-02 15:04 UTC"))
}

func cstr[T int8 | uint8](b []T) string {
	var s []byte
	for _, c := range b {
		if c == 0 {
			break
		}
		s = append(s, byte(c))
	}
	return string(s)
}

// ---------------------------------------------------------------- data

// makeData writes big and dir10k and returns big's SHA-256.
func makeData(dir string) [32]byte {
	if err := os.MkdirAll(filepath.Join(dir, "dir10k"), 0o755); err != nil {
		fatalf("%v", err)
	}
	f, err := os.Create(filepath.Join(dir, "big"))
	if err != nil {
		fatalf("%v", err)
	}
	var seed [32]byte
	binary.LittleEndian.PutUint64(seed[:], uint64(time.Now().UnixNano()))
	src := rand.NewChaCha8(seed)
	h := sha256.New()
	buf := make([]byte, 1<<20)
	for n := 0; n < bigSize; n += len(buf) {
		src.Read(buf)
		h.Write(buf)
		if _, err := f.Write(buf); err != nil {
			fatalf("write big: %v", err)
		}
	}
	if err := f.Close(); err != nil {
		fatalf("write big: %v", err)
	}
	for i := 0; i < dirCount; i++ {
		if err := os.WriteFile(filepath.Join(dir, "dir10k", fmt.Sprintf("f%05d", i)), nil, 0o644); err != nil {
			fatalf("%v", err)
		}
	}
	var sum [32]byte
	copy(sum[:], h.Sum(nil))
	return sum
}

// ---------------------------------------------------------------- servers

// start runs one server in the foreground as our child, waits until its
// socket accepts, and registers its stop (SIGTERM, then SIGKILL after 10 s;
// only this process, by its own handle).
func start(name, sock, path string, args ...string) {
	var log bytes.Buffer
	cmd := exec.Command(path, args...)
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		fatalf("start %s: %v", name, err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	atExit(func() {
		select {
		case <-done:
			return
		default:
		}
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			fmt.Fprintf(os.Stderr, "bench: %s did not stop on SIGTERM; killing pid %d\n", name, cmd.Process.Pid)
			cmd.Process.Kill()
			<-done
		}
	})
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case err := <-done:
			done <- err
			fatalf("%s exited early: %v\n%s", name, err, log.String())
		default:
		}
		if c, err := net.Dial("unix", sock); err == nil {
			c.Close()
			fmt.Printf("%s: pid %d on %s\n", name, cmd.Process.Pid, sock)
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	fatalf("%s did not listen on %s", name, sock)
}

// target is how one server is reached: socket, aname, and the tree path
// prefix under which the data directory appears.
type target struct {
	name, sock, aname, prefix string
}

func (e *env) diod() target { return target{"diod", e.diodSock, e.data, ""} }
func (e *env) ours() target { return target{"9harnessd", e.ourSock, "/", "dsh/"} }

// ---------------------------------------------------------------- verify

func verify(e *env, sum [32]byte) {
	fmt.Println("verifying every path once")
	for _, c := range []struct {
		t     target
		msize int
	}{{e.diod(), diodCap}, {e.ours(), diodCap}, {e.ours(), ourMsize}} {
		out, err := capture(e.diodcat, "-s", c.t.sock, "-a", c.t.aname, "-m", fmt.Sprint(c.msize), c.t.prefix+"big")
		if err != nil {
			fatalf("diodcat %s msize %d: %v", c.t.name, c.msize, err)
		}
		if len(out) != bigSize || sha256.Sum256(out) != sum {
			fatalf("diodcat %s msize %d: %d bytes (want %d) or content differs", c.t.name, c.msize, len(out), bigSize)
		}
	}
	for _, t := range []target{e.diod(), e.ours()} {
		out, err := capture(e.diodls, "-s", t.sock, "-a", t.aname, t.prefix+"dir10k")
		if err != nil {
			fatalf("diodls %s: %v", t.name, err)
		}
		if n := countNames(out); n != dirCount {
			fatalf("diodls %s: %d entries, want %d", t.name, n, dirCount)
		}
	}
	out, err := capture("ls", "-f", filepath.Join(e.data, "dir10k"))
	if err != nil {
		fatalf("ls -f: %v", err)
	}
	if n := countNames(out); n != dirCount {
		fatalf("ls -f: %d entries, want %d", n, dirCount)
	}
	for _, t := range []target{e.diod(), e.ours()} {
		c, err := dial9(t)
		if err != nil {
			fatalf("raw client, %s: %v", t.name, err)
		}
		size, err := c.getattr()
		c.Close()
		if err != nil {
			fatalf("raw client, %s: Tgetattr: %v", t.name, err)
		}
		if size != bigSize {
			fatalf("raw client, %s: Rgetattr size %d, want %d", t.name, size, bigSize)
		}
	}
}

// countNames counts listed names, not counting . and ..
func countNames(out []byte) int {
	n := 0
	for _, l := range strings.Split(string(out), "\n") {
		if l != "" && l != "." && l != ".." {
			n++
		}
	}
	return n
}

func capture(path string, args ...string) ([]byte, error) {
	var stderr bytes.Buffer
	cmd := exec.Command(path, args...)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return out, fmt.Errorf("%v: %s", err, strings.TrimSpace(stderr.String()))
	}
	return out, nil
}

// ---------------------------------------------------------------- cells

type cell struct {
	section string // "read", "list", "getattr"
	key     string // stable id used by the report
	name    string
	unit    string
	measure func() (float64, error)
	samples []float64
}

func plan(e *env) []*cell {
	big := filepath.Join(e.data, "big")
	cat := func(t target, msize int) func() (float64, error) {
		return e.repeat(*readMin, bigSize/1e6, e.diodcat, "-s", t.sock, "-a", t.aname, "-m", fmt.Sprint(msize), t.prefix+"big")
	}
	ls := func(t target, msize int) func() (float64, error) {
		return e.repeat(*listMin, dirCount, e.diodls, "-s", t.sock, "-a", t.aname, "-m", fmt.Sprint(msize), t.prefix+"dir10k")
	}
	ga := func(t target, conns int) func() (float64, error) {
		return func() (float64, error) { return getattrRate(t, conns, *rpcDur) }
	}
	n := *parallel
	return []*cell{
		{section: "read", key: "cat", name: "cat big > /dev/null", unit: "MB/s",
			measure: e.repeat(*readMin, bigSize/1e6, "cat", big)},
		{section: "read", key: "diod64", name: "diodcat, diod, msize 64 KiB", unit: "MB/s", measure: cat(e.diod(), diodCap)},
		{section: "read", key: "ours64", name: "diodcat, 9harnessd, msize 64 KiB", unit: "MB/s", measure: cat(e.ours(), diodCap)},
		{section: "read", key: "ours1M", name: "diodcat, 9harnessd, msize 1 MiB", unit: "MB/s", measure: cat(e.ours(), ourMsize)},

		{section: "list", key: "ls", name: "ls -f dir10k > /dev/null", unit: "entries/s",
			measure: e.repeat(*listMin, dirCount, "ls", "-f", filepath.Join(e.data, "dir10k"))},
		{section: "list", key: "diod64", name: "diodls, diod, msize 64 KiB", unit: "entries/s", measure: ls(e.diod(), diodCap)},
		{section: "list", key: "ours64", name: "diodls, 9harnessd, msize 64 KiB", unit: "entries/s", measure: ls(e.ours(), diodCap)},
		{section: "list", key: "ours1M", name: "diodls, 9harnessd, msize 1 MiB", unit: "entries/s", measure: ls(e.ours(), ourMsize)},

		{section: "getattr", key: "rtt", name: "unix socket round trip, 1 stream", unit: "rt/s",
			measure: func() (float64, error) { return echoRate(e.tmp, *rpcDur) }},
		{section: "getattr", key: "diod1", name: "Tgetattr, diod, 1 connection", unit: "ops/s", measure: ga(e.diod(), 1)},
		{section: "getattr", key: "ours1", name: "Tgetattr, 9harnessd, 1 connection", unit: "ops/s", measure: ga(e.ours(), 1)},
		{section: "getattr", key: "diodN", name: fmt.Sprintf("Tgetattr, diod, %d connections", n), unit: "ops/s", measure: ga(e.diod(), n)},
		{section: "getattr", key: "oursN", name: fmt.Sprintf("Tgetattr, 9harnessd, %d connections", n), unit: "ops/s", measure: ga(e.ours(), n)},
	}
}

// repeat returns a measurement that runs the command (stdout to /dev/null)
// until at least minDur has passed and reports units per second.
func (e *env) repeat(minDur time.Duration, units float64, path string, args ...string) func() (float64, error) {
	return func() (float64, error) {
		runs := 0
		t0 := time.Now()
		for runs == 0 || time.Since(t0) < minDur {
			var stderr bytes.Buffer
			cmd := exec.Command(path, args...)
			cmd.Stdout, cmd.Stderr = e.null, &stderr
			if err := cmd.Run(); err != nil {
				return 0, fmt.Errorf("%s: %v: %s", filepath.Base(path), err, strings.TrimSpace(stderr.String()))
			}
			runs++
		}
		return units * float64(runs) / time.Since(t0).Seconds(), nil
	}
}

// ---------------------------------------------------------------- raw 9P2000.L client

const (
	tversion = 100
	tattach  = 104
	twalk    = 110
	tgetattr = 24
	rlerror  = 7
	notag    = 0xffff
	nofid    = 0xffffffff
)

// conn9 is one connection with fid 1 walked to the file big.
type conn9 struct {
	net.Conn
	req  []byte // the Tgetattr frame, built once
	resp []byte
}

type frame struct{ b []byte }

func newFrame(typ uint8, tag uint16) *frame {
	f := &frame{b: make([]byte, 7, 64)}
	f.b[4] = typ
	binary.LittleEndian.PutUint16(f.b[5:], tag)
	return f
}
func (f *frame) u16(v uint16) *frame { f.b = binary.LittleEndian.AppendUint16(f.b, v); return f }
func (f *frame) u32(v uint32) *frame { f.b = binary.LittleEndian.AppendUint32(f.b, v); return f }
func (f *frame) u64(v uint64) *frame { f.b = binary.LittleEndian.AppendUint64(f.b, v); return f }
func (f *frame) str(s string) *frame { f.u16(uint16(len(s))); f.b = append(f.b, s...); return f }
func (f *frame) bytes() []byte {
	binary.LittleEndian.PutUint32(f.b, uint32(len(f.b)))
	return f.b
}

// rpc sends one frame and returns the reply's body, failing on Rlerror and
// on a reply of another type than want.
func (c *conn9) rpc(req []byte, want uint8) ([]byte, error) {
	if _, err := c.Write(req); err != nil {
		return nil, err
	}
	if _, err := io.ReadFull(c, c.resp[:4]); err != nil {
		return nil, err
	}
	n := binary.LittleEndian.Uint32(c.resp)
	if n < 7 || int(n) > len(c.resp) {
		return nil, fmt.Errorf("reply size %d", n)
	}
	if _, err := io.ReadFull(c, c.resp[4:n]); err != nil {
		return nil, err
	}
	typ, body := c.resp[4], c.resp[7:n]
	switch {
	case typ == rlerror && len(body) >= 4:
		return nil, fmt.Errorf("Rlerror %v", syscall.Errno(binary.LittleEndian.Uint32(body)))
	case typ != want:
		return nil, fmt.Errorf("reply type %d, want %d", typ, want)
	}
	return body, nil
}

// dial9 connects, negotiates 9P2000.L at msize 64 KiB, attaches as our
// euid and walks fid 1 to big.
func dial9(t target) (*conn9, error) {
	nc, err := net.Dial("unix", t.sock)
	if err != nil {
		return nil, err
	}
	c := &conn9{Conn: nc, resp: make([]byte, diodCap)}
	fail := func(what string, err error) (*conn9, error) {
		nc.Close()
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	body, err := c.rpc(newFrame(tversion, notag).u32(diodCap).str("9P2000.L").bytes(), tversion+1)
	if err != nil {
		return fail("Tversion", err)
	}
	if len(body) < 6 || string(body[6:]) != "9P2000.L" {
		return fail("Tversion", fmt.Errorf("server answered %q", body[min(6, len(body)):]))
	}
	if _, err := c.rpc(newFrame(tattach, 1).u32(0).u32(nofid).str("").str(t.aname).u32(uint32(os.Geteuid())).bytes(), tattach+1); err != nil {
		return fail("Tattach", err)
	}
	names := strings.Split(t.prefix+"big", "/")
	w := newFrame(twalk, 1).u32(0).u32(1).u16(uint16(len(names)))
	for _, s := range names {
		w.str(s)
	}
	body, err = c.rpc(w.bytes(), twalk+1)
	if err != nil {
		return fail("Twalk", err)
	}
	if len(body) < 2 || int(binary.LittleEndian.Uint16(body)) != len(names) {
		return fail("Twalk", errors.New("partial walk"))
	}
	c.req = newFrame(tgetattr, 1).u32(1).u64(0x3fff).bytes()
	return c, nil
}

// getattr sends one Tgetattr on fid 1 and returns the size it reports.
func (c *conn9) getattr() (uint64, error) {
	body, err := c.rpc(c.req, tgetattr+1)
	if err != nil {
		return 0, err
	}
	// valid[8] qid[13] mode[4] uid[4] gid[4] nlink[8] rdev[8] size[8]
	if len(body) < 57 {
		return 0, fmt.Errorf("short Rgetattr (%d bytes)", len(body))
	}
	return binary.LittleEndian.Uint64(body[49:]), nil
}

// getattrRate opens conns connections (untimed), then runs Tgetattr in a
// closed loop on each for d and returns the total rate.
func getattrRate(t target, conns int, d time.Duration) (float64, error) {
	cs := make([]*conn9, 0, conns)
	defer func() {
		for _, c := range cs {
			c.Close()
		}
	}()
	for range conns {
		c, err := dial9(t)
		if err != nil {
			return 0, err
		}
		cs = append(cs, c)
	}
	return closedLoop(len(cs), d, func(i int) error { _, err := cs[i].getattr(); return err })
}

// closedLoop runs op in n goroutines until d has passed and returns
// completed ops per second over the time until the last one finished.
func closedLoop(n int, d time.Duration, op func(i int) error) (float64, error) {
	var (
		stop  atomic.Bool
		total atomic.Int64
		wg    sync.WaitGroup
		errMu sync.Mutex
		first error
	)
	go1 := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-go1
			var k int64
			for !stop.Load() {
				if err := op(i); err != nil {
					errMu.Lock()
					if first == nil {
						first = err
					}
					errMu.Unlock()
					stop.Store(true)
					break
				}
				k++
			}
			total.Add(k)
		}()
	}
	t0 := time.Now()
	close(go1)
	timer := time.AfterFunc(d, func() { stop.Store(true) })
	wg.Wait()
	timer.Stop()
	el := time.Since(t0)
	if first != nil {
		return 0, first
	}
	return float64(total.Load()) / el.Seconds(), nil
}

// echoRate is the transport's own limit for one synchronous stream: 64-byte
// request and reply over a unix socket to an in-process echo goroutine.
func echoRate(dir string, d time.Duration) (float64, error) {
	p := filepath.Join(dir, "echo.sock")
	os.Remove(p)
	l, err := net.Listen("unix", p)
	if err != nil {
		return 0, err
	}
	defer l.Close()
	go func() {
		s, err := l.Accept()
		if err != nil {
			return
		}
		defer s.Close()
		b := make([]byte, 64)
		for {
			if _, err := io.ReadFull(s, b); err != nil {
				return
			}
			if _, err := s.Write(b); err != nil {
				return
			}
		}
	}()
	c, err := net.Dial("unix", p)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	b := make([]byte, 64)
	return closedLoop(1, d, func(int) error {
		if _, err := c.Write(b); err != nil {
			return err
		}
		_, err := io.ReadFull(c, b)
		return err
	})
}

// ---------------------------------------------------------------- report

type stat struct{ med, lo, hi float64 }

func summarize(xs []float64) stat {
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	med := s[n/2]
	if n%2 == 0 {
		med = (s[n/2-1] + s[n/2]) / 2
	}
	return stat{med, s[0], s[n-1]}
}

func num(v float64) string {
	switch {
	case v >= 100:
		return commas(int64(v + 0.5))
	case v >= 10:
		return fmt.Sprintf("%.1f", v)
	default:
		return fmt.Sprintf("%.2f", v)
	}
}

func commas(v int64) string {
	s := fmt.Sprint(v)
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

func ratio(a, b float64) string {
	if b == 0 {
		return "–"
	}
	return fmt.Sprintf("%.2fx", a/b)
}

func report(mach string, cells []*cell) string {
	st := map[string]stat{}
	byKey := map[string]*cell{}
	for _, c := range cells {
		k := c.section + "/" + c.key
		st[k] = summarize(c.samples)
		byKey[k] = c
	}
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }

	p("# Benchmarks\n\n")
	p("9harnessd side by side with [diod](https://github.com/chaos/diod), an independent 9P2000.L\n")
	p("server written in C, on the same data, the same unix-socket transport and the same clients\n")
	p("(diod's own `diodcat`/`diodls`, and a minimal raw 9P2000.L client in the benchmark program).\n")
	p("Generated by `test/bench`; do not edit by hand.\n\n")
	p("## How to run\n\n")
	p("```\nmake bench                              # as root; runs go run ./test/bench\n")
	p("go run ./test/bench -rounds 3 -out -   # print only\n```\n\n")
	p("Needs root (diod runs as root) and the Debian package `diod`. Takes a few minutes.\n\n")
	p("## Machine\n\n%s\n\n", mach)
	p("## Method\n\n")
	p("* Data in a fresh temporary directory: `big`, %d MB of random bytes (page-cached: read\n", bigSize>>20)
	p("  back right after it is written), and `dir10k`, a directory of %s empty files.\n", commas(dirCount))
	p("* `diod -f -n -N -e DATA -l SOCK` and `9harnessd --unix SOCK --root dsh=DATA` (the other\n")
	p("  five roots pointed at a nonexistent path) serve the same directory, each on a unix socket.\n")
	p("* %d rounds; in each round every row is measured once, in table order, so the servers\n", *rounds)
	p("  alternate (A B A B). Reported: median and min–max over the rounds. Ratios are of medians.\n")
	p("* Read and listing rows time whole client processes (`diodcat`, `diodls`, `cat`, `ls -f`,\n")
	p("  stdout to /dev/null), repeated for at least %s (reads) / %s (listings) per sample;\n", *readMin, *listMin)
	p("  process start-up is included, which weighs most on `ls -f`.\n")
	p("* Getattr rows: the raw client attaches (Tversion `9P2000.L` msize 65536, Tattach with\n")
	p("  n_uname = euid), walks a fid to `big`, then sends Tgetattr (mask 0x3fff) in a closed loop\n")
	p("  for %s, on 1 connection and on %d connections at once (one goroutine each).\n", *rpcDur, *parallel)
	p("  The socket round-trip row is the same loop against an in-process 64-byte echo: the\n")
	p("  ceiling for one synchronous stream on this machine.\n")
	p("* Every path is verified once before timing: diodcat output is the file byte for byte,\n")
	p("  diodls and `ls -f` list exactly %s names, Rgetattr reports the file's size.\n", commas(dirCount))
	p("* The clients and both servers share the machine's %d CPUs.\n\n", runtime.NumCPU())

	p("Targets: 9harnessd at least 1.0x diod on every row, and at least 2x diod on sequential\n")
	p("reads at 9harnessd's default msize (1 MiB; diod cannot go above 64 KiB, so it is compared\n")
	p("at its cap).\n\n")

	row := func(c *cell, s stat, vsDiod, vsAnchor, target string) {
		p("| %s | %s | %s–%s | %s | %s | %s |\n", c.name, num(s.med), num(s.lo), num(s.hi), vsDiod, vsAnchor, target)
	}
	met := func(r, want float64) string {
		v := fmt.Sprintf("≥ %.1fx diod: ", want)
		if r >= want {
			return v + "**met**"
		}
		return v + "**not met**"
	}
	table := func(section, title, unit, anchorKey, anchorName string, pairs [][3]string) {
		p("## %s\n\n", title)
		p("| row | median (%s) | spread | vs diod | vs %s | target |\n", unit, anchorName)
		p("|---|---:|---:|---:|---:|---|\n")
		a := st[section+"/"+anchorKey]
		row(byKey[section+"/"+anchorKey], a, "", "1.00x", "anchor")
		for _, pr := range pairs { // key, diod key to compare with, target multiple
			c, s := byKey[section+"/"+pr[0]], st[section+"/"+pr[0]]
			if pr[1] == "" {
				row(c, s, "1.00x", ratio(s.med, a.med), "reference")
				continue
			}
			d := st[section+"/"+pr[1]]
			var want float64
			fmt.Sscan(pr[2], &want)
			row(c, s, ratio(s.med, d.med), ratio(s.med, a.med), met(s.med/d.med, want))
		}
		p("\n")
	}

	table("read", fmt.Sprintf("Sequential read of a %d MB file", bigSize>>20), "MB/s", "cat", "cat", [][3]string{
		{"diod64", "", ""},
		{"ours64", "diod64", "1"},
		{"ours1M", "diod64", "2"},
	})
	p("The 1 MiB row is compared with diod at 64 KiB, diod's largest msize.\n\n")
	table("list", fmt.Sprintf("Listing a %s-entry directory", commas(dirCount)), "entries/s", "ls", "ls -f", [][3]string{
		{"diod64", "", ""},
		{"ours64", "diod64", "1"},
		{"ours1M", "diod64", "1"},
	})
	// getattr: the anchor is the socket round trip; the targets compare like with like.
	p("## Getattr on a held fid\n\n")
	p("| row | median (ops/s) | spread | vs diod | vs socket round trip | target |\n")
	p("|---|---:|---:|---:|---:|---|\n")
	rtt := st["getattr/rtt"]
	row(byKey["getattr/rtt"], rtt, "", "1.00x", "anchor")
	for _, pr := range [][2]string{{"diod1", ""}, {"ours1", "diod1"}, {"diodN", ""}, {"oursN", "diodN"}} {
		c, s := byKey["getattr/"+pr[0]], st["getattr/"+pr[0]]
		vsRTT := ratio(s.med, rtt.med)
		if strings.HasSuffix(pr[0], "N") {
			vsRTT = "" // many streams against one: not comparable
		}
		if pr[1] == "" {
			row(c, s, "1.00x", vsRTT, "reference")
			continue
		}
		d := st["getattr/"+pr[1]]
		row(c, s, ratio(s.med, d.med), vsRTT, met(s.med/d.med, 1))
	}
	p("\n")
	return b.String()
}

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

	"github.com/hugelgupf/p9/linux"
	"github.com/hugelgupf/p9/p9"

	"github.com/9harness/9harness/internal/client"
	"github.com/9harness/9harness/internal/proc/proctest"
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
	onlyAct  = flag.Bool("active-only", false, "measure only the /active listing section (needs no diod; prints it, and with an explicit -out replaces that section of the file)")
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

	ours := ourDaemon()
	tmp, err := os.MkdirTemp("", "9harness-bench-")
	if err != nil {
		fatalf("%v", err)
	}
	atExit(func() { os.RemoveAll(tmp) })
	if *onlyAct {
		m := machine(ours)
		fmt.Println("machine:", m)
		a := activeCells(ours, tmp)
		sec := activeReport(a)
		fmt.Print("\n" + sec)
		outSet := false
		flag.Visit(func(f *flag.Flag) { outSet = outSet || f.Name == "out" })
		if outSet && *outPath != "-" {
			if err := replaceActiveSection(*outPath, sec, m); err != nil {
				fmt.Fprintln(os.Stderr, "bench:", err)
				return 1
			}
			fmt.Println("wrote the /active section of", *outPath)
		}
		return 0
	}

	diod := tool("diod")
	e := &env{diodcat: tool("diodcat"), diodls: tool("diodls")}

	m := machine(ours)
	fmt.Println("machine:", m)

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
			printSample(r, c, v)
		}
	}
	fmt.Printf("measured in %s\n", time.Since(t0).Round(time.Second))

	act := activeCells(ours, tmp)

	md := report(m, cells) + activeReport(act)
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

func printSample(r int, c *cell, v float64) {
	if c.unit == "ms" {
		fmt.Printf("  round %d  %-60s %10.2f %s\n", r+1, c.name, v, c.unit)
		return
	}
	fmt.Printf("  round %d  %-44s %12.0f %s\n", r+1, c.name, v, c.unit)
}

// ---------------------------------------------------------------- /active

const (
	fixtureProcs = 2000 // processes in the generated fixture table
	liveSleepers = 500  // harness-shaped sleepers added to the live table
)

// activeRun is the /active section: its cells and what they were measured on.
type activeRun struct {
	cells                   []*cell
	fixtureAgents           int // agents the fixture table holds
	fixtureFiles, liveFiles int // field files one listing reads
	liveAgents, liveProcs   int // agents listed and processes in the live table
	sizes                   string
}

// activeCells builds the fixture table and home, starts the sleepers and
// two daemons, checks both listings once, and measures them against
// ps -eo pid,args, interleaved over the rounds.
func activeCells(ours, tmp string) *activeRun {
	dir := filepath.Join(tmp, "active")
	procDir, home, agents := makeActiveFixture(dir)
	run := &activeRun{fixtureAgents: agents, sizes: transcriptSizesText()}
	fmt.Printf("/active: fixture table of %d processes (%d agents) in %s\n", fixtureProcs, agents, procDir)

	fixSock := filepath.Join(dir, "fixture.sock")
	args := []string{"--unix", fixSock, "--quiet", "--proc", procDir}
	for _, h := range []string{"claude", "codex", "omp", "pi", "hermes", "dsh"} {
		args = append(args, "--root", h+"="+filepath.Join(home, "."+h))
	}
	start("9harnessd (fixture table)", fixSock, ours, args...)

	sleepers := startSleepers(filepath.Join(dir, "bin"), liveSleepers)
	empty := filepath.Join(dir, "empty-home")
	if err := os.MkdirAll(empty, 0o755); err != nil {
		fatalf("%v", err)
	}
	liveSock := filepath.Join(dir, "live.sock")
	args = []string{"--unix", liveSock, "--quiet"}
	for _, h := range []string{"claude", "codex", "omp", "pi", "hermes", "dsh"} {
		args = append(args, "--root", h+"="+filepath.Join(empty, "."+h))
	}
	start("9harnessd (live table)", liveSock, ours, args...)

	// Check both once: the fixture lists exactly its agents, each with a
	// session; the live table lists every sleeper.
	fmt.Println("/active: verifying both listings once")
	got, err := listActive(fixSock, false, func(h, pid string, fields map[string]string) {
		if fields["session"] == "" {
			fatalf("fixture /active/%s/%s: no session (via %q)", h, pid, fields["via"])
		}
	})
	if err != nil {
		fatalf("fixture listing: %v", err)
	}
	if got.agents != agents {
		fatalf("fixture listing: %d agents, want %d", got.agents, agents)
	}
	run.fixtureFiles = got.files
	seen := map[string]bool{}
	got, err = listActive(liveSock, true, func(h, pid string, _ map[string]string) {
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
	run.cells = []*cell{
		{section: "active", key: "ps", unit: "ms",
			name:    fmt.Sprintf("ps -eo pid,args, live table (%s processes)", commas(int64(run.liveProcs))),
			measure: func() (float64, error) { v, err := ps(); return 1000 / v, err }},
		{section: "active", key: "fixture", unit: "ms",
			name:    fmt.Sprintf("/active listing, fixture table (%s processes, %d agents)", commas(fixtureProcs), agents),
			measure: timeListing(fixSock, false, true)},
		{section: "active", key: "fixture-names", unit: "ms",
			name:    "/active names only, fixture table",
			measure: timeListing(fixSock, false, false)},
		{section: "active", key: "live", unit: "ms",
			name:    fmt.Sprintf("/active listing, live table (%s processes, %d agents)", commas(int64(run.liveProcs)), run.liveAgents),
			measure: timeListing(liveSock, true, true)},
		{section: "active", key: "live-names", unit: "ms",
			name:    "/active names only, live table",
			measure: timeListing(liveSock, true, false)},
	}
	fmt.Printf("measuring /active: %d rounds, %d cells\n", *rounds, len(run.cells))
	t0 := time.Now()
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
		var e linux.Errno
		return live && errors.As(err, &e) && e == linux.ENOENT
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
				if e.QID.Type&p9.TypeDir != 0 || e.Name == "transcript" {
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
// in the shapes of testdata/home) and a process table of fixtureProcs
// processes in dir: mostly not harnesses (kernel threads, shells, servers,
// interpreters), plus helpers that are never listed, plus the agents. It
// returns the table, the home and the number of agents.
func makeActiveFixture(dir string) (string, string, int) {
	home := filepath.Join(dir, "home")
	procDir := filepath.Join(dir, "proc")
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
	// 3 background workers and 2 print runs (helpers).
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
		add(proctest.Proc{PID: nextPID(), PPID: 1, Start: 900, Argv: []string{"claude", "-p", "summarize"}, Cwd: fakeHome})
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
	for k := 2; len(procs) < fixtureProcs; k++ {
		if k < 150 {
			procs = append(procs, proctest.Proc{PID: k, PPID: 2, UID: uid, Start: 12, Comm: fmt.Sprintf("kworker/%d:1", k%2), Cwd: "/"})
			continue
		}
		argv := others[rng.IntN(len(others))]
		add(proctest.Proc{PID: nextPID(), PPID: 1, Start: uint64(1000 + rng.IntN(100000)), Argv: argv, Cwd: "/srv/app"})
	}
	if err := proctest.Write(procDir, procs...); err != nil {
		fatalf("write the fixture table: %v", err)
	}
	writeFile(filepath.Join(procDir, "stat"), fmt.Sprintf("cpu  1 2 3 4\nbtime %d\nprocesses %d\n", boot, len(procs)))
	return procDir, home, agents
}

func writeFile(path, content string) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		fatalf("%v", err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		fatalf("%v", err)
	}
}

// replaceActiveSection puts sec in place of the "## /active listing"
// section of the report at path (up to the next "## " heading), noting the
// machine and time it was measured on, since the rest of the file may be
// older.
func replaceActiveSection(path, sec, machine string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	s := string(b)
	const head = "## /active listing\n"
	i := strings.Index(s, head)
	if i < 0 {
		return fmt.Errorf("%s: no %q section to replace", path, strings.TrimSpace(head))
	}
	end := len(s)
	if j := strings.Index(s[i+len(head):], "\n## "); j >= 0 {
		end = i + len(head) + j + 1
	}
	sec = strings.Replace(sec, head, head+"\nMeasured on its own (`go run ./test/bench -active-only -out "+path+"`): "+machine+".\n", 1)
	if !strings.HasSuffix(sec, "\n") {
		sec += "\n"
	}
	if end < len(s) {
		sec += "\n"
	}
	return os.WriteFile(path, []byte(s[:i]+sec+s[end:]), 0o644)
}

// activeReport renders the /active section.
func activeReport(a *activeRun) string {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	st := map[string]stat{}
	by := map[string]*cell{}
	for _, c := range a.cells {
		st[c.key], by[c.key] = summarize(c.samples), c
	}
	ps := st["ps"]
	p("## /active listing\n\n")
	p("A full listing of `/active` as a client shows it: through the project's client library,\n")
	p("dial and attach, list `/active` and every `/active/<harness>`, list every agent's directory\n")
	p("and read every field file in it (transcripts and sub-agent directories are listed, not read):\n")
	p("%s field files for the fixture table, %s for the live one. It is compared with\n", commas(int64(a.fixtureFiles)), commas(int64(a.liveFiles)))
	p("`ps -eo pid,args` (stdout to /dev/null, process start-up included), which reads every process.\n\n")
	p("* Fixture table: %s processes written with `proctest` into a temporary directory, served\n", commas(fixtureProcs))
	p("  with `9harnessd --proc DIR --root NAME=…` over a generated fixture home. %d are agents\n", a.fixtureAgents)
	p("  (12 claude with registry records, 10 codex native children holding their rollouts, 8 omp,\n")
	p("  8 pi, 6 hermes with leases, 6 dsh), all resolved to a session; 21 are helpers that are never\n")
	p("  listed (codex node wrappers and app-servers, claude --bg-spare and -p, hermes gateways, dsh\n")
	p("  web); the rest are kernel threads, shells, servers and interpreters. Transcript sizes cycle\n")
	p("  through %s.\n", a.sizes)
	p("* Live table: this machine's /proc with %d copies of `sleep` named `claude` running\n", liveSleepers)
	p("  (`claude 600`, outside tmux and zmx), served by a second daemon whose roots point into an\n")
	p("  empty home.\n")
	p("* `ps` cannot read a fixture table, so the fixture row is compared with `ps -eo pid,args`\n")
	p("  over the live table (%s processes, sleepers included); read its absolute time too.\n", commas(int64(a.liveProcs)))
	p("* %d rounds, rows interleaved (A B A B); each sample repeats its command for at least %s\n", *rounds, *listMin)
	p("  and reports milliseconds per run. Median and min–max over the rounds; ratios are of medians.\n")
	p("* Checked once before timing: the fixture listing holds exactly its %d agents, each with a\n", a.fixtureAgents)
	p("  session; the live listing holds every sleeper.\n\n")
	p("Target: a listing of `/active` takes no longer than `ps -eo pid,args` on the same table.\n\n")
	p("| row | median (ms) | spread | vs ps -eo pid,args | target |\n")
	p("|---|---:|---:|---:|---|\n")
	p("| %s | %s | %s–%s | 1.00x | anchor |\n", by["ps"].name, num(ps.med), num(ps.lo), num(ps.hi))
	for _, k := range []string{"fixture", "fixture-names", "live", "live-names"} {
		s := st[k]
		r := s.med / ps.med
		target := "≤ 1.0x ps: **met**"
		if r > 1 {
			target = "≤ 1.0x ps: **not met**"
		}
		if strings.HasSuffix(k, "-names") {
			target = "(breakdown)"
		}
		p("| %s | %s | %s–%s | %.2fx | %s |\n", by[k].name, num(s.med), num(s.lo), num(s.hi), r, target)
	}
	p("\nRatios here are times: below 1.00x is faster than `ps`. The names-only rows list\n")
	p("`/active` and every `/active/<harness>` and read no agent directory: the scan of the\n")
	p("process table alone, which is what `ps` does; the rest of a full listing is the field reads.\n")
	return b.String()
}

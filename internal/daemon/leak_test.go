package daemon

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/9harness/9harness/internal/client"
	"github.com/9harness/9harness/internal/harness"
	"github.com/9harness/9harness/internal/proc"
	"github.com/9harness/9harness/internal/saferoot"
	"github.com/9harness/9harness/internal/tree"
)

// leakServer is the daemon's Server over the repository's fixture home
// (read only) and fixture process table, as Run builds it, with a small
// msize so that the load stays cheap in memory.
func leakServer(t *testing.T) *Server {
	t.Helper()
	home, err := filepath.Abs("../../testdata/home")
	if err != nil {
		t.Fatal(err)
	}
	procs := proc.New("../../testdata/proc")
	roots := map[string]*saferoot.Root{}
	envs := map[string]harness.Env{}
	for _, h := range []string{"claude", "codex", "omp", "pi", "hermes", "dsh"} {
		roots[h] = saferoot.New(filepath.Join(home, "."+h))
		envs[h] = harness.Env{Procs: procs, Root: roots[h], Home: home, TmpDir: os.TempDir()}
	}
	active := &tree.ActiveConfig{Procs: procs, UID: uint32(os.Getuid()), Envs: envs, Self: os.Getpid()}
	return &Server{
		Root:     tree.New(tree.Config{Roots: roots, PID: os.Getpid(), Start: time.Now(), Active: active}),
		UID:      uint32(os.Getuid()),
		GID:      uint32(os.Getgid()),
		MaxMsize: 64 << 10,
	}
}

// fdCounts counts this process's open descriptors, and among them pidfds
// (the peer's, taken per connection where the kernel has SO_PEERPIDFD).
func fdCounts(t *testing.T) (fds, pidfds int) {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatalf("counting fds: %v", err)
	}
	for _, e := range ents {
		if l, err := os.Readlink("/proc/self/fd/" + e.Name()); err == nil && l == "anon_inode:[pidfd]" {
			pidfds++
		}
	}
	// ReadDir's own descriptor is listed while it reads.
	return len(ents) - 1, pidfds
}

func fdList() string {
	ents, _ := os.ReadDir("/proc/self/fd")
	var out []string
	for _, e := range ents {
		l, _ := os.Readlink("/proc/self/fd/" + e.Name())
		out = append(out, e.Name()+" -> "+l)
	}
	return strings.Join(out, "\n")
}

type counts struct{ goroutines, fds, pidfds int }

func (c counts) String() string {
	return fmt.Sprintf("%d goroutines, %d fds (%d pidfds)", c.goroutines, c.fds, c.pidfds)
}

func now(t *testing.T) counts {
	fds, pidfds := fdCounts(t)
	return counts{runtime.NumGoroutine(), fds, pidfds}
}

// settle waits until the counts are back to at most base: connections end
// asynchronously after their client hangs up. A deadline, not a sleep: it
// returns as soon as they are.
func settle(t *testing.T, what string, base counts) (counts, time.Duration) {
	t.Helper()
	start := time.Now()
	deadline := start.Add(15 * time.Second)
	for {
		c := now(t)
		if c.goroutines <= base.goroutines && c.fds <= base.fds && c.pidfds <= base.pidfds {
			return c, time.Since(start)
		}
		if time.Now().After(deadline) {
			var g bytes.Buffer
			pprof.Lookup("goroutine").WriteTo(&g, 1)
			t.Fatalf("after %s: %v, baseline %v (15 s later)\nfds:\n%s\ngoroutines:\n%s", what, c, base, fdList(), g.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// treeOf lists the files and directories of the tree.
func treeOf(t *testing.T, c *client.Client) (files, dirs []string) {
	t.Helper()
	var walk func(dir string, depth int)
	walk = func(dir string, depth int) {
		dirs = append(dirs, dir)
		ents, err := c.ReadDir(dir)
		if err != nil {
			t.Fatalf("readdir %s: %v", dir, err)
		}
		for _, e := range ents {
			p := path.Join(dir, e.Name)
			if e.QID.Type&0x80 != 0 {
				if depth < 8 {
					walk(p, depth+1)
				}
				continue
			}
			files = append(files, p)
		}
	}
	walk("/", 0)
	return files, dirs
}

// hangUp opens a 9P2000.L conversation on a raw connection, asks for a
// read (or a listing) of p and hangs up without waiting for the reply, or
// after the first bytes of it.
func hangUp(t *testing.T, sock, p string, dir bool, readSome bool) {
	c, err := net.DialTimeout("unix", sock, 5*time.Second)
	if err != nil {
		t.Errorf("dial: %v", err)
		return
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	call := func(m []byte) bool {
		if _, err := c.Write(m); err != nil {
			return false
		}
		var hdr [4]byte
		if _, err := io.ReadFull(c, hdr[:]); err != nil {
			return false
		}
		n := int(hdr[0]) | int(hdr[1])<<8 | int(hdr[2])<<16 | int(hdr[3])<<24
		_, err := io.CopyN(io.Discard, c, int64(n-4))
		return err == nil
	}
	var names [][]byte
	parts := client.Split(p)
	for _, s := range parts {
		names = append(names, str(s))
	}
	if !call(frame(100, 0xffff, u32(64<<10), str("9P2000.L"))) ||
		!call(frame(104, 1, u32(0), u32(^uint32(0)), str(""), str(""), u32(0))) ||
		!call(frame(110, 2, u32(0), u32(1), u16(uint16(len(parts))), concat(names...))) ||
		!call(frame(12, 3, u32(1), u32(0))) {
		t.Errorf("conversation to %s failed", p)
		return
	}
	typ := byte(116) // Tread
	if dir {
		typ = 40 // Treaddir
	}
	for tag := uint16(4); tag < 8; tag++ {
		c.Write(frame(typ, tag, u32(1), u64(0), u32(64<<10)))
	}
	if readSome {
		// The first bytes of the replies (one read: a short file's
		// reply is shorter than the buffer).
		var b [512]byte
		c.Read(b[:])
	}
}

// TestNoLeaks: many concurrent clients doing mixed operations (reads,
// stats, listings, walks, and hang-ups in the middle of a read or a
// listing), then a fuzz-style run of the FuzzConn corpus and random byte
// streams over live connections of a running Server: after each, once every
// client has closed, the process is back to its goroutine, fd and pidfd
// counts; after the server stops, back to those before it started.
//
// Guards rule 10: bounded memory, fids, requests and connections.
func TestNoLeaks(t *testing.T) {
	clients, ops := 64, 200
	if testing.Short() {
		clients, ops = 16, 50
	}
	// make torture sets HARNESS_LOAD=<clients>x<ops>, as for test/TestLoad.
	if v := os.Getenv("HARNESS_LOAD"); v != "" {
		a, b, _ := strings.Cut(v, "x")
		c, err1 := strconv.Atoi(a)
		o, err2 := strconv.Atoi(b)
		if err1 != nil || err2 != nil || c < 1 || o < 1 {
			t.Fatalf("HARNESS_LOAD=%q: want <clients>x<ops>", v)
		}
		clients, ops = c, o
	}
	s := leakServer(t)
	// Each client holds one connection and opens one more per hang-up.
	s.MaxConns = 2*clients + 16
	// The runtime's poller (its epoll and wake-up descriptors) stays once
	// started: start it before the first count.
	if l, err := net.Listen("unix", filepath.Join(t.TempDir(), "poll")); err == nil {
		l.Close()
	}
	before := now(t)

	sock := filepath.Join(t.TempDir(), "s")
	l, err := ListenUnix(sock, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- s.Serve(ctx, l) }()

	// Warm up (first listings, lazily started runtime goroutines), then
	// the baseline with the server running and no connection.
	warm, err := client.Dial(sock)
	if err != nil {
		t.Fatal(err)
	}
	files, dirs := treeOf(t, warm)
	for _, f := range files {
		warm.ReadFile(f)
	}
	warm.Close()
	for deadline := time.Now().Add(10 * time.Second); s.Conns() > 0 && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
	base, _ := settle(t, "the warm-up", counts{before.goroutines + 1, before.fds + 1, before.pidfds})

	// 1. Load.
	var wg sync.WaitGroup
	var mu sync.Mutex
	var nops, nerr, nhang int
	var peak counts
	start := time.Now()
	for i := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := client.Dial(sock)
			if err != nil {
				t.Errorf("client %d: %v", i, err)
				return
			}
			defer c.Close()
			errs, hangs := 0, 0
			for j := range ops {
				k := i*7919 + j*104729
				var err error
				switch j % 6 {
				case 0:
					_, err = c.ReadFile(files[k%len(files)])
				case 1:
					_, _, err = c.Stat(files[k%len(files)])
				case 2:
					_, err = c.ReadDir(dirs[k%len(dirs)])
				case 3:
					var f interface{ Close() error }
					if f, err = c.Walk(dirs[k%len(dirs)]); err == nil {
						err = f.Close()
					}
				case 4:
					hangUp(t, sock, files[k%len(files)], false, j%12 == 4)
					hangs++
				case 5:
					hangUp(t, sock, dirs[k%len(dirs)], true, j%12 == 5)
					hangs++
				}
				if err != nil {
					errs++
					t.Errorf("client %d op %d: %v", i, j, err)
				}
			}
			mu.Lock()
			nops += ops
			nerr += errs
			nhang += hangs
			if c := now(t); c.goroutines > peak.goroutines {
				peak = c
			}
			mu.Unlock()
		}()
	}
	wg.Wait()
	afterLoad, took := settle(t, "the load", base)
	t.Logf("load: %d clients x %d ops (%d of them hang-ups mid-read or mid-listing) in %v, %d errors; %d files, %d dirs",
		clients, ops, nhang, time.Since(start).Round(time.Millisecond), nerr, len(files), len(dirs))
	t.Logf("load: baseline %v; peak seen %v; after %v (settled in %v)", base, peak, afterLoad, took.Round(time.Millisecond))

	// 2. Fuzz-style: the FuzzConn seeds and corpus, mutations of them and
	// random streams, each on a live connection of the running server.
	streams := append([][]byte{}, seeds...)
	corpus, _ := filepath.Glob(fuzzCorpus)
	for _, p := range corpus {
		if b, err := readCorpus(p); err == nil {
			streams = append(streams, b)
		} else {
			t.Errorf("corpus %s: %v", p, err)
		}
	}
	rng := rand.New(rand.NewPCG(9, 9))
	n := 600
	if testing.Short() {
		n = 100
	}
	for i := range n {
		var b []byte
		switch i % 3 {
		case 0: // a seed with bytes flipped
			b = bytes.Clone(streams[rng.IntN(len(seeds))])
			for range 1 + rng.IntN(8) {
				if len(b) > 0 {
					b[rng.IntN(len(b))] = byte(rng.Uint32())
				}
			}
		case 1: // a good Tversion, then noise
			b = frame(100, 0xffff, u32(8192), str([]string{"9P2000.L", "9P2000"}[i%2]))
			noise := make([]byte, rng.IntN(300))
			for j := range noise {
				noise[j] = byte(rng.Uint32())
			}
			b = append(b, noise...)
		default: // a seed cut anywhere
			src := streams[rng.IntN(len(streams))]
			if len(src) > 0 {
				b = bytes.Clone(src[:rng.IntN(len(src))])
			}
		}
		streams = append(streams, b)
	}
	start = time.Now()
	work := make(chan []byte)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for in := range work {
				feed(t, sock, in)
			}
		}()
	}
	for _, in := range streams {
		work <- in
	}
	close(work)
	wg.Wait()
	afterFuzz, took := settle(t, "the fuzz-style run", base)
	t.Logf("fuzz-style: %d streams (%d seeds, %d corpus, %d generated) in %v; after %v (settled in %v)",
		len(streams), len(seeds), len(corpus), n, time.Since(start).Round(time.Millisecond), afterFuzz, took.Round(time.Millisecond))

	// 3. Stop: back to the counts before the server existed.
	cancel()
	if err := <-served; err != nil {
		t.Fatalf("Serve: %v", err)
	}
	final, _ := settle(t, "the server stopped", before)
	t.Logf("stopped: before %v, after %v", before, final)
}

// feed writes in to a live connection, half-closes, and reads until the
// server closes it; the server must close it within the bound.
func feed(t *testing.T, sock string, in []byte) {
	c, err := net.DialTimeout("unix", sock, 5*time.Second)
	if err != nil {
		t.Errorf("dial: %v", err)
		return
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(20 * time.Second))
	go func() {
		c.Write(in)
		c.(*net.UnixConn).CloseWrite()
	}()
	if _, err := io.Copy(io.Discard, c); err != nil && !errors.Is(err, syscall.ECONNRESET) {
		// A reset is an end too: the server closed with input unread.
		t.Errorf("the server did not end a connection fed %x: %v", in, err)
	}
}

// readCorpus reads a "go test fuzz v1" file of one []byte.
func readCorpus(p string) ([]byte, error) {
	b, err := os.ReadFile(p)
	if err != nil {
		return nil, err
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) != 2 || lines[0] != "go test fuzz v1" {
		return nil, fmt.Errorf("not a one-value corpus file")
	}
	v, ok := strings.CutPrefix(lines[1], "[]byte(")
	v, ok2 := strings.CutSuffix(v, ")")
	if !ok || !ok2 {
		return nil, fmt.Errorf("not a []byte value")
	}
	s, err := strconv.Unquote(v)
	return []byte(s), err
}

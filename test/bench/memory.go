package main

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// The memory section: 9harnessd's resident set (VmRSS in
// /proc/<pid>/status; peaks are VmHWM, the kernel's high-water mark of
// VmRSS) idle, after many connections, over a million requests, and under a
// read load at the largest msize; diod beside it under the same load.

const (
	memStreams  = 4       // connections carrying the long run of requests
	memDepth    = 8       // requests in flight on each of them
	loadConns   = 64      // connections in the read load (9harnessd's default --max-conns)
	loadMsize   = 4 << 20 // 9harnessd's largest msize, --msize 4194304
	memSettle   = 500 * time.Millisecond
	kib         = 1024.0
	flatGrowMiB = 1.0 // "flat": grows by at most this much from the first checkpoint to the last
)

// checkpoints are the fractions of -mem-requests at which RSS is sampled.
var checkpoints = []float64{0.1, 0.25, 0.5, 1}

type memRun struct {
	samples map[string][]float64 // "ours/idle", "diod/req/3", "ours/slope", ... in MiB (slope: KiB per 100k)
	rate    map[string][]float64 // requests per second in the long run, per server
}

func (m *memRun) add(key string, v float64) { m.samples[key] = append(m.samples[key], v) }

// memStatus returns VmRSS and VmHWM of pid, in KiB.
func memStatus(pid int) (rss, hwm float64, err error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok || (k != "VmRSS" && k != "VmHWM") {
			continue
		}
		n, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
		if err != nil {
			return 0, 0, fmt.Errorf("%s: %q", k, v)
		}
		if k == "VmRSS" {
			rss = n
		} else {
			hwm = n
		}
	}
	if rss == 0 {
		return 0, 0, fmt.Errorf("/proc/%d/status: no VmRSS", pid)
	}
	return rss, hwm, sc.Err()
}

func rssMiB(s *server) float64 {
	rss, _, err := memStatus(s.pid())
	if err != nil {
		fatalf("%s: %v", s.name, err)
	}
	return rss / kib
}

func memorySection(e *env) *memRun {
	m := &memRun{samples: map[string][]float64{}, rate: map[string][]float64{}}
	dir := filepath.Join(e.tmp, "memory")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		fatalf("%v", err)
	}
	type srv struct {
		key string
		s   *server
		t   target
	}
	startOurs := func(name string, extra ...string) srv {
		sock := filepath.Join(dir, name+".sock")
		os.Remove(sock)
		return srv{"ours", start("9harnessd (memory)", sock, e.ours, append(e.ourArgs(sock), extra...)...), target{"9harnessd", sock, "/", "dsh/"}}
	}
	startDiod := func(name string) srv {
		sock := filepath.Join(dir, name+".sock")
		os.Remove(sock)
		return srv{"diod", start("diod (memory)", sock, e.diod, "-f", "-n", "-N", "-e", e.data, "-l", sock), target{"diod", sock, e.data, ""}}
	}
	fmt.Printf("measuring memory: %d rounds\n", *memRounds)
	t0 := time.Now()
	for r := 0; r < *memRounds; r++ {
		// Idle, many connections, many requests: one fresh pair of servers.
		pair := []srv{startOurs(fmt.Sprintf("ours-%d", r)), startDiod(fmt.Sprintf("diod-%d", r))}
		time.Sleep(memSettle)
		for _, p := range pair {
			v := rssMiB(p.s)
			m.add(p.key+"/idle", v)
			fmt.Printf("  round %d  %-9s idle after start: %.1f MiB\n", r+1, p.t.name, v)
		}
		for _, p := range pair {
			if err := manyConns(p.t, *memConns); err != nil {
				fatalf("memory, %d connections to %s: %v", *memConns, p.t.name, err)
			}
			time.Sleep(memSettle)
			v := rssMiB(p.s)
			m.add(p.key+"/conns", v)
			fmt.Printf("  round %d  %-9s after %d connections: %.1f MiB\n", r+1, p.t.name, *memConns, v)
		}
		for _, p := range pair {
			at, rate, err := manyRequests(p.t, p.s, *memRequests)
			if err != nil {
				fatalf("memory, %d requests to %s: %v", *memRequests, p.t.name, err)
			}
			m.rate[p.key] = append(m.rate[p.key], rate)
			for i, v := range at {
				m.add(fmt.Sprintf("%s/req/%d", p.key, i), v/kib)
			}
			sl := slope(at)
			m.add(p.key+"/slope", sl)
			m.add(p.key+"/growth", (at[len(at)-1]-at[0])/kib)
			fmt.Printf("  round %d  %-9s %d requests at %.0f/s: RSS %s MiB, slope %.1f KiB per 100k\n",
				r+1, p.t.name, *memRequests, rate, fmtMiB(at), sl)
		}
		for _, p := range pair {
			p.s.stop()
		}

		// The read load: fresh servers, so that VmHWM is this load's peak.
		for _, l := range []struct {
			key   string
			start func() srv
			msize uint32
		}{
			{"ours4M", func() srv { return startOurs(fmt.Sprintf("ours4m-%d", r), "--msize", fmt.Sprint(loadMsize)) }, loadMsize},
			{"ours64", func() srv { return startOurs(fmt.Sprintf("ours64-%d", r)) }, diodCap},
			{"diod", func() srv { return startDiod(fmt.Sprintf("diod64-%d", r)) }, diodCap},
		} {
			p := l.start()
			time.Sleep(memSettle)
			polled, hwm, n, err := readLoad(p.t, p.s, l.msize, *memReadDur)
			if err != nil {
				fatalf("memory, read load on %s: %v", p.t.name, err)
			}
			m.add("load/"+l.key, hwm/kib)
			m.add("load/"+l.key+"/polled", polled/kib)
			fmt.Printf("  round %d  %-9s %d connections reading at msize %d: peak VmHWM %.1f MiB (polled VmRSS max %.1f), %.0f MB/s\n",
				r+1, p.t.name, loadConns, l.msize, hwm/kib, polled/kib, n/memReadDur.Seconds()/1e6)
			p.s.stop()
		}
	}
	fmt.Printf("measured memory in %s\n", time.Since(t0).Round(time.Second))
	return m
}

func fmtMiB(kb []float64) string {
	s := make([]string, len(kb))
	for i, v := range kb {
		s[i] = fmt.Sprintf("%.1f", v/kib)
	}
	return strings.Join(s, " ")
}

// slope is the least-squares slope of RSS (KiB) over the checkpoints, in
// KiB per 100,000 requests.
func slope(at []float64) float64 {
	var sx, sy, sxx, sxy float64
	n := float64(len(at))
	for i, y := range at {
		x := checkpoints[i] * float64(*memRequests) / 1e5
		sx, sy, sxx, sxy = sx+x, sy+y, sxx+x*x, sxy+x*y
	}
	return (n*sxy - sx*sy) / (n*sxx - sx*sx)
}

// manyConns opens n connections one after another; on each it negotiates,
// attaches, walks a fid to big, sends two Tgetattr (checking big's size)
// and hangs up.
func manyConns(t target, n int) error {
	for i := range n {
		c, err := dial9(t)
		if err != nil {
			return fmt.Errorf("connection %d: %w", i, err)
		}
		for range 2 {
			size, err := c.getattr()
			if err == nil && size != bigSize {
				err = fmt.Errorf("Rgetattr size %d, want %d", size, bigSize)
			}
			if err != nil {
				c.Close()
				return fmt.Errorf("connection %d: %w", i, err)
			}
		}
		c.Close()
	}
	return nil
}

// manyRequests sends total Tgetattr requests over memStreams connections,
// memDepth in flight on each (written together, then their replies read),
// and samples the server's VmRSS (KiB) as the count passes each checkpoint.
func manyRequests(t target, s *server, total int) ([]float64, float64, error) {
	cs := make([]*conn9, 0, memStreams)
	defer func() {
		for _, c := range cs {
			c.Close()
		}
	}()
	for range memStreams {
		c, err := dial9(t)
		if err != nil {
			return nil, 0, err
		}
		cs = append(cs, c)
	}
	batch := make([]byte, 0, memDepth*len(cs[0].req))
	for i := range memDepth {
		f := append([]byte(nil), cs[0].req...)
		f[5] = byte(i + 1) // tag
		batch = append(batch, f...)
	}
	var (
		done  atomic.Int64
		stop  atomic.Bool
		wg    sync.WaitGroup
		errMu sync.Mutex
		first error
	)
	for _, c := range cs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				if _, err := c.Write(batch); err != nil {
					errMu.Lock()
					first = err
					errMu.Unlock()
					stop.Store(true)
					return
				}
				for range memDepth {
					if _, err := c.reply(tgetattr + 1); err != nil {
						errMu.Lock()
						first = err
						errMu.Unlock()
						stop.Store(true)
						return
					}
				}
				if done.Add(memDepth) >= int64(total) {
					stop.Store(true)
				}
			}
		}()
	}
	t0 := time.Now()
	var at []float64
	for _, f := range checkpoints {
		want := int64(f * float64(total))
		for done.Load() < want && !stop.Load() {
			time.Sleep(time.Millisecond)
		}
		if stop.Load() && done.Load() < want {
			break
		}
		rss, _, err := memStatus(s.pid())
		if err != nil {
			stop.Store(true)
			wg.Wait()
			return nil, 0, err
		}
		at = append(at, rss)
	}
	wg.Wait()
	el := time.Since(t0)
	if first != nil {
		return nil, 0, first
	}
	if len(at) != len(checkpoints) {
		return nil, 0, fmt.Errorf("stopped after %d requests", done.Load())
	}
	return at, float64(done.Load()) / el.Seconds(), nil
}

// readLoad opens loadConns connections at msize, each with big open and
// one Tread of msize-24 bytes in flight at all times (sequential through the
// file, wrapping), for d. It returns the largest VmRSS polled every 10 ms,
// the VmHWM at the end (KiB) and the bytes read.
func readLoad(t target, s *server, msize uint32, d time.Duration) (float64, float64, float64, error) {
	cs := make([]*conn9, 0, loadConns)
	defer func() {
		for _, c := range cs {
			c.Close()
		}
	}()
	for i := range loadConns {
		c, err := dial9m(t, msize, "big")
		if err != nil {
			return 0, 0, 0, fmt.Errorf("connection %d: %w", i+1, err)
		}
		cs = append(cs, c)
		if err := c.open(); err != nil {
			return 0, 0, 0, fmt.Errorf("connection %d: Tlopen: %w", i+1, err)
		}
	}
	var (
		stop  atomic.Bool
		bytes atomic.Int64
		wg    sync.WaitGroup
		errMu sync.Mutex
		first error
	)
	for i, c := range cs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			count := c.msize - 24
			off := int64(i) * int64(count) % bigSize
			for !stop.Load() {
				body, err := c.rpc(newFrame(tread, 1).u32(1).u64(uint64(off)).u32(count).bytes(), tread+1)
				if err != nil {
					errMu.Lock()
					first = err
					errMu.Unlock()
					stop.Store(true)
					return
				}
				n := int64(len(body) - 4)
				bytes.Add(n)
				off += n
				if n == 0 || off >= bigSize {
					off = 0
				}
			}
		}()
	}
	var polled float64
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) && !stop.Load() {
		if rss, _, err := memStatus(s.pid()); err == nil && rss > polled {
			polled = rss
		}
		time.Sleep(10 * time.Millisecond)
	}
	stop.Store(true)
	wg.Wait()
	_, hwm, err := memStatus(s.pid())
	if err != nil {
		return 0, 0, 0, err
	}
	if first != nil {
		return 0, 0, 0, first
	}
	return polled, hwm, float64(bytes.Load()), nil
}

// memoryReport renders the memory section.
func memoryReport(m *memRun) string {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	st := func(k string) stat { return summarize(m.samples[k]) }
	f1 := func(v float64) string { // one decimal, no "-0.0"
		if v > -0.05 && v < 0.05 {
			v = 0
		}
		return fmt.Sprintf("%.1f", v)
	}
	mib := func(s stat) string { return f1(s.med) + " | " + f1(s.lo) + "–" + f1(s.hi) }
	req := func(i int) string { return commas(int64(checkpoints[i] * float64(*memRequests))) }

	p("## Memory\n\n")
	p("The daemon's resident set: VmRSS from `/proc/<pid>/status`, read by the benchmark while the\n")
	p("server runs; peaks are VmHWM from the same file (the kernel's high-water mark of VmRSS over\n")
	p("the process's life), so every peak is taken on a freshly started server. diod's is read the\n")
	p("same way, under the same load. %d rounds; each starts fresh servers, and within a round each\n", *memRounds)
	p("step runs on 9harnessd, then on diod.\n\n")
	p("* Idle: %s after the socket first accepts (the readiness probe: one connect and close).\n", memSettle)
	p("* Connections: %s connections one after another, each Tversion (msize 64 KiB), Tattach,\n", commas(int64(*memConns)))
	p("  Twalk to `big`, two Tgetattr, hang up; RSS %s after the last.\n", memSettle)
	p("* Requests: on the same servers, %s Tgetattr on %d connections, %d in flight on each\n", commas(int64(*memRequests)), memStreams, memDepth)
	p("  (written together, replies read, repeat); RSS sampled as the count passes %s, %s,\n", req(0), req(1))
	p("  %s and %s. Slope: least squares over those four samples, in KiB per 100,000 requests;\n", req(2), req(3))
	p("  growth: the last sample minus the first.\n")
	p("* Read load: %d connections (9harnessd's default `--max-conns`) each with `big` open and\n", loadConns)
	p("  one Tread of msize−24 bytes in flight at all times, for %s; VmRSS polled every 10 ms.\n", *memReadDur)
	p("  9harnessd runs once with `--msize %d` (4 MiB, its largest) and once with its default, the\n", loadMsize)
	p("  clients asking 64 KiB like diod's cap; diod at 64 KiB.\n\n")

	p("| measurement | 9harnessd median (MiB) | spread | diod median (MiB) | spread | vs diod | target |\n")
	p("|---|---:|---:|---:|---:|---:|---|\n")
	idle := st("ours/idle")
	t := "≤ 15 MiB: **met**"
	if idle.med > 15 {
		t = "≤ 15 MiB: **not met**"
	}
	p("| idle after start | %s | %s | %s | %s |\n", mib(idle), mib(st("diod/idle")), ratio(idle.med, st("diod/idle").med), t)
	c := st("ours/conns")
	p("| after %s connections | %s | %s | %s | |\n", commas(int64(*memConns)), mib(c), mib(st("diod/conns")), ratio(c.med, st("diod/conns").med))
	for i := range checkpoints {
		o, d := st(fmt.Sprintf("ours/req/%d", i)), st(fmt.Sprintf("diod/req/%d", i))
		p("| after %s requests | %s | %s | %s | |\n", req(i), mib(o), mib(d), ratio(o.med, d.med))
	}
	gr := st("ours/growth")
	t = fmt.Sprintf("flat (≤ %.0f MiB growth): **met**", flatGrowMiB)
	if gr.hi > flatGrowMiB {
		t = fmt.Sprintf("flat (≤ %.0f MiB growth): **not met**", flatGrowMiB)
	}
	p("| growth, %s → %s requests | %s | %s | | %s |\n", req(0), req(3), mib(gr), mib(st("diod/growth")), t)
	sl, dsl := st("ours/slope"), st("diod/slope")
	p("| slope, KiB per 100k requests | %s | %s | | |\n", mib(sl), mib(dsl))
	l4, l64, ld := st("load/ours4M"), st("load/ours64"), st("load/diod")
	// Per connection: one Tread in flight, whose buffer is at most its
	// count (see the text below).
	bound := float64(loadConns) * float64(loadMsize) / (1 << 20)
	p("| peak, %d connections reading, 9harnessd msize 4 MiB | %s | | | | bound %.0f MiB: peak %.2fx |\n",
		loadConns, mib(l4), bound, l4.med/bound)
	p("| peak, %d connections reading, msize 64 KiB | %s | %s | %s | |\n", loadConns, mib(l64), mib(ld), ratio(l64.med, ld.med))
	o, d := summarize(m.rate["ours"]), summarize(m.rate["diod"])
	p("\nThe requests ran at %s/s on 9harnessd and %s/s on diod (medians). Ratios are of medians;\n", commas(int64(o.med)), commas(int64(d.med)))
	p("below 1.00x 9harnessd is the smaller. Flat means the growth from %s to %s requests\n", req(0), req(3))
	p("stays within %.0f MiB in every round (%.1f bytes per request).\n\n", flatGrowMiB,
		flatGrowMiB*(1<<20)/((checkpoints[len(checkpoints)-1]-checkpoints[0])*float64(*memRequests)))
	p("The bound at 4 MiB (diod cannot go above 64 KiB, so that row has no diod beside it): a\n")
	p("Tread's buffer comes from a pool, sized by its count (at most msize−11), and is held only\n")
	p("while that read is in flight; an idle connection holds none. A read of a host file into a\n")
	p("unix socket is spliced file → pipe → socket and holds no user-space buffer at all (the\n")
	p("pipe's pages are kernel memory, counted by the unit's MemoryMax, not by VmRSS). Each\n")
	p("connection here keeps one Tread in flight, so %d connections (the `--max-conns` default)\n", loadConns)
	p("hold at most %.0f MiB of buffers. A peak far below the bound is the splice at work; a peak\n", bound)
	p("near it would mean reads copied through user space. Above the buffers: heap the collector\n")
	p("has not reclaimed yet (GOGC=100) and buffers parked in the pools.\n")
	return b.String()
}

package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/9harness/9harness/internal/ninep/proto"
)

// The attack section: the owner's `ls /` (a whole session: connect,
// Tversion, Tattach, Tlopen, Treaddir, Tclunk, hang up) timed while a
// peer attacks each bound of rule 10, each attack on a freshly started
// 9harnessd; and the resident memory 64 idle connections cost.
//
// The daemon runs as root, the owner, so the owner's listings come from
// this process; the attacks on per-connection bounds (xattr, pipeline,
// fids, Tversion) come from it too, since those bounds hold for every
// connection. The idle-connections attack needs another uid (the owner's
// reserve and the per-uid cap spare the owner's own): it is made by a copy
// of this program run as attackUID, granted by --allow-uid.

const (
	attackUID    = 65534           // nobody: the grantee of the idle-connections attack
	attackConns  = 64              // idle connections the grantee opens
	attackSettle = 1 * time.Second // the attack runs this long before the first listing
	holdEnv      = "BENCH_HOLD_SOCK"
)

// attack is one row: it starts against sock and returns its stop.
type attack struct {
	name  string
	start func(sock string) (stop func(), err error)
}

var attacks = []attack{
	{"none (baseline)", func(string) (func(), error) { return func() {}, nil }},
	{"Txattrcreate 2^50, then Twrites", attackXattr},
	{"Tgetattr pipeline never read, 1 connection", func(s string) (func(), error) { return attackPipeline(s, 1) }},
	{"Tgetattr pipeline never read, 8 connections", func(s string) (func(), error) { return attackPipeline(s, 8) }},
	{"200,000 fids by Twalk", attackFids},
	{"64 idle connections of a grantee", attackIdle},
	{"Tversion again and again mid-session", attackVersion},
}

type attackRun struct {
	lat     map[string][]float64 // ms, every listing of every round
	fails   map[string]int
	peakRSS map[string][]float64 // MiB, VmHWM of each round's daemon
	idle    []float64            // MiB: the daemon idle
	idle64  []float64            // MiB: with 64 idle connections
}

// raw9b is a raw 9P2000.L connection.
type raw9b struct {
	c     net.Conn
	r     *bufio.Reader
	msize uint32
}

func dial9b(sock string, msize uint32) (*raw9b, error) {
	c, err := net.DialTimeout("unix", sock, 10*time.Second)
	if err != nil {
		return nil, err
	}
	r := &raw9b{c: c, r: bufio.NewReaderSize(c, 64<<10), msize: msize}
	f := proto.AppendVersion(nil, proto.Tversion, proto.Version{Tag: proto.NoTag, Msize: msize, Version: proto.Version2000L})
	typ, body, err := r.rpcFrame(f)
	if err != nil {
		c.Close()
		return nil, err
	}
	if typ != proto.Rversion || len(body) < 4 {
		c.Close()
		return nil, fmt.Errorf("reply %d to Tversion", typ)
	}
	r.msize = min(msize, proto.Uint32(body))
	return r, nil
}

func frame9(typ uint8, tag uint16, body []byte) []byte {
	return append(proto.AppendHeader(nil, uint32(proto.HeaderSize+len(body)), typ, tag), body...)
}

func (r *raw9b) rpcFrame(f []byte) (uint8, []byte, error) {
	r.c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := r.c.Write(f); err != nil {
		return 0, nil, err
	}
	g, err := proto.ReadFrame(r.r, r.msize+proto.HeaderSize)
	if err != nil {
		return 0, nil, err
	}
	_, typ, _ := proto.Header(g)
	return typ, g[proto.HeaderSize:], nil
}

// rpc sends one request; an Rlerror is an errno.
func (r *raw9b) rpc(typ uint8, body []byte) ([]byte, error) {
	rt, rb, err := r.rpcFrame(frame9(typ, 1, body))
	switch {
	case err != nil:
		return nil, err
	case rt == proto.Rlerror && len(rb) >= 4:
		return nil, syscall.Errno(proto.Uint32(rb))
	case rt != typ+1:
		return nil, fmt.Errorf("reply %d to %d", rt, typ)
	}
	return rb, nil
}

func (r *raw9b) attach(fid uint32) error {
	b := proto.AppendUint32(nil, fid)
	b = proto.AppendUint32(b, proto.NoFid)
	b = proto.AppendString(proto.AppendString(b, ""), "")
	_, err := r.rpc(proto.Tattach, proto.AppendUint32(b, proto.NoUID))
	return err
}

func walk9(fid, newfid uint32) []byte {
	return proto.AppendUint16(proto.AppendUint32(proto.AppendUint32(nil, fid), newfid), 0)
}

// ownerList is one `ls /` of the owner, a whole session.
func ownerList(sock string) error {
	r, err := dial9b(sock, 64<<10)
	if err != nil {
		return err
	}
	defer r.c.Close()
	if err := r.attach(0); err != nil {
		return err
	}
	if _, err := r.rpc(proto.Tlopen, proto.AppendUint32(proto.AppendUint32(nil, 0), 0)); err != nil {
		return err
	}
	var names int
	for off := uint64(0); ; {
		b := proto.AppendUint32(proto.AppendUint64(proto.AppendUint32(nil, 0), off), r.msize-proto.RreadHeaderSize)
		rb, err := r.rpc(proto.Treaddir, b)
		if err != nil {
			return err
		}
		if len(rb) < 4 || proto.Uint32(rb) == 0 {
			break
		}
		// Dirents: qid[13] offset[8] type[1] name[s].
		d := rb[4:]
		for len(d) >= 24 {
			off = proto.Uint64(d[13:])
			n := int(proto.Uint16(d[22:]))
			if len(d) < 24+n {
				break
			}
			d = d[24+n:]
			names++
		}
	}
	if names == 0 {
		return errors.New("ls /: no entries")
	}
	_, err = r.rpc(proto.Tclunk, proto.AppendUint32(nil, 0))
	return err
}

// loop runs f until stop is closed, on its own goroutine.
func loop(stop <-chan struct{}, wg *sync.WaitGroup, f func() bool) {
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if !f() {
				return
			}
		}
	}()
}

func stopper(stop chan struct{}, wg *sync.WaitGroup, conns ...*raw9b) func() {
	return func() {
		close(stop)
		for _, c := range conns {
			c.c.Close()
		}
		wg.Wait()
	}
}

func attackXattr(sock string) (func(), error) {
	a, err := dial9b(sock, 1<<20)
	if err != nil {
		return nil, err
	}
	if err := a.attach(0); err != nil {
		return nil, err
	}
	if _, err := a.rpc(proto.Twalk, walk9(0, 1)); err != nil {
		return nil, err
	}
	b := proto.AppendString(proto.AppendUint32(nil, 1), "user.bench")
	a.rpc(proto.Txattrcreate, proto.AppendUint32(proto.AppendUint64(b, 1<<50), 0)) // refused or not, the writes follow
	data := make([]byte, a.msize-proto.HeaderSize-16)
	var off uint64
	stop, wg := make(chan struct{}), &sync.WaitGroup{}
	loop(stop, wg, func() bool {
		w := proto.AppendUint32(proto.AppendUint64(proto.AppendUint32(nil, 1), off), uint32(len(data)))
		rb, err := a.rpc(proto.Twrite, append(w, data...))
		if err == nil && len(rb) >= 4 {
			off += uint64(proto.Uint32(rb))
		}
		var errno syscall.Errno
		return err == nil || errors.As(err, &errno)
	})
	return stopper(stop, wg, a), nil
}

func attackPipeline(sock string, n int) (func(), error) {
	stop, wg := make(chan struct{}), &sync.WaitGroup{}
	var conns []*raw9b
	for range n {
		a, err := dial9b(sock, 1<<20)
		if err != nil {
			return nil, err
		}
		if err := a.attach(0); err != nil {
			return nil, err
		}
		conns = append(conns, a)
		var tag uint16
		buf := make([]byte, 0, 4096*19)
		loop(stop, wg, func() bool {
			buf = buf[:0]
			for range 4096 {
				buf = append(buf, frame9(proto.Tgetattr, tag, proto.AppendUint64(proto.AppendUint32(nil, 0), 0x3fff))...)
				if tag++; tag == proto.NoTag {
					tag = 0
				}
			}
			a.c.SetWriteDeadline(time.Now().Add(time.Second))
			_, err := a.c.Write(buf)
			var ne net.Error
			return err == nil || errors.As(err, &ne) && ne.Timeout()
		})
	}
	return stopper(stop, wg, conns...), nil
}

func attackFids(sock string) (func(), error) {
	a, err := dial9b(sock, 64<<10)
	if err != nil {
		return nil, err
	}
	if err := a.attach(0); err != nil {
		return nil, err
	}
	// The 200,000 walks first, 256 at a time; then the attack goes on
	// walking past whatever cap answered.
	next := uint32(1)
	walkMany := func() error {
		var buf []byte
		for i := range 256 {
			buf = append(buf, frame9(proto.Twalk, uint16(i), walk9(0, next))...)
			next = next%200000 + 1
		}
		a.c.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := a.c.Write(buf); err != nil {
			return err
		}
		for range 256 {
			if _, err := proto.ReadFrame(a.r, a.msize+proto.HeaderSize); err != nil {
				return err
			}
		}
		return nil
	}
	for range 200000 / 256 {
		if err := walkMany(); err != nil {
			return nil, err
		}
	}
	stop, wg := make(chan struct{}), &sync.WaitGroup{}
	loop(stop, wg, func() bool { return walkMany() == nil })
	return stopper(stop, wg, a), nil
}

func attackVersion(sock string) (func(), error) {
	a, err := dial9b(sock, 8192)
	if err != nil {
		return nil, err
	}
	stop, wg := make(chan struct{}), &sync.WaitGroup{}
	loop(stop, wg, func() bool {
		if a.attach(0) != nil {
			return false
		}
		if _, err := a.rpc(proto.Twalk, walk9(0, 1)); err != nil {
			return false
		}
		f := proto.AppendVersion(nil, proto.Tversion, proto.Version{Tag: proto.NoTag, Msize: 8192, Version: proto.Version2000L})
		_, _, err := a.rpcFrame(f)
		return err == nil
	})
	return stopper(stop, wg, a), nil
}

// attackIdle runs a copy of this program as attackUID, which opens
// attackConns connections, says Tversion on each and then nothing, until
// its standard input closes.
func attackIdle(sock string) (func(), error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	dir := filepath.Dir(sock)
	copyPath := filepath.Join(dir, "attacker")
	if _, err := os.Stat(copyPath); err != nil {
		b, err := os.ReadFile(self)
		if err != nil {
			return nil, err
		}
		if err := os.WriteFile(copyPath, b, 0o755); err != nil {
			return nil, err
		}
	}
	cmd := exec.Command(copyPath)
	cmd.Env = []string{holdEnv + "=" + sock}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: attackUID, Gid: attackUID}}
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		in.Close()
		cmd.Wait()
		return nil, fmt.Errorf("the grantee's connections: %v", err)
	}
	fmt.Printf("    the grantee: %s", line)
	return func() { in.Close(); cmd.Wait() }, nil
}

// holdIdle is the attacker's side of attackIdle: it opens its connections
// all at once, reports how many were answered within the dial's 10 s (the
// daemon may queue the ones past the grantee's cap, or close them), then
// holds them until stdin closes.
func holdIdle(sock string) {
	held := make([]net.Conn, attackConns)
	answered := make([]bool, attackConns)
	var wg sync.WaitGroup
	for i := range attackConns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := net.DialTimeout("unix", sock, 10*time.Second)
			if err != nil {
				return
			}
			held[i] = c
			r := &raw9b{c: c, r: bufio.NewReader(c), msize: 8192}
			f := proto.AppendVersion(nil, proto.Tversion, proto.Version{Tag: proto.NoTag, Msize: 8192, Version: proto.Version2000L})
			if typ, _, err := r.rpcFrame(f); err == nil && typ == proto.Rversion {
				answered[i] = true
				c.SetDeadline(time.Time{})
			}
		}()
	}
	wg.Wait()
	served := 0
	for _, ok := range answered {
		if ok {
			served++
		}
	}
	fmt.Printf("%d of %d connections served, the rest queued or closed\n", served, attackConns)
	io.Copy(io.Discard, os.Stdin)
	for _, c := range held {
		if c != nil {
			c.Close()
		}
	}
	os.Exit(0)
}

func attackSection(e *env) *attackRun {
	run := &attackRun{lat: map[string][]float64{}, fails: map[string]int{}, peakRSS: map[string][]float64{}}
	dir := filepath.Join(e.tmp, "attack")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		fatalf("%v", err)
	}
	// The grantee reaches the socket and runs its copy of this program.
	for d := dir; d != filepath.Dir(e.tmp); d = filepath.Dir(d) {
		os.Chmod(d, 0o755)
	}
	samples := 100 * *rounds
	fmt.Printf("measuring attacks: %d listings by the owner under each\n", samples)
	t0 := time.Now()
	for i, a := range attacks {
		for r := 0; r < *memRounds; r++ {
			sock := filepath.Join(dir, fmt.Sprintf("a%d-%d.sock", i, r))
			s := start("9harnessd (attack)", sock, e.ours, append(e.ourArgs(sock), "--allow-uid", strconv.Itoa(attackUID))...)
			stop, err := a.start(sock)
			if err != nil {
				fatalf("attack %q: %v", a.name, err)
			}
			time.Sleep(attackSettle)
			for n := 0; n < samples / *memRounds; n++ {
				t := time.Now()
				if err := ownerList(sock); err != nil {
					run.fails[a.name]++
					continue
				}
				run.lat[a.name] = append(run.lat[a.name], float64(time.Since(t).Microseconds())/1000)
			}
			_, hwm, _ := memStatus(s.pid())
			run.peakRSS[a.name] = append(run.peakRSS[a.name], hwm/kib)
			stop()
			s.stop()
			l := run.lat[a.name]
			fmt.Printf("  round %d  %-46s ls / p50 %.2f ms p99 %.2f ms, %d failed; peak RSS %.1f MiB\n",
				r+1, a.name, pctl(l, 50), pctl(l, 99), run.fails[a.name], hwm/kib)
		}
	}
	// 64 idle connections of the owner (no per-uid cap, no idle timeout):
	// what each costs while it does nothing.
	for r := 0; r < *memRounds; r++ {
		sock := filepath.Join(dir, fmt.Sprintf("idle-%d.sock", r))
		s := start("9harnessd (idle connections)", sock, e.ours, e.ourArgs(sock)...)
		time.Sleep(memSettle)
		before := rssMiB(s)
		var conns []*raw9b
		for range attackConns {
			c, err := dial9b(sock, ourMsize)
			if err != nil {
				fatalf("idle connections: %v", err)
			}
			if err := c.attach(0); err != nil {
				fatalf("idle connections: %v", err)
			}
			c.c.SetDeadline(time.Time{})
			conns = append(conns, c)
		}
		time.Sleep(memSettle)
		after := rssMiB(s)
		run.idle = append(run.idle, before)
		run.idle64 = append(run.idle64, after)
		fmt.Printf("  round %d  %d idle connections (msize 1 MiB): %.1f MiB -> %.1f MiB, %.0f KiB each\n",
			r+1, attackConns, before, after, (after-before)*kib/attackConns)
		for _, c := range conns {
			c.c.Close()
		}
		s.stop()
	}
	fmt.Printf("attacks measured in %s\n", time.Since(t0).Round(time.Second))
	return run
}

// pctl is the p-th percentile of v (nearest rank).
func pctl(v []float64, p float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(v))
	i := int(float64(len(s))*p/100+0.5) - 1
	return s[max(0, min(i, len(s)-1))]
}

func attackReport(run *attackRun) string {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	p("## Under attack\n\n")
	p("The owner's `ls /` (a whole session: connect, Tversion, Tattach, Tlopen, Treaddir, Tclunk,\n")
	p("hang up) timed while a peer attacks one bound of rule 10, each attack on a freshly started\n")
	p("9harnessd running as the owner; listings begin %v after the attack. The grantee of the idle\n", attackSettle)
	p("connections is uid %d (`--allow-uid`); the other attacks come from the owner's uid, since\n", attackUID)
	p("their bounds hold for every connection. Peak RSS is the daemon's VmHWM.\n\n")
	p("| attack | ls / p50 (ms) | ls / p99 (ms) | failed | peak RSS (MiB) |\n")
	p("|---|---:|---:|---:|---:|\n")
	for _, a := range attacks {
		l := run.lat[a.name]
		p50, p99 := "—", "—" // no listing was answered
		if len(l) > 0 {
			p50, p99 = fmt.Sprintf("%.2f", pctl(l, 50)), fmt.Sprintf("%.2f", pctl(l, 99))
		}
		p("| %s | %s | %s | %d of %d | %.1f |\n", a.name, p50, p99, run.fails[a.name], len(l)+run.fails[a.name], pctl(run.peakRSS[a.name], 50))
	}
	p("\n")
	idle, idle64 := pctl(run.idle, 50), pctl(run.idle64, 50)
	p("| measurement | median (MiB) | per connection (KiB) | target |\n")
	p("|---|---:|---:|---|\n")
	each := (idle64 - idle) * kib / attackConns
	t := "≤ 64 KiB each: **met**"
	if each > 64 {
		t = "≤ 64 KiB each: **not met**"
	}
	p("| idle daemon | %.1f | | |\n", idle)
	p("| %d idle connections of the owner, msize 1 MiB | %.1f | %.0f | %s |\n", attackConns, idle64, each, t)
	return b.String()
}

package main

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// ---------------------------------------------------------------- events

// The events section: how long a read blocked on /active/events takes to
// be released by a Tflush naming it (no event posted), in both dialects.
// The clock starts as the Tflush is written and stops when its Rflush has
// been read.

// eventsFlushes is how many releases make one round's sample per dialect.
const eventsFlushes = 50

const (
	evTflush = 108
	evRflush = 109
	evTopen  = 112 // 9P2000
	evTwalk  = 110
)

type eventsRun struct{ cells []*cell }

// eventsSection starts a daemon with no agents and measures the release
// latency; each sample is the median of eventsFlushes releases on one
// connection.
func eventsSection(e *env) *eventsRun {
	dir := filepath.Join(e.tmp, "events")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		fatalf("%v", err)
	}
	sock := filepath.Join(dir, "9harnessd.sock")
	d := start("9harnessd (events)", sock, e.ours, e.ourArgs(sock)...)
	defer d.stop()
	run := &eventsRun{}
	for _, dialect := range []string{"9P2000.L", "9P2000"} {
		dialect := dialect
		c := &cell{name: "release of a flushed events read, " + dialect}
		c.measure = func() (float64, error) { return flushLatency(sock, dialect) }
		run.cells = append(run.cells, c)
	}
	for r := 0; r < *rounds; r++ {
		for _, c := range run.cells {
			v, err := c.measure()
			if err != nil {
				fatalf("events, %s: %v", c.name, err)
			}
			c.samples = append(c.samples, v)
			printSample(r, c, v)
		}
	}
	return run
}

// evConn is a connection in either dialect, written byte by byte.
type evConn struct {
	c net.Conn
	r *bufio.Reader
}

func (c *evConn) send(f []byte) error {
	_, err := c.c.Write(f)
	return err
}

// recv reads one reply: type, tag, body.
func (c *evConn) recv() (uint8, uint16, []byte, error) {
	var h [7]byte
	if _, err := io.ReadFull(c.r, h[:]); err != nil {
		return 0, 0, nil, err
	}
	n := binary.LittleEndian.Uint32(h[:])
	if n < 7 || n > 1<<20 {
		return 0, 0, nil, fmt.Errorf("reply size %d", n)
	}
	body := make([]byte, n-7)
	if _, err := io.ReadFull(c.r, body); err != nil {
		return 0, 0, nil, err
	}
	return h[4], binary.LittleEndian.Uint16(h[5:]), body, nil
}

func (c *evConn) rpc(f []byte, want uint8) error {
	if err := c.send(f); err != nil {
		return err
	}
	typ, _, body, err := c.recv()
	if err != nil {
		return err
	}
	if typ != want {
		return fmt.Errorf("reply type %d (%q), want %d", typ, body, want)
	}
	return nil
}

// flushLatency opens /active/events in dialect and returns the median,
// in microseconds, of eventsFlushes read-then-flush releases.
func flushLatency(sock, dialect string) (float64, error) {
	nc, err := net.Dial("unix", sock)
	if err != nil {
		return 0, err
	}
	defer nc.Close()
	nc.SetDeadline(time.Now().Add(2 * time.Minute))
	c := &evConn{c: nc, r: bufio.NewReader(nc)}
	if err := c.rpc(newFrame(tversion, notag).u32(65536).str(dialect).bytes(), tversion+1); err != nil {
		return 0, fmt.Errorf("Tversion: %v", err)
	}
	att := newFrame(tattach, 1).u32(0).u32(nofid).str("bench").str("")
	if dialect == "9P2000.L" {
		att.u32(uint32(os.Geteuid()))
	}
	if err := c.rpc(att.bytes(), tattach+1); err != nil {
		return 0, fmt.Errorf("Tattach: %v", err)
	}
	if err := c.rpc(newFrame(evTwalk, 1).u32(0).u32(1).u16(2).str("active").str("events").bytes(), evTwalk+1); err != nil {
		return 0, fmt.Errorf("Twalk: %v", err)
	}
	if dialect == "9P2000.L" {
		err = c.rpc(newFrame(tlopen, 1).u32(1).u32(0).bytes(), tlopen+1)
	} else {
		f := newFrame(evTopen, 1).u32(1)
		f.b = append(f.b, 0)
		err = c.rpc(f.bytes(), evTopen+1)
	}
	if err != nil {
		return 0, fmt.Errorf("open: %v", err)
	}
	var xs []float64
	for i := 0; i < eventsFlushes; i++ {
		if err := c.send(newFrame(tread, 5).u32(1).u64(0).u32(4096).bytes()); err != nil {
			return 0, err
		}
		// Let the read reach the events file and wait there.
		time.Sleep(2 * time.Millisecond)
		t0 := time.Now()
		if err := c.send(newFrame(evTflush, 6).u16(5).bytes()); err != nil {
			return 0, err
		}
		for {
			typ, tag, body, err := c.recv()
			if err != nil {
				return 0, err
			}
			if typ == evRflush && tag == 6 {
				break
			}
			if tag != 5 {
				return 0, fmt.Errorf("reply type %d tag %d: %q", typ, tag, body)
			}
		}
		xs = append(xs, float64(time.Since(t0).Microseconds()))
	}
	return summarize(xs).med, nil
}

func eventsReport(r *eventsRun) string {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	p("## Events\n\n")
	p("A read of `/active/events` with nothing to report blocks; a Tflush naming it must release\n")
	p("it at once, in either dialect, with no event posted. On one connection per dialect to a\n")
	p("daemon with no agents: open the file, send a Tread, wait 2 ms, send the Tflush; the clock\n")
	p("starts as the Tflush is written and stops when its Rflush has been read. A sample is the\n")
	p("median of %d releases; %d rounds; median and min–max over the samples.\n\n", eventsFlushes, *rounds)
	p("| row | median (µs) | spread | target |\n")
	p("|---|---:|---:|---|\n")
	for _, c := range r.cells {
		s := summarize(c.samples)
		p("| %s | %s | %s–%s | well under 10 s (the test's bound) |\n", c.name, num(s.med), num(s.lo), num(s.hi))
	}
	return b.String()
}

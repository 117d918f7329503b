package tree

import (
	"context"
	"errors"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/9harness/9harness/internal/errs"
	"github.com/9harness/9harness/internal/harness"
	"github.com/9harness/9harness/internal/proc"
	"github.com/9harness/9harness/internal/saferoot"
)

// eventsName is /active/events's name.
const eventsName = "events"

// The events file's bounds.
const (
	// eventsBuffer is how many lines one reader may have waiting: a
	// reader that does not keep up loses the oldest, and is told how
	// many. With eventsWhat it bounds what one reader holds to about
	// 128 × 200 bytes, however long it leaves its lines unread.
	eventsBuffer = 128
	// eventsWhat bounds a line's WHAT (a waiting text is the harness's
	// own words, of any length).
	eventsWhat = 120
	// eventsRescan is the fallback: the process table and every agent's
	// state are derived again this often while anyone reads, since a
	// process's birth and death are not inotify-able (/proc) and a
	// watched file may be replaced between a change and its watch.
	eventsRescan = time.Second
	// eventsSettle is how long the watcher lets a burst of inotify
	// events settle (a transcript appended line by line) before it
	// derives the states once for all of them.
	eventsSettle = 20 * time.Millisecond
	// eventsGap is the least time between two derivations that inotify
	// asked for: an agent streaming its answer appends to its transcript
	// many times a second, and each derivation reads every agent's files
	// (through the cache, but a stat each).
	eventsGap = 150 * time.Millisecond
	// eventsWatches bounds the files watched at once; beyond it the
	// rescan alone sees the changes, a second later.
	eventsWatches = 4096
)

// The events a line may carry.
const (
	EventAppear = "appear"
	EventExit   = "exit"
	EventMoved  = "moved"
	EventLost   = "lost" // TIME - - lost N: N older lines were dropped
)

// events is the one watcher behind /active/events: it runs while at least
// one reader has the file open, and fans each line out to every reader.
type events struct {
	a *active

	mu      sync.Mutex
	readers map[*eventReader]struct{}
	stop    context.CancelFunc
	done    chan struct{}
	// prev is the last derived state of every agent, the baseline the
	// next derivation is compared with.
	prev map[eventKey]eventState
}

type eventKey struct {
	h     string
	pid   int
	start uint64
}

type eventState struct {
	state, waiting string
	files          []watchFile
}

// watchFile is a host file the state rules read, inside a harness root.
type watchFile struct {
	root *saferoot.Root
	rel  string
}

func (w watchFile) id() string { return w.root.Path() + "\x00" + w.rel }

func newEvents(a *active) *events {
	return &events{a: a, readers: map[*eventReader]struct{}{}}
}

// eventsFile is /active/events.
type eventsFile struct{ e *events }

func (f *eventsFile) Attr() (Attr, error) {
	s := f.e.a.start
	return Attr{Mode: 0o444, Nlink: 1, Atime: s, Mtime: s, Ctime: s, Path: SynthPath("/active/" + eventsName)}, nil
}

// Open registers a reader from this moment. The first one starts the
// watcher, after deriving the baseline here, so that a change made once
// the open has returned is a line.
func (f *eventsFile) Open() (Handle, error) {
	r := &eventReader{e: f.e, wake: make(chan struct{}, 1)}
	if err := f.e.add(r); err != nil {
		return nil, err
	}
	return r, nil
}

func (e *events) add(r *eventReader) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	for e.stop == nil && e.done != nil {
		// The previous watcher has been told to stop: wait for it, so
		// that two never run, without the lock it may need to finish.
		done := e.done
		e.mu.Unlock()
		<-done
		e.mu.Lock()
		if e.done == done {
			e.done = nil
		}
	}
	if e.stop == nil {
		cur, err := e.derive()
		if err != nil {
			return err
		}
		e.prev = cur
		// The watches are in place before the open returns, as the
		// baseline is.
		in := newInotify()
		in.sync(cur)
		ctx, cancel := context.WithCancel(context.Background())
		e.stop, e.done = cancel, make(chan struct{})
		go e.run(ctx, e.done, in, cur)
	}
	e.readers[r] = struct{}{}
	return nil
}

func (e *events) remove(r *eventReader) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if _, ok := e.readers[r]; !ok {
		return
	}
	delete(e.readers, r)
	if len(e.readers) == 0 && e.stop != nil {
		e.stop()
		e.stop = nil
		e.prev = nil
	}
}

// running says whether the watcher runs (for tests).
func (e *events) running() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.stop != nil
}

// post hands a line to every reader.
func (e *events) post(line []byte) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for r := range e.readers {
		r.push(line)
	}
}

// Moved posts a moved line for the agent h/p: called when a move of it
// has completed; what is where it went.
func (e *events) moved(h string, p proc.Proc, what string) {
	e.post(eventLine(time.Now(), h, p.PID, EventMoved, what))
}

// derive takes every live agent's turn state now, and the files it was
// read from.
func (e *events) derive() (map[eventKey]eventState, error) {
	a := e.a
	all, err := a.scanAgents()
	if err != nil {
		return nil, err
	}
	memo := harness.NewMemoCache(a.files)
	defer memo.Release()
	out := make(map[eventKey]eventState, len(all))
	for _, d := range all {
		facts, err := d.resolveWith(memo)
		if err != nil {
			continue // gone since the scan: the next derivation says exit
		}
		st := eventState{state: facts.State, waiting: facts.Waiting}
		if root := a.cfg.Envs[d.h].Root; root != nil {
			if facts.Transcript != "" {
				st.files = append(st.files, watchFile{root, facts.Transcript})
			}
			// The harness's other files its state is read from
			// (Claude's live registry record).
			if sp, ok := harness.SpecOf(d.h); ok && sp.EventFiles != nil {
				for _, f := range sp.EventFiles(d.p.PID) {
					st.files = append(st.files, watchFile{root, f})
				}
			}
		}
		out[eventKey{d.h, d.p.PID, d.p.Start}] = st
	}
	return out, nil
}

// diff returns the lines that take prev to cur, in a stable order: exits,
// then appearances, then state changes, each sorted by harness and pid.
func diff(prev, cur map[eventKey]eventState, now time.Time) [][]byte {
	keys := func(m map[eventKey]eventState) []eventKey {
		ks := make([]eventKey, 0, len(m))
		for k := range m {
			ks = append(ks, k)
		}
		sort.Slice(ks, func(i, j int) bool {
			if ks[i].h != ks[j].h {
				return ks[i].h < ks[j].h
			}
			return ks[i].pid < ks[j].pid
		})
		return ks
	}
	var out [][]byte
	for _, k := range keys(prev) {
		if _, ok := cur[k]; !ok {
			out = append(out, eventLine(now, k.h, k.pid, EventExit, ""))
		}
	}
	for _, k := range keys(cur) {
		c := cur[k]
		p, was := prev[k]
		if !was {
			out = append(out, eventLine(now, k.h, k.pid, EventAppear, ""))
		}
		// A state first known, or changed, or a waiting agent that now
		// waits for something else. A state that becomes unknown is no
		// line: unknown is not a state.
		if c.state != "" && (!was || c.state != p.state || c.waiting != p.waiting) {
			out = append(out, eventLine(now, k.h, k.pid, c.state, c.waiting))
		}
	}
	return out
}

// eventLine is one line: TIME HARNESS PID EVENT [WHAT]. WHAT is made one
// line of printable text, bounded by eventsWhat.
func eventLine(t time.Time, h string, pid int, event, what string) []byte {
	var b strings.Builder
	b.WriteString(t.UTC().Format(time.RFC3339))
	b.WriteByte(' ')
	b.WriteString(h)
	b.WriteByte(' ')
	if pid > 0 {
		b.WriteString(strconv.Itoa(pid))
	} else {
		b.WriteByte('-')
	}
	b.WriteByte(' ')
	b.WriteString(event)
	if what = oneLine(what); what != "" {
		b.WriteByte(' ')
		b.WriteString(what)
	}
	b.WriteByte('\n')
	return []byte(b.String())
}

func oneLine(s string) string {
	s = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f || r == '\u2028' || r == '\u2029' {
			return ' '
		}
		return r
	}, s)
	s = strings.TrimSpace(s)
	if len(s) > eventsWhat {
		cut := eventsWhat
		for cut > 0 && s[cut]&0xc0 == 0x80 {
			cut-- // not inside a UTF-8 sequence
		}
		s = s[:cut]
	}
	return s
}

// run is the watcher: it derives the states on every inotify event on the
// files the state rules read (after eventsSettle), and every eventsRescan
// whatever happened, and posts what changed, until ctx ends.
func (e *events) run(ctx context.Context, done chan struct{}, in *inotify, prev map[eventKey]eventState) {
	defer close(done)
	defer in.close()
	tick := time.NewTicker(eventsRescan)
	defer tick.Stop()
	last := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		case <-in.wake:
			t := time.NewTimer(max(eventsSettle, time.Until(last.Add(eventsGap))))
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
			select {
			case <-in.wake:
			default:
			}
		}
		last = time.Now()
		cur, err := e.derive()
		if err != nil {
			continue // the next tick tries again
		}
		lines := diff(prev, cur, time.Now())
		prev = cur
		in.sync(cur)
		e.mu.Lock()
		if ctx.Err() == nil {
			e.prev = cur
			for _, l := range lines {
				for r := range e.readers {
					r.push(l)
				}
			}
		}
		e.mu.Unlock()
	}
}

// inotify watches the files the state rules read. Each file is opened
// relative to its harness root's pinned descriptor (saferoot) and the
// watch is added through /proc/self/fd, so no path is resolved outside
// the root; a file that is replaced (a registry rewritten by rename)
// loses its watch (IN_IGNORED), and the next derivation watches the new
// one. Without inotify (an error, or the bound) the rescan is all there is.
type inotify struct {
	f       *os.File
	wake    chan struct{}
	mu      sync.Mutex
	watched map[string]int // watchFile.id → wd
	byWd    map[int]string
	done    chan struct{}
}

func newInotify() *inotify {
	in := &inotify{wake: make(chan struct{}, 1), watched: map[string]int{}, byWd: map[int]string{}}
	fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		return in
	}
	// A non-blocking descriptor goes to the runtime's poller, so closing
	// the file ends the pending read.
	in.f = os.NewFile(uintptr(fd), "inotify")
	in.done = make(chan struct{})
	go in.read()
	return in
}

func (in *inotify) close() {
	if in.f == nil {
		return
	}
	in.f.Close()
	<-in.done
}

const inotifyMask = unix.IN_MODIFY | unix.IN_CLOSE_WRITE | unix.IN_ATTRIB | unix.IN_DELETE_SELF | unix.IN_MOVE_SELF

func (in *inotify) read() {
	defer close(in.done)
	buf := make([]byte, 16*(unix.SizeofInotifyEvent+unix.NAME_MAX+1))
	for {
		n, err := in.f.Read(buf)
		if err != nil {
			if errors.Is(err, os.ErrClosed) || errors.Is(err, io.EOF) {
				return
			}
			if n == 0 {
				return
			}
		}
		for off := 0; off+unix.SizeofInotifyEvent <= n; {
			ev := (*unix.InotifyEvent)(unsafe.Pointer(&buf[off]))
			if ev.Mask&unix.IN_IGNORED != 0 {
				in.mu.Lock()
				if id, ok := in.byWd[int(ev.Wd)]; ok {
					delete(in.byWd, int(ev.Wd))
					if in.watched[id] == int(ev.Wd) {
						delete(in.watched, id)
					}
				}
				in.mu.Unlock()
			}
			off += unix.SizeofInotifyEvent + int(ev.Len)
		}
		select {
		case in.wake <- struct{}{}:
		default:
		}
	}
}

// sync watches the files of cur, and stops watching the others.
func (in *inotify) sync(cur map[eventKey]eventState) {
	if in.f == nil {
		return
	}
	fd := int(in.f.Fd())
	want := map[string]watchFile{}
	for _, st := range cur {
		for _, w := range st.files {
			want[w.id()] = w
		}
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	for id, wd := range in.watched {
		if _, ok := want[id]; !ok {
			unix.InotifyRmWatch(fd, uint32(wd))
			delete(in.watched, id)
			delete(in.byWd, wd)
		}
	}
	for id, w := range want {
		if _, ok := in.watched[id]; ok || len(in.watched) >= eventsWatches {
			continue
		}
		f, err := w.root.Open(w.rel)
		if err != nil {
			continue // absent for now: the rescan sees it come
		}
		wd, err := unix.InotifyAddWatch(fd, "/proc/self/fd/"+strconv.Itoa(int(f.Fd())), inotifyMask)
		f.Close()
		if err != nil {
			continue
		}
		in.watched[id] = wd
		in.byWd[wd] = id
	}
}

// eventReader is one open of /active/events: its own cursor, a bounded
// queue of whole lines.
type eventReader struct {
	e    *events
	wake chan struct{}

	mu      sync.Mutex
	lines   [][]byte // oldest first, at most eventsBuffer
	lost    int      // lines dropped since the reader last read
	partial []byte   // the rest of a line a short read cut
	closed  bool
}

var _ Handle = (*eventReader)(nil)

// eventsLineMax bounds a line's bytes: its time, harness, pid and event,
// and a WHAT of at most eventsWhat.
const eventsLineMax = 96 + eventsWhat

// held is what a reader may come to hold: its queue full of the longest
// lines. Lines are shared by every reader they are posted to, so this is
// a bound, not a count.
func (r *eventReader) held() int64 { return eventsBuffer * eventsLineMax }

func (r *eventReader) push(line []byte) {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return
	}
	if len(r.lines) >= eventsBuffer {
		r.lines[0] = nil
		r.lines = r.lines[1:]
		r.lost++
	}
	r.lines = append(r.lines, line)
	r.mu.Unlock()
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// take copies the waiting lines into p, whole lines first: a line longer
// than what is left of p is cut, its rest given by the next read.
func (r *eventReader) take(p []byte) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	if len(r.partial) > 0 {
		k := copy(p, r.partial)
		r.partial = r.partial[k:]
		n += k
		if len(r.partial) > 0 {
			return n
		}
		r.partial = nil
	}
	if r.lost > 0 {
		l := eventLine(time.Now(), "-", 0, EventLost, strconv.Itoa(r.lost))
		r.lost = 0
		// The lost line goes first, before what is left.
		r.lines = append([][]byte{l}, r.lines...)
	}
	for len(r.lines) > 0 && n < len(p) {
		l := r.lines[0]
		if len(l) > len(p)-n && n > 0 {
			break // whole lines where they fit
		}
		k := copy(p[n:], l)
		n += k
		if k < len(l) {
			r.partial = l[k:]
		}
		r.lines[0] = nil
		r.lines = r.lines[1:]
	}
	if len(r.lines) == 0 {
		r.lines = nil // let the backing array go
	}
	return n
}

// ReadAtContext blocks until there is a line, or ctx ends. The offset is
// ignored: the file is a stream, each open its own cursor.
func (r *eventReader) ReadAtContext(ctx context.Context, p []byte, _ int64) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	for {
		if n := r.take(p); n > 0 {
			return n, nil
		}
		r.mu.Lock()
		closed := r.closed
		r.mu.Unlock()
		if closed {
			return 0, io.EOF
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-r.wake:
		}
	}
}

// ReadAt is a read no one can cancel: it returns what is there, and
// waits for nothing. Only the wire's ContextReader path blocks.
func (r *eventReader) ReadAt(p []byte, off int64) (int, error) {
	if n := r.take(p); n > 0 {
		return n, nil
	}
	return 0, errs.E("events.read", errs.Interrupted, "/active/"+eventsName, context.Canceled)
}

func (r *eventReader) Close() error {
	r.mu.Lock()
	r.closed = true
	r.lines, r.partial = nil, nil
	r.mu.Unlock()
	select {
	case r.wake <- struct{}{}:
	default:
	}
	r.e.remove(r)
	return nil
}
